"""Catalogs in object storage (tfprof.catalog.remote, tfprof.catalog.storage) against a real
S3-compatible server: moto's, started here on 127.0.0.1 at a free port, reached through the
same environment variables a user sets (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...). The kinds
of tests the local catalog has: every golden case through a run, the runs table, no-clobber,
remove, SQL, aggregates, a dead writer's lock and leftovers, a lost commit race, concurrent
adds from two processes, a writer killed mid-add, and damaged or missing objects."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, GOLDEN_FIXTURES, golden_case_on, golden_cases

import tfprof
from tfprof.api import run_view
from tfprof.catalog import (
    add_run,
    aggregate_profile,
    check_catalog,
    match_runs,
    remote,
    remote_read,
    remove_run,
    run_profile,
    runs,
    sql,
)
from tfprof.catalog.layout import RUNS
from tfprof.catalog.storage import LOCK_KEY, ObjectStore, WriterLock, location, object_uri
from tfprof.errors import (
    CatalogWarning,
    InputNotFoundError,
    MissingDependencyError,
    OptionError,
    OutputError,
    ProfileFormatError,
)
from tfprof.schema import TABLES

BUCKET = "tfprof-test"


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server with one bucket, and the environment pointing at it (for this process
    and the processes it starts)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
           "AWS_EC2_METADATA_DISABLED": "true"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        mp.delenv("AWS_PROFILE", raising=False)
        ObjectStore(f"s3://{BUCKET}").client.create_bucket(Bucket=BUCKET)
        yield env
    server.stop()


@pytest.fixture
def cat(s3) -> str:
    """A fresh catalog URI (a new prefix of the bucket)."""
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"


def _keys(uri: str) -> list[str]:
    return ObjectStore(uri).list()


def _listed(uri: str) -> set[str]:
    return {f["path"] for files in runs(uri).column("files").to_pylist() for f in files}


def _scope(prof) -> str:
    return run_view(prof, "scope", {"max_depth": 3}).text


# ----------------------------------------------------------------------------- round trip
@pytest.fixture(scope="module")
def golden_s3(s3) -> str:
    uri = f"s3://{BUCKET}/golden"
    for name in GOLDEN_FIXTURES:
        add_run(uri, name, tags={"fixture": name}, profile_path=FIXTURES / name / "profile.pb")
    return uri


_RUNS: dict[str, tfprof.Profile] = {}


@pytest.mark.parametrize("fixture,case", list(golden_cases()))
def test_every_golden_case_through_a_run_in_s3(golden_s3, fixture, case):
    """A run read back from S3 prints what its profile alone prints, byte for byte."""
    if fixture not in _RUNS:
        _RUNS[fixture] = run_profile(golden_s3, fixture)
    golden_case_on(_RUNS[fixture], fixture, case)


def test_runs_table_and_objects(golden_s3):
    table = runs(golden_s3)
    assert table.column("run").to_pylist() == GOLDEN_FIXTURES
    for row in table.to_pylist():
        assert dict(row["tags"]) == {"fixture": row["run"]}
        assert row["source_file"] == str(FIXTURES / row["run"] / "profile.pb")
    keys = _keys(golden_s3)
    assert set(keys) == _listed(golden_s3) | {RUNS}  # no lock left, nothing unlisted


def test_sql_and_aggregate_equal_a_local_catalog(cat, tmp_path):
    local = tmp_path / "cat"
    for run, kind, tags in (("n-1", "cnn", {"host": "h1"}), ("n-2", "multistep", {"host": "h2", "worker": "0"}),
                            ("other", "cnn", {})):
        add_run(local, run, tags=tags, profile_path=tfprof.sample_path(kind))
        add_run(cat, run, tags=tags, profile_path=tfprof.sample_path(kind))
    for query in ("select run, host, worker, count(*) n, sum(duration_micros) t from execs group by all order by run",
                  "select n.run, count(*) from nodes n join node_types t using (run, node_id) group by 1 order by 1",
                  "select run, nodes, tags from runs order by run"):
        assert sql(cat, query).to_pylist() == sql(local, query).to_pylist()
    assert match_runs(cat, "n-*") == ["n-1", "n-2"]
    for how in ("sum", "max"):
        want = run_view(aggregate_profile(local, ["n-1", "n-2"], how), "scope", {"max_depth": 4}).text
        assert run_view(aggregate_profile(cat, ["n-1", "n-2"], how), "scope", {"max_depth": 4}).text == want


def test_a_jobs_ranks_in_s3_equal_a_local_catalog(cat, tmp_path):
    """A distributed job added to S3 holds a rank partition per trace, as on disk: one rank reads
    back as its trace, SQL sees the rank column, the ranks aggregate as a local catalog's do."""
    from tfprof.catalog import add_job, run_ranks

    gloo = FIXTURES / "ranks" / "gloo4"
    local = tmp_path / "cat"
    add_job(local, "job", [gloo])
    row = add_job(cat, "job", [gloo])
    assert run_ranks(row) == [0, 1, 2, 3] and all("/rank=" in f["path"] for f in row["files"])
    assert _scope(run_profile(cat, "job", 2)) == _scope(tfprof.load(gloo / "rank-2.pt.trace.json.gz"))
    with pytest.raises(OptionError, match="is a job of 4 ranks"):
        run_profile(cat, "job")
    query = "select run, rank, count(*) n, sum(duration_ns) t from execs group by all order by all"
    assert sql(cat, query).to_pylist() == sql(local, query).to_pylist() and len(sql(cat, query)) == 4
    want = run_view(aggregate_profile(local, ["job"], "mean"), "scope", {"max_depth": 3}).text
    assert run_view(aggregate_profile(cat, ["job"], "mean"), "scope", {"max_depth": 3}).text == want


def test_uris_are_recognised():
    assert object_uri("s3://b/p/") == "s3://b/p" and object_uri(Path("s3://b/p")) == "s3://b/p"
    assert object_uri("gs://b") == "gs://b" and object_uri("runs/") is None and object_uri(Path("s3:x")) is None
    assert location("runs/") == Path("runs") and location(Path("gs://b/x")) == "gs://b/x"
    for bad in ("s3://", "s3://b/x?y=1", "s3://b/../x", "s3://b//x"):
        with pytest.raises(OptionError, match="bad --catalog"):
            ObjectStore(bad)


# ----------------------------------------------------------------------------- writers
def test_no_clobber_force_and_remove(cat):
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    add_run(cat, "b", profile_path=tfprof.sample_path("cnn"))
    before = _listed(cat)
    with pytest.raises(OutputError, match="already in the catalog `s3://.*--force"):
        add_run(cat, "a", profile_path=tfprof.sample_path("multistep"))
    assert _listed(cat) == before
    add_run(cat, "a", force=True, profile_path=tfprof.sample_path("multistep"))
    assert _scope(run_profile(cat, "a")) == _scope(tfprof.load(tfprof.sample_path("multistep")))
    assert set(_keys(cat)) == _listed(cat) | {RUNS}  # the replaced run's objects are gone
    foreign = "nodes/run=b/README.txt"  # an object tfprof did not write: never deleted
    ObjectStore(cat).put(foreign, b"mine")
    remove_run(cat, "b")
    assert runs(cat).column("run").to_pylist() == ["a"]
    assert set(_keys(cat)) == _listed(cat) | {RUNS, foreign}
    with pytest.raises(OptionError, match="no run `b` in the catalog"):
        remove_run(cat, "b")


def test_a_prefix_holding_other_objects_is_refused(cat):
    ObjectStore(cat).put("notes.txt", b"not a catalog")
    with pytest.raises(OutputError, match="not a tfprof catalog's .*notes.txt"):
        add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    assert _keys(cat) == ["notes.txt"]


def test_a_dead_writers_lock_is_broken_and_its_leftovers_deleted(cat, monkeypatch):
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    store = ObjectStore(cat)
    leftover = "nodes/run=ghost/host=__HIVE_DEFAULT_PARTITION__/worker=__HIVE_DEFAULT_PARTITION__/part-0a0b0c.parquet"
    store.put(leftover, b"half")
    store.put(LOCK_KEY, json.dumps({"owner": "dead", "ttl": 1}).encode())  # not renewed: dead after 1 s
    assert runs(cat).column("run").to_pylist() == ["a"]  # unlisted objects are invisible
    monkeypatch.setenv("TFPROF_CATALOG_LOCK_WAIT", "30")
    start = time.monotonic()
    add_run(cat, "b", profile_path=tfprof.sample_path("cnn"))
    assert 1 <= time.monotonic() - start < 20
    assert runs(cat).column("run").to_pylist() == ["a", "b"]
    assert set(_keys(cat)) == _listed(cat) | {RUNS}  # the leftover and the lock are gone


def test_a_live_writers_lock_is_waited_for_then_refused(cat, monkeypatch):
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    monkeypatch.setenv("TFPROF_CATALOG_LOCK_WAIT", "1")
    holder = WriterLock(ObjectStore(cat))
    holder.acquire()
    try:
        with pytest.raises(OutputError, match="being written by another writer"):
            add_run(cat, "b", profile_path=tfprof.sample_path("cnn"))
        with pytest.raises(OutputError, match="being written by another writer"):
            remove_run(cat, "a")
    finally:
        holder.release()
    assert runs(cat).column("run").to_pylist() == ["a"]
    assert set(_keys(cat)) == _listed(cat) | {RUNS}


def test_two_writers_breaking_one_dead_lock_get_it_once(cat, monkeypatch):
    """Both saw the same dead lock; the first replaces it (If-Match on that version), the
    second's replacement then fails and it waits, rather than both holding the lock."""
    store = ObjectStore(cat)
    store.put(LOCK_KEY, b'{"owner": "dead", "ttl": 1}')
    time.sleep(2.1)  # (Last-Modified and Date have one-second resolution)
    dead = store.get(LOCK_KEY)
    first = WriterLock(ObjectStore(cat))
    first.acquire()
    try:
        late = ObjectStore(cat)
        monkeypatch.setattr(late, "get", lambda rel, **_: dead)  # it read the dead lock before `first` broke it
        monkeypatch.setenv("TFPROF_CATALOG_LOCK_WAIT", "0.5")
        with pytest.raises(OutputError, match="being written by another writer"):
            WriterLock(late).acquire()
        first.confirm()  # still its own
    finally:
        first.release()
    assert LOCK_KEY not in _keys(cat)


def test_a_lock_taken_over_is_noticed_before_the_commit(cat):
    store = ObjectStore(cat)
    lock = WriterLock(store)
    lock.acquire()
    store.put(LOCK_KEY, b'{"owner": "someone else", "ttl": 60}')  # another writer broke it
    with pytest.raises(OutputError, match="taken over"):
        lock.confirm()
    lock.release()
    assert store.get(LOCK_KEY)[0] == b'{"owner": "someone else", "ttl": 60}'  # theirs is left alone


def test_a_commit_that_lost_a_race_changes_nothing(cat, monkeypatch):
    """Another writer commits between this writer's read of the run list and its commit (as
    one whose lock was broken would): the conditional PUT fails, the uploads are deleted."""
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    store = ObjectStore(cat)
    sink = pa.BufferOutputStream()
    pq.write_table(runs(cat), sink, compression="snappy")  # other bytes, so another ETag
    theirs = sink.getvalue().to_pybytes()
    real = remote._upload

    def upload_then_race(*args, **kwargs):
        out = real(*args, **kwargs)
        store.put(RUNS, theirs)
        return out

    monkeypatch.setattr(remote, "_upload", upload_then_race)
    with pytest.raises(OutputError, match="changed by another writer"):
        add_run(cat, "b", profile_path=tfprof.sample_path("cnn"))
    assert store.get(RUNS)[0] == theirs
    assert runs(cat).column("run").to_pylist() == ["a"]
    assert set(_keys(cat)) == _listed(cat) | {RUNS}  # its uploads deleted, no lock left


def test_writer_dying_mid_add_leaves_nothing_visible(cat, monkeypatch):
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    calls, real = [], ObjectStore.upload

    def dies(store, local, rel):
        calls.append(rel)
        if len(calls) == 4:
            raise KeyboardInterrupt  # after three uploads
        real(store, local, rel)

    monkeypatch.setattr(ObjectStore, "upload", dies)
    with pytest.raises(KeyboardInterrupt):
        add_run(cat, "b", profile_path=tfprof.sample_path("cnn"))
    monkeypatch.undo()
    assert runs(cat).column("run").to_pylist() == ["a"]
    assert len(set(_keys(cat)) - _listed(cat) - {RUNS}) == 3  # its uploads, unlisted
    add_run(cat, "c", profile_path=tfprof.sample_path("cnn"))
    assert set(_keys(cat)) == _listed(cat) | {RUNS}


def test_a_reader_racing_a_replace_reads_the_new_run_list(cat, monkeypatch):
    """A replace commits and deletes the old objects after a reader read the run list: the
    reader finds an object gone, reads the run list again and gets the new run."""
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    real, raced = remote_read._fetch_all, []

    def replace_first(store, entries):
        if not raced:
            raced.append(1)
            add_run(cat, "a", force=True, profile_path=tfprof.sample_path("multistep"))
        return real(store, entries)

    monkeypatch.setattr(remote_read, "_fetch_all", replace_first)
    assert _scope(run_profile(cat, "a")) == _scope(tfprof.load(tfprof.sample_path("multistep")))
    assert raced == [1]


# ----------------------------------------------------------------------------- bad input
def test_damaged_and_missing_objects_are_named(cat):
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    store = ObjectStore(cat)
    entry = {f["table"]: f for f in runs(cat).to_pylist()[0]["files"]}["execs"]
    data = store.get(entry["path"])[0]
    store.put(entry["path"], data[:-10])
    with pytest.raises(ProfileFormatError, match=r"`s3://.*/execs/run=a/.*` is damaged \(.* bytes where"):
        run_profile(cat, "a")
    store.put(entry["path"], bytes([data[0] ^ 1]) + data[1:])
    with pytest.raises(ProfileFormatError, match="checksum differs"):
        run_profile(cat, "a")
    with pytest.warns(CatalogWarning, match="skips a run it cannot read: `a` .*checksum differs"):
        assert sql(cat, "select count(*) n from execs").to_pylist() == [{"n": 0}]  # SQL over every run: skipped
    report = check_catalog(cat)
    assert report["problems"] == [] and "checksum differs" in report["runs"][0]["problems"][0]
    store.delete(entry["path"])
    with pytest.raises(ProfileFormatError, match="is missing from the catalog"):
        run_profile(cat, "a")
    assert "is missing from the catalog" in check_catalog(cat, checksums=False)["runs"][0]["problems"][0]
    store.put(RUNS, b"PAR1 not really")
    with pytest.raises(ProfileFormatError, match=r"runs.parquet` is damaged"):
        runs(cat)


def test_missing_bucket_catalog_and_writer_extras(s3, cat, monkeypatch):
    with pytest.raises(InputNotFoundError, match="bucket of `s3://no-such-bucket-x/c` does not exist"):
        runs("s3://no-such-bucket-x/c")
    with pytest.raises(InputNotFoundError, match="bucket of `s3://no-such-bucket-x/c` does not exist"):
        add_run("s3://no-such-bucket-x/c", "a", profile_path=tfprof.sample_path("cnn"))
    with pytest.raises(InputNotFoundError, match="is not a tfprof catalog"):
        run_profile(cat, "a")
    with pytest.raises(OptionError, match="read-only here"):
        add_run("gs://bucket/c", "a", profile_path=tfprof.sample_path("cnn"))
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(MissingDependencyError, match=r"needs boto3: pip install 'tfprof\[s3\]'"):
        add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))


# ----------------------------------------------------------------------------- processes
def _tfprof(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], env={**os.environ, **env, "TFPROF_SERVER": "0"},
                          capture_output=True, text=True, timeout=180)


def test_cli_on_a_catalog_in_s3(s3, cat, tmp_path):
    profile = str(tfprof.sample_path("cnn"))
    out = _tfprof(s3, "ingest", "--catalog", cat, "--run", "r1", "--tag", "host=h1", profile)
    assert out.returncode == 0 and out.stdout == f"added run r1 to {cat} (467 nodes, 1 steps)\n", out.stderr
    view = _tfprof(s3, "scope", "--catalog", cat, "--run", "r1", "--max_depth", "3")
    assert view.returncode == 0 and view.stdout == _tfprof(s3, "scope", "--max_depth", "3", profile).stdout
    assert "r1" in _tfprof(s3, "runs", cat).stdout
    rows = _tfprof(s3, "sql", "select run, host, count(*) n from nodes group by all", "--catalog", cat, "--format", "json")
    assert rows.returncode == 0 and json.loads(rows.stdout) == [{"run": "r1", "host": "h1", "n": 467}]
    again = _tfprof(s3, "ingest", "--catalog", cat, "--run", "r1", profile)
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "--force" in again.stderr
    for args in (("runs", f"s3://{BUCKET}/nothing-here"), ("scope", cat), ("check", f"s3://{BUCKET}/nothing-here"), ("runs", "s3://no-such-bucket-x/c"),
                 ("scope", "--catalog", cat, "--run", "nope"), ("runs", cat + "?q=1")):
        bad = _tfprof(s3, *args)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr, bad.stderr
    creds = _tfprof({**s3, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "ingest", "--catalog", cat,
                    "--run", "r2", profile)
    assert creds.returncode == 2 and creds.stderr.count("\n") == 1 and cat in creds.stderr
    checked = _tfprof(s3, "check", cat)
    assert checked.returncode == 0 and checked.stdout == f"catalog {cat}: 1 runs\nrun r1: {len(TABLES)} files ok; its data: 0 errors, 0 warnings\n"
    assert _tfprof(s3, "runs", cat, "--remove", "r1").stdout == f"removed run r1 from {cat}\n"
    assert runs(cat).num_rows == 0
    job = _tfprof(s3, "ingest", "--catalog", cat, "--run", "job", str(FIXTURES / "ranks" / "gloo4"))
    assert job.returncode == 0 and job.stdout.startswith(f"added job job to {cat}: 4 ranks"), job.stderr
    ranks = _tfprof(s3, "ranks", "--catalog", cat, "--run", "job")
    assert ranks.returncode == 0 and "  straggler: rank 2 joins the collectives" in ranks.stdout, ranks.stderr


_ADDER = """
import sys, tfprof
from tfprof.catalog import add_run
add_run(sys.argv[1], sys.argv[2], profile_path=tfprof.sample_path(sys.argv[3]))
"""


def test_a_command_that_reached_s3_skips_the_interpreters_exit(s3, cat):
    """pyarrow's S3 shutdown at the interpreter's exit aborted `tfprof check s3://...` now and
    then (SIGABRT after correct output; 2 of 25 runs here): a command that reached object
    storage ends with os._exit. An exit handler shows which way a process ended; the same
    command on a local file still runs it."""
    ingest = _tfprof(s3, "ingest", "--catalog", cat, "--run", "r1", str(tfprof.sample_path("cnn")))
    assert ingest.returncode == 0, ingest.stderr
    probe = ("import atexit, sys; atexit.register(lambda: print('exit handlers ran', file=sys.stderr)); "
             "from tfprof.cli.client import main; sys.exit(main(sys.argv[1:]))")
    remote_run = subprocess.run([sys.executable, "-c", probe, "runs", cat], capture_output=True, text=True,
                                env={**os.environ, **s3, "TFPROF_SERVER": "0"}, timeout=120)
    assert remote_run.returncode == 0 and "r1" in remote_run.stdout and "exit handlers ran" not in remote_run.stderr
    local_run = subprocess.run([sys.executable, "-c", probe, "scope", "--max_depth", "1", str(tfprof.sample_path("cnn"))],
                               capture_output=True, text=True, env={**os.environ, "TFPROF_SERVER": "0"}, timeout=120)
    assert local_run.returncode == 0 and "exit handlers ran" in local_run.stderr


def test_concurrent_adds_from_two_processes(s3, cat):
    """Two processes add different runs at once, three times over: every run is listed and
    reads back whole, and nothing is left that the runs table does not list."""
    env = {**os.environ, **s3, "TFPROF_SERVER": "0"}
    for round_ in range(3):
        procs = [subprocess.Popen([sys.executable, "-c", _ADDER, cat, f"r{round_}-{i}", kind], env=env,
                                  stderr=subprocess.PIPE) for i, kind in enumerate(("cnn", "multistep"))]
        for p in procs:
            _, err = p.communicate(timeout=180)
            assert p.returncode == 0, err.decode()
    names = runs(cat).column("run").to_pylist()
    assert names == sorted(f"r{r}-{i}" for r in range(3) for i in range(2))
    assert set(_keys(cat)) == _listed(cat) | {RUNS}
    for name in names:
        kind = "cnn" if name.endswith("-0") else "multistep"
        assert _scope(run_profile(cat, name)) == _scope(tfprof.load(tfprof.sample_path(kind)))


_KILLED = """
import os, sys, time, tfprof
from tfprof.catalog import add_run
from tfprof.catalog.storage import ObjectStore
real = ObjectStore.upload
def slow(self, local, rel):
    real(self, local, rel)
    print("uploaded", flush=True)
    time.sleep(60)
ObjectStore.upload = slow
add_run(sys.argv[1], "killed", profile_path=tfprof.sample_path("cnn"))
"""


def test_a_writer_killed_mid_add_leaves_nothing_visible(s3, cat):
    """SIGKILL after the first upload, lock held: the run is not listed; the next add waits
    out the dead lock (TFPROF_CATALOG_LOCK_TTL=2), deletes the upload and commits."""
    env = {**os.environ, **s3, "TFPROF_SERVER": "0", "TFPROF_CATALOG_LOCK_TTL": "2"}
    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, cat], env=env, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"uploaded\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert runs(cat).column("run").to_pylist() == ["a"]
    assert LOCK_KEY in _keys(cat) and len(set(_keys(cat)) - _listed(cat) - {RUNS, LOCK_KEY}) == 1
    added = subprocess.run([sys.executable, "-c", _ADDER, cat, "b", "multistep"], env=env, capture_output=True,
                           timeout=180)
    assert added.returncode == 0, added.stderr.decode()
    assert runs(cat).column("run").to_pylist() == ["a", "b"]
    assert set(_keys(cat)) == _listed(cat) | {RUNS}


@pytest.mark.spark
def test_sql_over_s3_on_spark_equals_duckdb(s3, cat):
    pytest.importorskip("pyspark", reason="needs pyspark: pip install 'tfprof[spark]'")
    from tfprof.catalog.spark import on_spark, spark_sql

    add_run(cat, "a", tags={"host": "h1"}, profile_path=tfprof.sample_path("cnn"))
    add_run(cat, "b", profile_path=tfprof.sample_path("multistep"))
    for query in ("select run, host, count(*) n, sum(duration_micros) t from execs group by run, host order by run",
                  "select n.run, count(*) c from nodes n join node_types t using (run, node_id) group by 1 order by 1"):
        assert spark_sql(cat, query).to_pylist() == sql(cat, query).to_pylist()
    with on_spark():  # a view of a run in S3 with its SQL on Spark
        got = _scope(run_profile(cat, "a"))
    assert got == _scope(tfprof.load(tfprof.sample_path("cnn")))


@pytest.mark.spark
def test_runs_in_s3_aggregated_on_spark(s3, cat):
    """Runs in S3 aggregated on Spark (their partitions copied, each checked) print the local aggregate."""
    pytest.importorskip("pyspark", reason="needs pyspark: pip install 'tfprof[spark]'")
    from tfprof.catalog.spark_members import spark_aggregate

    add_run(cat, "a", profile_path=tfprof.sample_path("cnn"))
    add_run(cat, "b", profile_path=tfprof.sample_path("multistep"))
    add_run(cat, "c", profile_path=FIXTURES / "rnn" / "profile.pb")  # not asked for: not copied
    for cmd in ("scope", "op"):
        want = run_view(aggregate_profile(cat, ["a", "b"], "mean"), cmd, {"max_depth": 4}).text
        assert run_view(spark_aggregate(cat, ["a", "b"], "mean"), cmd, {"max_depth": 4}).text == want
