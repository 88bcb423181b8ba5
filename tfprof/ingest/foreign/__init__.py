"""Foreign profiles: PyTorch Kineto traces (Chrome-trace JSON, plain or gzip) and XSpace protobufs
(TensorFlow 2, JAX, XProf), recognised by their content and read into tfprof's tables.

``kind(path)`` says which format a file holds (None: not a foreign profile, so one of tfprof's
own); ``read(path)`` gives its whole tables. docs/FOREIGN.md has the mapping rules.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tfprof.ingest.foreign.trace_json import looks_like_trace

KINDS = ("kineto", "xspace")
"""The foreign formats, as ``Profile.source`` names them."""


def kind(path) -> str | None:
    """``kineto``, ``xspace`` or None, from the first bytes of file ``path`` (not its name)."""
    if not isinstance(path, (str, Path)) or not Path(path).is_file():
        return None
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if looks_like_trace(head if head[:2] != b"\x1f\x8b" else Path(path).read_bytes()):
        return "kineto"
    from tfprof.ingest.foreign.xspace import looks_like_xspace

    return "xspace" if looks_like_xspace(Path(path)) else None


def read(path, what: str) -> dict[str, pa.Table]:
    """The tables of foreign profile ``path`` of kind ``what``."""
    from tfprof.ingest.sources import read_bytes

    data = read_bytes(path, "profile")
    if what == "kineto":
        from tfprof.ingest.foreign import kineto

        return kineto.read(Path(path), data)
    from tfprof.ingest.foreign import xspace

    return xspace.read(Path(path), data)
