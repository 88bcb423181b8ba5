"""Recognising an XSpace by its first bytes, and saying in one line what is wrong with one that
does not decode or holds nothing to profile.

An XSpace (xplane.proto) is ``planes`` (1), ``errors`` (2), ``warnings`` (3) and ``hostnames`` (4),
written in that order. An XPlane starts with ``id`` (1, a varint, left out when 0) and ``name``
(2), so a file that starts with field 1 whose first bytes read as an id and then a printable name
is an XSpace, even when it is cut off later: that is what lets a truncated capture be called one.
tfprof's own inputs never pass: a ProfileProto's first field is a map entry whose value (field 2)
starts with a tag byte, not printable text; a GraphDef's, a RunMetadata's and an OpLogProto's
first field holds a message in field 1, where an XPlane holds a varint.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import message as _message

from tfprof.ingest.sources import one_line
from tfprof.schema.proto import xplane_pb2
from tfprof.varint import VarintError, decode

WHAT = "an XSpace protobuf (TensorFlow 2 / JAX profile)"
"""How messages name the format."""
LOOKS = f"looks like {WHAT} but"
_STRINGS = {2: "errors", 3: "warnings", 4: "hostnames"}  # the XSpace's string fields


def _varint(buf: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """The varint at ``pos`` of the bytes before ``end``, or (None, pos) when they end inside it
    or it is too long."""
    try:
        return decode(buf, pos, end)
    except VarintError:
        return None, pos


def _text(raw: bytes) -> str | None:
    """``raw`` as text when it is non-empty, UTF-8 and printable."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text and text.isprintable() else None


def plane_name(buf: bytes, start: int, end: int) -> str | None:
    """The name of the XPlane whose bytes begin at ``start`` (``end``: where they end, maybe past
    the bytes at hand), read from its leading ``id`` and ``name`` fields; None when they are not
    an XPlane's. A name the bytes end inside counts from 4 characters on (ending in ``…``)."""
    end = min(end, len(buf))
    pos = start
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        if tag == 0x08:  # id
            _, pos = _varint(buf, pos, end)
            continue
        if tag != 0x12:  # anything but the name before the name: not an XPlane
            return None
        size, pos = _varint(buf, pos, end)
        if size is None:
            return None
        if pos + size > end and end == len(buf) and end - pos >= 4:  # the bytes end inside the name
            cut = _text(buf[pos:end].decode("utf-8", "ignore").encode())
            return cut and cut + "…"
        return _text(buf[pos:pos + size]) if pos + size <= end else None
    return None


def _fields(buf: bytes):
    """The XSpace's top-level fields: (number, start of its tag, start of its value, end of its
    value) each; the last one's end may lie past the bytes (cut off). A tag that is not one of
    the XSpace's length-delimited fields ends the walk with number -1."""
    pos = 0
    while pos < len(buf):
        at = pos
        tag, pos = _varint(buf, pos, len(buf))
        size, value = _varint(buf, pos, len(buf)) if tag is not None else (None, pos)
        if tag is None or tag & 7 != 2 or not 1 <= tag >> 3 <= 4 or size is None:
            yield -1, at, at, at
            return
        yield tag >> 3, at, value, value + size
        pos = value + size


def looks_like_xspace(head: bytes, whole: bool) -> bool:
    """True when the first bytes of a file (``head``; ``whole``: the whole file) are an XSpace's: a
    first plane with a printable name, or (a capture with no planes) nothing but printable errors,
    warnings and host names."""
    if head[:1] == b"\x0a":
        size, pos = _varint(head, 1, len(head))
        return size is not None and plane_name(head, pos, pos + size) is not None
    if head[:1] not in (b"\x12", b"\x1a", b"\x22") or not whole:
        return False
    fields = list(_fields(head))
    return all(n in _STRINGS and end <= len(head) and _text(head[s:end]) is not None for n, _, s, end in fields)


def damaged(path: Path, data: bytes, reason: str) -> str:
    """Why protobuf cannot decode ``data``, an XSpace by its first bytes (``reason``: protobuf's
    words): the field cut off by the end of the file, the byte that is no XSpace field, or the
    plane that does not decode."""
    planes = 0
    for number, at, start, end in _fields(data):
        planes += number == 1
        what = (f"plane {planes} (`{one_line(plane_name(data, start, end) or '?')}`)" if number == 1
                else f"its {_STRINGS.get(number, 'field')} entry")
        if number == -1:
            return (f"`{path}` {LOOKS} byte {at:,} holds no XSpace field; it is damaged after its first "
                    f"{planes} plane(s) (protobuf: {reason})")
        if end > len(data):
            return (f"`{path}` {LOOKS} it is truncated: {what} at byte {at:,} is {end - start:,} bytes long, but the "
                    f"file ends at byte {len(data):,}; check that the file is complete (was it copied while the "
                    "profiler still wrote it?)")
        if number == 1:
            try:
                xplane_pb2.XPlane().ParseFromString(data[start:end])
            except (_message.DecodeError, ValueError, RuntimeError):
                return f"`{path}` {LOOKS} {what} (bytes {start:,}–{end:,}) does not decode (protobuf: {reason})"
    return f"`{path}` {LOOKS} protobuf cannot decode it ({reason}); check that the file is complete"


def _said(space: xplane_pb2.XSpace) -> str:
    """What the profiler itself reported (its ``errors`` and ``warnings``), for a message's end."""
    notes = [*space.errors, *space.warnings]
    if not notes:
        return ""
    shown = "; ".join(one_line(n) for n in notes[:3])
    return f"; the profiler reported: {shown}" + (f" (and {len(notes) - 3} more)" if len(notes) > 3 else "")


def plane_events(space: xplane_pb2.XSpace) -> list[int]:
    """How many events each plane of ``space`` holds."""
    return [sum(len(line.events) for line in plane.lines) for plane in space.planes]


def nothing_captured(path: Path, space: xplane_pb2.XSpace, events: list[int] | None = None) -> str | None:
    """The message for an XSpace with no planes or no events at all (None: it has events).
    ``events``: each plane's event count (``plane_events``; given where ``space`` lacks its lines)."""
    if not space.planes:
        hosts = f" (host {', '.join(f'`{one_line(h)}`' for h in space.hostnames)})" if space.hostnames else ""
        return f"`{path}` is {WHAT} with no planes{hosts}: the profiler captured nothing{_said(space)}"
    if not any(plane_events(space) if events is None else events):
        names = ", ".join(f"`{one_line(p.name)}`" for p in space.planes)
        return (f"`{path}` is {WHAT} without events: its planes ({names}) hold only metadata; was the profiler "
                f"stopped before anything ran?{_said(space)}")
    return None


def no_ops(path: Path, space: xplane_pb2.XSpace, events: int, per_plane: list[int] | None = None) -> str:
    """The message for an XSpace whose ``events`` events hold no op (an idle capture); ``per_plane``
    as ``nothing_captured``'s ``events``."""
    counts = plane_events(space) if per_plane is None else per_plane
    busy = [p.name for p, n in zip(space.planes, counts) if n]
    return (f"`{path}` is {WHAT} without op events: its {events:,} events (on {', '.join(f'`{one_line(n)}`' for n in busy)})"
            " are runtime activity, none a TensorFlow graph op (named `<node path>:<op type>`) or an executed HLO "
            f"instruction (an `hlo_op` stat); did the model run while the profiler was on?{_said(space)}")
