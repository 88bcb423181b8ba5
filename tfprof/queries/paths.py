"""Row identities for comparing views: each displayed row's path, and a 64-bit key of it.

A row's path (``tfprof.queries.diff``) is its name in the scope, graph and op views, and in the
code view the names of the displayed frames from the top one down to the row, joined by ``/``.
Those paths are long (a code view of a large profile holds gigabytes of them), so rows are
matched on a **key**: a 64-bit hash of the path, built in the code view from the parent's key
and the row's own name (``path_keys``), never from the path string. Keys can collide: a second
key under another seed checks every match (a false match needs both 64-bit keys of two paths to
agree), and where it disagrees the diff matches on exact ranks of the paths
(``tfprof.queries.diff``).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof import kernels

SEP = "/"
_SEED = np.uint64(0x9E3779B97F4A7C15)


def path_parents(parent_row) -> np.ndarray:
    """Per displayed row, the row whose path its own continues: its displayed parent
    (``parent_row``, as the engines return it), or -1 for the root (row 0) and the rows right
    under it, whose path is their name."""
    up = np.asarray(parent_row, dtype=np.int64)
    return np.where(up > 0, up, -1)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


CHECK_SEED = 0x5BD1E995  # the seed of the second, independent key that checks a match


def path_keys(names: pl.Series, parent: np.ndarray, depth: np.ndarray, seed: int = 0) -> np.ndarray:
    """Each row's key: its name's hash (under ``seed``) mixed into its path parent's key
    (``path_parents``), one tree level at a time."""
    own = names.cast(pl.String).hash(seed=seed).to_numpy().astype(np.uint64)
    keys = np.empty(len(own), np.uint64)
    top = parent < 0
    keys[top] = _mix(_SEED ^ own[top])
    below = np.flatnonzero(~top)
    if len(below):
        levels = depth[below]
        for d in np.unique(levels):  # parents are one level up: already keyed
            rows = below[levels == d]
            keys[rows] = _mix(keys[parent[rows]] ^ own[rows])
    return keys


def _buffers(text: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A string column's UTF-8 bytes and int64 offsets (row i is ``data[offsets[i]:offsets[i + 1]]``)."""
    arr = pa.array(text.cast(pl.String).to_arrow()).cast(pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64)[arr.offset: arr.offset + len(arr) + 1] if len(arr) else np.zeros(1, np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return data, offsets


def code_paths(names: pl.Series, parent: np.ndarray) -> pl.Series:
    """Each row's frame path in a displayed tree in pre-order, ``parent`` its ``path_parents``
    (the root keeps its name; a frame's path is its displayed ancestors' names below the root
    and its own), written byte by byte from the names' buffer."""
    if len(names) == 0:
        return names.cast(pl.String)
    data, offsets = _buffers(names)
    out, out_offsets = kernels.compiled(_join_py)(parent, data, offsets, np.uint8(ord(SEP)))
    joined = pa.LargeStringArray.from_buffers(len(names), pa.py_buffer(out_offsets), pa.py_buffer(out))
    return pl.Series(names.name, joined, dtype=pl.String)


def _join_py(parent, data, offsets, sep):  # compiled by kernels.compiled
    n = parent.shape[0]
    length = np.empty(n, np.int64)
    total = 0
    for i in range(n):
        own = offsets[i + 1] - offsets[i]
        p = parent[i]
        length[i] = own if p < 0 else length[p] + 1 + own
        total += length[i]
    out = np.empty(total, np.uint8)
    starts = np.empty(n + 1, np.int64)
    starts[0] = 0
    for i in range(n):
        w = starts[i]
        starts[i + 1] = w + length[i]
        p = parent[i]
        if p >= 0:  # the parent precedes its rows in pre-order: its path is written
            k = length[p]
            out[w:w + k] = out[starts[p]:starts[p] + k]
            out[w + k] = sep
            w += k + 1
        own = offsets[i + 1] - offsets[i]
        out[w:w + own] = data[offsets[i]:offsets[i] + own]
    return out, starts
