"""Ctrl-C (SIGINT) and SIGTERM while tfprof writes: exit 130 / 143 with one line on stderr,
no temporary left, and whatever was at the output path before left intact.

Each case starts `python -m tfprof` on a synthetic profile (benchmarks/synthlib.py, 30,000 nodes
× 5 steps: long enough to be caught while writing), waits until its temporary appears (so the
signal arrives mid-write), sends the signal, then compares every file in the working
directory with what was there before.
"""

from __future__ import annotations

import hashlib
import importlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tfprof.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = [(signal.SIGINT, 130, "Interrupted."), (signal.SIGTERM, 143, "Terminated.")]


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict[str, Path]:
    """A synthetic ProfileProto and a store of it (both only read by the tests)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    synth = importlib.import_module("synthlib")  # the module name its numba cache is kept under
    folder = tmp_path_factory.mktemp("big")
    synth.write_profile(folder / "big.pb", 30_000, 5)
    assert main(["ingest", str(folder / "big.pb"), "--out", str(folder / "big.tfprof")]) == 0
    return {"profile": folder / "big.pb", "store": folder / "big.tfprof"}


def interrupt(work: Path, args: list[str], sig: int, ready: Callable[[], bool]) -> subprocess.CompletedProcess:
    """Run tfprof in ``work``, send ``sig`` as soon as ``ready()``; its exit code and output."""
    proc = subprocess.Popen([sys.executable, "-m", "tfprof", *args], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    try:
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"tfprof {' '.join(args)} ended before it was caught writing: {proc.communicate()}")
            time.sleep(0.002)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def temporaries(work: Path, name: str) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name.startswith(f".{name}."))


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_ingest_leaves_the_previous_store(tmp_path, big, sig, code, line):
    work = tmp_path
    cnn = ROOT / "tests" / "fixtures" / "cnn" / "profile.pb"
    assert main(["ingest", str(cnn), "--out", str(work / "s.tfprof")]) == 0
    (work / "notes.txt").write_text("the user's")
    before = snapshot(work)
    proc = interrupt(work, ["ingest", str(big["profile"]), "--out", "s.tfprof", "--force"], sig,
                     lambda: bool(temporaries(work, "s.tfprof")))
    assert proc.returncode == code, proc.stderr
    assert proc.stderr == line + "\n"
    assert temporaries(work, "s.tfprof") == []
    assert snapshot(work) == before  # the previous store, file by file


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_view_leaves_no_output_and_the_previous_file(tmp_path, big, sig, code, line):
    """The graph view's timeline of every step: step i+1's trace is made while step i's waits
    in its temporary; the signal comes once the second temporary exists."""
    work = tmp_path
    (work / "t_0").write_text("an older trace")
    before = snapshot(work)
    proc = interrupt(work, ["graph", str(big["store"]), "--output", "timeline:outfile=t", "--force"], sig,
                     lambda: bool(temporaries(work, "t_1")))
    assert proc.returncode == code, proc.stderr
    assert proc.stderr == line + "\n"
    assert proc.stdout == ""  # tfprof's "written" lines come only once all files are in place
    assert [p.name for p in work.iterdir()] == ["t_0"]
    assert snapshot(work) == before


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> Path:
    """A Kineto trace large enough to be scanned in two halves: the transformer capture's events
    60 times over, each copy shifted past the previous one (48 MB)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_foreign")
    path = tmp_path_factory.mktemp("kineto") / "long.pt.trace.json"
    bench._kineto_scaled(ROOT / "tests" / "fixtures" / "foreign" / "torch_transformer.pt.trace.json.gz", 60, path)
    return path


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_kineto_scan_runs_on_its_threads(tmp_path, long_trace, capsys, monkeypatch, sig, code,
                                                           line):
    """A large trace is scanned by numba on two threads, outside the GIL. A signal that arrives
    meanwhile (here sent by a scanning thread as it starts) ends the command as any other signal
    does, once the threads are done, with nothing left in the temporary directory."""
    from tfprof.ingest.foreign import kineto_events

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    real, sent = kineto_events.scan, []

    def scan(*args):
        if not sent:
            sent.append(threading.current_thread() is not threading.main_thread())
            signal.pthread_kill(threading.main_thread().ident, sig)
        return real(*args)

    monkeypatch.setattr(kineto_events, "scan", scan)
    rc = main(["tables", str(long_trace)])
    assert sent == [True]  # sent from a scanning thread, while the main thread waits for both
    assert (rc, capsys.readouterr().err) == (code, line + "\n")
    assert list(scratch.iterdir()) == []


def test_an_interrupted_command_in_process_gives_130(tmp_path, capsys, monkeypatch):
    """The cause of the old exit status 0: typer's main loop turned KeyboardInterrupt into
    Exit(130) and returned it as the command's value, which main() dropped."""
    import tfprof.api.inputs

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tfprof.api.inputs, "iter_inputs", interrupted)
    rc = main(["ingest", str(ROOT / "tests" / "fixtures" / "cnn" / "profile.pb"), "--out", str(tmp_path / "s")])
    assert rc == 130
    assert capsys.readouterr().err == "Interrupted.\n"
    assert list(tmp_path.iterdir()) == []


def test_main_restores_the_sigterm_handler():
    before = signal.getsignal(signal.SIGTERM)
    main(["--version"])
    assert signal.getsignal(signal.SIGTERM) is before


def test_ctrl_c_in_the_shell_abandons_the_running_view_and_the_session_goes_on(tmp_path, big):
    """In the interactive shell Ctrl-C stops the command, not the session: its temporaries go,
    the next line runs, and `quit` exits 0."""
    work = tmp_path
    proc = subprocess.Popen([sys.executable, "-m", "tfprof", str(big["store"])], cwd=work, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("graph -output timeline:outfile=t\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while not temporaries(work, "t_1"):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.002)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate("scope -max_depth 0 -output file:outfile=after.txt\nquit\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert err == ""
    assert sorted(p.name for p in work.iterdir()) == ["after.txt"]
    assert "_TFProfRoot" in (work / "after.txt").read_text()


class _Once:
    """Raise KeyboardInterrupt on the first call, then behave as ``fn``: one Ctrl-C raised twice
    (a polars query raises it, Python's handler again at the next call), the second during the
    cleanup of the first."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt
        return self.fn(*args, **kwargs)


def test_a_second_interrupt_during_a_files_cleanup_does_not_cut_it_short(tmp_path, monkeypatch):
    import tfprof.output.files as output

    def first(tmp, data):
        raise KeyboardInterrupt

    undo = _Once(output._undo)
    monkeypatch.setattr(output, "_undo", undo)
    monkeypatch.setattr(output, "_fill", first)
    with pytest.raises(KeyboardInterrupt):
        output.write_files({tmp_path / "a": b"1", tmp_path / "b": b"2"})
    assert undo.calls == 2 and list(tmp_path.iterdir()) == []


def test_a_second_interrupt_during_a_stores_cleanup_does_not_cut_it_short(tmp_path, monkeypatch):
    import shutil

    import tfprof.output.directories as output

    rmtree = _Once(shutil.rmtree)
    monkeypatch.setattr(output.shutil, "rmtree", rmtree)
    with pytest.raises(KeyboardInterrupt):
        with output.new_directory(tmp_path / "s") as tmp:
            (tmp / "part").write_bytes(b"half")
            raise KeyboardInterrupt
    assert rmtree.calls == 2 and list(tmp_path.iterdir()) == []


def test_a_second_interrupt_in_the_shell_does_not_end_the_session(monkeypatch, capsys):
    import io

    import tfprof.cli.interactive as shell

    class Lines(io.StringIO):
        def readline(self, *args):
            line = super().readline(*args)
            if line.startswith("interrupt"):
                raise KeyboardInterrupt
            return line

    out = _Once(shell._out)
    monkeypatch.setattr(shell, "_out", out)
    session = shell.Shell(None, shell.Options(), lambda *a, **k: None)
    assert session.loop(Lines("interrupt\nhelp\nquit\n")) == 0
    assert out.calls >= 3 and "Commands" in capsys.readouterr().out


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_swallowed_by_native_code_still_stops_the_command(tmp_path, capsys, monkeypatch, sig, code, line):
    """A signal landing while native code calls back into Python (numba writing its cache through a
    ctypes callback, as CI once saw) has its exception printed and swallowed there. The stop is
    noted, so the output is not put in place and the exit status is still the signal's."""
    import os

    import tfprof.api.inputs

    cnn = ROOT / "tests" / "fixtures" / "cnn" / "profile.pb"
    assert main(["ingest", str(cnn), "--out", str(tmp_path / "s")]) == 0
    before = snapshot(tmp_path)
    real = tfprof.api.inputs.write_indexes

    def swallowed(*args, **kwargs):
        try:  # what ctypes does with an exception raised in a callback
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # the handler runs at the next bytecode
        except BaseException:  # noqa: BLE001 - the point of the test
            pass
        return real(*args, **kwargs)

    monkeypatch.setattr(tfprof.api.inputs, "write_indexes", swallowed)
    capsys.readouterr()
    assert main(["ingest", str(cnn), "--out", str(tmp_path / "s"), "--force"]) == code
    assert capsys.readouterr().err.strip().splitlines()[-1] == line
    assert snapshot(tmp_path) == before  # the previous store, and no temporary
    assert main(["--version"]) == 0  # the stop was handled: nothing is left noted


def test_a_ctrl_c_that_lands_in_a_compiled_kernel_is_a_stop_not_a_bug(capsys, monkeypatch):
    """A signal whose handler runs as a numba kernel returns comes out as a ``SystemError``
    ("returned a result with an exception set") with the ``KeyboardInterrupt`` inside: the
    command ends as interrupted (130, one line), not with an internal error."""
    from tfprof import stopping
    from tfprof.ingest import foreign

    def read(*args, **kwargs):
        stopping.request(KeyboardInterrupt)  # what the CLI's handler notes before it raises
        raise SystemError("CPUDispatcher(<function scan>) returned a result with an exception set")

    monkeypatch.setattr(foreign, "read", read)
    rc = main(["scope", str(ROOT / "tests" / "fixtures" / "foreign" / "torch_cnn.pt.trace.json")])
    assert (rc, capsys.readouterr().err) == (130, "Interrupted.\n")


def test_a_ctrl_c_while_the_command_line_imports_its_libraries(capsys, monkeypatch):
    """Before ``main`` installs its handlers the client imports pyarrow, polars and numba (a
    second): a Ctrl-C then ends it with 130 and one line, not a traceback."""
    from tfprof.cli import client

    class Interrupting:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "tfprof.cli.main":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "tfprof.cli.main")
    monkeypatch.setattr(sys, "meta_path", [Interrupting, *sys.meta_path])
    monkeypatch.setenv("TFPROF_SERVER", "0")
    assert client.main(["--version"]) == 130
    assert capsys.readouterr().err == "Interrupted.\n"


class _StopsInDel:
    """An object whose finaliser is interrupted: Python cannot raise from ``__del__``, as it
    cannot from a callback out of native code, and reports the exception as unraisable."""

    def __del__(self):
        signal.raise_signal(signal.SIGINT)


def test_a_stop_swallowed_by_a_callback_is_kept_quiet_and_raised_again(capsys, monkeypatch):
    from tfprof import stopping
    from tfprof.cli.main import _signals

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # Python's own, not pytest's
    with _signals():
        _StopsInDel()  # dropped at once: its __del__ is interrupted
        assert capsys.readouterr().err == ""
        with pytest.raises(KeyboardInterrupt):
            stopping.check()
        stopping.clear()


def test_other_unraisable_exceptions_are_still_reported(capsys, monkeypatch):
    from tfprof.cli.main import _signals

    class Broken:
        def __del__(self):
            raise ValueError("from a finaliser")

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    with _signals():
        Broken()
    assert "ValueError: from a finaliser" in capsys.readouterr().err
