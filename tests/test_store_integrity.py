"""A store records every file with its size and CRC-32; a damaged store is one `Error:` line
naming the damaged file (exit code 2), never an internal error nor a wrong number (every read
checks the CRC-32s of the files it reads); a store written before files were listed still
opens (tfprof.manifest, tfprof.store.verify_store).

Each damage case damages one copy of a store and checks what `tables`, a view, SQL and
`verify_store` say, and that nothing in the working directory changed (the commands only read).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zlib
from pathlib import Path

import pytest
from conftest import FIXTURES
from damage import flip_middle, silent_flip

import tfprof
from tfprof.cli.main import main
from tfprof.errors import ProfileFormatError
from tfprof.store import MANIFEST, has_checksums, verify_store


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tmpl") / "s.tfprof"
    assert main(["ingest", str(FIXTURES / "cnn" / "profile.pb"), "--out", str(out)]) == 0
    return out


@pytest.fixture
def store(tmp_path, monkeypatch, template) -> Path:
    shutil.copytree(template, tmp_path / "s.tfprof")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "s.tfprof"


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_manifest_lists_every_file_with_its_size_and_crc32(store):
    files = json.loads((store / MANIFEST).read_text())["files"]
    on_disk = {p.relative_to(store).as_posix() for p in store.rglob("*") if p.is_file()}
    assert set(files) == on_disk - {MANIFEST}
    assert any(f.startswith("indexes/") for f in files) and "nodes.parquet" in files
    for rel, entry in files.items():
        data = (store / rel).read_bytes()
        assert entry == {"size": len(data), "crc32": f"{zlib.crc32(data):08x}"}, rel
    assert has_checksums(store)
    verify_store(store, checksums=True)


def _garbage(path: Path) -> None:
    """Other bytes of the same size (a Parquet file keeps neither its footer nor its magic)."""
    size = path.stat().st_size
    path.write_bytes(hashlib.sha256(b"x").digest() * (size // 32) + b"y" * (size % 32))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


DAMAGE = {  # case: (file, how), the file named by the error
    "truncated_table": ("nodes.parquet", _truncate),
    "deleted_table": ("execs.parquet", Path.unlink),
    "garbage_table": ("nodes.parquet", _garbage),
    "grown_table": ("node_steps.parquet", lambda p: p.write_bytes(p.read_bytes() + b"\0" * 10)),
    "truncated_index_part": ("indexes/scope_layout/layout.arrow", _truncate),
    "missing_index_part": ("indexes/graph_structure/perm.arrow", Path.unlink),
    "garbage_index_part": ("indexes/scope_layout/layout.arrow", _garbage),
    "garbage_manifest": (MANIFEST, lambda p: p.write_bytes(b"\x00not json{" * 20)),
    "manifest_file_list": (MANIFEST, lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "files": 3}))),
    "manifest_unlisted_table": (MANIFEST, lambda p: p.write_text(json.dumps(
        {**json.loads(p.read_text()), "files": {k: v for k, v in json.loads(p.read_text())["files"].items()
                                                if k != "nodes.parquet"}}))),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_store_is_named_in_one_error_line(store, capsys, case):
    rel, damage = DAMAGE[case]
    damage(store / rel)
    before = snapshot(store.parent)
    commands = [
        ["tables", "s.tfprof"],
        ["scope", "s.tfprof", "--max_depth", "3", "--select", "micros,params"],
        ["graph", "s.tfprof", "--max_depth", "3"],
        ["sql", "select count(*) n from nodes", "s.tfprof"],
    ]
    for argv in commands:
        rc, out, err = run(capsys, *argv)
        lines = err.strip().splitlines()
        assert rc == 2, (argv, err)
        assert len(lines) == 1 and lines[0].startswith("Error: "), (argv, err)
        assert f"`{Path('s.tfprof') / rel}`" in lines[0], (argv, lines[0])
        assert "--force" in lines[0] or "tfprof ingest" in lines[0], lines[0]
    with pytest.raises(ProfileFormatError, match=str(Path("s.tfprof") / rel).replace(".", r"\.")):
        verify_store("s.tfprof", checksums=True)
    assert snapshot(store.parent) == before
    # what the message says to do works
    fix = ["ingest", str(FIXTURES / "cnn" / "profile.pb"), "--out", "s.tfprof"]
    if "--force" in lines[0]:
        fix.append("--force")
    else:
        shutil.rmtree(store)
    assert run(capsys, *fix)[0] == 0
    verify_store("s.tfprof", checksums=True)


def test_bytes_changed_in_place_are_found_by_their_checksum(store, capsys):
    """Same size, footer intact: opening cannot see it; `verify_store` (tfprof check) does."""
    path = store / "code_frames.parquet"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0x5A for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))
    verify_store(store, checksums=False)  # sizes only: all as written
    with pytest.raises(ProfileFormatError, match="code_frames.parquet.*checksum"):
        verify_store(store, checksums=True)


def test_a_decoding_failure_inside_a_query_names_the_damaged_file(store, capsys, monkeypatch):
    """When a query fails on a store's bytes (opening checks only sizes), the command checks
    the store it read and reports the damaged file instead of an internal error."""
    from tfprof.queries import engine

    path = store / "execs.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))

    def fails(*args, **kwargs):
        raise ValueError("decoding failed")  # what a reader raises on such bytes, wherever it is

    monkeypatch.setitem(engine._TREES, "scope", fails)
    rc, _, err = run(capsys, "scope", "s.tfprof")
    assert rc == 2
    assert err.count("\n") == 1 and "`s.tfprof/execs.parquet` is damaged" in err
    # an undamaged store: the failure is a bug, and said so
    shutil.copy(FIXTURES / "cnn" / "profile.pb", "p.pb")
    main(["ingest", "p.pb", "--out", "fine.tfprof"])
    rc, _, err = run(capsys, "scope", "fine.tfprof")
    assert rc == 1 and err.startswith("Internal error: ValueError: decoding failed")


def _old_format(store: Path) -> None:
    """The store as the previous version wrote it: no file list in the manifest, and no
    validation table (the schema gained it later)."""
    manifest = json.loads((store / MANIFEST).read_text())
    del manifest["files"]
    del manifest["tables"]["validation"]
    (store / "validation.parquet").unlink()
    (store / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def test_a_store_of_the_previous_version_still_opens(store, capsys):
    rc, want, err = run(capsys, "scope", str(FIXTURES / "cnn" / "profile.pb"), "--max_depth", "4")
    assert rc == 0, err
    _old_format(store)
    assert not has_checksums(store)
    rc, out, err = run(capsys, "scope", "s.tfprof", "--max_depth", "4")
    assert rc == 0, err
    assert out == want
    verify_store(store, checksums=True)  # unverifiable is not damaged: every file still decodes
    # the table it predates reads as empty, in SQL too; `check` says why it has nothing to say
    rc, out, err = run(capsys, "sql", "select count(*) as n from validation", "s.tfprof", "-f", "csv")
    assert rc == 0 and out == "n\n0\n", err
    rc, out, err = run(capsys, "check", "s.tfprof")
    assert rc == 0 and "written before tfprof validated" in err and "--force" in err


@pytest.mark.parametrize("rel", ["nodes.parquet", "indexes/scope_layout/layout.arrow"])
def test_damage_to_a_store_of_the_previous_version_is_named_when_read(store, capsys, rel):
    _old_format(store)
    _garbage(store / rel)
    rc, _, err = run(capsys, "scope", "s.tfprof")
    assert rc == 2 and err.count("\n") == 1 and f"`{Path('s.tfprof') / rel}`" in err, err
    with pytest.raises(ProfileFormatError, match=rel.replace(".", r"\.")):
        verify_store(store, checksums=True)


def test_a_store_copied_elsewhere_still_verifies(store, tmp_path):
    """Paths in the manifest are relative: a moved store is the same store."""
    moved = tmp_path / "elsewhere" / "copy.tfprof"
    moved.parent.mkdir()
    shutil.copytree(store, moved)
    os.utime(moved / "nodes.parquet", (0, 0))  # times are not part of it
    verify_store(moved, checksums=True)


def test_a_flipped_bit_is_an_error_not_a_wrong_number(store, capsys):
    """One bit flipped in `execs.duration_micros` decodes to another sum (neither DuckDB nor
    polars checks Parquet page checksums): every read checks the file's CRC-32 first."""
    want, got = silent_flip(store / "execs.parquet", "duration_micros")
    assert got != want  # what a reader without checksums would print
    before = snapshot(store.parent)
    for argv in (["sql", "select sum(duration_micros) from execs", "s.tfprof"],
                 ["sql", "select n.name, e.duration_micros from nodes n join execs e using (node_id)", "s.tfprof"],
                 ["graph", "s.tfprof", "--step", "0", "--output", "timeline:outfile=t.json"]):
        rc, out, err = run(capsys, *argv)
        assert rc == 2 and err.count("\n") == 1, (argv, err)
        assert err.startswith("Error: `s.tfprof/execs.parquet` is damaged (its checksum differs") and "--force" in err
        assert str(got) not in out
    rc, out, err = run(capsys, "sql", "select count(*) n from nodes", "s.tfprof", "-f", "csv")
    assert rc == 0 and out == "n\n467\n", err  # a query that reads only undamaged files still runs
    prof = tfprof.load(store)
    for read in (lambda: prof.frame("execs"), lambda: prof.columns("execs", ["duration_micros"]),
                 lambda: prof.sql("select sum(duration_micros) from execs"), prof.connection):
        with pytest.raises(ProfileFormatError, match=r"execs\.parquet.*checksum"):
            read()
    assert snapshot(store.parent) == before


def test_a_flipped_bit_in_an_index_part_is_named(store, capsys):
    flip_middle(store / "indexes" / "scope_layout" / "layout.arrow")
    rc, _, err = run(capsys, "scope", "s.tfprof", "--max_depth", "3")
    assert rc == 2 and err.count("\n") == 1 and "`s.tfprof/indexes/scope_layout/layout.arrow` is damaged" in err, err


def test_each_file_is_checked_once_per_process_and_only_when_read(store, monkeypatch):
    """The checksum of a file costs one read of it per process, and a table never read is
    never checked (a lazy read of some columns stays proportional to the tables it touches)."""
    import tfprof.manifest as manifest

    read: list[str] = []
    real = manifest.crc32_of
    monkeypatch.setattr(manifest, "crc32_of", lambda f: read.append(Path(f).name) or real(f))
    monkeypatch.setattr(manifest, "_VERIFIED", set())
    for _ in range(2):
        prof = tfprof.load(store)
        assert prof.lazy("nodes").select("name").collect().height == 467
        assert prof.sql("select count(*) n from steps")["n"][0] == 1
    assert read == ["nodes.parquet", "steps.parquet"]
    # a file written again is checked again
    shutil.copy(store / "nodes.parquet", "n.parquet")
    os.replace("n.parquet", store / "nodes.parquet")
    tfprof.load(store).frame("nodes")
    assert read == ["nodes.parquet", "steps.parquet", "nodes.parquet"]


class _FakeLibc:
    """Records the malloc settings asked for (in place of glibc)."""

    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append((param, value))

    def malloc_trim(self, pad):
        return 0


def test_a_library_user_keeps_its_malloc_and_the_command_line_tunes_its_own(tmp_path, monkeypatch, capsys):
    """mallopt changes malloc for the whole process for good: ``tfprof.save`` in a user's process
    never calls it; the command line's main does, once."""
    import tfprof.malloc as store
    from tfprof.cli.main import main

    fake = _FakeLibc()
    monkeypatch.setattr(store, "_LIBC", fake)
    monkeypatch.setattr(store, "_TUNED", False)
    tfprof.save(tfprof.load(FIXTURES / "cnn" / "profile.pb"), tmp_path / "lib.tfprof")
    assert fake.calls == []
    assert main(["ingest", str(FIXTURES / "cnn" / "profile.pb"), "--out", str(tmp_path / "cli.tfprof")]) == 0
    assert main(["scope", str(tmp_path / "cli.tfprof"), "--max_depth", "1"]) == 0
    assert fake.calls == [(store._M_MMAP_THRESHOLD, store._MMAP_THRESHOLD)]
