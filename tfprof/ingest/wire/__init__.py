"""Fast ProfileProto decoder: numba kernels walk the protobuf wire format into numpy columns.

``tables_from_message`` (profile_proto.py) is the reference: it needs the whole parsed message
(~3 GB and ~10 s just to parse a 70k-node, 50-step profile, then a Python loop per exec
record). This package produces the same tables from the file, batch by batch, in bounded memory:

1. ``scan_profile`` (``scan.py``) walks the top level once: where each ``nodes`` map entry is,
   each node's name, ``steps``, ``id_to_string``, the two flags.
2. ``ProfileReader.batches`` cuts the node ids into contiguous ranges of about ``_BATCH_BYTES``
   of input (``batch.py``). A batch's nodes are copied with ``pread`` into a private buffer in
   node-id order; a *count* kernel (``count.py``) walks them, validating the wire format and
   counting each table's rows; a *fill* kernel (``fill.py``) walks them again and writes the
   values straight into preallocated columns, which ``tables.py`` turns into Arrow tables.
   One batch per core is read and decoded at once, while the caller handles the one before.
3. Device strings (few distinct values, millions of occurrences) are interned in a small hash
   table (``devices.py``) and become dictionary codes; other strings are copied out by the fill
   kernel and dictionary-encoded by Arrow. Attr values are sliced raw when a kernel has checked
   that the slice is exactly what ``SerializeToString(deterministic=True)`` gives
   (``canonical.py``), otherwise re-serialized through protobuf.

The wire primitives every kernel shares (varints, tags, fields checked against a table of
wire types, map entries, packed numbers) are in ``fields.py``; map semantics (key order, the
last of equal keys) in ``order.py``; the status codes they return, and the errors those
become, in ``errors.py``.

Every table of a batch is in the schema's row order and its dictionaries list the values the
batch uses in the order the reference decoder first meets them, so concatenating the batches
(``concat_batches``) gives tables equal to the reference's (``pa.Table.equals``). Damaged files
raise ``ProfileFormatError``: every length and varint is checked against the end of its
message before it is used. The few valid encodings the kernels leave alone (a map entry whose
key or value field appears twice or that has a third field, a string field given twice,
deprecated groups) are decoded by the reference decoder instead; a map entry that a later one
of the same key replaces is checked by protobuf itself, which parses it though it is not kept.

The kernels are written to keep numba's runtime out of the hot loops (``_nrt=False``: no
reference counting, no allocation; scratch space comes from the caller) and to let the hottest
helpers be inlined (``inline="always"``), which roughly halves the decoding time at the price
of a longer first compile (cached on disk).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from tfprof.ingest import derive, profile_proto
from tfprof.ingest.sources import damaged

# PREAD is looked up here, when a reader starts: without it (tests set it to None) nodes are read with seek + read.
from tfprof.ingest.wire.batch import PREAD, THREADS, Batcher, batch_bounds
from tfprof.ingest.wire.canonical import SPEC_KIND, SPEC_SUB, is_canonical  # noqa: F401 (tests check the kernel)
from tfprof.ingest.wire.errors import Unusual
from tfprof.ingest.wire.scan import ProfileIndex, check_file, scan_profile
from tfprof.schema import NODE_TABLES, TABLES
from tfprof.schema.conform import conform

__all__ = ["BATCH_TABLES", "ProfileIndex", "ProfileReader", "concat_batches", "decode_profile",
           "iter_profile_batches", "scan_profile"]

BATCH_TABLES = tuple(t for t in NODE_TABLES if t != "allocator_memory")  # what a ProfileProto carries per node
"""The per-node tables, in the order a batch holds them."""


class ProfileReader:
    """Streams the tables of one ProfileProto file.

    >>> reader = ProfileReader("profile_100")                    # doctest: +SKIP
    >>> for batch in reader.batches(): write(batch)              # per-node tables   # doctest: +SKIP
    >>> write(reader.profile_tables())                           # steps, devices, info, ...  # doctest: +SKIP

    ``batches()`` yields dicts of the per-node tables (``BATCH_TABLES``) for consecutive ranges
    of node ids. With ``prefetch`` (the default), batches are read and decoded in the background,
    one per core at once (each batch on one thread), while the caller handles the one before;
    without, one batch at a time is decoded when asked for, each kernel call spread over the
    cores (fewer batches in memory).
    ``profile_tables()`` gives the whole-profile tables once the batches are consumed.
    """

    def __init__(self, path: str | os.PathLike, *, batch_nodes: int | None = None,
                 index: ProfileIndex | None = None, prefetch: bool = True) -> None:
        self.path = check_file(path)
        self.batch_nodes = batch_nodes
        self.prefetch = prefetch
        self._index = index
        self._batcher: Batcher | None = None
        self._fallback: dict[str, pa.Table] | None = None
        self._done = False

    @property
    def index(self) -> ProfileIndex | None:
        """The top-level scan (None when the file needs the reference decoder)."""
        if self._index is None and self._fallback is None:
            try:
                self._index = scan_profile(self.path)
            except Unusual:
                self._fallback = profile_proto.tables_from_message(profile_proto.parse_profile(self.path))
        return self._index

    def batches(self) -> Iterator[dict[str, pa.Table]]:
        """The per-node tables, batch by batch (node ids ascending)."""
        yielded = False
        try:
            for batch in self._batches():
                yielded = True
                yield batch
        except Unusual:
            if yielded:
                raise damaged(self.path, "profile", "a field or map entry is written twice, which only the "
                              "reference decoder reads; decode it with tfprof.ingest.wire.decode_profile, "
                              "which falls back to protobuf") from None
            self._use_reference()
            yield from _reference_batches(self._fallback, self.batch_nodes)
        self._done = True

    def _use_reference(self) -> None:
        self._index = None
        self._fallback = profile_proto.tables_from_message(profile_proto.parse_profile(self.path))

    def _batches(self) -> Iterator[dict[str, pa.Table]]:
        """``batches``, raising ``Unusual`` for what the kernels leave to protobuf."""
        index = self.index
        if index is None:
            yield from _reference_batches(self._fallback, self.batch_nodes)
            return
        bounds = batch_bounds(index, self.batch_nodes)
        with open(self.path, "rb") as f:
            b = self._batcher = Batcher(self.path, f, index, PREAD)
            if not self.prefetch or THREADS < 2 or len(bounds) < 2:
                for a, z in bounds:
                    yield b.decode(a, z)
                return
            # One batch per core, each read and decoded by one thread (no kernel split over the
            # cores: no waiting for the slower half), handed out in order.
            b.split = False
            with ThreadPoolExecutor(THREADS, thread_name_prefix="tfprof-wire-batch") as pool:
                jobs = {k: pool.submit(b.decode_part, *bounds[k], k % THREADS)
                        for k in range(min(THREADS, len(bounds)))}
                for k in range(len(bounds)):
                    tables, seen = jobs.pop(k).result()
                    j = k + THREADS  # its bytes go to batch k's buffer, free now
                    if j < len(bounds):
                        jobs[j] = pool.submit(b.decode_part, *bounds[j], j % THREADS)
                    b.note_seen(seen)
                    yield tables

    def profile_tables(self) -> dict[str, pa.Table]:
        """steps, devices, info (and the empty allocator_memory, checkpoint_tensors), as the
        reference's ``finish`` builds them; call it after ``batches()`` is exhausted."""
        if not self._done:
            raise RuntimeError("profile_tables() needs every batch to have been read first")
        if self._fallback is not None:
            return {k: v for k, v in self._fallback.items() if k not in BATCH_TABLES}
        index, b = self._index, self._batcher
        devs = b.devices.strings
        seen = list(b.exec_devices_seen) + [c for c in b.canonical_seen if c not in b.exec_devices_seen]
        names = pa.array([devs[c].decode() for c in seen], pa.string())
        return {
            "steps": conform("steps", {"step": pa.array(index.steps, pa.int64())}),
            "allocator_memory": TABLES["allocator_memory"].schema.empty_table(),
            "checkpoint_tensors": TABLES["checkpoint_tensors"].schema.empty_table(),
            # derive.devices_table lists devices in order of first appearance in exec_devices and
            # then in nodes.canonical_device: the same order, from what the batches saw.
            "devices": derive.devices_table(pa.table({"device": names}),
                                            pa.table({"canonical_device": pa.array([], pa.string())})),
            "info": conform("info", {"has_trace": [index.has_trace],
                                     "miss_accelerator_stream": [index.miss_accelerator_stream]}),
        }


def iter_profile_batches(
    path: str | os.PathLike, *, batch_nodes: int | None = None, index: ProfileIndex | None = None,
    prefetch: bool = True,
) -> Iterator[dict[str, pa.Table]]:
    """The per-node tables of ProfileProto ``path`` (``BATCH_TABLES``), in batches of node ids.

    Each batch covers the next ``batch_nodes`` node ids (default: about ``_BATCH_BYTES`` of the
    file), so concatenating the batches gives the globally sorted tables. ``index`` (from
    ``scan_profile``) saves the scan; ``prefetch``: see ``ProfileReader``. Damaged files raise
    ``ProfileFormatError``. The whole-profile tables come from ``ProfileReader.profile_tables``.
    """
    yield from ProfileReader(path, batch_nodes=batch_nodes, index=index, prefetch=prefetch).batches()


def _reference_batches(tables: dict[str, pa.Table], batch_nodes: int | None) -> Iterator[dict[str, pa.Table]]:
    """Batches cut from the reference decoder's tables (for the rare encodings the kernels leave)."""
    ids = tables["nodes"].column("node_id").to_numpy()
    step = batch_nodes or len(ids)
    for lo in range(0, len(ids), step):
        first, last = ids[lo], ids[min(lo + step, len(ids)) - 1]
        batch = {}
        for name in BATCH_TABLES:
            col = tables[name].column("node_id").to_numpy()
            i, j = np.searchsorted(col, first, "left"), np.searchsorted(col, last, "right")
            batch[name] = tables[name].slice(i, j - i)
        yield batch


def decode_profile(path: str | os.PathLike) -> dict[str, pa.Table]:
    """Every table of ProfileProto ``path``: equal to ``tables_from_message(parse_profile(path))``."""
    reader = ProfileReader(path)
    try:
        batches = list(reader._batches())
    except Unusual:  # an encoding the kernels leave to protobuf (see ``Unusual``)
        reader._use_reference()
        return reader._fallback
    reader._done = True
    tables = {name: concat_batches([b[name] for b in batches]) for name in BATCH_TABLES}
    tables.update(reader.profile_tables())
    order = list(profile_proto._FROM_PROTO) + ["allocator_memory", "checkpoint_tensors", "devices", "info"]
    return {name: tables[name] for name in order}


def concat_batches(parts: list[pa.Table]) -> pa.Table:
    """One table from batches of it, with one dictionary per column (values in order of first use)."""
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts).unify_dictionaries().combine_chunks()
