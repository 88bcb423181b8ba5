"""The top-level scan: one walk over a ProfileProto file that finds each ``nodes`` map entry and
its name, ``steps``, ``id_to_string`` and the two flags (``scan_profile`` -> ``ProfileIndex``).

It reads the file through a read-only ``mmap`` whose pages are released (``MADV_DONTNEED``)
behind it, so a file of any size is scanned in bounded memory. Map entries may come in any key
order (TensorFlow's C++ writes maps in hash order); a repeated key keeps the last entry.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from tfprof.errors import InputNotFoundError, ProfileFormatError
from tfprof.ingest.sources import KINDS, damaged
from tfprof.ingest.wire.errors import precise_error, wire_error
from tfprof.ingest.wire.fields import W_NODE_NAME, W_PROFILE, read_entry, read_field, read_packed
from tfprof.ingest.wire.tables import checked_strings, gather

_SPAN = 32 << 20  # bytes of file the scan walks between two page releases
_PAGE = mmap.PAGESIZE


@njit(cache=True, _nrt=False)
def _scan_top(buf, pos, stop, end, ent, names, state, steps, ids):
    """Walk top-level fields from ``pos`` until ``stop`` (or a full output array); returns the new pos.

    ent[k] = (key, node start, node end, name start, name end); names gets the name bytes;
    state = [n entries, n name bytes, n steps, n ids, has_trace, miss_accelerator_stream, start
    of the field being read (where an error is)]; ids[k] = (key, value start, value end).
    """
    while pos < stop:
        if state[0] >= len(ent) or state[3] >= len(ids):
            return pos  # full: the caller grows the arrays and calls again
        state[6] = pos
        f, wt, v, s, e, nxt = read_field(buf, pos, end, W_PROFILE)
        if nxt < 0:
            return nxt
        if f == 1:  # nodes: map<int64, ProfileNode>
            key, _, _, _, ns, ne, st = read_entry(buf, s, e, 0, 2)
            if st < 0:
                return st
            # The name: the first name field of the node (the count kernel checks it is the only one).
            nm_s = nm_e = -1
            q = ns
            while q < ne:
                g, _, _, a, b, q = read_field(buf, q, ne, W_NODE_NAME)
                if q < 0:
                    return q
                if g == 1:
                    nm_s, nm_e = a, b
                    break
            k = state[0]
            ent[k, 0] = key
            ent[k, 1] = ns
            ent[k, 2] = ne
            ent[k, 3] = nm_s
            ent[k, 4] = state[1]
            if nm_s >= 0:
                nb = nm_e - nm_s
                if state[1] + nb > len(names):
                    return pos  # grow names and come back to this entry
                for x in range(nb):  # (loops, not slices: slice assignment costs seconds of compile)
                    names[state[1] + x] = buf[nm_s + x]
                state[1] += nb
            state[0] = k + 1
        elif f == 2 or f == 5:  # has_trace, miss_accelerator_stream
            state[4 if f == 2 else 5] = 1 if v != 0 else 0
        elif f == 3:  # steps, packed or not
            if wt == 0:
                n = 1
                if state[2] < len(steps):
                    steps[state[2]] = v
            else:
                n = read_packed(buf, s, e, steps, state[2], len(steps))
                if n < 0:
                    return n
            if state[2] + n > len(steps):
                return pos  # grow steps and come back
            state[2] += n
        elif f == 4:  # id_to_string: map<int64, string>
            key, _, _, _, vs, ve, st = read_entry(buf, s, e, 0, 2, True)
            if st < 0:
                return st
            k = state[3]
            ids[k, 0] = key
            ids[k, 1] = vs
            ids[k, 2] = ve
            state[3] = k + 1
        pos = nxt
    return pos


@dataclass
class ProfileIndex:
    """What the top-level scan learns about a ProfileProto file (node ids ascending)."""

    path: Path
    size: int
    keys: np.ndarray  # node ids (map keys), ascending, unique
    node_start: np.ndarray  # ProfileNode bytes [start, end) of each node
    node_end: np.ndarray
    name_start: np.ndarray  # where the scan found the node's name (the count kernel checks it)
    names: pa.StringArray  # node names, by id
    steps: np.ndarray  # ProfileProto.steps, ascending (repeats kept, as the reference keeps them)
    has_trace: bool
    miss_accelerator_stream: bool
    id_keys: np.ndarray  # id_to_string keys, ascending
    id_code: np.ndarray  # code of each id's string in code_values
    code_values: pa.StringArray  # the distinct id_to_string strings, then "" if it is not among them
    empty_code: int  # code of "" in code_values (an unknown id reads as "")

    @property
    def num_nodes(self) -> int:
        return len(self.keys)


class _Mapped:
    """A read-only memory map of a file, with page release."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "rb")
        try:
            self.mm = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            self.file.close()
            raise ProfileFormatError(f"`{path}` cannot be read: {exc}") from None
        self.array = np.frombuffer(self.mm, np.uint8)

    def release(self, start: int, end: int) -> None:
        """Drop the pages of ``[start, end)`` from this process (they stay in the page cache)."""
        lo = start - start % _PAGE
        if end > lo:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, lo, end - lo)
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        self.array = None
        try:
            self.mm.close()
        except BufferError:  # a view is still alive (an exception's traceback): unmapped when it goes
            pass
        self.file.close()

    def __enter__(self) -> _Mapped:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_file(path: str | os.PathLike) -> Path:
    """The checks of ``sources.read_bytes``, without reading the file."""
    p = Path(path)
    what, flag = KINDS["profile"]
    if not p.exists():
        raise InputNotFoundError.given_as(p, flag)
    if p.is_dir():
        raise ProfileFormatError(f"`{p}` is a directory, expected a {what} file (given as {flag})")
    try:
        size = p.stat().st_size
        with open(p, "rb"):
            pass
    except OSError as exc:
        raise ProfileFormatError(f"`{p}` cannot be read: {exc.strerror or exc}") from None
    if size == 0:
        raise ProfileFormatError(f"`{p}` is empty, expected a {what} file (given as {flag})")
    return p


def scan_profile(path: str | os.PathLike) -> ProfileIndex:
    """Walk the top level of ProfileProto file ``path``: node positions and names, steps, strings."""
    p = check_file(path)
    with _Mapped(p) as m:
        return _scan(p, m)


def _scan(p: Path, m: _Mapped) -> ProfileIndex:
    buf = m.array
    end = len(buf)
    # Sized from the file so that they rarely grow (each growth copies them): nodes of about
    # 1 KB and names of about 1/20 of a node are usual; untouched pages cost nothing.
    ent = np.empty((max(4096, end >> 9), 5), np.int64)
    names = np.empty(max(1 << 16, end >> 3), np.uint8)
    steps = np.empty(256, np.int64)
    ids = np.empty((1024, 3), np.int64)
    state = np.zeros(7, np.int64)
    pos = 0
    while pos < end:
        stop = min(end, pos + _SPAN)
        new = _scan_top(buf, pos, stop, end, ent, names, state, steps, ids)
        if new < 0:
            raise wire_error(p, new, int(state[6]))
        if new < stop:  # an output array is full: grow it and go on from the same entry
            if state[0] >= len(ent):
                ent = np.concatenate([ent, np.empty_like(ent)])
            if state[3] >= len(ids):
                ids = np.concatenate([ids, np.empty_like(ids)])
            names = np.concatenate([names, np.empty_like(names)])
            steps = np.concatenate([steps, np.empty_like(steps)])
        m.release(pos, new)
        pos = new
    n = int(state[0])
    if n == 0:
        raise damaged(p, "profile", "it has no nodes")
    ent = ent[:n]
    name_off = np.append(ent[:, 4], state[1])
    name_len = np.diff(name_off)
    keys, keep = _last_of_each_key(ent[:, 0])
    if ((ent[keep, 3] < 0) | (name_len[keep] == 0)).any():
        raise damaged(p, "profile", "a node has no name or a wrong id; is this another kind of file?")
    try:
        all_names = checked_strings(names[: state[1]], name_off.astype(np.int32), p, "a node name")
    except ProfileFormatError as exc:
        k = _first_bad_string(names, name_off)
        raise precise_error(exc, p, ent[k:k + 1, 1], ent[k:k + 1, 2], ent[k:k + 1, 0]) from None
    if len(keep) < n:  # protobuf parses the entries a later one of the same key replaces: so must we
        _check_replaced(p, buf, np.delete(ent, keep, axis=0))
    id_n = int(state[3])
    id_keys, id_keep = _last_of_each_key(ids[:id_n, 0])
    data, offs = gather(buf, ids[:id_n, 1], ids[:id_n, 2])
    try:  # every value is checked, the replaced ones too (protobuf parses them)
        id_values = checked_strings(data, offs, p, "an id_to_string value").take(pa.array(id_keep))
    except ProfileFormatError:
        k = _first_bad_string(data, offs)
        raise damaged(p, "profile", f"the string of `id_to_string[{int(ids[k, 0])}]` at byte {int(ids[k, 1])} "
                      "is not valid UTF-8") from None
    m.release(0, end)
    enc = pc.dictionary_encode(id_values)
    values = enc.dictionary
    empty = values.index("").as_py() if len(values) else -1
    if empty < 0:
        empty = len(values)
        values = pa.concat_arrays([values, pa.array([""], pa.string())])
    id_code = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return ProfileIndex(
        path=p,
        size=end,
        keys=keys,
        node_start=ent[keep, 1].copy(),
        node_end=ent[keep, 2].copy(),
        name_start=ent[keep, 3].copy(),
        names=all_names.take(pa.array(keep)),
        steps=np.sort(steps[: state[2]]),
        has_trace=bool(state[4]),
        miss_accelerator_stream=bool(state[5]),
        id_keys=id_keys,
        id_code=id_code,
        code_values=values,
        empty_code=empty,
    )


def _check_replaced(path: Path, buf: np.ndarray, ent: np.ndarray) -> None:
    """Map entries of ``nodes`` that a later entry of the same key replaces are never decoded,
    but protobuf still parses them: a damaged one is an error (found by protobuf itself)."""
    from google.protobuf.message import DecodeError

    from tfprof.schema.proto import tfprof_log_pb2

    for key, s, e in ent[:, :3].tolist():
        try:
            tfprof_log_pb2.ProfileNode.FromString(buf[s:e].tobytes())
        except (DecodeError, ValueError, RuntimeError):
            exc = damaged(path, "profile", f"node {key} (bytes {s}-{e}), replaced by a later one, does not decode")
            raise precise_error(exc, path, np.array([s]), np.array([e]), np.array([key])) from None


def _first_bad_string(data: np.ndarray, offsets: np.ndarray) -> int:
    """The index of the first string of ``data`` cut at ``offsets`` that is not UTF-8."""
    for k in range(len(offsets) - 1):
        try:
            data[offsets[k]: offsets[k + 1]].tobytes().decode("utf-8")
        except UnicodeDecodeError:
            return k
    return 0


def _last_of_each_key(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique keys ascending, position of the last occurrence of each): protobuf map semantics."""
    if len(keys) and keys.min() >= 0 and keys.max() < 2 * len(keys):  # ids 0..n-1, as tfprof numbers
        last = _last_positions(keys, int(keys.max()) + 1)  # nodes: placed, not sorted
        unique = np.flatnonzero(last >= 0)
        return unique.astype(keys.dtype), last[unique]
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    last = np.ones(len(sk), bool)
    last[:-1] = sk[1:] != sk[:-1]
    return sk[last].copy(), order[last]


@njit(cache=True)
def _last_positions(keys, size):
    """Per key value 0..size-1, the position of its last occurrence in ``keys`` (-1: none)."""
    last = np.full(size, -1, np.int64)
    for i in range(keys.shape[0]):
        last[keys[i]] = i
    return last
