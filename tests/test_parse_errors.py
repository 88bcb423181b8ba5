"""Damaged input of every kind: exit code 2 and one ``Error:`` line that names the file and the
flag that passed it, and says where the bytes stop making sense: the line and column of a text
proto, the byte offset, field and message type of a binary one. No traceback, and the files in
the working directory are left exactly as they were.

The damaged files are generated from the fixtures: truncations at several points, bit flips
that protobuf itself rejects, giant length prefixes, files of another kind, JSON, empty files,
directories, and text-format syntax errors at known places. Most cases run in-process through
``tfprof.cli.main.main``; a few through a subprocess, as a user runs them.
"""

from __future__ import annotations

import hashlib
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from google.protobuf.message import DecodeError

from tfprof.cli.main import main
from tfprof.schema.proto import graph_pb2, run_metadata_pb2, tfprof_log_pb2

SOURCE = FIXTURES / "cnn"
GRAPH = "graph.pb"  # the companion graph of the run_meta, op_log and checkpoint cases

# kind: (fixture file, flag, message type name, protobuf class)
KINDS = {
    "profile": ("profile.pb", "--profile_path", "ProfileProto", tfprof_log_pb2.ProfileProto),
    "graph": ("graph.pb", "--graph_path", "GraphDef", graph_pb2.GraphDef),
    "graph_text": ("graph.pbtxt", "--graph_path", "GraphDef", graph_pb2.GraphDef),
    "run_meta": ("run_meta_0.pb", "--run_meta_path", "RunMetadata", run_metadata_pb2.RunMetadata),
    "op_log": ("op_log.pb", "--op_log_path", "OpLogProto", tfprof_log_pb2.OpLogProto),
    "checkpoint": ("model.ckpt.index", "--checkpoint_path", "checkpoint", None),
}
BINARY = ("profile", "graph", "run_meta", "op_log")


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    """A working directory holding a copy of the cnn fixture; the test runs inside it."""
    d = tmp_path / "work"
    shutil.copytree(SOURCE, d, ignore=shutil.ignore_patterns("golden"))
    monkeypatch.chdir(d)
    return d


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


def argv(kind: str, path: Path | str) -> list[str]:
    """The command line passing ``path`` as input ``kind`` (with a good graph where needed)."""
    flag = KINDS[kind][1]
    if kind in ("profile", "graph", "graph_text"):
        return ["tables", flag, str(path)]
    if kind == "checkpoint":
        path = str(path).removesuffix(".index")
    return ["tables", "--graph_path", GRAPH, flag, str(path)]


def error_line(work: Path, capsys, args: list[str]) -> str:
    """Run the CLI in-process: it must exit 2 with one ``Error:`` line, touching no file."""
    before = snapshot(work)
    rc = main(args)
    out = capsys.readouterr()
    assert snapshot(work) == before, "files in the working directory changed"
    assert rc == 2, (rc, out.err)
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err
    assert lines[0].startswith("Error: ") and "Traceback" not in out.err
    return lines[0]


def write_bad(work: Path, kind: str, data: bytes) -> Path:
    """``data`` as a damaged input of ``kind`` (a checkpoint index goes beside a copy of the shards)."""
    if kind == "checkpoint":
        folder = work / "bad_ckpt"
        folder.mkdir()
        shutil.copy(work / "model.ckpt.data-00000-of-00001", folder)
        path = folder / "model.ckpt.index"
    else:
        path = work / f"bad_{KINDS[kind][0]}"
    path.write_bytes(data)
    return path


def rejected(cls, data: bytes) -> bool:
    try:
        cls.FromString(data)
    except DecodeError:
        return True
    return False


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


# --------------------------------------------------------------------------- truncations

FRACTIONS = (0.002, 0.25, 0.5, 0.75, 0.999)


def text_cut(text: bytes, at: int) -> int:
    """A cut at or before ``at`` that leaves a node block open (a cut between two top-level
    blocks would leave a valid, shorter graph)."""
    while at > 1 and text[:at].count(b"{") == text[:at].count(b"}"):
        at -= 1
    return at


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_truncated(work, capsys, kind, fraction):
    name, flag, what, cls = KINDS[kind]
    data = (work / name).read_bytes()
    cut = max(1, int(len(data) * fraction))
    if kind == "graph_text":
        cut = text_cut(data, cut)
    elif cls is not None:
        while not rejected(cls, data[:cut]):  # a cut between top-level fields leaves a valid prefix
            cut -= 1
    path = write_bad(work, kind, data[:cut])
    line = error_line(work, capsys, argv(kind, path))
    assert f"`{path}`" in line
    if kind == "checkpoint":
        assert f"is truncated or damaged ({cut} bytes" in line
    elif kind == "graph_text":
        lines = data[:cut].count(b"\n") + 1
        assert re.search(rf"text format, line {lines} column \d+: ", line), line
    else:
        assert f"is not a valid {what} (truncated: " in line and flag in line
        assert f"the file ends at byte {cut})" in line, line


# --------------------------------------------------------------------------- bit flips


def _flips(kind: str, count: int) -> list[tuple[int, int]]:
    """(byte, bit) flips of the fixture that protobuf itself rejects, drawn with a fixed seed."""
    name, _, _, cls = KINDS[kind]
    data = (SOURCE / name).read_bytes()
    rng = random.Random(f"flips-{kind}")
    out = []
    while len(out) < count:
        pos, bit = rng.randrange(len(data)), rng.randrange(8)
        bad = bytearray(data)
        bad[pos] ^= 1 << bit
        if rejected(cls, bytes(bad)):
            out.append((pos, bit))
    return out


FLIPS = [(kind, pos, bit) for kind in BINARY for pos, bit in _flips(kind, 4)]


@pytest.mark.parametrize(("kind", "pos", "bit"), FLIPS, ids=[f"{k}-{p}-{b}" for k, p, b in FLIPS])
def test_bit_flip(work, capsys, kind, pos, bit):
    name, flag, what, _ = KINDS[kind]
    data = bytearray((work / name).read_bytes())
    data[pos] ^= 1 << bit
    path = write_bad(work, kind, bytes(data))
    line = error_line(work, capsys, argv(kind, path))
    assert f"`{path}` is not a valid {what} (" in line and flag in line
    offset = re.search(r" at bytes? (\d+)", line)
    assert offset and int(offset.group(1)) < len(data), line


@pytest.mark.parametrize("block", ["index", "data"])
def test_bit_flip_in_checkpoint_block(work, capsys, block):
    data = bytearray((work / "model.ckpt.index").read_bytes())
    footer = bytes(data[-48:])
    _, p = read_varint(footer, 0)
    _, p = read_varint(footer, p)
    index_offset, _ = read_varint(footer, p)
    pos = index_offset + 2 if block == "index" else 3  # the data block starts the file
    data[pos] ^= 0x10
    path = write_bad(work, "checkpoint", bytes(data))
    line = error_line(work, capsys, argv("checkpoint", path))
    assert f"`{path}` is damaged" in line and "fails its CRC32C check" in line


# --------------------------------------------------------------------------- giant lengths


@pytest.mark.parametrize("length", [2**31 - 1, 2**62])
@pytest.mark.parametrize("kind", BINARY)
def test_giant_length_prefix(work, capsys, kind, length):
    """The first top-level field's length replaced by a huge one: an error naming the length,
    not an attempt to allocate it."""
    name, flag, what, _ = KINDS[kind]
    data = (work / name).read_bytes()
    assert data[0] & 7 == 2, "the first field is length-delimited"
    _, after = read_varint(data, 1)
    bad = data[:1] + varint(length) + data[after:]
    path = write_bad(work, kind, bad)
    line = error_line(work, capsys, argv(kind, path))
    assert f"`{path}` is not a valid {what} (truncated: field {data[0] >> 3} " in line and flag in line
    assert f"at byte 0 is {length} bytes long, but the file ends at byte {len(bad)})" in line, line


def test_giant_length_inside_a_message(work, capsys):
    """A length that runs past its enclosing message (not the file) names both."""
    inner = b"\x0a" + varint(2**40) + b"\x0a\x07/cpu:0" + bytes(20)  # StepStats.dev_stats, too long
    data = b"\x0a" + varint(len(inner)) + inner + b"\x12\x00"  # RunMetadata.step_stats, then cost_graph
    path = write_bad(work, "run_meta", data)
    line = error_line(work, capsys, argv("run_meta", path))
    assert "field 1 `step_stats.dev_stats[0]` (DeviceStepStats) at byte 2 is 1099511627776 bytes long" in line
    assert f"its enclosing `step_stats` ends at byte {2 + len(inner)}" in line and "truncated" not in line


def test_giant_checkpoint_block_handle(work, capsys):
    data = (work / "model.ckpt.index").read_bytes()
    footer = data[-48:]
    meta_offset, p = read_varint(footer, 0)
    meta_size, p = read_varint(footer, p)
    index_offset, _ = read_varint(footer, p)
    handles = varint(meta_offset) + varint(meta_size) + varint(index_offset) + varint(2**60)
    path = write_bad(work, "checkpoint", data[:-48] + handles.ljust(40, b"\x00") + footer[-8:])
    line = error_line(work, capsys, argv("checkpoint", path))
    assert f"`{path}` is truncated: its index block ends at byte" in line


# --------------------------------------------------------------------------- wrong kinds

WRONG = [
    # (file, passed as, phrase)
    ("graph.pb", "run_meta", "is not a valid RunMetadata ("),
    ("run_meta_0.pb", "op_log", "is not a valid OpLogProto ("),
    ("profile.pb", "graph", "is not a valid GraphDef ("),
    ("run_meta_0.pb", "graph", "is not a valid GraphDef ("),
    ("graph.pb", "profile", "is not a valid ProfileProto ("),
    ("op_log.pb", "profile", "is not a valid ProfileProto ("),
    ("profile.pb", "run_meta", "is not a valid RunMetadata ("),
    ("graph.pbtxt", "profile", "is not a valid ProfileProto ("),
    ("graph.pbtxt", "op_log", "is not a valid OpLogProto ("),
    ("graph.pb", "checkpoint", "is not a TensorFlow checkpoint"),
]


@pytest.mark.parametrize(("name", "kind", "phrase"), WRONG, ids=[f"{n}-as-{k}" for n, k, _ in WRONG])
def test_file_of_another_kind(work, capsys, name, kind, phrase):
    line = error_line(work, capsys, argv(kind, work / name))
    assert f"`{work / name}`" in line and phrase in line
    if kind != "checkpoint":
        assert KINDS[kind][1] in line


FLAG_KINDS = ("profile", "graph", "run_meta", "op_log", "checkpoint")


@pytest.mark.parametrize("kind", FLAG_KINDS)
def test_json_file(work, capsys, kind):
    path = work / ("stats.json.index" if kind == "checkpoint" else "stats.json")
    path.write_text('{"nodes": [{"name": "a", "op": "MatMul"}], "steps": [0]}\n')
    line = error_line(work, capsys, argv(kind, path))
    assert f"`{path}`" in line
    if kind == "checkpoint":
        assert "is not a TensorFlow checkpoint index" in line
    else:
        what, flag = KINDS[kind][2], KINDS[kind][1]
        assert f"is not a valid {what} (" in line and flag in line


@pytest.mark.parametrize("kind", FLAG_KINDS)
def test_empty_file(work, capsys, kind):
    path = work / ("empty.index" if kind == "checkpoint" else "empty.pb")
    path.write_bytes(b"")
    line = error_line(work, capsys, argv(kind, path))
    assert f"`{path}` is empty" in line
    if kind != "checkpoint":
        assert KINDS[kind][1] in line


@pytest.mark.parametrize("kind", FLAG_KINDS)
def test_directory_where_a_file_is_expected(work, capsys, kind):
    folder = work / "a_folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a profile")
    line = error_line(work, capsys, argv(kind, folder))
    assert f"`{folder}" in line
    phrase = {"profile": "not a tfprof store", "checkpoint": "does not exist"}.get(kind, "is a directory")
    assert phrase in line, line
    if kind in ("graph", "run_meta", "op_log"):
        assert KINDS[kind][1] in line


# --------------------------------------------------------------------------- text-format syntax


GOOD_NODE = 'node {\n  name: "a"\n  op: "Const"\n}\n'
# (text, line, column, phrase): the error is at a known place.
SYNTAX = {
    "unclosed_brace": (GOOD_NODE + 'node {\n  name: "b"\n  op: "Add"\n', 8, 1, 'Expected "}"'),
    "bad_integer": (GOOD_NODE + 'node {\n  name: "b"\n  op: "Add"\n  attr {\n    key: "N"\n    value {\n'
                    '      i: 12x\n    }\n  }\n}\n', 11, 10, "Couldn't parse integer"),
    "string_for_message": (GOOD_NODE + 'node: "b"\n', 5, 7, 'Expected "{"'),
    "missing_quote": (GOOD_NODE + 'node {\n  name: "b\n}\n', 6, 9, "String missing ending quote"),
    "stray_close": (GOOD_NODE + "}\n", 5, 1, "Expected identifier or number"),
    "bad_escape": (GOOD_NODE + 'node {\n  name: "b\\x"\n  op: "Add"\n}\n', 6, 9, "truncated \\xXX escape"),
    "number_for_string": (GOOD_NODE + "node {\n  name: 7\n}\n", 6, 9, "Expected string"),
    "non_utf8_byte": (GOOD_NODE + 'node {\n  name: "b\xff"\n}\n', 6, 11, "is not UTF-8"),
}


@pytest.mark.parametrize("case", list(SYNTAX))
def test_pbtxt_syntax_error(work, capsys, case):
    text, line_no, column, phrase = SYNTAX[case]
    path = work / "broken.pbtxt"
    path.write_bytes(text.encode("latin-1") if case == "non_utf8_byte" else text.encode())
    line = error_line(work, capsys, argv("graph", path))
    assert f"`{path}` is not a valid GraphDef (text format, line {line_no} column {column}: " in line, line
    assert phrase in line and "--graph_path" in line


def test_pbtxt_run_metadata_syntax_error(work, capsys):
    good = (FIXTURES / "gpu_tiny" / "run_meta_0.pbtxt").read_text()
    lines = good.splitlines()
    k = next(i for i, s in enumerate(lines) if "node_name" in s)
    lines[k] = lines[k].replace("node_name:", "node_name =")
    path = work / "broken_rm.pbtxt"
    path.write_text("\n".join(lines) + "\n")
    (work / "tiny.pbtxt").write_bytes((FIXTURES / "gpu_tiny" / "graph.pbtxt").read_bytes())
    line = error_line(work, capsys, ["tables", "--graph_path", "tiny.pbtxt", "--run_meta_path", str(path)])
    column = lines[k].index("=") + 1
    assert f"`{path}` is not a valid RunMetadata (text format, line {k + 1} column {column}: " in line, line


# --------------------------------------------------------------------------- as a user runs it


SUBPROCESS = [("profile", 0.5), ("graph_text", 0.5), ("run_meta", 0.25), ("checkpoint", 0.5)]


@pytest.mark.parametrize(("kind", "fraction"), SUBPROCESS, ids=[k for k, _ in SUBPROCESS])
def test_truncated_through_a_subprocess(work, kind, fraction):
    name, flag, what, cls = KINDS[kind]
    data = (work / name).read_bytes()
    cut = int(len(data) * fraction)
    if kind == "graph_text":
        cut = text_cut(data, cut)
    elif cls is not None:
        while not rejected(cls, data[:cut]):
            cut -= 1
    path = write_bad(work, kind, data[:cut])
    before = snapshot(work)
    proc = subprocess.run([sys.executable, "-m", "tfprof", *argv(kind, path)], capture_output=True, text=True,
                          cwd=work, timeout=120)
    assert snapshot(work) == before
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in proc.stderr
    assert f"`{path}`" in lines[0]
    if kind not in ("checkpoint", "graph_text"):
        assert f"the file ends at byte {cut})" in lines[0] and what in lines[0]
