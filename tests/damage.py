"""Damage that a reader without checksums does not notice, and a folder's fingerprint to show
nothing else changed: for the integrity and trust tests, and the fuzz readers of crafted
surroundings (``fuzz/hostile.py`` loads this file by path)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def _sum(data: bytes, column: str) -> int | None:
    """The sum of ``column`` of Parquet ``data``, or None when it does not decode."""
    try:
        return pc.sum(pq.read_table(pa.BufferReader(data), columns=[column])[column]).as_py()
    except (pa.ArrowException, OSError, ValueError):
        return None


def silent_flip(file: Path, column: str) -> tuple[int, int]:
    """Flip one bit of ``column``'s pages in Parquet ``file`` so that the file still decodes
    and only the column's values change: what a reader that checks no checksum would sum.
    Returns (the sum as written, the sum after the flip)."""
    data = file.read_bytes()
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    index = meta.schema.to_arrow_schema().get_field_index(column)
    chunk = meta.row_group(0).column(index)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    want = _sum(data, column)
    for pos in range(start + chunk.total_compressed_size - 1, start, -1):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[pos] ^= 1 << bit
            got = _sum(bytes(damaged), column)
            if got is not None and got != want:
                file.write_bytes(bytes(damaged))
                return want, got
    raise AssertionError(f"no silent bit flip found in {file}:{column}")


def flip_middle(file: Path) -> None:
    """Flip one bit in the middle of ``file`` (an uncompressed Arrow file decodes as before)."""
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x10
    file.write_bytes(bytes(data))


def tree(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``, links not followed: a file's digest, a link's target."""
    out = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
