"""The resident server (tfprof.cli.server) behind the thin client (tfprof.cli.client): a command
served gives the same bytes, exit code and files as one run in its own process; signals reach
it; a client that goes away interrupts it; a busy or unusable server is bypassed; only this
user's private socket is used; the client imports nothing heavy.

The suite runs with TFPROF_SERVER=0 (conftest); these tests turn it on with a private socket
folder, start one server through the client's own start path, and stop it at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_signals import SIGNALS, big, interrupt, snapshot, temporaries  # noqa: F401 - big is a fixture

from tfprof.cli import resident

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "tests" / "fixtures" / "cnn" / "profile.pb"
SLOW_SQL = ("select count(*) from nodes a, nodes b, nodes c, nodes d "
            "where a.name || b.name < c.name || d.name")


def tfprof(args, env, cwd=None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120, **kwargs)


def served(env) -> int:
    out = subprocess.run([sys.executable, "-c", "from tfprof.cli import resident; s = resident.status(); "
                          "print(-1 if s is None else s['served'])"], env=env, capture_output=True, text=True)
    return int(out.stdout)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The environment of a user with a running server (started by a first, unserved command)."""
    folder = tmp_path_factory.mktemp("sockets")
    folder.chmod(0o700)
    env = {**os.environ, "TFPROF_SERVER": "1", "TFPROF_SERVER_DIR": str(folder)}
    first = tfprof(["scope", str(CNN), "--max_depth", "1"], env)
    assert first.returncode == 0, first.stderr
    deadline = time.monotonic() + 120
    while served(env) < 0:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)
    yield env
    subprocess.run([sys.executable, "-m", "tfprof", "server", "stop"], env=env, timeout=60)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("store")
    subprocess.run([sys.executable, "-m", "tfprof", "ingest", str(CNN), "--out", str(folder / "cnn.tfprof")],
                   check=True, timeout=300)
    return folder / "cnn.tfprof"


CASES = [
    ["scope", "{store}", "--max_depth", "3", "--select", "micros,bytes,params", "--order_by", "micros"],
    ["op", "{store}", "--select", "micros,occurrence", "--min_micros", "1"],
    ["code", "{store}", "--max_depth", "4"],
    ["graph", "{store}", "--start_name_regexes", "resnet/stem.*", "--max_depth", "2"],
    ["advise", "{store}"],
    ["sql", "select op, count(*) n from nodes group by op order by n desc, op limit 5", "{store}", "--format", "csv"],
    ["check", "{store}", "--format", "json"],
    ["tables", "{store}"],
    ["scope", "{store}", "--max_depth", "x"],  # exit 2, one line
    ["scope", "no/such/store"],
    ["sql", "copy nodes to 'x.csv'", "{store}"],
    ["diff", "{store}", str(CNN), "--max_depth", "2"],
]


@pytest.mark.parametrize("case", CASES, ids=[" ".join(c[:2]) + f" #{i}" for i, c in enumerate(CASES)])
def test_a_served_command_gives_what_its_own_process_gives(env, store, case):
    args = [a.format(store=store) for a in case]
    before = served(env)
    through = tfprof(args, env)
    assert served(env) == before + 1  # it did go through the server
    alone = tfprof(args, {**env, "TFPROF_SERVER": "0"})
    assert (through.returncode, through.stdout, through.stderr) == (alone.returncode, alone.stdout, alone.stderr)


def test_relative_paths_umask_and_environment_are_the_clients(env, store, tmp_path):
    (tmp_path / "in").mkdir()
    link = tmp_path / "in" / "s.tfprof"
    link.symlink_to(store)
    old = os.umask(0o077)
    try:
        proc = tfprof(["scope", "s.tfprof", "--max_depth", "2", "--output", "file:outfile=out.txt"], env,
                      cwd=tmp_path / "in")
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / "in" / "out.txt"
    assert "_TFProfRoot" in written.read_text()
    assert written.stat().st_mode & 0o777 == 0o600
    proc = tfprof(["scope", str(store), "--max_depth", "1"], {**env, "TFPROF_ENGINE": "nonsense"})
    assert proc.returncode == 2 and "TFPROF_ENGINE" in proc.stderr  # the client's environment, not the server's


def test_a_reader_of_the_output_sees_its_end(env, store):
    """The server lets go of the client's stdout after the command: `tfprof ... | head` ends."""
    pipe = subprocess.run(f"{sys.executable} -m tfprof scope {store} | head -n 2", shell=True, env=env,
                          capture_output=True, text=True, timeout=60)
    assert pipe.stdout.splitlines()[1].startswith("Doc:")
    assert served(env) > 0


@pytest.mark.parametrize(("sig", "code", "line"), SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_signals_reach_the_served_command_and_it_leaves_no_output(env, big, tmp_path, monkeypatch, sig, code,  # noqa: F811
                                                                 line):
    work = tmp_path
    (work / "t_0").write_text("an older trace")
    before = snapshot(work)
    monkeypatch.setenv("TFPROF_SERVER", "1")
    monkeypatch.setenv("TFPROF_SERVER_DIR", env["TFPROF_SERVER_DIR"])
    count = served(env)
    proc = interrupt(work, ["graph", str(big["store"]), "--output", "timeline:outfile=t", "--force"], sig,
                     lambda: bool(temporaries(work, "t_1")))
    assert served(env) == count + 1
    assert proc.returncode == code, proc.stderr
    assert proc.stderr == line + "\n"
    assert snapshot(work) == before
    assert tfprof(["scope", str(CNN), "--max_depth", "0"], env).returncode == 0  # and the server goes on


def test_a_client_that_goes_away_interrupts_its_command(env, store):
    proc = subprocess.Popen([sys.executable, "-m", "tfprof", "sql", SLOW_SQL, str(store)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    count = served(env)
    time.sleep(2.0)
    proc.kill()
    proc.wait()
    start = time.monotonic()
    after = tfprof(["scope", str(store), "--max_depth", "0"], env)
    assert after.returncode == 0 and "_TFProfRoot" in after.stdout
    assert time.monotonic() - start < 30  # the killed client's query was stopped, not run to its end
    assert served(env) >= count


def test_a_busy_server_is_bypassed(env, store):
    count = served(env)
    slow = subprocess.Popen([sys.executable, "-m", "tfprof", "sql", SLOW_SQL, str(store)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(2.0)
        assert served(env) == -1  # busy: it does not even answer a status request
        quick = tfprof(["scope", str(store), "--max_depth", "1"], env)
        assert quick.returncode == 0 and "_TFProfRoot" in quick.stdout
    finally:
        slow.send_signal(signal.SIGINT)
        slow.communicate(timeout=60)
    assert slow.returncode == 130
    assert served(env) == count + 1  # the slow one; the quick one ran in its own process


def test_only_a_private_folder_is_used(tmp_path, monkeypatch):
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o755)
    open_folder.chmod(0o755)
    assert not resident.private_dir(open_folder, create=False)
    monkeypatch.setenv("TFPROF_SERVER_DIR", str(open_folder))
    assert resident.request({"ping": True}) is None  # never even connects
    private = tmp_path / "private"
    assert resident.private_dir(private, create=True)
    assert private.stat().st_mode & 0o777 == 0o700


def test_when_the_server_is_on():
    for env, expected in [({}, True), ({"CI": "true"}, False), ({"CI": "true", "TFPROF_SERVER": "1"}, True),
                          ({"TFPROF_SERVER": "0"}, False), ({"TFPROF_SERVER": "off"}, False)]:
        code = ("import os, sys; [os.environ.pop(k, None) for k in ('CI', 'TFPROF_SERVER')]; "
                f"os.environ.update({env!r}); from tfprof.cli import resident as r; "
                "print(r.enabled(), r.served(['scope', 'x']), r.served(['scope', 'x', '--help']), r.served(['x.tfprof']))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == [str(expected), str(expected), "False", "False"]


def test_the_client_imports_no_heavy_module():
    code = ("import sys; from tfprof.cli import client, resident; resident.served(['scope', 'x']); resident.server_key(); "
            "print(sorted(m for m in ('pyarrow', 'polars', 'numpy', 'numba', 'duckdb', 'typer') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_key_follows_the_package_files_and_import_environment(tmp_path, monkeypatch):
    key = resident.server_key()
    assert resident.server_key() == key
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")
    assert resident.server_key() != key
    monkeypatch.delenv("NUMBA_NUM_THREADS")
    monkeypatch.setenv("TFPROF_SERVER_DIR", str(tmp_path))  # where it listens does not name it
    assert resident.server_key() == key


def test_an_idle_server_exits_and_removes_its_socket(tmp_path):
    folder = tmp_path / "s"
    env = {**os.environ, "TFPROF_SERVER": "1", "TFPROF_SERVER_DIR": str(folder), "TFPROF_SERVER_IDLE": "1"}
    assert tfprof(["scope", str(CNN), "--max_depth", "0"], env).returncode == 0
    deadline = time.monotonic() + 120
    while not list(folder.glob("*.sock")):
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.2)
    while list(folder.glob("*.sock")):
        assert time.monotonic() < deadline, "the idle server did not exit"
        time.sleep(0.2)
    assert list(folder.iterdir()) == []  # its lock and (empty) log went with it


def test_the_key_is_the_same_whichever_name_starts_python(tmp_path):
    """`tfprof` (its script names python3.X) and `python -m tfprof` find the same server: every
    name of this environment's interpreter gives one key. In a virtual environment those are the
    names beside its pyvenv.cfg; the interpreter it links to is another environment (other
    libraries), so it is left out there."""
    code = "from tfprof.cli import resident; print(resident.server_key())"
    here = Path(sys.executable).parent
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    names = {sys.executable, *(str(here / n) for n in ("python", "python3", version) if (here / n).exists())}
    if sys.prefix == sys.base_prefix:  # no venv: a link to the interpreter from anywhere is the same python
        link = tmp_path / "python-by-another-name"
        link.symlink_to(os.path.realpath(sys.executable))
        names |= {os.path.realpath(sys.executable), str(link)}
    assert len(names) >= 2
    keys = {subprocess.run([exe, "-c", code], capture_output=True, text=True, check=True).stdout for exe in names}
    assert len(keys) == 1


@pytest.mark.parametrize("own", [None, "muzzy_decay_ms:500"])
def test_the_command_line_sets_polars_allocator_before_polars_loads(own):
    # jemalloc reads _RJEM_MALLOC_CONF once, as polars loads: the client must have set it by then
    # (client.POLARS_MALLOC_CONF), and keep a user's own setting.
    code = ("import os, sys\n"
            "seen = []\n"
            "class Hook:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'polars' and not seen:\n"
            "            seen.append(os.environ.get('_RJEM_MALLOC_CONF'))\n"
            "sys.meta_path.insert(0, Hook())\n"
            "from tfprof.cli import client\n"
            f"code = client.main(['tables', {str(CNN)!r}])\n"
            "print(code, seen, client.POLARS_MALLOC_CONF[1], file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    env.update({"TFPROF_SERVER": "0"} if own is None else {"TFPROF_SERVER": "0", "_RJEM_MALLOC_CONF": own})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    code_, seen, ours = out.stderr.strip().splitlines()[-1].split(" ", 2)
    assert (code_, seen) == ("0", repr([own or ours])), out.stderr
