"""Foreign profiles: PyTorch Kineto traces (Chrome-trace JSON, plain or gzip) and XSpace protobufs
(TensorFlow 2, JAX, XProf), recognised by their content and read into tfprof's tables.

``kind(path)`` says which format a file holds (None: not a foreign profile, so one of tfprof's
own); ``read(path)`` gives its whole tables; ``no_source(prof)`` says what the views' header says
the profile has no source for. docs/FOREIGN.md has the mapping rules.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tfprof.ingest.foreign.trace_json import GZIP_MAGIC, looks_like_json, looks_like_trace

KINDS = ("kineto", "xspace")
"""The foreign formats, as ``Profile.source`` names them."""


def kind(path) -> str | None:
    """``kineto``, ``xspace`` or None, from the first bytes of file ``path`` (not its name)."""
    if not isinstance(path, (str, Path)) or not Path(path).is_file():
        return None
    with open(path, "rb") as f:
        head = f.read(1 << 16)  # a gzipped head is enough too: only its first 8 KB inflated are looked at
        whole = not f.read(1)
    # Any gzip file and any JSON go to the Chrome-trace reader, which says what else they hold: a
    # binary protobuf starts with neither (its first byte is never 0x1f, `{` or `[`).
    if head.startswith(GZIP_MAGIC) or looks_like_trace(head) or looks_like_json(head):
        return "kineto"
    from tfprof.ingest.foreign.xcheck import looks_like_xspace

    return "xspace" if looks_like_xspace(head, whole) else None


def read(path, what: str, progress=None) -> dict[str, pa.Table]:
    """The tables of foreign profile ``path`` of kind ``what``; ``progress`` (an ingest progress
    callback: done, total, what) is told how far the read has got, in thousandths."""
    from tfprof.ingest.foreign.progress import teller
    from tfprof.ingest.sources import read_bytes, read_mapped

    tell = teller(progress)
    if what == "kineto":  # mapped: the scan drops each window of the file once its columns are gathered
        from tfprof.ingest.foreign import kineto

        tables = kineto.read(Path(path), [read_mapped(path, "profile")], tell)
    else:
        data = read_bytes(path, "profile")
        box = [data]  # the reader empties it: the file's bytes are freed once the events are decoded
        del data
        from tfprof.ingest.foreign import xspace

        tables = xspace.read(Path(path), box, tell)
    tell(1, "tables")
    return tables


_ESTIMATED_KINETO = ("params (no graph), output bytes and temp/persistent bytes (no allocator breakdown); "
                     "float_ops are estimated from recorded input shapes, except for op types with no rule: {}")


_LISTED = 8  # op types named in the header; the rest are counted (SQL on nodes lists them all)


def _some(names: list[str]) -> str:
    """``names`` for one header line: the first few, then how many more."""
    if not names:
        return "none"
    shown = ", ".join(names[:_LISTED])
    return shown if len(names) <= _LISTED else f"{shown} and {len(names) - _LISTED} more"


def no_source(prof) -> str | None:
    """The fields of ``prof`` (a ``Profile``) that its input has no source for, as the views' header
    names them (None: one of tfprof's own profiles). A Kineto trace whose ops recorded their input
    shapes has float_ops estimated for the op types ``torch_flops`` has a rule for; the header says
    so and lists the op types without one."""
    from tfprof.schema.tables import FOREIGN_NO_SOURCE

    if prof.source not in FOREIGN_NO_SOURCE:
        return None
    if prof.source == "kineto":
        import pyarrow.compute as pc

        from tfprof.ingest.foreign.torch_flops import RULES

        nodes = prof.table("nodes")
        if pc.max(nodes["float_ops"]).as_py() or 0:
            ops = sorted(set(pc.unique(nodes["op"].cast(pa.string())).to_pylist()) - set(RULES))
            return _ESTIMATED_KINETO.format(_some(ops))
    if prof.source == "xspace" and prof.row_counts().get("allocations", 0):
        return FOREIGN_NO_SOURCE["xspace_memory"]
    return FOREIGN_NO_SOURCE[prof.source]
