"""No wrong number with exit code 0: crafted memory events, times in the wrong unit, step
markers that are no step, and integer options beyond their type are each reported (the
``validation`` table, one ``Warning:`` line, a mark where the number is shown) or refused with
one ``Error:`` line (exit code 2), never printed as if true and never a traceback.

The traces are made here: Kineto JSON written by ``_kineto``, and an XSpace taken from a
fixture with its durations put in the wrong unit."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from conftest import FIXTURES
from starlette.testclient import TestClient

import tfprof
from tfprof.api.memory import memory, memory_page, memory_report
from tfprof.cli.app import app
from tfprof.cli.main import main as cli_main
from tfprof.schema.proto import xplane_pb2
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER
from tfprof.ui.profiles import Profiles

INT64_MAX = 2**63 - 1
PIB = 1 << 50
SAMPLE = str(tfprof.sample_path())
TORCH = str(tfprof.sample_path("torch"))
TF2 = FIXTURES / "foreign" / "tf2_keras.xplane.pb"
GLOO4 = FIXTURES / "ranks" / "gloo4"


def _kineto(path: Path, memory_events=(), *, step="ProfilerStep#1", ops=(("aten::add", 1010.0, 50.0, 1),)) -> Path:
    """A Kineto trace: one step marker, ``ops`` (name, ts, dur, tid) and ``[memory]`` instants
    (ts, Bytes, Total Allocated or None) on cuda:0."""
    events = [{"ph": "X", "cat": "user_annotation", "name": step, "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0,
               "args": {}}]
    events += [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": t, "ts": ts, "dur": d, "args": {}}
               for n, ts, d, t in ops]
    for i, (ts, size, total) in enumerate(memory_events):
        args = {"Bytes": size, "Device Id": 0, "Device Type": 1, "Addr": 4096 + i, "Total Reserved": 0}
        if total is not None:
            args["Total Allocated"] = total
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": ts, "args": args})
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _run(capsys, *args) -> tuple[int, str, str]:
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Internal error" not in err, err
    return code, out, err


def _check(capsys, path) -> dict[str, list[dict]]:
    code, out, _ = _run(capsys, "check", path, "--format", "json")
    assert code == 0, out
    found: dict[str, list[dict]] = {}
    for r in json.loads(out)["entries"]:
        found.setdefault(r["code"], []).append(r)
    return found


def _one_warning(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: ") and "validation problem" in lines[0], err


def _steps_table(text: str) -> list[list[str]]:
    """The rows of ``tfprof memory``'s steps table, as cells (the allocator with its marks)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("allocator"))
    rows = []
    for line in lines[start + 1:]:
        if not line or not line[0].isalnum():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


# ------------------------------------------------------------------ memory curves


def test_a_level_below_zero_is_reported_and_marked(capsys, tmp_path):
    trace = _kineto(tmp_path / "neg.pt.trace.json", [(1020.0, 100, 100), (1030.0, -200, -100)])
    code, out, err = _run(capsys, "memory", trace)
    assert code == 0
    _one_warning(err)
    for cells in _steps_table(out):
        if any(c.startswith("-") for c in cells[3:]):  # a negative number is never shown unmarked
            assert cells[0].endswith("!"), out
    assert "! damaged" in out and "below 0" in out
    found = _check(capsys, trace)
    assert [r["step"] for r in found["negative_memory_level"]] == [1]
    assert "cuda:0" in found["negative_memory_level"][0]["detail"]


def test_sums_that_would_wrap_are_unknown_not_wrapped(capsys, tmp_path):
    # 2 x (2**63 - 808) + 1648 = 2**64 + 32: in int64 the running sum wraps to a plausible 32 bytes
    big = INT64_MAX - 807
    trace = _kineto(tmp_path / "wrap.pt.trace.json", [(1020.0, big, None), (1030.0, big, None), (1040.0, 1648, None)])
    prof = tfprof.load(trace)
    row = memory(prof).row(0, named=True)
    assert "beyond 1 PiB" in row["damage"]
    assert all(row[c] is None for c in ("start_bytes", "peak_bytes", "end_bytes", "allocated"))
    assert all(v is None or abs(v) <= PIB for _, v in memory_page(prof, None, None)["curve"])
    # the op's memory record holds no wrapped sum: int64's largest, counted as 0 and reported
    assert prof.sql("select max(requested_bytes) b, min(requested_bytes) lo from memory").row(0) == (0, 0)
    code, out, err = _run(capsys, "memory", trace)
    assert code == 0
    _one_warning(err)
    [cells] = _steps_table(out)
    assert cells[0].endswith("!") and cells[3:] == ["?"] * 6, out
    assert "32B" not in out
    found = _check(capsys, trace)
    assert "memory_level_beyond" in found and "absurd_bytes" in found


def test_a_total_allocated_beyond_int64_is_one_error_line(capsys, tmp_path):
    trace = _kineto(tmp_path / "big.pt.trace.json", [(1020.0, 100, 2**64 - 1)])
    code, out, err = _run(capsys, "memory", trace)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "`Total Allocated` 18446744073709551615" in lines[0]


def test_a_peak_is_never_below_the_level_the_step_started_at(capsys, tmp_path):
    # the step opens with a free from 1500 to 500 bytes, then climbs to 600: the peak is the start
    trace = _kineto(tmp_path / "free.pt.trace.json", [(1020.0, -1000, 500), (1030.0, 100, 600)])
    prof = tfprof.load(trace)
    row = memory(prof).row(0, named=True)
    assert (row["start_bytes"], row["peak_bytes"], row["peak_micros"], row["damage"]) == (1500, 1500, 0, None)
    assert "the peak is the level the step started at" in memory_report(prof)
    assert "negative_memory_level" not in _check(capsys, trace)


@pytest.mark.parametrize("path", [TORCH, FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz",
                                  FIXTURES / "foreign" / "tf2_keras_memory.xplane.pb"], ids=["torch", "resnet", "keras"])
def test_real_traces_have_no_damaged_levels(path):
    rows = memory(tfprof.load(path))
    assert rows["damage"].is_null().all()
    assert (rows["peak_bytes"] >= rows["start_bytes"]).all() and (rows["peak_bytes"] >= rows["end_bytes"]).all()


def test_the_ui_memory_page_marks_damage(tmp_path):
    trace = _kineto(tmp_path / "neg.pt.trace.json", [(1020.0, 100, 100), (1030.0, -200, -100)])
    ui = make_app(Profiles.load([str(trace)]))
    client = TestClient(ui, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: ui.state.token})
    pid = client.get("/api/profiles").json()["profiles"][0]["id"]
    page = client.get(f"/api/memory/{pid}").json()
    assert page["shown"]["damage"] == "below 0" and "damaged" in page["damage"]
    assert page["rows"][0]["damage"] == "below 0"
    answer = client.get(f"/api/memory/{pid}?step={2**63}")
    assert answer.status_code == 400 and "`step`" in answer.json()["error"]


# ------------------------------------------------------------------ times beyond the capture


def test_an_xspace_in_the_wrong_unit_is_reported(capsys, tmp_path):
    space = xplane_pb2.XSpace.FromString(TF2.read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                event.duration_ps *= 1_000_000  # the durations in the wrong unit, the starts right
    crafted = tmp_path / "units.xplane.pb"
    crafted.write_bytes(space.SerializeToString())
    code, out, err = _run(capsys, "scope", crafted, "--max_depth", "1")
    assert code == 0
    _one_warning(err)
    found = _check(capsys, crafted)
    assert "time_beyond_capture" in found
    assert "the capture lasts" in found["time_beyond_capture"][0]["detail"]
    assert "time_beyond_capture" not in _check(capsys, TF2)  # the same capture, as written


def test_kineto_durations_in_the_wrong_unit_are_reported(capsys, tmp_path):
    # ns written as µs: three 5 µs runs of one op on three threads, 10 µs apart, read as 5 ms each
    ops = [("aten::mm", 1010.0 + 10 * k, 5000.0, k + 1) for k in range(3)]
    trace = _kineto(tmp_path / "ns.pt.trace.json", ops=ops)
    found = _check(capsys, trace)
    [row] = found["time_beyond_capture"]
    assert row["node"] == "aten::mm" and "15,000 us" in row["detail"]
    code, _, err = _run(capsys, "op", trace)
    assert code == 0
    _one_warning(err)


@pytest.mark.parametrize("path", [TORCH, TF2, FIXTURES / "foreign" / "kineto_alexnet.pt.trace.json.gz",
                                  FIXTURES / "cnn" / "profile.pb"], ids=["torch", "tf2", "alexnet", "cnn"])
def test_real_captures_are_within_their_span(capsys, path):
    assert "time_beyond_capture" not in _check(capsys, path)


# ------------------------------------------------------------------ step markers


@pytest.mark.parametrize("marker", ["ProfilerStep#abc", "ProfilerStep#-1", "ProfilerStep#99999999999999999999",
                                    "ProfilerStep#"])
def test_a_step_marker_without_a_step_number_is_reported(capsys, tmp_path, marker):
    trace = _kineto(tmp_path / "step.pt.trace.json", [(1020.0, 100, 100)], step=marker)
    code, out, err = _run(capsys, "memory", trace)
    assert code == 0 and "step" in out
    _one_warning(err)
    assert tfprof.load(trace).sql("select distinct step from node_steps")["step"].to_list() == [0]
    found = _check(capsys, trace)
    assert [r["detail"].split("`")[1] for r in found["bad_step_marker"]] == [marker]


# ------------------------------------------------------------------ integer options

_INPUTS = {"memory": [TORCH], "ranks": [str(GLOO4)], "ui": [SAMPLE, "--no-browser"],
           "diff": [SAMPLE, "--step", "0"]}
"""What each command with an integer option of its own needs besides it."""
_VIEW_COMMANDS = ("scope", "graph", "op", "code")
_HUGE = (2**63, 10**20)


def _integer_options() -> list[tuple[str, str]]:
    """(command, option) for every integer option of every command of the command line."""
    found = []
    for name, command in sorted(typer.main.get_command(app).commands.items()):
        for param in command.params:
            if getattr(param, "type_descriptor", None) is not None and param.type_descriptor.annotation is int:
                found.append((name, max(param.opts, key=len)))
    return found


def _refused(capsys, args: list[str], option: str) -> None:
    if args[0] == "ui":  # a check that did not trip would serve forever: in its own process, with a limit
        proc = subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, timeout=60)
        code, err = proc.returncode, proc.stderr
    else:
        code, _, err = _run(capsys, *args)
    lines = err.strip().splitlines()
    assert code == 2, (args, err)
    assert len(lines) == 1 and lines[0].startswith("Error: ") and option in lines[0], (args, err)
    assert "Traceback" not in err


def test_the_walk_finds_every_integer_option():
    assert set(_integer_options()) >= {("memory", "--step"), ("memory", "--top"), ("ranks", "--top"),
                                       ("ranks", "--workers"), ("ui", "--port"), ("diff", "--against")}
    assert {c for c, _ in _integer_options()} <= set(_INPUTS)


@pytest.mark.parametrize(("command", "option"), _integer_options())
def test_every_integer_option_beyond_its_range_is_one_error_line(capsys, command, option):
    for value in (*_HUGE, -1):  # none of these options takes a negative number
        _refused(capsys, [command, *_INPUTS[command], option, str(value)], option)


@pytest.mark.parametrize("command", _VIEW_COMMANDS)
def test_every_view_option_beyond_int64_is_one_error_line(capsys, command):
    from tfprof.api.options import INT_OPTIONS, MORE_THRESHOLDS

    for name in (*INT_OPTIONS, *MORE_THRESHOLDS):
        for value in (*_HUGE, *((-1,) if name != "step" else (-2,))):
            _refused(capsys, [command, SAMPLE, f"--{name}", str(value)], name)
        code, _, _ = _run(capsys, command, SAMPLE, f"--{name}", str(INT64_MAX if name != "step" else 0))
        assert code == 0, name  # int64's largest itself is taken and overflows nowhere


def test_the_python_api_and_the_ui_refuse_them_too():
    from tfprof.api.options import Options
    from tfprof.errors import OptionError
    from tfprof.ui.params import BadRequest, view_options

    with pytest.raises(OptionError, match="max_depth` takes an integer from 0 to 9223372036854775807"):
        Options.from_tfprof({"max_depth": 10**20})
    for name, value in (("max_depth", str(10**20)), ("min_micros", str(2**63)), ("step", "-2")):
        with pytest.raises(BadRequest, match=f"`{name}`"):
            view_options({name: value})
