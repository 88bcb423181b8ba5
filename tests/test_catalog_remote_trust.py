"""Catalogs in object storage as bad input from elsewhere (docs/SECURITY.md, "Catalogs in object
storage"): credentials in a catalog's URI, a writers' lock that would never die, objects larger
than the run list says or replaced while read, and a storage service that never answers.

The S3 cases run against moto's server (tests/test_catalog_s3.py's fixture), the byte counts
through a proxy that counts what the server sends; the silent service is a socket here that
accepts connections and never answers, for ``s3://`` and ``gs://`` (google-cloud-cpp's
``CLOUD_STORAGE_EMULATOR_ENDPOINT``)."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from test_catalog_s3 import BUCKET, cat, s3  # noqa: F401 - the moto server and a fresh catalog

import tfprof
from tfprof.catalog import add_run, run_profile, runs
from tfprof.catalog import storage as storage_module
from tfprof.catalog.layout import RUNS
from tfprof.catalog.storage import LOCK_KEY, ObjectStore, WriterLock
from tfprof.cli.main import main
from tfprof.errors import InputError, OptionError, ProfileFormatError, masked

SECRET, KEY_ID = "SeCrEtVaLuE", "AKIAEXAMPLEKEY"


def _one_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return lines[0]


# ----------------------------------------------------------------------------- credentials
CREDENTIAL_URIS = [
    f"s3://{KEY_ID}:{SECRET}@bucket/prefix",
    f"s3://{KEY_ID}:{SECRET}/with+slash@bucket/prefix",  # an AWS secret often holds a `/`
    f"s3://{KEY_ID}@bucket/prefix",
    f"gs://{SECRET}@bucket/prefix",
    f"s3://bucket/prefix?AWSAccessKeyId={KEY_ID}&Signature={SECRET}&Expires=1",
    f"s3://bucket/prefix?X-Amz-Algorithm=AWS4&X-Amz-Credential={KEY_ID}%2F2024&X-Amz-Signature={SECRET}",
    f"gs://bucket/prefix?token={SECRET}",
]


@pytest.mark.parametrize("uri", CREDENTIAL_URIS)
def test_credentials_in_a_catalog_uri_are_refused_and_never_shown(uri, capsys, tmp_path):
    """Every command that takes a catalog refuses such a URI with one line that shows it
    masked and names the standard credential chain; the secret appears nowhere."""
    commands = [["runs", uri], ["runs", uri, "--remove", "r"], ["check", uri], ["scope", "--catalog", uri, "--run", "r"],
                ["sql", "select 1", "--catalog", uri], ["ingest", "--catalog", uri, "--run", "r",
                                                         str(tfprof.sample_path("cnn"))],
                ["ui", "--catalog", uri, "--run", "r", "--no-browser"], ["ranks", "--catalog", uri, "--run", "r"]]
    for args in commands:
        assert main(args) == 2, args
        out, err = capsys.readouterr()
        line = _one_error(err)
        assert "credential chain" in line and "***" in line, line
        assert SECRET not in out + err and KEY_ID not in out + err, (args, err)
    for call in (lambda: runs(uri), lambda: run_profile(uri, "r"), lambda: ObjectStore(uri),
                 lambda: add_run(uri, "r", profile_path=tfprof.sample_path("cnn"))):
        with pytest.raises(OptionError, match="credential chain") as caught:
            call()
        assert SECRET not in str(caught.value) and KEY_ID not in str(caught.value)


def test_debug_tracebacks_are_masked_too(capsys):
    """``--debug`` shows the traceback instead of the one line, written through the same guarded
    stderr: the credentials stay masked there as well (a user pastes tracebacks into issues)."""
    for args in (["--debug", "runs", CREDENTIAL_URIS[0]], ["--debug", "check", CREDENTIAL_URIS[4]]):
        assert main(args) == 2
        out, err = capsys.readouterr()
        assert err.startswith("Traceback") and "OptionError" in err and "***" in err, err
        assert SECRET not in out + err and KEY_ID not in out + err, err


def test_masking_hides_secrets_in_any_message_and_leaves_the_rest():
    """The one masking function, as every error's text and the command line's stderr use it."""
    for text in CREDENTIAL_URIS + [f'Could not connect to the endpoint URL: "http://u:{SECRET}@10.0.0.1/b/k"',
                                   f"see https://x.example/o?X-Goog-Signature={SECRET}&alt=media"]:
        assert SECRET not in masked(text) and KEY_ID not in masked(text), masked(text)
        assert SECRET not in str(InputError(f"cannot read `{text}`"))
    for plain in ("s3://bucket/user@example.com/runs", "http://127.0.0.1:9000/bucket/key", "runs/a@b",
                  "s3://b/p?versionId=3"):
        assert masked(plain) == plain
    from tfprof.cli.streams import _Stderr

    sink = io.StringIO()
    _Stderr(sink).write(f"Warning: the endpoint http://{KEY_ID}:{SECRET}@host/ said no\n")
    assert sink.getvalue() == "Warning: the endpoint http://***@host/ said no\n"


def test_credentials_in_the_endpoint_are_refused_and_never_shown(tmp_path):
    """botocore's and pyarrow's own messages name the endpoint they tried (pyarrow took the key
    id for the host name: "Could not resolve host: AKIA..."); credentials written into
    AWS_ENDPOINT_URL are refused, masked, before any client sees them."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, **_AWS, "TFPROF_SERVER": "0", "AWS_ENDPOINT_URL": f"http://{KEY_ID}:{SECRET}@127.0.0.1:{port}",
           "TFPROF_CATALOG_CONNECT_TIMEOUT": "0.5", "TFPROF_CATALOG_READ_TIMEOUT": "0.5"}
    for args in (["runs", "s3://bucket/p"], ["ingest", "--catalog", "s3://bucket/p", "--run", "r",
                                             str(tfprof.sample_path("cnn"))]):
        proc = subprocess.run([sys.executable, "-m", "tfprof", *args], env=env, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert proc.returncode == 2
        assert "AWS_ENDPOINT_URL=`http://***@127.0.0.1" in _one_error(proc.stderr), proc.stderr
        assert SECRET not in proc.stdout + proc.stderr and KEY_ID not in proc.stdout + proc.stderr, proc.stderr


# ----------------------------------------------------------------------------- the writers' lock
BAD_LOCKS = {
    "nan": b'{"owner": "w", "ttl": NaN}',
    "infinity": b'{"owner": "w", "ttl": Infinity}',
    "negative": b'{"owner": "w", "ttl": -5}',
    "huge": b'{"owner": "w", "ttl": 1e300}',
    "huge_int": b'{"owner": "w", "ttl": ' + b"9" * 400 + b"}",
    "string": b'{"owner": "w", "ttl": "60"}',
    "bool": b'{"owner": "w", "ttl": true}',
    "no_owner": b'{"ttl": 60}',
    "not_json": b"\x00\xff lock",
    "list": b"[60]",
    "oversized": b'{"owner": "w", "ttl": 60, "pad": "' + b"x" * 20000 + b'"}',
}


@pytest.mark.parametrize("body", list(BAD_LOCKS.values()), ids=list(BAD_LOCKS))
def test_a_damaged_lock_is_reported_and_replaced_not_waited_on(cat, body, monkeypatch, capsys):  # noqa: F811
    """A lock whose lifetime is NaN, infinite, negative, huge or no number (or that is no lock)
    never lives forever: the next writer reports it on one Warning line and replaces it."""
    ObjectStore(cat).put(LOCK_KEY, body)
    monkeypatch.setenv("TFPROF_CATALOG_LOCK_WAIT", "5")
    start = time.monotonic()
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    assert time.monotonic() - start < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"Warning: the lock `{cat}/.lock` of the catalog is damaged"), err
    assert runs(cat).column("run").to_pylist() == ["a"] and LOCK_KEY not in ObjectStore(cat).list()


def test_a_live_lock_is_judged_on_the_servers_clock(cat, monkeypatch):  # noqa: F811
    """A lock renewed a moment ago is alive, however far this machine's clock is ahead, and with
    a response that carries no Date it is alive until it has been seen unchanged for its lifetime."""
    store = ObjectStore(cat)
    store.put(LOCK_KEY, b'{"owner": "w", "ttl": 2}')
    found = store.get(LOCK_KEY)
    lock = WriterLock(store)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)  # this machine's clock an hour ahead
    assert not lock._dead(found, {})
    body, etag, response = found
    undated = {**response, "ResponseMetadata": {"HTTPHeaders": {}}}
    seen: dict = {}
    assert not lock._dead((body, etag, undated), seen)
    time.sleep(2.2)
    assert lock._dead((body, etag, undated), seen)  # the same version for longer than its lifetime
    assert not lock._dead((body, etag + "x", undated), seen)  # a renewal: another version, seen just now


# ----------------------------------------------------------------------------- bounded reads
class CountingProxy:
    """A TCP proxy to moto's server that counts the bytes the server sends back."""

    def __init__(self, target_port: int) -> None:
        self.sent = 0
        self._lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.target = target_port
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:  # the server has stopped
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, count: bool) -> None:
        try:
            while data := src.recv(65536):
                if count:
                    with self._lock:
                        self.sent += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


@pytest.mark.parametrize("client", ["boto3", "pyarrow"])
def test_a_partition_larger_than_listed_is_refused_unread(s3, cat, monkeypatch, client):  # noqa: F811
    """The run list says 15 KB; the object holds 40 MB: the read is refused with one line
    naming it, and what the server sent stays near the listed size (not 40 MB)."""
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    entry = {f["table"]: f for f in runs(cat).to_pylist()[0]["files"]}["nodes"]
    ObjectStore(cat).put(entry["path"], os.urandom(40 << 20))
    proxy = CountingProxy(int(s3["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    if client == "pyarrow":
        monkeypatch.setitem(sys.modules, "boto3", None)
    try:
        before = proxy.sent
        with pytest.raises(ProfileFormatError, match=r"nodes/run=a/.*` is damaged \(41,943,040 bytes where the "
                                                      r"catalog wrote .*; it was not downloaded\)"):
            run_profile(cat, "a")
        # the run list, the other partitions (each within its listed size), headers
        listed = sum(f["bytes"] for f in runs(cat).to_pylist()[0]["files"])
        assert proxy.sent - before < listed + 1_000_000, proxy.sent - before
    finally:
        proxy.close()


def test_a_run_list_beyond_its_limit_is_refused_unread(cat, monkeypatch, capsys):  # noqa: F811
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    monkeypatch.setattr(storage_module, "RUN_LIST_LIMIT", 1000)  # the run list takes about 3 KB
    assert main(["runs", cat]) == 2
    line = _one_error(capsys.readouterr().err)
    assert f"`{cat}/{RUNS}` holds" in line and "more than the 1,000 it may; it was not downloaded" in line


def test_an_object_replaced_while_read_is_one_error(cat, monkeypatch, capsys):  # noqa: F811
    """Read in ranges (a small CHUNK here), a partition replaced between two ranges by other
    bytes of the same size: the next range names the first one's ETag (If-Match) and the read
    stops with one line saying the object changed, never a mix of both versions."""
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    entry = {f["table"]: f for f in runs(cat).to_pylist()[0]["files"]}["nodes"]
    store = ObjectStore(cat)
    original = store.get(entry["path"])[0]
    monkeypatch.setattr(storage_module, "CHUNK", 4096)
    real, replaced = ObjectStore._call, []

    def replace_after_first_range(self, doing, rel, method, *args, **kwargs):
        out = real(self, doing, rel, method, *args, **kwargs)
        if rel == entry["path"] and method == "get_object" and not replaced:
            replaced.append(1)
            real(store, "write", rel, "put_object", Body=original[::-1])  # same size, other bytes
        return out

    monkeypatch.setattr(ObjectStore, "_call", replace_after_first_range)
    assert main(["scope", "--catalog", cat, "--run", "a", "--max_depth", "2"]) == 2
    line = _one_error(capsys.readouterr().err)
    assert f"`{cat}/{entry['path']}` changed while it was read" in line and "run the command again" in line, line
    assert replaced == [1]


# ----------------------------------------------------------------------------- a service that never answers
_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture
def silent():
    """A socket that accepts connections and never answers; how many it accepted."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], held
    server.close()
    for conn in held:
        conn.close()


def _silent_env(port: int, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TFPROF_CATALOG_"))}
    return {**env, **_AWS, **extra, "TFPROF_SERVER": "0", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "CLOUD_STORAGE_EMULATOR_ENDPOINT": f"http://127.0.0.1:{port}"}


COMMANDS = {
    "runs-s3": ["runs", "s3://bucket/prefix"],
    "runs-gs": ["runs", "gs://bucket/prefix"],
    "scope-gs": ["scope", "--catalog", "gs://bucket/prefix", "--run", "r"],
    "ingest-s3": ["ingest", "--catalog", "s3://bucket/prefix", "--run", "r", str(tfprof.sample_path("cnn"))],
}


@pytest.mark.parametrize("args", list(COMMANDS.values()), ids=list(COMMANDS))
def test_a_silent_service_is_one_error_within_the_time_limits(silent, tmp_path, args):
    port, held = silent
    env = _silent_env(port, TFPROF_CATALOG_CONNECT_TIMEOUT="0.2", TFPROF_CATALOG_READ_TIMEOUT="0.5")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "tfprof", *args], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    took = time.monotonic() - start
    assert proc.returncode == 2 and held, proc.stderr
    assert "did not answer in time (TFPROF_CATALOG_CONNECT_TIMEOUT=0.2 s" in _one_error(proc.stderr)
    assert took < 20, took  # 3 attempts of 0.7 s, the clients' back-off, Python's start


@pytest.mark.parametrize("args", list(COMMANDS.values()), ids=list(COMMANDS))
@pytest.mark.parametrize(("sig", "code", "line"), [(signal.SIGINT, 130, "Interrupted."),
                                                   (signal.SIGTERM, 143, "Terminated.")], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_command_waiting_on_a_silent_service(silent, tmp_path, args, sig, code, line):
    """With the default time limits (minutes in all), Ctrl-C or SIGTERM sent while the command
    waits for the service ends it within a second."""
    port, held = silent
    proc = subprocess.Popen([sys.executable, "-m", "tfprof", *args], env=_silent_env(port), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not held:  # the command is waiting on the service
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code and err == line + "\n", (proc.returncode, err)
    assert took < 1.0, took


# ----------------------------------------------------------------------------- the fuzz target
_SEEDS = """
import sys
sys.path.insert(0, "fuzz")
import contract
from make_corpus import seeds
for name, data in seeds("s3").items():
    print(name, contract.check("s3", data), flush=True)
"""


def test_the_s3_fuzz_targets_seeds_keep_the_contract():
    """fuzz/hostile_s3.py's seeds (damaged locks, objects of the wrong size or replaced while
    read, lying headers, a damaged run list) through its contract, in a process of their own
    (the target puts its fake service in place of boto3's client)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", _SEEDS], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TFPROF_SERVER": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = dict(line.split() for line in proc.stdout.splitlines())
    assert len(outcomes) >= 10 and set(outcomes.values()) == {"loaded"}, outcomes
