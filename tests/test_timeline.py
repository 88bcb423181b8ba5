"""-output timeline: the real tool's trace files, event by event, and their structure.

Every case of tests/golden/timeline/<fixture>/cases.json (made by tools/make_timeline_golden.py
with the real tfprof) runs through the public API (``run_view`` + ``write_output``) into a
temporary directory; the files written, their names (``<outfile>_<step>``) and bytes, and the
messages on stdout must equal the real tool's. No normalisation is needed: tfprof's timeline is
deterministic (std::map orders devices, lanes, starts and nodes; jsoncpp sorts object keys,
see docs/TFPROF_BEHAVIOUR.md, 'Timeline file'), so only the temporary directory in the messages is replaced by `{OUT}`. On a
difference the first differing event is shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import tfprof
from tfprof import Profile
from tfprof.api import check_output, run_view, write_output
from tfprof.cli.main import main
from tfprof.errors import OptionError, OutputError, TfprofError
from tfprof.queries.options import Options
from tfprof.queries.timeline import _lanes, tree_events
from tfprof.queries.timeline_memory import _top
from tfprof.views.timeline import json_string, render_trace

ROOT = Path(__file__).parent
GOLDEN = ROOT / "golden" / "timeline"
FIXTURES = ROOT / "fixtures"
OUT = "{OUT}"


def profile_file(fixture: str) -> Path:
    return GOLDEN / "gpu_lanes" / "profile.pb" if fixture == "gpu_lanes" else FIXTURES / fixture / "profile.pb"


_PROFILES: dict[str, Profile] = {}


def _profile(fixture: str) -> Profile:
    if fixture not in _PROFILES:
        _PROFILES[fixture] = tfprof.load(profile_file(fixture))
    return _PROFILES[fixture]


def _cases():
    for case_file in sorted(GOLDEN.glob("*/cases.json")):
        for case in json.loads(case_file.read_text()):
            yield pytest.param(case_file.parent.name, case, id=f"{case_file.parent.name}-{case['id']}")


def run_case(fixture: str, case: dict, out: Path):
    """Run a golden case through the API into ``out``; (files by name, stdout) or the error."""
    options = dict(case["options"], output=case["options"]["output"].replace(OUT, str(out)))
    opts = Options.from_tfprof(options)
    try:
        check_output(case["cmd"], opts)
        written = write_output(_profile(fixture), run_view(_profile(fixture), case["cmd"], opts))
    except TfprofError as exc:
        return None, exc
    files = {p.name: p.read_bytes() for p in written.paths}
    return (files, written.stdout.replace(str(out), OUT)), None


def first_difference(mine: bytes, real: bytes) -> str:
    a, b = json.loads(mine)["traceEvents"], json.loads(real)["traceEvents"]
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"event {i}:\n  ours: {json.dumps(x, sort_keys=True)}\n  real: {json.dumps(y, sort_keys=True)}"
    return f"{len(a)} events vs {len(b)} (same prefix); or same events, different bytes"


@pytest.mark.parametrize("fixture, case", list(_cases()))
def test_golden_timeline(fixture, case, tmp_path):
    folder = GOLDEN / fixture
    real_files = {p.name: p.read_bytes() for p in (folder / case["id"]).iterdir()} if (folder / case["id"]).is_dir() else {}
    real_stderr = (folder / f"{case['id']}.stderr").read_text() if (folder / f"{case['id']}.stderr").exists() else ""
    real_stdout = (folder / f"{case['id']}.stdout").read_text() if (folder / f"{case['id']}.stdout").exists() else ""
    result, error = run_case(fixture, case, tmp_path)
    if not real_files:
        # The real tool wrote nothing and said why on stderr; we raise that (docs/COMPATIBILITY.md).
        assert error is not None, "the real tool wrote no timeline here; we must refuse"
        if "No code trace information" not in real_stderr:  # our wording differs there (COMPATIBILITY #5)
            assert str(error).split(";")[0] in real_stderr
        assert list(tmp_path.iterdir()) == []
        return
    assert error is None, error
    files, stdout = result
    # A scope/code timeline with no step is written to outfile itself, where tfprof appends
    # `_-1` (docs/COMPATIBILITY.md): the golden's names and message are read that way.
    real_files = {name.removesuffix("_-1"): data for name, data in real_files.items()}
    real_stdout = real_stdout.replace("_-1.\n", ".\n")
    assert sorted(files) == sorted(real_files)
    for name, data in real_files.items():
        assert files[name] == data, f"{name}: " + first_difference(files[name], data)
    assert stdout == real_stdout
    for data in files.values():
        check_trace_structure(json.loads(data))


# --------------------------------------------------------------------------- structure


REQUIRED = {
    "M": {"name", "ph", "pid", "args"},
    "X": {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"},
    "s": {"name", "cat", "ph", "pid", "tid", "ts", "id"},
    "t": {"name", "cat", "ph", "pid", "tid", "ts", "id"},
    "C": {"name", "cat", "ph", "pid", "tid", "ts", "args"},
}


def check_trace_structure(trace: dict) -> None:
    """What chrome://tracing and Perfetto need of the Trace Event Format (JSON object form)."""
    assert set(trace) == {"traceEvents"} and isinstance(trace["traceEvents"], list)
    named: set[int] = set()
    flows: dict[int, list[str]] = {}
    for event in trace["traceEvents"]:
        ph = event["ph"]
        assert ph in REQUIRED, event
        assert REQUIRED[ph] <= set(event), (ph, sorted(event))
        assert all(type(event[k]) is int for k in ("pid", "tid", "ts", "dur", "id") if k in event), event
        assert event.get("ts", 0) >= 0 and event.get("dur", 0) >= 0, event
        assert isinstance(event["name"], str) and event["name"]
        if "args" in event:
            assert isinstance(event["args"], dict)
        if ph == "M":
            assert event["name"] == "process_name" and isinstance(event["args"]["name"], str)
            named.add(event["pid"])
        if ph in "st":
            flows.setdefault(event["id"], []).append(ph)
    used = {e["pid"] for e in trace["traceEvents"] if e["ph"] != "M"}
    assert used <= named, f"processes without a name: {used - named}"
    assert all(sorted(phases) == ["s", "t"] for phases in flows.values()), flows


def test_structure_check_can_fail():
    with pytest.raises(AssertionError):
        check_trace_structure({"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 0, "cat": "Op", "args": {}}]})
    with pytest.raises(AssertionError):
        check_trace_structure({"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": 0, "dur": 1, "cat": "Op",
                                                "args": {}}]})  # pid 0 has no process_name


def test_every_fixture_has_golden_cases():
    folders = {p.parent.name for p in GOLDEN.glob("*/cases.json")}
    assert {"cnn", "rnn", "multistep", "gpu_tiny", "gpu_lanes"} <= folders


# --------------------------------------------------------------------------- pieces


def test_lanes_pass_intervals_that_end_at_the_start():
    # per device, rows by start: [0,10) [10,20) share lane 0; [5,12) overlaps -> lane 1;
    # [12,13) fits lane 1 again (ends at 12); another device starts over at lane 0.
    group = np.array([0, 0, 0, 0, 0, 1])
    start = np.array([0, 5, 10, 12, 15, 5])
    end = np.array([10, 12, 20, 13, 16, 6])
    assert _lanes(group, start, end).tolist() == [0, 1, 0, 1, 1, 0]


def test_top_allocations_walk():
    # one device; segments sorted by value then name: 60, 30 (a), 30 (b), 5, all live over
    # (0, 50]; a sample at ts 10 with 100 bytes in use
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    offsets, start, until, value = i64(0, 4), i64(0, 0, 0, 0), i64(50, 50, 50, 50), i64(60, 30, 30, 5)
    picked, rest = _top(offsets, start, until, value, i64(0), i64(10), i64(100), 10)
    assert picked[0].tolist()[:4] == [0, 1, 3, -1]  # 60, 30 (a), then 5: 30 (b) no longer fits
    assert rest.tolist() == [5]
    # at most `limit` names; a segment counts only when start < ts <= until
    picked, _ = _top(offsets, start, until, value, i64(0, 0, 0), i64(10, 50, 51), i64(1000, 1000, 1000), 2)
    assert picked.tolist() == [[0, 1], [0, 1], [-1, -1]]
    picked, _ = _top(offsets, i64(0, 10, 0, 0), until, value, i64(0), i64(10), i64(100), 10)
    assert picked[0].tolist()[:3] == [0, 2, 3]  # the segment starting at ts itself is not yet live


def test_tree_events_skip_zero_time_subtrees():
    frame = pl.DataFrame({
        "name": ["_TFProfRoot", "a", "a/x", "b", "b/y", "c"],
        "level": [0, 1, 2, 1, 2, 1],
        "parent_row": [-1, 0, 1, 0, 3, 0],
        "total_exec_micros": [10, 4, 3, 0, 5, 6],
    })
    ops = tree_events(frame).filter(pl.col("kind") == "op")
    assert ops.select("name", "pid", "ts", "dur").rows() == [
        ("_TFProfRoot", 0, 0, 10), ("a", 1, 0, 4), ("a/x", 2, 0, 3), ("c", 1, 4, 6),
    ]


def test_children_outlasting_their_parent_do_not_abort():
    # tfprof CHECK-fails here (negative op times make a parent shorter than its shown
    # children); we keep laying the children out back to back from the parent's start
    # (docs/COMPATIBILITY.md row 16).
    frame = pl.DataFrame({
        "name": ["_TFProfRoot", "p", "p/a", "p/b", "q"],
        "level": [0, 1, 2, 2, 1],
        "parent_row": [-1, 0, 1, 1, 0],
        "total_exec_micros": [9, 5, 10, -5, 4],
    })
    ops = tree_events(frame).filter(pl.col("kind") == "op")
    assert ops.select("name", "ts", "dur").rows() == [("_TFProfRoot", 0, 9), ("p", 0, 5), ("p/a", 0, 10), ("q", 5, 4)]


def test_graph_timeline_needs_steps(tmp_path):
    prof = tfprof.load(graph_path=FIXTURES / "gpu_tiny" / "graph.pbtxt")
    result = run_view(prof, "graph", {"output": f"timeline:outfile={tmp_path}/t"})
    with pytest.raises(OptionError, match="no steps"):
        write_output(prof, result)
    assert list(tmp_path.iterdir()) == []


def test_json_strings_as_jsoncpp_writes_them():
    assert json_string('a"b\\c') == '"a\\"b\\\\c"'
    assert json_string("é\x7f\n") == '"\\u00e9\x7f\\n"'


def test_empty_tree_renders_an_empty_trace():
    frame = pl.DataFrame({"name": ["_TFProfRoot"], "level": [0], "parent_row": [-1], "total_exec_micros": [0]})
    trace = json.loads(render_trace(tree_events(frame)))
    check_trace_structure(trace)
    assert [e["ph"] for e in trace["traceEvents"]] == ["M", "X"]


# --------------------------------------------------------------------------- shells


def test_cli_graph_timeline_writes_one_file_per_step(tmp_path, capsys):
    rc = main(["graph", str(FIXTURES / "multistep" / "profile.pb"), "-output", f"timeline:outfile={tmp_path}/trace"])
    assert rc == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace_0", "trace_1", "trace_2"]
    out = capsys.readouterr().out
    assert out.count("generating trace file.") == 3 and f"Timeline file is written to {tmp_path}/trace_2." in out
    real = GOLDEN / "multistep" / "graph_default_cli"
    assert all((tmp_path / p.name).read_bytes() == p.read_bytes() for p in real.iterdir())


@pytest.mark.parametrize(
    "args, message",
    [
        (["op", "-output", "timeline:outfile={d}/t"], "op view doesn't support timeline yet"),
        (["scope", "-output", "timeline:outfile={d}/missing/t"], "does not exist"),
        (["scope", "-output", "timeline:outfile={d}/taken"], "is a directory"),
    ],
)
def test_cli_bad_timeline_output_is_one_line(args, message, tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    argv = [a.format(d=tmp_path) for a in args]
    rc = main([argv[0], str(FIXTURES / "cnn" / "profile.pb"), *argv[1:]])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("Error: ") and err.count("\n") == 1 and message in err
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]  # nothing written, nothing half-written


def test_failed_write_leaves_no_file_of_the_call(tmp_path):
    # graph timeline of three steps where the last target is a directory: nothing is written
    (tmp_path / "t_2").mkdir()
    prof = _profile("multistep")
    result = run_view(prof, "graph", {"output": f"timeline:outfile={tmp_path}/t", "max_depth": 3})
    with pytest.raises(OutputError):
        write_output(prof, result)
    assert [p.name for p in tmp_path.iterdir()] == ["t_2"]


def test_python_api_timeline(tmp_path, capsys):
    fx = FIXTURES / "gpu_tiny"
    opts = tfprof.ProfileOptionBuilder().with_step(0).with_timeline_output(str(tmp_path / "t")).build()
    tfprof.profile(str(fx / "graph.pbtxt"), str(fx / "run_meta_0.pbtxt"), cmd="scope", options=opts)
    trace = json.loads((tmp_path / "t_0").read_text())
    check_trace_structure(trace)
    assert "Timeline file is written to" in capsys.readouterr().out
    with pytest.raises(OptionError):
        tfprof.profile(str(fx / "graph.pbtxt"), str(fx / "run_meta_0.pbtxt"), cmd="op", options=opts)
