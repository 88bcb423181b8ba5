"""Servers follow their files: a profile replaced on disk under the web UI (a store ingested again
with --force, moved away with another put in its place, copied over in place; a trace rewritten)
is answered from exactly the new profile, the answers a fresh server over it gives, never from a
mix of what was cached and what is read lazily; one deleted is answered 410 with the reason. A
``Profile`` opened from a store never reads a table of another store generation, and the resident
server's commands answer from the profile on disk now, or say in one line that it is gone.

Before: the UI answered ``/api/memory/0`` from the first store after it was replaced, and
``/api/overview/0`` with the first store's node count beside the second's steps; a Profile read
the second store's tables beside the first's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from test_server import env, served  # noqa: F401 - env: the fixture of a running server
from test_ui_api import page_client

import tfprof
from tfprof.api import ingest_to_store, run_view
from tfprof.api.memory import memory
from tfprof.errors import ProfileChangedError, ProfileFormatError
from tfprof.manifest import MANIFEST, identity, read_manifest
from tfprof.profile import Profile
from tfprof.ui.app import make_app
from tfprof.ui.profiles import Profiles

A_TRACE = Path(tfprof.sample_path("torch"))  # 2 steps, memory levels recorded
B_TRACE = FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz"  # 1 step, a GPU's memory

GETS = ["/api/profiles", "/api/memory/0", "/api/overview/0", "/api/steps/0", "/api/view/0/scope?max_depth=3",
        "/api/view/0/op", "/api/view/0/code?max_depth=4", "/api/advice/0", "/api/timeline/0",
        "/api/flame/0/scope?metric=micros", "/api/ranks"]
SQL = "select count(*) n, sum(duration_micros) t from execs"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stores")
    ingest_to_store(folder / "a.tfprof", profile_path=A_TRACE)
    ingest_to_store(folder / "b.tfprof", profile_path=B_TRACE)
    return folder / "a.tfprof", folder / "b.tfprof"


def answers(client) -> dict[str, tuple[int, bytes]]:
    """Every page's answer: status and body."""
    out = {url: client.get(url) for url in GETS}
    out["sql"] = client.post("/api/sql/0", data={"q": SQL})
    return {url: (r.status_code, r.content) for url, r in out.items()}


def fresh(path: Path) -> dict[str, tuple[int, bytes]]:
    """What a server started now over ``path`` answers."""
    return answers(page_client(make_app(Profiles.load([str(path)]))))


def served_copy(store: Path, tmp_path: Path):
    """A copy of ``store`` (``run.tfprof``) and a page client of a UI serving it."""
    run = tmp_path / "run.tfprof"
    shutil.copytree(store, run)
    return run, page_client(make_app(Profiles.load([str(run)])))


def replace_store(run: Path, new: Path, how: str) -> None:
    if how == "force":  # `tfprof ingest NEW --out RUN --force`: a new directory swapped in
        ingest_to_store(run, profile_path=new, force=True)
    elif how == "moved":  # moved away, and another put in its place
        os.rename(run, run.with_name(run.name + ".moved"))
        shutil.copytree(new, run)
    else:  # `cp -r new/. run/`: the same directory, every file written over in place, the manifest last
        files = sorted(new.rglob("*"), key=lambda f: f.name == MANIFEST)
        for f in files:
            if f.is_file():
                (run / f.relative_to(new)).parent.mkdir(parents=True, exist_ok=True)
                with open(run / f.relative_to(new), "wb") as out:
                    out.write(f.read_bytes())


@pytest.mark.parametrize("how", ["force", "moved", "in_place"])
def test_a_replaced_store_is_answered_from_the_new_store_only(stores, tmp_path, how):
    a, b = stores
    run, client = served_copy(a, tmp_path)
    before = answers(client)  # every cache warm with the first store
    assert all(status == 200 for status, _ in before.values()), before
    replace_store(run, b, how)
    after = answers(client)
    assert after == fresh(run)
    assert after["/api/memory/0"] != before["/api/memory/0"] and after["sql"] != before["sql"]


def test_a_deleted_store_is_410_with_the_reason_and_read_again_once_back(stores, tmp_path):
    a, b = stores
    run, client = served_copy(a, tmp_path)
    answers(client)
    shutil.rmtree(run)
    for url in [u for u in GETS if u != "/api/profiles"]:
        r = client.get(url)
        assert r.status_code == 410, (url, r.text)
        assert r.json()["error"] == (f"`{run}` was deleted since the UI opened it; put it back (it is read again then) "
                                     "or start the UI on another profile")
    r = client.post("/api/sql/0", data={"q": SQL})
    assert r.status_code == 410 and "was deleted since the UI opened it" in r.json()["error"]
    listed = client.get("/api/profiles").json()["profiles"]  # the page still opens, and says why
    assert listed[0]["nodes"] == 0 and "was deleted since the UI opened it" in listed[0]["error"]
    shutil.copytree(b, run)
    assert answers(client) == fresh(run)


def test_a_trace_rewritten_in_place_is_read_again_and_a_deleted_one_is_410(tmp_path):
    trace = tmp_path / "run.pt.trace.json.gz"
    shutil.copyfile(A_TRACE, trace)
    client = page_client(make_app(Profiles.load([str(trace)])))
    before = answers(client)
    inode = trace.stat().st_ino
    with open(trace, "r+b") as f:  # the same file, rewritten
        f.write(B_TRACE.read_bytes())
        f.truncate()
    assert trace.stat().st_ino == inode
    after = answers(client)
    assert after == fresh(trace) and after["/api/memory/0"] != before["/api/memory/0"]
    trace.unlink()
    r = client.get("/api/memory/0")
    assert r.status_code == 410 and r.json()["error"].startswith(f"`{trace}` was deleted since the UI opened it")


def test_a_store_replaced_while_a_request_reads_it_gives_the_new_answer(stores, tmp_path, monkeypatch):
    """The store is swapped after the request read it and before it answered: the answer is
    thrown away and the request asked again on the new store."""
    import tfprof.api.memory as memory_api

    a, b = stores
    run, client = served_copy(a, tmp_path)
    real, calls = memory_api.memory_page, []

    def swapped_after_reading(*args, **kwargs):
        page = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            replace_store(run, b, "moved")
        return page

    monkeypatch.setattr(memory_api, "memory_page", swapped_after_reading)
    got = client.get("/api/memory/0")
    monkeypatch.setattr(memory_api, "memory_page", real)
    assert len(calls) == 2
    assert (got.status_code, got.content) == fresh(run)["/api/memory/0"]


def test_a_store_that_keeps_changing_is_refused_with_409(stores, tmp_path, monkeypatch):
    import tfprof.api.memory as memory_api

    a, b = stores
    run, client = served_copy(a, tmp_path)
    real, turn = memory_api.memory_page, []

    def always_swapped(*args, **kwargs):
        page = real(*args, **kwargs)
        shutil.rmtree(run)
        shutil.copytree(b if len(turn) % 2 == 0 else a, run)
        turn.append(1)
        return page

    monkeypatch.setattr(memory_api, "memory_page", always_swapped)
    got = client.get("/api/memory/0")
    assert got.status_code == 409
    assert got.json()["error"] == (f"`{run}` changed while the UI read it, 3 times running; ask again once it is "
                                   "written")


# ----------------------------------------------------------------------------- Profile


def test_a_profile_never_reads_a_table_of_a_replaced_store(stores, tmp_path):
    a, b = stores
    run = tmp_path / "run.tfprof"
    shutil.copytree(a, run)
    prof = Profile.open(run)
    counts = prof.row_counts()
    prof.frame("steps")
    run_view(prof, "scope", {"max_depth": 2})
    replace_store(run, b, "moved")
    reads = {
        "table": lambda: prof.table("execs"),
        "columns": lambda: prof.columns("node_steps", ["node_id"]),
        "lazy": lambda: prof.lazy("steps").collect(),
        "frame": lambda: prof.frame("memory"),
        "sql": lambda: prof.sql("select count(*) from nodes"),
        "connection": lambda: prof.connection(),
        "view": lambda: run_view(prof, "code", {"max_depth": 2}),
        "memory": lambda: memory(prof),
    }
    for what, read in reads.items():
        with pytest.raises(ProfileChangedError, match="was replaced .* after this profile was opened from it") as err:
            read()
        assert not err.value.deleted, what
    with pytest.raises(ProfileChangedError):  # read before, but a memory map of a file that may be rewritten
        prof.table("nodes")
    assert prof.row_counts() == counts  # the manifest as opened, not the new one's
    shutil.rmtree(run)
    with pytest.raises(ProfileChangedError, match=f"the store `{run}` was deleted after") as err:
        prof.frame("execs")
    assert err.value.deleted


def test_a_table_file_rewritten_in_place_after_its_check_is_checked_again(stores, tmp_path):
    """The manifest unchanged, one table's file rewritten in place after it was read and checked:
    the next read checks its checksum again (it read the new bytes unchecked before)."""
    a, b = stores
    run = tmp_path / "run.tfprof"
    shutil.copytree(a, run)
    prof = Profile.open(run)
    assert prof.lazy("nodes").collect().height == prof.row_counts()["nodes"]
    with open(run / "nodes.parquet", "r+b") as f:
        f.write((b / "nodes.parquet").read_bytes())
        f.truncate()
    with pytest.raises(ProfileFormatError, match="nodes.parquet` is damaged \\(its checksum differs"):
        prof.lazy("nodes").collect()


def test_a_store_replaced_while_it_is_opened_is_refused(stores, tmp_path, monkeypatch):
    profile_module = sys.modules["tfprof.profile"]  # (tfprof.profile is also tf.profiler's function)
    a, b = stores
    run = tmp_path / "run.tfprof"
    shutil.copytree(a, run)
    real = profile_module.check_tails

    def swapped(path, manifest):
        real(path, manifest)
        replace_store(run, b, "moved")

    monkeypatch.setattr(profile_module, "check_tails", swapped)
    with pytest.raises(ProfileChangedError, match=f"the store `{run}` changed while it was being opened"):
        Profile.open(run)


def test_identity_tells_a_rewrite_from_a_read(stores, tmp_path):
    """A file rewritten in place at its old size with its old mtime put back, and a manifest
    changed so, are told apart (the ctime, and the manifest's CRC-32); reading changes nothing;
    ``read_manifest`` gives the new manifest (its cache took such a rewrite for the old one)."""
    a, _ = stores
    run = tmp_path / "run.tfprof"
    shutil.copytree(a, run)
    trace = tmp_path / "t.json"
    trace.write_text('{"a": 1}')
    first, store_first = identity(trace), identity(run)
    assert read_manifest(run)["source"] == "kineto"
    trace.read_bytes()
    Profile.open(run).frame("nodes")
    assert (identity(trace), identity(run)) == (first, store_first)
    for path, old, new in ((trace, b'"a": 1', b'"b": 2'), (run / MANIFEST, b'"kineto"', b'"kinetY"')):
        st = path.stat()
        path.write_bytes(path.read_bytes().replace(old, new))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert identity(trace) != first and identity(run) != store_first
    assert read_manifest(run)["source"] == "kinetY"
    assert identity(tmp_path / "gone") is None


# ----------------------------------------------------------------------------- the resident server


def _run(args, environ) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], env=environ, capture_output=True, text=True,
                          timeout=120)


def _served_and_fresh(args, environ) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """``tfprof ARGS`` through the running server (asserted served) and in a process of its own."""
    count = served(environ)
    got = _run(args, environ)
    assert served(environ) == count + 1, "not served"
    return got, _run(args, {**environ, "TFPROF_SERVER": "0"})


def _same(a, b) -> bool:
    return (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)


COMMANDS = [["memory", "{p}"], ["overview", "{p}"], ["scope", "{p}", "--max_depth", "2", "--select", "micros,bytes"],
            ["sql", SQL, "{p}", "--format", "csv"]]


def test_served_commands_follow_a_replaced_or_deleted_store(env, stores, tmp_path):  # noqa: F811
    a, b = stores
    run = tmp_path / "run.tfprof"
    shutil.copytree(a, run)
    outputs = []
    for step in ("a", "b"):
        for args in COMMANDS:
            got, want = _served_and_fresh([x.format(p=run) for x in args], env)
            assert got.returncode == 0 and _same(got, want), (args, got.stderr)
            outputs.append(got.stdout)
        if step == "a":
            ingest_to_store(run, profile_path=b, force=True)
    assert outputs[:4] != outputs[4:]
    shutil.rmtree(run)
    got, want = _served_and_fresh(["memory", str(run)], env)
    assert _same(got, want) and got.returncode == 2
    [line] = got.stderr.splitlines()
    assert line.startswith(f"Error: `{run}` does not exist") and line.endswith("check the path")


def test_served_commands_follow_a_trace_rewritten_in_place(env, tmp_path):  # noqa: F811
    trace = tmp_path / "run.pt.trace.json.gz"
    shutil.copyfile(A_TRACE, trace)
    outputs = []
    for step in ("a", "b"):
        got, want = _served_and_fresh(["memory", str(trace)], env)
        assert got.returncode == 0 and _same(got, want), got.stderr
        outputs.append(got.stdout)
        with open(trace, "r+b") as f:
            f.write(B_TRACE.read_bytes())
            f.truncate()
    assert outputs[0] != outputs[1]



def test_served_commands_read_a_manifest_rewritten_in_place_anew(env, stores, tmp_path):  # noqa: F811
    """The server keeps the manifests it read by their file's identity: one rewritten in place at
    its old size with its mtime put back (as `cp -p` of another store's manifest of that size
    would be) was taken for the one it had read (the server printed the old row counts)."""
    a, _ = stores
    run = tmp_path / "run.tfprof"
    shutil.copytree(a, run)
    manifest = run / MANIFEST
    nodes = read_manifest(run)["tables"]["nodes"]
    first, _ = _served_and_fresh(["tables", str(run)], env)
    st = manifest.stat()
    manifest.write_bytes(manifest.read_bytes().replace(f'"nodes": {nodes},'.encode(), f'"nodes": {nodes + 1},'.encode()))
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (manifest.stat().st_size, manifest.stat().st_mtime_ns, manifest.stat().st_ino) == (st.st_size, st.st_mtime_ns,
                                                                                             st.st_ino)
    got, want = _served_and_fresh(["tables", str(run)], env)
    assert _same(got, want) and got.stdout != first.stdout, got.stdout
