"""The V2 checkpoint reader against TensorFlow's own reading of the fixture checkpoints.

The fixtures and their golden data come from tools/make_checkpoint_fixtures.py (real TensorFlow).
Damaged copies are made in tmp_path; every error test also checks that the reader left the
user's files exactly as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from tfprof.errors import InputError, InputNotFoundError, ProfileFormatError
from tfprof.ingest import checkpoint as ck
from tfprof.ingest import checkpoint_slices
from tfprof.ingest.checkpoint import checkpoint_prefix, crc32c, read_checkpoint, row_to_numpy, tensor_to_numpy
from tfprof.schema.proto import tensor_bundle_pb2
from tfprof.schema.tables import TABLES

ROOT = Path(__file__).parent / "fixtures" / "checkpoints"
GOLDEN = sorted(p.parent.name for p in ROOT.glob("*/expected.json"))
PREFIX = "model.ckpt"


def expected(fixture: str) -> tuple[dict, dict[str, np.ndarray]]:
    meta = json.loads((ROOT / fixture / "expected.json").read_text())
    with np.load(ROOT / fixture / "expected.npz") as z:
        arrays = {k: z[k] for k in z.files}
    return meta, arrays


def copy_fixture(tmp_path: Path, fixture: str) -> Path:
    """A copy of fixture ``fixture`` in tmp_path; returns its prefix."""
    shutil.copytree(ROOT / fixture, tmp_path / fixture)
    return tmp_path / fixture / PREFIX


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in files if p.is_file()}


def flip_bit(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def entry(prefix: Path, name: str) -> tensor_bundle_pb2.BundleEntryProto:
    e = tensor_bundle_pb2.BundleEntryProto()
    e.ParseFromString(ck._read_index(f"{prefix}.index")[name.encode()])
    return e


def raises_unchanged(prefix: Path, error: type[Exception], *names: str, match: str | None = None) -> str:
    """Read ``prefix``, expect ``error`` whose message names ``names``, and no file changed."""
    folder = Path(prefix).parent
    before = snapshot(folder)
    with pytest.raises(error, match=match) as info:
        read_checkpoint(prefix)
    message = str(info.value)
    assert "\n" not in message
    for name in names:
        assert f"`{name}`" in message, message
    assert snapshot(folder) == before
    return message


# ---------------------------------------------------------------------------------------------
# Values equal TensorFlow's


@pytest.mark.parametrize("fixture", GOLDEN)
def test_tensors_match_tensorflow(fixture: str) -> None:
    meta, arrays = expected(fixture)
    table = read_checkpoint(ROOT / fixture / meta["prefix"])
    assert table.schema == TABLES["checkpoint_tensors"].schema
    assert table.column("name").to_pylist() == sorted(meta["tensors"])
    for row in table.to_pylist():
        want = meta["tensors"][row["name"]]
        assert (row["dtype"], row["shape"]) == (want["dtype"], want["shape"]), row["name"]
        assert row["num_elements"] == int(np.prod(want["shape"], dtype=np.int64))
        value = row_to_numpy(row)
        assert value.shape == tuple(want["shape"])
        if want["dtype"] == "DT_STRING":
            assert row["value"] is None
            assert row["string_value"] == [bytes.fromhex(h) for h in want["string_value_hex"]]
            assert value.reshape(-1).tolist() == row["string_value"]
            continue
        key = want["key"]
        raw = arrays[f"{key}_raw"].tobytes() if f"{key}_raw" in arrays else arrays[key].tobytes()
        assert row["value"] == raw, row["name"]
        assert row["string_value"] is None
        np.testing.assert_array_equal(value, arrays[key])
        assert value.dtype == arrays[key].dtype


def test_fixture_files_are_the_ones_tensorflow_wrote() -> None:
    for fixture in GOLDEN:
        meta, _ = expected(fixture)
        assert sorted(p.name for p in (ROOT / fixture).glob(f"{PREFIX}*")) == meta["files"]
    shards = [f"{PREFIX}.data-00000-of-00002", f"{PREFIX}.data-00001-of-00002"]
    assert expected("sharded")[0]["files"][:2] == shards


def test_partitioned_slices_are_not_rows() -> None:
    table = read_checkpoint(ROOT / "partitioned" / PREFIX)
    assert not any(n.startswith("\x00") or "part_" in n for n in table.column("name").to_pylist())
    assert tensor_to_numpy(table, "embedding").shape == (200, 3)


def test_tensor_to_numpy() -> None:
    table = read_checkpoint(ROOT / "dtypes" / PREFIX)
    assert tensor_to_numpy(table, "scalar").shape == ()
    assert tensor_to_numpy(table, "scalar") == np.float32(3.25)
    bf16 = tensor_to_numpy(table, "bfloat16")  # widened to float32; exact values are in the golden test
    assert bf16.dtype == np.float32 and bf16[[0, 1, 3]].tolist() == [1.5, -3.25, 0.0]
    assert tensor_to_numpy(table, "string_scalar").item() == b"just one"
    assert tensor_to_numpy(table, "zero_size").shape == (0, 3)
    with pytest.raises(KeyError, match="`nope`"):
        tensor_to_numpy(table, "nope")
    with pytest.raises(InputError, match="DT_VARIANT"):
        row_to_numpy({"name": "v", "dtype": "DT_VARIANT", "shape": [], "value": None, "string_value": None})


# ---------------------------------------------------------------------------------------------
# Paths users paste


@pytest.mark.parametrize("fixture", ["sharded", "tf2_sharded"])
def test_prefix_index_and_shard_paths_give_the_same_table(fixture: str) -> None:
    prefix = ROOT / fixture / PREFIX
    want = read_checkpoint(str(prefix))
    paths = [prefix, f"{prefix}.index", *sorted((ROOT / fixture).glob(f"{PREFIX}.data-*"))]
    assert len(paths) >= 4
    for path in paths:
        assert checkpoint_prefix(path) == str(prefix)
        assert read_checkpoint(path).equals(want)


def test_directory_suggests_the_prefix() -> None:
    with pytest.raises(InputNotFoundError, match="found: `.*model.ckpt`") as info:
        read_checkpoint(ROOT / "dtypes")
    assert isinstance(info.value, FileNotFoundError)


# ---------------------------------------------------------------------------------------------
# Bad input: one test per case


def test_missing_index(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    Path(f"{prefix}.index").unlink()
    raises_unchanged(prefix, InputNotFoundError, f"{prefix}.index")


def test_missing_path(tmp_path: Path) -> None:
    raises_unchanged(tmp_path / "nothing" / PREFIX, InputNotFoundError, f"{tmp_path / 'nothing' / PREFIX}.index")


def test_missing_shard(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "sharded")
    Path(f"{prefix}.data-00001-of-00002").unlink()
    raises_unchanged(prefix, InputNotFoundError, f"{prefix}.data-00001-of-00002")


def test_truncated_index(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    index = Path(f"{prefix}.index")
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    raises_unchanged(prefix, ProfileFormatError, str(index), match="truncated")


def test_truncated_shard(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    shard = Path(f"{prefix}.data-00000-of-00001")
    shard.write_bytes(shard.read_bytes()[:-100])
    raises_unchanged(prefix, ProfileFormatError, str(shard), match="truncated")


def test_bit_flip_in_numeric_data(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    e = entry(prefix, "big")
    flip_bit(Path(f"{prefix}.data-00000-of-00001"), e.offset + e.size // 2)
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.data-00000-of-00001", "big", match="CRC32C")


@pytest.mark.parametrize("where", ["lengths", "bytes"])
def test_bit_flip_in_string_data(tmp_path: Path, where: str) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    e = entry(prefix, "string_2d")
    flip_bit(Path(f"{prefix}.data-00000-of-00001"), e.offset + (1 if where == "lengths" else e.size - 1))
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.data-00000-of-00001", "string_2d", match="CRC32C")


def test_bit_flip_in_a_slice(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "partitioned")
    shard = Path(f"{prefix}.data-00000-of-00001")
    flip_bit(shard, shard.stat().st_size // 2)
    raises_unchanged(prefix, ProfileFormatError, str(shard), match="CRC32C")


def test_bit_flip_in_index(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    flip_bit(Path(f"{prefix}.index"), 40)
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.index", match="CRC32C")


def test_empty_index(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    Path(f"{prefix}.index").write_bytes(b"")
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.index", match="empty")


def test_empty_shard(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "sharded")
    Path(f"{prefix}.data-00000-of-00002").write_bytes(b"")
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.data-00000-of-00002", match="truncated")


def test_v1_checkpoint(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "v1")
    message = raises_unchanged(prefix, ProfileFormatError, str(prefix), match="V1 checkpoint")
    assert "only V2" in message and "Saver" in message


def test_v1_checkpoint_as_shipped() -> None:
    raises_unchanged(ROOT / "v1" / PREFIX, ProfileFormatError, str(ROOT / "v1" / PREFIX), match="V1")


def test_not_a_checkpoint_file(tmp_path: Path) -> None:
    path = tmp_path / "graph.pbtxt"
    path.write_text('node { name: "a" op: "Const" }\n')
    raises_unchanged(path, ProfileFormatError, str(path), match="not a TensorFlow checkpoint")


def test_index_that_is_not_a_table(tmp_path: Path) -> None:
    index = tmp_path / "model.ckpt.index"
    index.write_bytes(b"this is a text file, not an SSTable\n" * 4)
    raises_unchanged(index, ProfileFormatError, str(index), match="not a TensorFlow checkpoint index")


def test_bad_magic(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    index = Path(f"{prefix}.index")
    flip_bit(index, index.stat().st_size - 1)
    raises_unchanged(prefix, ProfileFormatError, str(index))


# ---------------------------------------------------------------------------------------------
# Unsupported variants, built with a tiny table writer over the fixture's own entries


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_table(path: Path, entries: dict[bytes, bytes], compression: int = 0) -> None:
    """A LevelDB table with one data block (every entry a restart), as TensorFlow's writer lays it out."""
    out = bytearray()

    def block(items: list[tuple[bytes, bytes]], kind: int = 0) -> bytes:
        offsets, body = [], bytearray()
        for k, v in items:
            offsets.append(len(body))
            body += _varint(0) + _varint(len(k)) + _varint(len(v)) + k + v
        body += b"".join(struct.pack("<I", o) for o in offsets or [0]) + struct.pack("<I", len(offsets or [0]))
        handle = _varint(len(out)) + _varint(len(body))
        out.extend(body + bytes([kind]) + struct.pack("<I", _mask(crc32c(bytes(body) + bytes([kind])))))
        return handle

    items = sorted(entries.items())
    data = block(items, compression)
    meta = block([])
    index = block([(items[-1][0], data)])
    out.extend((meta + index).ljust(40, b"\x00") + struct.pack("<Q", 0xDB4775248B80FB57))
    path.write_bytes(bytes(out))


def rewrite_header(prefix: Path, **fields: object) -> None:
    table = ck._read_index(f"{prefix}.index")
    header = tensor_bundle_pb2.BundleHeaderProto()
    header.ParseFromString(table[b""])
    for name, value in fields.items():
        if name == "min_consumer":
            header.version.min_consumer = value
        else:
            setattr(header, name, value)
    table[b""] = header.SerializeToString()
    write_table(Path(f"{prefix}.index"), table)


def test_own_table_writer_round_trips(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "slices")
    rewrite_header(prefix)
    assert read_checkpoint(prefix).equals(read_checkpoint(ROOT / "slices" / PREFIX))


def test_big_endian(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    rewrite_header(prefix, endianness=tensor_bundle_pb2.BundleHeaderProto.BIG)
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.index", match="big-endian")


def test_newer_format(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    rewrite_header(prefix, min_consumer=5)
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.index", match="newer")


def test_snappy_blocks(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "dtypes")
    write_table(Path(f"{prefix}.index"), ck._read_index(f"{prefix}.index"), compression=1)
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.index", match="snappy")


def test_missing_slice(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "slices")
    table = ck._read_index(f"{prefix}.index")
    del table[next(k for k in table if k.startswith(b"\x00") and b"middle" in k)]
    write_table(Path(f"{prefix}.index"), table)
    raises_unchanged(prefix, ProfileFormatError, f"{prefix}.index", "middle", match="slice")


# ---------------------------------------------------------------------------------------------
# Building blocks


def _crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    rng = np.random.default_rng(0)
    for n in [0, 1, 7, 8, 9, 15, 16, 17, 1000]:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert crc32c(data) == _crc32c_bitwise(data)
        assert crc32c(data[n // 3 :], crc32c(data[: n // 3])) == crc32c(data)
    assert crc32c(b"abc") != zlib.crc32(b"abc")  # Castagnoli, not the zlib polynomial


def test_ordered_code_numbers() -> None:
    # The two examples of tensorflow/core/lib/strings/ordered_code.cc.
    assert checkpoint_slices._ordered_signed(0x424242) == bytes.fromhex("f0424242")
    assert checkpoint_slices._ordered_signed(-0x800) == bytes.fromhex("3800")
    small = [checkpoint_slices._ordered_signed(v).hex() for v in (0, 63, 64, -1, -64, -65)]
    assert small == ["80", "bf", "c040", "7f", "40", "3fbf"]
    assert checkpoint_slices._ordered_num(0) == b"\x00" and checkpoint_slices._ordered_num(258) == b"\x02\x01\x02"
    assert checkpoint_slices._ordered_string(b"a\x00b\xff") == b"a\x00\xffb\xff\x00\x00\x01"


def test_reader_opens_files_read_only(tmp_path: Path) -> None:
    prefix = copy_fixture(tmp_path, "sharded")
    for p in prefix.parent.iterdir():
        os.chmod(p, 0o444)
    before = snapshot(prefix.parent)
    assert read_checkpoint(prefix).num_rows == 5
    assert snapshot(prefix.parent) == before
