"""The kernels' status codes and what they become: a ``ProfileFormatError`` that names the failing
field and its offset (found by walking that field again in Python), or ``Unusual`` for valid
protobuf that the reference decoder must read instead.

Errors are negative positions: a kernel function that returns a position (or a range's start)
returns one of the ``_E_*`` codes instead when the bytes are damaged.
"""

from __future__ import annotations

from tfprof import varint
from tfprof.ingest.sources import damaged

E_VARINT, E_LENGTH, E_WIRE, E_MISMATCH, E_UNUSUAL, E_CHANGED, _E_UTF8 = varint.BAD, -2, -3, -4, -5, -6, -7
_WIRE_PROBLEMS = {
    E_VARINT: "a varint is truncated or longer than 10 bytes",
    E_LENGTH: "a length runs past the end of its message",
    E_WIRE: "an invalid tag, wire type or group",
    E_MISMATCH: "a known field has the wrong wire type",
    E_CHANGED: "it changed while it was being read",  # the fill kernel's rows disagree with the count kernel's
    _E_UTF8: "a string field is not valid UTF-8",
}


class Unusual(Exception):
    """Valid protobuf that the kernels leave to the reference decoder: a map entry whose key or
    value field appears twice (protobuf merges messages, and checks every string is UTF-8), a
    map entry with a field other than key and value, a deprecated group, a node named twice, a
    string field of a node or trace given twice (the last is kept, the first checked)."""


def wire_error(path, code: int, at: int, end: int | None = None, key: int | None = None):
    """The ``ProfileFormatError`` for kernel status ``code`` met in a top-level field starting at
    byte ``at`` of ``path``, or (``end`` and ``key`` given) in the ProfileNode of id ``key`` at
    bytes ``[at, end)``; raises ``Unusual`` for what protobuf itself must decode.

    The kernels only say what kind of problem they met; the failing field and its offset come
    from walking that one field or node again in Python (``tfprof.ingest.locate``).
    """
    if code == E_UNUSUAL:
        raise Unusual()
    found = _locate(path, at, end, key) if code != E_CHANGED else None
    if found is None:
        problem = _WIRE_PROBLEMS.get(code, "damaged wire format")
        where = f"node {key} at bytes {at}-{end}" if end is not None else f"the field at byte {at}"
        return damaged(path, "profile", f"not protobuf wire format, or truncated: {problem}, in {where}")
    return damaged(path, "profile", str(found))


def precise_error(exc: Exception, path, starts, ends, keys) -> Exception:
    """``exc``, a problem met in the nodes at ``[starts, ends)`` (ids ``keys``) once the kernels
    were done with them (a string that is not UTF-8, an attr value protobuf cannot parse), made
    precise: the first field of those nodes that protobuf's rules reject, and its offset."""
    import mmap

    from tfprof.ingest.locate import locate
    from tfprof.schema.proto import tfprof_log_pb2

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for s, e, k in zip(starts.tolist(), ends.tolist(), keys.tolist()):
                found = locate(mm, tfprof_log_pb2.ProfileNode, start=s, end=e, prefix=f"nodes[{k}]")
                if found is not None:
                    return damaged(path, "profile", str(found))
    except (OSError, ValueError):
        pass
    return exc


def _locate(path, at: int, end: int | None, key: int | None):
    """The first problem ``tfprof.ingest.locate`` finds there, reading the file again (None when
    it finds none, or the file cannot be read)."""
    import mmap

    from tfprof.ingest.locate import locate
    from tfprof.schema.proto import tfprof_log_pb2

    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if end is None:
                return locate(mm, tfprof_log_pb2.ProfileProto, start=at, strict=True, first_only=True)
            return locate(mm, tfprof_log_pb2.ProfileNode, start=at, end=end, strict=True, prefix=f"nodes[{key}]")
    except (OSError, ValueError):
        return None
