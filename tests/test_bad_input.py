"""Bad input gives one line naming the file and the problem, exit code 2, no traceback,
and the user's files are left exactly as they were. One test per case, through the CLI."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES


def tfprof(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Content hash and mtime of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture
def work(tmp_path) -> Path:
    """A copy of the cnn fixture the test may damage."""
    d = tmp_path / "in"
    shutil.copytree(FIXTURES / "cnn", d)
    return d


def _run_checked(work: Path, *args: str) -> subprocess.CompletedProcess:
    before = snapshot(work)
    proc = tfprof(*args)
    assert snapshot(work) == before, "the input files were modified"
    return proc


def test_missing_file(work):
    missing = work / "nope.pb"
    proc = _run_checked(work, "tables", "--profile_path", str(missing))
    assert_one_line_error(proc, str(missing), "does not exist")


def test_a_missing_positional_profile_is_named_as_the_argument(work):
    missing = work / "nope.pb"
    assert_one_line_error(tfprof("scope", str(missing)), str(missing), "does not exist (the PROFILE argument)")
    assert_one_line_error(tfprof("scope", "--profile_path", str(missing)), "(given as --profile_path)")


def test_sql_with_the_profile_before_the_query_says_which_comes_first(work):
    proc = tfprof("sql", str(work / "profile.pb"), "select count(*) from nodes")
    assert_one_line_error(proc, "reads like a SQL query", 'tfprof sql "QUERY" PROFILE')


def test_ingest_of_a_missing_profile_blames_the_input(work, tmp_path):
    """The store is written batch by batch as the input is read, so an input error surfaces
    while the store is being written: it is still said as the input's error, not the output's."""
    missing = work / "nope.pb"
    proc = _run_checked(work, "ingest", "--profile_path", str(missing), "--out", str(tmp_path / "store"))
    assert_one_line_error(proc, str(missing), "does not exist")
    assert "cannot write" not in proc.stderr
    assert not (tmp_path / "store").exists()


def test_missing_run_meta_in_list(work):
    proc = _run_checked(
        work, "tables", "--graph_path", str(work / "graph.pb"),
        "--run_meta_path", f"{work / 'run_meta_0.pb'},{work / 'run_meta_9.pb'}",
    )
    assert_one_line_error(proc, "run_meta_9.pb", "does not exist")


def test_graphdef_passed_as_run_metadata(work):
    proc = _run_checked(work, "tables", "--graph_path", str(work / "graph.pb"), "--run_meta_path", str(work / "graph.pb"))
    assert_one_line_error(proc, str(work / "graph.pb"), "not a valid RunMetadata", "--run_meta_path")


def test_text_graphdef_passed_as_run_metadata(work):
    proc = _run_checked(
        work, "tables", "--graph_path", str(work / "graph.pb"), "--run_meta_path", str(work / "graph.pbtxt")
    )
    assert_one_line_error(proc, "graph.pbtxt", "not a valid RunMetadata")


def test_graphdef_passed_as_profile(work):
    proc = _run_checked(work, "tables", "--profile_path", str(work / "graph.pb"))
    assert_one_line_error(proc, str(work / "graph.pb"), "not a valid ProfileProto")


def test_run_metadata_passed_as_graph(work):
    proc = _run_checked(work, "tables", "--graph_path", str(work / "run_meta_0.pb"))
    assert_one_line_error(proc, "run_meta_0.pb", "not a valid GraphDef")


def test_truncated_profile(work):
    bad = work / "truncated.pb"
    data = (work / "profile.pb").read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    proc = _run_checked(work, "tables", "--profile_path", str(bad))
    assert_one_line_error(proc, str(bad), "ProfileProto")


def _saved_as_text(src: Path, dst: Path) -> Path:
    """``src`` as a browser's text view or an editor saves a binary file: every byte that is not
    UTF-8 replaced by U+FFFD."""
    dst.write_bytes(src.read_bytes().decode("utf-8", "replace").encode("utf-8"))
    return dst


@pytest.mark.parametrize("args", [
    ("profile.pb", "--profile_path"),
    ("run_meta_0.pb", "--graph_path", "graph.pb", "--run_meta_path"),
    ("kineto_mi250_rocm.pt.trace.json.gz", "--profile_path"),
    ("jax_mlp.xplane.pb", "--profile_path"),
], ids=["profile", "run_meta", "kineto_gzip", "xspace"])
def test_a_binary_file_saved_as_text_is_said_to_be(work, args):
    name, *flags = args
    src = work / name if (work / name).exists() else FIXTURES / "foreign" / name
    bad = _saved_as_text(src, work / f"as_text_{name}")
    flags = [str(work / f) if f.endswith(".pb") and not f.startswith("-") else f for f in flags]
    proc = _run_checked(work, "tables", *flags, str(bad))
    assert_one_line_error(proc, f"`{bad}` cannot be read: it was saved as text", "EF BF BD (U+FFFD)", "raw bytes")


def test_a_json_trace_naming_a_replacement_character_is_not_said_to_be_saved_as_text(work):
    bad = work / "trace.json"
    names = [{"ph": "X", "name": f"op\ufffd{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(5)]
    bad.write_text('{"traceEvents": ' + str(names).replace("'", '"') + ', "x": }', encoding="utf-8")
    proc = _run_checked(work, "tables", "--profile_path", str(bad))
    assert proc.returncode == 2 and "saved as text" not in proc.stderr, proc.stderr


def test_truncated_run_metadata(work):
    bad = work / "truncated_rm.pb"
    data = (work / "run_meta_0.pb").read_bytes()
    bad.write_bytes(data[: len(data) // 3])
    proc = _run_checked(work, "tables", "--graph_path", str(work / "graph.pb"), "--run_meta_path", str(bad))
    assert_one_line_error(proc, str(bad), "RunMetadata")


def test_truncated_graph(work):
    bad = work / "truncated_graph.pb"
    data = (work / "graph.pb").read_bytes()
    bad.write_bytes(data[: len(data) // 2 + 7])
    proc = _run_checked(work, "tables", "--graph_path", str(bad))
    assert_one_line_error(proc, str(bad), "GraphDef")


def test_bit_flipped_profile(work):
    """A flip that turns the first tag's wire type into an invalid one (7) must be caught.

    Flips inside a number's payload cannot be detected by any protobuf reader (no checksum);
    a flip in the framing (tags, lengths) can, and is.
    """
    bad = work / "flipped.pb"
    data = bytearray((work / "profile.pb").read_bytes())
    data[0] |= 0x07
    bad.write_bytes(bytes(data))
    proc = _run_checked(work, "tables", "--profile_path", str(bad))
    assert_one_line_error(proc, str(bad), "ProfileProto")


def test_bit_flipped_length_in_run_metadata(work):
    """The top-level length prefix of step_stats grown past the end of the file."""
    bad = work / "flipped_rm.pb"
    data = bytearray((work / "run_meta_0.pb").read_bytes())
    assert data[0] == 0x0A  # field 1 (step_stats), length-delimited
    data[1] |= 0x7F
    data[2] |= 0x7F
    bad.write_bytes(bytes(data))
    proc = _run_checked(work, "tables", "--graph_path", str(work / "graph.pb"), "--run_meta_path", str(bad))
    assert_one_line_error(proc, str(bad), "RunMetadata")


def test_empty_file(work):
    empty = work / "empty.pb"
    empty.write_bytes(b"")
    for flag in ("--profile_path", "--graph_path"):
        proc = _run_checked(work, "tables", flag, str(empty))
        assert_one_line_error(proc, str(empty), "is empty")


def test_empty_op_log(work):
    empty = work / "empty_log.pb"
    empty.write_bytes(b"")
    proc = _run_checked(work, "tables", "--graph_path", str(work / "graph.pb"), "--op_log_path", str(empty))
    assert_one_line_error(proc, str(empty), "is empty")


def test_checkpoint_with_missing_shard(work):
    (work / "model.ckpt.data-00000-of-00001").unlink()
    proc = _run_checked(
        work, "tables", "--graph_path", str(work / "graph.pb"), "--checkpoint_path", str(work / "model.ckpt")
    )
    assert_one_line_error(proc, "model.ckpt.data-00000-of-00001")


def test_directory_that_is_not_a_store(work, tmp_path):
    plain = tmp_path / "just_a_dir"
    plain.mkdir()
    (plain / "notes.txt").write_text("hello")
    before = snapshot(plain)
    proc = tfprof("tables", "--profile_path", str(plain))
    assert snapshot(plain) == before
    assert_one_line_error(proc, str(plain), "not a tfprof store")


def test_ingest_refuses_to_overwrite_a_non_store_directory(work, tmp_path):
    target = tmp_path / "precious"
    target.mkdir()
    (target / "thesis.tex").write_text("do not delete")
    before = snapshot(target)
    proc = tfprof("ingest", "--profile_path", str(work / "profile.pb"), "--out", str(target))
    assert_one_line_error(proc, str(target), "not a tfprof store")
    assert snapshot(target) == before


def test_ingest_into_missing_parent(work, tmp_path):
    proc = tfprof("ingest", "--profile_path", str(work / "profile.pb"), "--out", str(tmp_path / "no" / "such" / "dir"))
    assert_one_line_error(proc, "does not exist")
    assert not (tmp_path / "no").exists()


def test_profile_path_with_graph_path(work):
    proc = _run_checked(work, "tables", "--profile_path", str(work / "profile.pb"), "--graph_path", str(work / "graph.pb"))
    assert_one_line_error(proc, "--profile_path")


def test_no_input():
    proc = tfprof("tables")
    assert_one_line_error(proc, "no input")


def test_unknown_option(work):
    proc = tfprof("tables", "--profile_pth", str(work / "profile.pb"))
    assert_one_line_error(proc, "--profile_pth")
