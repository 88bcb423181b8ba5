"""Bad input and a bad environment found by a security campaign: each gives one ``Error:``
line (exit code 2), never an internal error, a misleading line or a silently wrapped value.

Kineto and XSpace times that are not finite or beyond int64 ns; gzip bombs (bounded by ``TFPROF_MAX_INFLATED``,
small here); a temporary directory whose name holds a quote, or that is full; stdout full or
closed, stderr closed; control characters in file names. Signals are in test_signals.py, gates in
test_gates.py.
"""

from __future__ import annotations

import builtins
import errno
import gzip
import io
import json
import subprocess
import sys
import tempfile
import tracemalloc
import zlib
from pathlib import Path

import pytest

import tfprof
from tfprof import kernels
from tfprof.cli.main import main

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
KINETO_GZ = FOREIGN / "torch_transformer.pt.trace.json.gz"
BASE_NS = 1_790_000_000_000_000_000  # a capture in 2026


def write_trace(path: Path, *, base=BASE_NS, ts="40.0", dur="5.0", extra: tuple = ()) -> Path:
    """A small Kineto trace: one step and two ops; the last op's ``ts`` and ``dur`` are written as
    given (raw JSON literals: NaN, Infinity, 1e400 ...), then ``extra`` events."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0, "dur": 20.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": "@ts@", "dur": "@dur@"},
        *extra,
    ]
    text = json.dumps({"baseTimeNanoseconds": "@base@", "traceEvents": events})
    path.write_text(text.replace('"@ts@"', ts).replace('"@dur@"', dur).replace('"@base@"', str(base)))
    return path


def one_error(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return lines[0]


# ---------------------------------------------------------------- Kineto times


@pytest.mark.parametrize("engine", [True, False], ids=["kernels", "reference"])
@pytest.mark.parametrize("field", ["ts", "dur"])
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "1e29", "18446744073709551617"])
def test_a_time_that_is_not_finite_or_beyond_int64_is_one_line(tmp_path, capsys, engine, field, value):
    path = write_trace(tmp_path / "t.pt.trace.json", **{field: value})
    with kernels.using(engine):
        line = one_error(capsys, ["tables", str(path)])
    assert str(path) in line and "`aten::relu`" in line and f"`{field}`" in line


def test_a_start_that_would_wrap_past_int64_is_refused(tmp_path, capsys):
    # 8e15 µs fits int64 ns alone, but not with the base time added: it wrapped to a date before 1970
    line = one_error(capsys, ["tables", str(write_trace(tmp_path / "t.json", ts="8e15"))])
    assert "`ts`" in line and "9e18 ns" in line


def test_a_begin_end_pair_too_far_apart_is_refused(tmp_path, capsys):
    pair = ({"ph": "B", "cat": "cpu_op", "name": "aten::wide", "pid": 1, "tid": 2, "ts": -8e15},
            {"ph": "E", "cat": "cpu_op", "name": "aten::wide", "pid": 1, "tid": 2, "ts": 8e15})
    line = one_error(capsys, ["tables", str(write_trace(tmp_path / "t.json", base=0, extra=pair))])
    assert "`aten::wide`" in line and "`dur`" in line


@pytest.mark.parametrize("base", ["1e400", str(10**30), '"soon"'])
def test_a_base_time_beyond_int64_is_one_line(tmp_path, capsys, base):
    line = one_error(capsys, ["tables", str(write_trace(tmp_path / "t.json", base=base))])
    assert "baseTimeNanoseconds" in line


def test_times_within_range_that_only_look_wrong_are_validation_warnings(tmp_path, capsys):
    path = write_trace(tmp_path / "t.json", dur="2e11")  # 2.3 days: kept, reported, counted as 0
    assert main(["op", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("Warning: 1 validation problem") and "\n" not in err.rstrip("\n")


def xspace_with(path: Path, *, line_start: int | None = None, session_start: float | None = None) -> Path:
    """The TF2 capture with its first line's ``timestamp_ns`` or its ``profile_start_time`` replaced."""
    from tfprof.schema.proto import xplane_pb2

    space = xplane_pb2.XSpace.FromString((FOREIGN / "tf2_keras.xplane.pb").read_bytes())
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for stat in plane.stats:
            if session_start is not None and names.get(stat.metadata_id) == "profile_start_time":
                stat.double_value = session_start
    if line_start is not None:
        next(line for plane in space.planes for line in plane.lines if line.events).timestamp_ns = line_start
    path.write_bytes(space.SerializeToString())
    return path


@pytest.mark.parametrize("engine", [True, False], ids=["kernels", "reference"])
@pytest.mark.parametrize("change, needle", [({"line_start": 2**63 - 10}, "starts at"),
                                             ({"session_start": float("nan")}, "profile_start_time"),
                                             ({"session_start": float("inf")}, "profile_start_time")])
def test_an_xspace_time_beyond_int64_is_one_line(tmp_path, capsys, engine, change, needle):
    path = xspace_with(tmp_path / "t.xplane.pb", **change)
    with kernels.using(engine):
        line = one_error(capsys, ["tables", str(path)])
    assert str(path) in line and needle in line


# ---------------------------------------------------------------- gzip bombs


def write_bomb(path: Path, inflated: int) -> Path:
    """A valid gzipped trace whose events array holds ``inflated`` bytes of spaces (~1000:1)."""
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [pack.compress(b'{"traceEvents": [')]
    block = b" " * (1 << 20)
    parts += [pack.compress(block) for _ in range(inflated >> 20)]
    parts += [pack.compress(b'{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]}'), pack.flush()]
    path.write_bytes(b"".join(parts))
    return path


def test_a_bomb_stops_at_the_limit_the_environment_sets_without_inflating_further(tmp_path, monkeypatch):
    bomb = write_bomb(tmp_path / "bomb.json.gz", 64 << 20)
    monkeypatch.setenv("TFPROF_MAX_INFLATED", "1MB")
    tracemalloc.start()
    try:
        with pytest.raises(tfprof.ProfileFormatError, match="TFPROF_MAX_INFLATED") as info:
            tfprof.load(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(bomb) in str(info.value) and "1.0 MB" in str(info.value)
    assert peak < 8 << 20, f"{peak:,} bytes allocated for a 1 MB limit"


def test_a_bomb_beyond_the_default_limit_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TFPROF_MAX_INFLATED", raising=False)
    bomb = write_bomb(tmp_path / "bomb.json.gz", 80 << 20)  # 80 KB: the default limit is its floor, 64 MiB
    line = one_error(capsys, ["tables", str(bomb)])
    assert str(bomb) in line and "decompression bomb" in line and "TFPROF_MAX_INFLATED" in line


def test_the_default_limit_and_the_variable(monkeypatch):
    from tfprof.ingest.foreign.trace_json import inflate_limit

    monkeypatch.delenv("TFPROF_MAX_INFLATED", raising=False)
    assert inflate_limit(1_000)[0] == 64 << 20 and inflate_limit(10_000_000)[0] == 1_000_000_000
    for text, size in [("500", 500), ("2GB", 2_000_000_000), ("1GiB", 1 << 30), ("1.5 kb", 1500)]:
        monkeypatch.setenv("TFPROF_MAX_INFLATED", text)
        assert inflate_limit(1_000)[0] == size
    monkeypatch.setenv("TFPROF_MAX_INFLATED", "lots")
    with pytest.raises(tfprof.OptionError, match="TFPROF_MAX_INFLATED=`lots` is not a size"):
        inflate_limit(1_000)


def test_a_genuine_trace_loads_under_a_tight_limit_and_in_several_gzip_members(tmp_path, monkeypatch):
    raw = gzip.decompress(KINETO_GZ.read_bytes())
    monkeypatch.setenv("TFPROF_MAX_INFLATED", str(len(raw)))  # exactly its size
    members = tmp_path / "members.json.gz"
    members.write_bytes(gzip.compress(raw[:1000]) + gzip.compress(raw[1000:]) + b"\0" * 64)  # gzip allows both
    want = tfprof.load(KINETO_GZ).table("trace_events")
    assert tfprof.load(members).table("trace_events").equals(want)
    monkeypatch.setenv("TFPROF_MAX_INFLATED", str(len(raw) - 1))
    with pytest.raises(tfprof.ProfileFormatError, match="inflates to more than"):
        tfprof.load(members)


# ---------------------------------------------------------------- the temporary directory


def test_a_temporary_directory_named_with_a_quote_reads_the_trace(tmp_path, monkeypatch):
    odd = tmp_path / "o'brien"
    odd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(odd))
    assert tfprof.load(KINETO_GZ).table("nodes").num_rows > 0
    assert list(odd.iterdir()) == []


def full_temporary_directory(monkeypatch, folder: Path) -> None:
    """Writing any file under ``folder`` fails as on a full disk."""
    real_open = builtins.open

    def full_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax") and str(file).startswith(str(folder)):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(file, mode, *args, **kwargs)

    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setattr(builtins, "open", full_open)
    monkeypatch.setattr(io, "open", full_open)


def test_a_full_temporary_directory_is_one_line_naming_it(tmp_path, monkeypatch):
    full = tmp_path / "full"
    full_temporary_directory(monkeypatch, full)
    with pytest.raises(tfprof.OutputError) as err:  # a ProfileProto given as bytes goes through a temporary file
        tfprof.load(tfprof.sample_path().read_bytes())
    assert f"temporary directory `{full}` is full" in str(err.value) and "TMPDIR" in str(err.value)
    assert tfprof.load(KINETO_GZ).tables()["nodes"].num_rows > 0  # a Kineto trace is read in memory: it needs none
    assert list(full.iterdir()) == []


# ---------------------------------------------------------------- stdout and stderr


def shell(command: str) -> subprocess.CompletedProcess:
    """``python -m tfprof`` with its streams as ``command`` (sh syntax, PYTHON and SAMPLE set) says."""
    line = command.replace("PYTHON", f"'{sys.executable}' -m tfprof").replace("SAMPLE", f"'{tfprof.sample_path()}'")
    return subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=120, check=False)


def test_a_closed_stdout_is_an_error_not_a_silent_success(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)  # what Python makes of a closed descriptor 1
    line = one_error(capsys, ["tables", str(tfprof.sample_path())])
    assert line.startswith("Error: cannot write the output to stdout: it is closed")


@pytest.mark.parametrize("redirect, why", [(">&-", "it is closed"), (">/dev/full", "No space left on device")])
def test_stdout_that_cannot_be_written_is_one_line_and_exit_2(redirect, why):
    proc = shell(f"exec PYTHON tables SAMPLE {redirect}")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"Error: cannot write the output to stdout: {why}; send it to a file or device that " \
                          "can take it (or use the command's output file option)\n"


def test_with_stderr_closed_too_the_exit_code_still_tells():
    assert shell("exec PYTHON tables SAMPLE >&- 2>&-").returncode == 2
    assert shell("exec PYTHON tables SAMPLE 2>&- >/dev/full").returncode == 2
    proc = shell("exec PYTHON tables SAMPLE 2>&-")
    assert proc.returncode == 0 and proc.stdout.startswith("table")


def test_a_reader_that_stops_early_ends_the_command_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "tfprof", "scope", str(tfprof.sample_path()), "--max_depth", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and err == b""


# ---------------------------------------------------------------- control characters


def test_printable_escapes_what_a_terminal_acts_on():
    from tfprof.errors import printable

    assert printable("a\x1b[31mb\nc\td\x7f\x9b\u202e\u2028é→") == "a\\x1b[31mb\\nc\\td\\x7f\\x9b\\u202e\\u2028é→"
    assert str(tfprof.ProfileFormatError("`x\x1b]0;t\x07`")) == "`x\\x1b]0;t\\x07`"


def test_a_file_name_with_an_escape_sequence_reaches_stderr_escaped(tmp_path, capsys):
    bad = tmp_path / "b\x1b[31m\nred.pb"
    bad.write_bytes(b"not a profile")
    line = one_error(capsys, ["tables", str(bad)])
    assert "\x1b" not in line and "b\\x1b[31m\\nred.pb" in line


def test_a_warning_line_naming_such_a_file_stays_one_escaped_line(tmp_path, capsys):
    path = write_trace(tmp_path / "w\x1b[2J\nX.json", dur="2e11")
    assert main(["op", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("Warning: ") and err.count("\n") == 1 and "\x1b" not in err and "w\\x1b[2J\\nX.json" in err


def test_an_unknown_option_with_an_escape_sequence_is_escaped(capsys):
    line = one_error(capsys, ["scope", str(tfprof.sample_path()), "--max_dpth\x1b[2J", "3"])
    assert "\x1b" not in line and "\\x1b[2J" in line


def test_progress_bar_draws_on_the_terminal_unescaped(monkeypatch):
    """stderr escapes control characters while a command runs, but the ingest progress bar
    draws with escape sequences on purpose: it writes to the stream under the guard."""
    import io

    from tfprof.cli import app as cli_app
    from tfprof.cli.streams import guarded_streams

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with guarded_streams():
        print("Error: a\x1b[31mb", file=sys.stderr)
        update = cli_app.progress_bar()
        update(1, 2, "nodes")
        update(2, 2, "nodes")
    text = tty.getvalue()
    assert text.startswith("Error: a\\x1b[31mb\n")
    assert "\x1b[" in text[len("Error: a\\x1b[31mb\n"):], "the bar's escape sequences were escaped or lost"
