"""Batches: the bytes of a range of node ids are read into a private buffer, then the count and
fill kernels run over them on every core and the Arrow tables are built (``Batcher``).

A batch's nodes are copied with ``pread`` in node-id order; the count kernel validates them and
counts each table's rows, the fill kernel writes the values into preallocated columns. Both are
compiled ``nogil`` and run on every core, each thread taking a contiguous part of the batch.
Device strings met for the first time are interned between two fill passes.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
from numba import njit

from tfprof.errors import ProfileFormatError
from tfprof.ingest.sources import damaged, one_line
from tfprof.ingest.wire.canonical import SPEC_KIND, SPEC_SUB
from tfprof.ingest.wire.count import (
    C_ALLOC,
    C_ATTRS,
    C_EXDEV,
    C_EXECS,
    C_FRAMES,
    C_INPUTS,
    C_MEM,
    C_ODIMS,
    C_OMEM,
    C_OSH,
    C_SHAPE,
    C_STEPS,
    C_STRB,
    C_TYPES,
    E_STEP,
    NCOUNT,
    NROWT,
    count_kernel,
)
from tfprof.ingest.wire.devices import Devices
from tfprof.ingest.wire.errors import Unusual, precise_error, wire_error
from tfprof.ingest.wire.fill import compact_rows, fill_kernel
from tfprof.ingest.wire.fill_rows import NSCR
from tfprof.ingest.wire.scan import ProfileIndex
from tfprof.ingest.wire.tables import batch_tables, first_seen

_BATCH_BYTES = 24 << 20  # input bytes per batch when batch_nodes is not given (at most)
_MIN_BATCHES = 12  # a smaller file is cut into about this many batches (down to _MIN_BATCH_BYTES each)
_MIN_BATCH_BYTES = 2 << 20


def _libc_pread():
    """libc's ``pread``, callable from compiled code (None where there is no such function)."""
    try:
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.pread
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_ssize_t
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_longlong]
    return fn


PREAD = _libc_pread()


@njit(cache=True, nogil=True)
def _pread_nodes(pread, fd, starts, ends, dst, pos):
    """Read each node ``[starts[i], ends[i])`` of the file to ``dst[pos[i]:]`` with ``pread``, one
    call per run of nodes that follow each other in both; 0, or -1 on a short read."""
    base = dst.ctypes.data
    i = 0
    n = len(starts)
    while i < n:
        j = i + 1
        while j < n and starts[j] == ends[j - 1] and pos[j] == pos[j - 1] + ends[j - 1] - starts[j - 1]:
            j += 1
        off = starts[i]
        size = ends[j - 1] - off
        got = 0
        while got < size:
            k = pread(fd, base + pos[i] + got, size - got, off + got)
            if k <= 0:
                return -1
            got += k
        i = j
    return 0


def _pread_nodes_py(file, starts: np.ndarray, ends: np.ndarray, dst: np.ndarray, pos: np.ndarray) -> bool:
    """``_pread_nodes`` where libc's pread cannot be called: one seek and read per node."""
    view = memoryview(dst)
    for s, e, p in zip(starts.tolist(), ends.tolist(), pos.tolist()):
        file.seek(s)
        if file.readinto(view[p: p + e - s]) != e - s:
            return False
    return True


def _words(a: np.ndarray) -> np.ndarray:
    """``a`` (uint8; 8-aligned, at least 8 bytes of padding) as uint64 words, for ``_word``."""
    w = np.frombuffer(memoryview(a), np.uint64, count=len(a) // 8)
    w.flags.writeable = False  # one numba type for every buffer
    return w


class _View:
    """A read-only byte buffer the kernels walk, with its word views."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.words = _words(array)


def batch_bounds(index: ProfileIndex, batch_nodes: int | None) -> list[tuple[int, int]]:
    n = index.num_nodes
    if batch_nodes is None:
        sizes = np.cumsum(index.node_end - index.node_start)
        # Batches in flight are what the decoder holds in memory: a few of them whatever the
        # size of the file, so a small file is cut finer than a large one.
        step = min(_BATCH_BYTES, max(_MIN_BATCH_BYTES, int(sizes[-1]) // _MIN_BATCHES if n else 0))
        cuts = [0]
        while cuts[-1] < n:
            done = sizes[cuts[-1] - 1] if cuts[-1] else 0
            nxt = int(np.searchsorted(sizes, done + step, side="right"))
            cuts.append(min(n, max(nxt, cuts[-1] + 1)))
    else:
        if batch_nodes < 1:
            raise ValueError(f"batch_nodes must be >= 1, got {batch_nodes}")
        cuts = list(range(0, n, batch_nodes)) + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


THREADS = max(1, min(8, _cpus()))
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads for the kernels (compiled ``nogil``: they run on all cores at once)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(THREADS, thread_name_prefix="tfprof-wire")
        return _POOL


def _alloc(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialized array in Arrow's memory pool: it reuses the memory of batches already
    dropped, where fresh pages from the OS would each be zeroed by the kernel first."""
    n = int(np.prod(shape))
    buf = pa.allocate_buffer(max(n * np.dtype(dtype).itemsize, 8))
    return np.frombuffer(buf, dtype, count=n).reshape(shape)


_SCRATCH_COUNTS = [c for c in range(NCOUNT) if c not in (C_ODIMS, C_SHAPE, C_FRAMES, C_STRB)]


def _fill_scratch(counts: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-call scratch of the fill kernel: sized for the longest list of any node in ``part``."""
    longest = int(counts[part][:, _SCRATCH_COUNTS].max()) if len(part) else 0
    return (np.empty((NSCR, 4 * max(longest, 3) + 16), np.int64), np.empty(2 * NROWT, np.int64),
            np.empty(NROWT, np.int64), np.empty((16, 4), np.int64))


class Batcher:
    """Decodes sets of nodes of one file; keeps the device dictionary across batches.

    A batch's nodes are read with ``pread`` into one private buffer rather than walked through
    the memory map: a key-ordered batch of a file written in hash order has its nodes scattered
    over the whole file, and mapping pages around each one (twice: count and fill) costs more
    than copying the bytes once.
    """

    def __init__(self, path: Path, file, index: ProfileIndex, pread) -> None:
        self.path = path
        self.file = file
        self.index = index
        self.pread = pread  # libc's pread (``PREAD``), or None: seek and read
        self.exec_devices_seen: dict[int, None] = {}  # device codes, in order of first appearance
        self.canonical_seen: dict[int, None] = {}
        self.devices = Devices()
        self.step_set = np.unique(index.steps)
        self.ids = (index.id_keys, index.id_code, np.int64(index.empty_code))
        self.spec = (SPEC_KIND, SPEC_SUB)
        self._buffers = [np.empty(0, np.uint8) for _ in range(THREADS)]  # one per batch decoded at once
        self.split = True  # each kernel call over every core (see ``_run``)
        self._seed()

    def _seed(self) -> None:
        """Intern the devices of a sample of nodes first, so that the first batch rarely re-runs."""
        n = self.index.num_nodes
        self._decode(np.unique(np.linspace(0, n - 1, min(n, 64)).astype(np.int64)))

    def read(self, a: int, b: int, slot: int = 0) -> tuple[_View, np.ndarray, np.ndarray]:
        """The bytes of the batch of node ids ``index.keys[a:b]`` (see ``_read``), into buffer ``slot``."""
        return self._read(self.index.node_start[a:b], self.index.node_end[a:b], slot)

    def _read(self, starts: np.ndarray, ends: np.ndarray, slot: int = 0) -> tuple[_View, np.ndarray, np.ndarray]:
        """The bytes of nodes ``[starts, ends)`` (in node-id order) one after the other in a
        private buffer, and their positions there.

        Node-id order, not file order: the kernels then read their input and write their output
        columns front to back. Nodes next to each other in both orders are read with one call.
        """
        lens = ends - starts
        pos = np.cumsum(lens) - lens
        need = (int(lens.sum()) + 15) // 8 * 8  # whole words, one of them padding (see _word)
        # A few buffers, reused batch after batch (fresh pages would be zeroed by the kernel first):
        # one being decoded, one being read ahead.
        if len(self._buffers[slot]) < need:
            self._buffers[slot] = np.empty(max(need, len(self._buffers[slot]) * 5 // 4), np.uint8)
        data = self._buffers[slot][:need]
        fd = self.file.fileno()
        if self.pread is not None:  # one call per run of nodes, from compiled code
            ok = _pread_nodes(self.pread, fd, starts, ends, data, pos) == 0
        else:
            ok = _pread_nodes_py(self.file, starts, ends, data, pos)
        if not ok:
            raise damaged(self.path, "profile", "it changed while it was being read")
        data = data.view()
        data.flags.writeable = False
        return _View(data), pos, pos + lens

    def _run(self, kernel, view: _View, ns: np.ndarray, ne: np.ndarray, nodes: np.ndarray, args: tuple,
             scratch=None) -> None:
        """Run ``kernel`` over ``nodes`` on every core (compiled ``nogil``).

        ``scratch(part)`` gives the extra (per-thread) arguments of a call over nodes ``part``.
        """
        def call(part: np.ndarray) -> None:
            kernel(view.array, part, ns, ne, *args, *(scratch(part) if scratch else ()))

        # In buffer order, so that each thread streams through memory (the hardware prefetcher
        # follows), each thread taking a contiguous part of the buffer of about equal size.
        if self.split and len(nodes) >= 2 * THREADS and THREADS > 1:
            size = np.cumsum(ne[nodes] - ns[nodes])
            cuts = np.searchsorted(size, size[-1] * np.arange(1, THREADS) / THREADS)
            list(_pool().map(call, np.split(nodes, cuts)))
        else:
            call(nodes)

    def decode(self, a: int, b: int) -> dict[str, pa.Table]:
        """The batch of node ids ``index.keys[a:b]``."""
        tables, seen = self.decode_part(a, b, 0)
        self.note_seen(seen)
        return tables

    def decode_part(self, a: int, b: int, slot: int) -> tuple[dict[str, pa.Table], tuple]:
        """``decode`` for a batch decoded while others are (its bytes read into buffer ``slot``):
        the tables, and what ``note_seen`` must be given once the batches before it have been."""
        return self._decode(np.arange(a, b), tables=True, data=self.read(a, b, slot))

    def note_seen(self, seen: tuple) -> None:
        """Record the devices a batch used, in order of first appearance (batch after batch)."""
        for codes, into in zip(seen, (self.exec_devices_seen, self.canonical_seen)):
            into.update(dict.fromkeys(codes))

    def _decode(self, sel: np.ndarray, *, tables: bool = False, data: tuple | None = None
                ) -> tuple[dict[str, pa.Table], tuple] | None:
        idx = self.index
        B = len(sel)
        file_s, nids = idx.node_start[sel], idx.keys[sel]
        view, ns, ne = data if data is not None else self._read(file_s, idx.node_end[sel])
        everyone = np.arange(B)
        counts = np.zeros((B, NCOUNT), np.int64)
        err = np.zeros(B, np.int64)
        errpos = np.zeros(B, np.int64)
        name_pos = np.zeros(B, np.int64)
        self._run(count_kernel, view, ns, ne, everyone, (nids, counts, err, errpos, name_pos))
        self._raise_count_errors(err, sel)
        if (name_pos - ns != idx.name_start[sel] - file_s).any():
            raise Unusual()  # a node with two names: the last one counts, not the one indexed
        rowc = counts[:, :NROWT]
        base = np.cumsum(rowc, axis=0) - rowc
        total = rowc.sum(axis=0)

        def rows(t: int, ncol: int) -> np.ndarray:
            # One row per column: each column is contiguous (for Arrow) and the layout is always 'C'
            # (an F-order array with < 2 rows is also C-contiguous, and numba would compile again).
            return _alloc((ncol, int(total[t])), np.int64)

        out = (_alloc((8, B), np.int64), _alloc((int(total[C_SHAPE]),), np.int64), rows(C_INPUTS, 5),
               rows(C_TYPES, 3), rows(C_OSH, 4), _alloc((int(total[C_ODIMS]),), np.int64), rows(C_ATTRS, 6),
               rows(C_FRAMES, 13), rows(C_STEPS, 5), rows(C_EXDEV, 4), rows(C_EXECS, 6), rows(C_MEM, 13),
               rows(C_OMEM, 6), rows(C_ALLOC, 4), _alloc((int(total[C_STRB]),), np.uint8))
        used = np.zeros((B, NROWT), np.int64)
        errv = np.zeros((B, 2), np.int64)
        miss = np.zeros((B, 3), np.int64)
        todo = everyone
        while len(todo):
            self._run(fill_kernel, view, ns, ne, todo, (nids, counts, base, idx.keys, self.step_set, self.ids,
                      self.devices.kernel_args(view.words), self.spec, out, used, err, errv, miss),
                      lambda part: _fill_scratch(counts, part))
            todo = np.flatnonzero(miss[:, 0])
            if len(todo):  # device strings met for the first time: intern them, decode those nodes again
                new = [bytes(view.array[s:e]) for s, e in miss[todo, 1:]]
                for v in new:
                    try:
                        v.decode("utf-8")
                    except UnicodeDecodeError:
                        raise self._precise(damaged(self.path, "profile", "a device name is not valid UTF-8"),
                                            sel) from None
                self.devices.add(new)
                miss[todo] = 0
                errv[todo] = 0
        self._raise_count_errors(err, sel)
        self._raise_check_errors(errv, sel)
        replaced = np.flatnonzero((used != rowc).any(axis=1))
        if len(replaced):  # map entries a later one of the same key replaced: protobuf still parses them
            self._check_with_protobuf(view, ns, ne, replaced, sel)
        if not tables:
            return None
        if (used != rowc).any():  # repeated map keys: the last entry won, close the gaps
            out = list(out)
            for t, k in ((C_INPUTS, 2), (C_OSH, 4), (C_ATTRS, 6), (C_STEPS, 8), (C_EXDEV, 9), (C_EXECS, 10),
                         (C_MEM, 11), (C_OMEM, 12), (C_ALLOC, 13)):
                if (used[:, t] != rowc[:, t]).any():
                    out[k] = out[k][:, : compact_rows(out[k], base[:, t], used[:, t])]
        try:
            return self._tables(int(sel[0]), int(sel[-1]) + 1, out)
        except ProfileFormatError as exc:  # a string or attr value of these nodes: where is it?
            raise self._precise(exc, sel) from None

    def _check_with_protobuf(self, view: _View, ns: np.ndarray, ne: np.ndarray, nodes: np.ndarray,
                             sel: np.ndarray) -> None:
        """Parse ``nodes`` (positions in the batch) with protobuf: an error if one does not decode."""
        from google.protobuf.message import DecodeError

        from tfprof.schema.proto import tfprof_log_pb2

        for j in nodes.tolist():
            try:
                tfprof_log_pb2.ProfileNode.FromString(view.array[ns[j]:ne[j]].tobytes())
            except (DecodeError, ValueError, RuntimeError):
                key = int(self.index.keys[sel[j]])
                exc = damaged(self.path, "profile", f"node {key} does not decode")
                raise self._precise(exc, sel[j:j + 1]) from None

    def _precise(self, exc: Exception, sel: np.ndarray) -> Exception:
        idx = self.index
        return precise_error(exc, self.path, idx.node_start[sel], idx.node_end[sel], idx.keys[sel])

    def _raise_count_errors(self, err: np.ndarray, sel: np.ndarray) -> None:
        bad = np.flatnonzero(err)
        if not len(bad):
            return
        j = int(bad[0])
        code = int(err[j])
        if code < 0:
            i, idx = int(sel[j]), self.index
            raise wire_error(self.path, code, int(idx.node_start[i]), int(idx.node_end[i]), int(idx.keys[i]))
        raise damaged(self.path, "profile", "a node has no name or a wrong id; is this another kind of file?")

    def _raise_check_errors(self, errv: np.ndarray, sel: np.ndarray) -> None:
        bad = np.flatnonzero(errv[:, 0])
        if not len(bad):
            return
        j = int(bad[0])
        name = one_line(self.index.names[int(sel[j])].as_py())
        if errv[j, 0] == E_STEP:
            raise damaged(self.path, "profile", f"node `{name}` has stats for unlisted step {int(errv[j, 1])}")
        raise damaged(self.path, "profile", f"node `{name}` has an input with unknown id {int(errv[j, 1])}")

    def _tables(self, a: int, b: int, out: tuple) -> tuple[dict[str, pa.Table], tuple]:
        devs = self.devices.array()
        o_nodes, o_exdev = out[0], out[9]
        seen = tuple(first_seen(codes, max(len(devs), 1))[1].tolist() for codes in (o_exdev[2, :], o_nodes[3, :]))
        return batch_tables(out, self.index, a, b, devs, self.path), seen
