"""A served command runs as the client's own process would, in what a request cannot carry too:
the client's temporary folder (TMPDIR, read once and cached), its resource limits, its
libraries' versions (an upgrade gets a fresh server), and a working directory that is gone is
one line, exit 2. Each test here failed on the server before it learned these.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import resource
import shutil
import site
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_server import CNN, ROOT, env, served, tfprof  # noqa: F401 - env is a fixture

from tfprof.cli import resident

TRACE = ROOT / "tfprof" / "sample" / "torch_transformer.pt.trace.json.gz"
_, _FSIZE_HARD = resource.getrlimit(resource.RLIMIT_FSIZE)


def limited(args, env, limits, python=("-m", "tfprof"), **kwargs) -> subprocess.CompletedProcess:  # noqa: F811
    """``tfprof ARGS`` under the resource limits ``limits`` ((RLIMIT_X, (soft, hard)), ...)."""
    def apply():
        for which, value in limits:
            resource.setrlimit(which, value)

    return subprocess.run([sys.executable, *python, *args], env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=apply, **kwargs)


def served_under(env, limits) -> int:  # noqa: F811
    """Commands served by the server of a client with ``limits``; -1 when none runs."""
    code = "from tfprof.cli import resident; s = resident.status(); print(-1 if s is None else s['served'])"
    return int(limited([], env, limits, python=("-c", code)).stdout)


def wait_for_server(count) -> None:
    deadline = time.monotonic() + 120
    while count() < 0:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)


def stop_all(folder: Path) -> None:
    """Stop every server listening in ``folder``, whatever its key."""
    for path in folder.glob("*.sock"):
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(path))
            payload = json.dumps({"stop": True}).encode()
            sock.sendall(resident.LENGTH.pack(len(payload)) + payload)
            sock.recv(2)


@pytest.fixture
def sockets(tmp_path):
    folder = tmp_path / "sockets"
    folder.mkdir(mode=0o700)
    yield folder
    stop_all(folder)


def same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess) -> bool:
    return (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


def test_each_command_has_its_own_temporary_folder(tmp_path, sockets):
    """`TMPDIR=ta tfprof tables k.pt.trace.json; rm -r ta; TMPDIR=tb tfprof ...` gave FileNotFoundError
    (the server kept the first command's folder, as Python's tempfile caches it)."""
    trace = tmp_path / "k.pt.trace.json"
    trace.write_bytes(gzip.decompress(TRACE.read_bytes()))
    ta, tb = tmp_path / "ta", tmp_path / "tb"
    ta.mkdir()
    tb.mkdir()
    env = {**os.environ, "TFPROF_SERVER": "1", "TFPROF_SERVER_DIR": str(sockets), "TMPDIR": str(ta)}  # noqa: F811
    assert tfprof(["scope", str(CNN), "--max_depth", "0"], env).returncode == 0  # starts the server
    wait_for_server(lambda: served(env))
    count = served(env)
    first = tfprof(["tables", str(trace)], env)
    assert first.returncode == 0, first.stderr
    assert served(env) == count + 1
    shutil.rmtree(ta)
    for folder in (tb, ta):  # another folder; the first one, now gone (a process of its own uses /tmp)
        through = tfprof(["tables", str(trace)], {**env, "TMPDIR": str(folder)})
        alone = tfprof(["tables", str(trace)], {**env, "TMPDIR": str(folder), "TFPROF_SERVER": "0"})
        assert alone.returncode == 0, alone.stderr
        assert same(through, alone), through.stderr
    assert served(env) == count + 2  # the gone folder's command went through the server of its TMPDIR


def test_a_file_size_limit_holds_in_a_served_command(env, tmp_path):  # noqa: F811
    """Under `ulimit -f 100` a served `sql ... --out x.csv` exited 0 and wrote the whole file."""
    limits = [(resource.RLIMIT_FSIZE, (100 << 10, _FSIZE_HARD))]
    args = ["sql", "select * from nodes", str(CNN), "--out", "x.csv"]  # 150 KB of CSV
    runs = {}
    try:
        for name in ("alone", "first", "served"):
            (tmp_path / name).mkdir()
            if name == "served":  # by the server the first one started, which has the same limits
                wait_for_server(lambda: served_under(env, limits))
                count = served_under(env, limits)
            runs[name] = limited(args, {**env, "TFPROF_SERVER": "0"} if name == "alone" else env, limits,
                                 cwd=tmp_path / name)
            assert list((tmp_path / name).iterdir()) == []
        assert served_under(env, limits) == count + 1
    finally:
        limited(["server", "stop"], env, limits)
    assert runs["alone"].returncode != 0 and "File too large" in runs["alone"].stderr
    assert same(runs["first"], runs["alone"]), runs["first"]
    assert same(runs["served"], runs["alone"]), runs["served"]


@pytest.mark.parametrize("limit", ["RLIMIT_CPU", "RLIMIT_AS"])
def test_a_limit_on_the_whole_process_is_never_served(env, limit):  # noqa: F811
    """CPU seconds and address space count a process's whole life and size, and a server's are
    not a fresh process's: a client with such a limit runs its command itself."""
    which = getattr(resource, limit)
    limits = [(which, (3600 if limit == "RLIMIT_CPU" else 64 << 30, resource.getrlimit(which)[1]))]
    sockets = set(Path(env["TFPROF_SERVER_DIR"]).glob("*.sock"))
    count = served(env)
    proc = limited(["scope", str(CNN), "--max_depth", "1"], env, limits)
    assert proc.returncode == 0, proc.stderr
    assert served(env) == count
    time.sleep(1.0)
    assert set(Path(env["TFPROF_SERVER_DIR"]).glob("*.sock")) == sockets  # nor does it start one


def test_the_key_follows_the_installed_libraries(tmp_path, monkeypatch):
    """An upgraded (or reinstalled) polars, duckdb, numba ... means a fresh server."""
    lib = tmp_path / "site-packages"
    (lib / "polars-2.1.0.dist-info").mkdir(parents=True)
    (lib / "duckdb-2.0.1.dist-info").mkdir()
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(lib)])
    monkeypatch.setattr(site, "getusersitepackages", lambda: str(tmp_path / "no-user-site"))
    keys = [resident.server_key()]
    (lib / "polars-2.1.0.dist-info").rename(lib / "polars-2.2.0.dist-info")  # an upgrade
    keys.append(resident.server_key())
    shutil.rmtree(lib / "duckdb-2.0.1.dist-info")  # the same version reinstalled, a second later
    (lib / "duckdb-2.0.1.dist-info").mkdir()
    st = lib.stat()
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    keys.append(resident.server_key())
    assert len(set(keys)) == 3
    assert resident.server_key() == keys[-1]


def test_a_running_server_keeps_its_key(env):  # noqa: F811
    """The server inherits what the key covers from the client that starts it; nothing it imports
    may change them (it would leave as stale at its next tick)."""
    code = ("import json; from tfprof.cli import resident; s = resident.status(); "
            "print(json.dumps([s and s.get('key'), resident.server_key()]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    theirs, ours = json.loads(out.stdout)
    assert theirs == ours


@pytest.mark.parametrize("server", ["1", "0"])
@pytest.mark.parametrize("args", [["scope", str(CNN), "--max_depth", "1"],
                                  ["sql", "select 1 x", str(CNN), "--out", "x.csv"]], ids=["scope", "sql --out"])
def test_a_deleted_working_directory_is_one_line(env, tmp_path, server, args):  # noqa: F811
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone),
                           sys.executable, "-m", "tfprof", *args], env={**env, "TFPROF_SERVER": server},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("Error: the current directory no longer exists")
    assert proc.stderr.count("\n") == 1


def test_main_in_a_deleted_directory_is_one_line(tmp_path, capsys):
    """``tfprof.cli.main.main`` called from Python (not through the client) says the same line."""
    from tfprof.cli.main import main

    gone = tmp_path / "gone"
    gone.mkdir()
    here = os.getcwd()
    os.chdir(gone)
    try:
        gone.rmdir()
        code = main(["sql", "select 1", str(tmp_path / "x.pb")])
    finally:
        os.chdir(here)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("Error: the current directory no longer exists")
