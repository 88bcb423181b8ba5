"""Where a binary protobuf message fails to decode: the field, its byte offset and what is wrong.

Protobuf's parser only says *that* bytes do not decode ("Error parsing message"). When it says
so, ``locate`` walks the wire format against the message's descriptor, as protobuf does, and
stops at the first field that breaks a rule: a tag or varint cut short or longer than protobuf
allows, a length running past the end of its message or of the file, a string that is not
UTF-8, a group that never ends, messages nested deeper than protobuf's limit. The result names
the field by its path (``step_stats.dev_stats[0].node_stats[12]``), its number and type, and the
byte where its tag starts.

Only the failing branch is walked in Python: each embedded message is first given to protobuf
whole, and entered only if protobuf rejects it. ``strict`` also reports a known field written
with another wire type (protobuf keeps such a field as an unknown one; the compiled ProfileProto
decoder refuses it) and then walks every field.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import descriptor as _d
from google.protobuf import message as _message
from google.protobuf.message_factory import GetMessageClass

from tfprof.varint import VarintError, decode

MAX_DEPTH = 100  # protobuf's default recursion limit
_MAX_FIELD = (1 << 29) - 1

_F = _d.FieldDescriptor
_FIXED64 = {_F.TYPE_FIXED64, _F.TYPE_SFIXED64, _F.TYPE_DOUBLE}
_FIXED32 = {_F.TYPE_FIXED32, _F.TYPE_SFIXED32, _F.TYPE_FLOAT}
_LENGTH = {_F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE}
_WIRE_NAMES = {0: "varint", 1: "64-bit", 2: "length-delimited", 3: "group", 5: "32-bit"}
_TYPE_NAMES = {
    getattr(_F, name): name[5:].lower() for name in dir(_F) if name.startswith("TYPE_") and name != "TYPE_GROUP"
}


@dataclass(frozen=True)
class Problem:
    """The first field at which a message stops decoding."""

    at: int  # byte offset of the field's tag (of the bad byte for a tag)
    path: str  # the field's path from the top message, e.g. ``node[3].attr['T']``; "" for the top
    field: str  # "field 2", "a tag"
    kind: str  # "string", "NodeDef", "unknown to NodeDef"; "" for a tag
    what: str  # what is wrong, e.g. "is 5000 bytes long but the file ends at byte 3000"
    truncated: bool = False  # it runs past the end of the file

    def __str__(self) -> str:
        where = " in" if self.field.startswith("a ") else ""
        name = f"{self.field}{where} `{self.path}`" if self.path else self.field
        kind = f" ({self.kind})" if self.kind else ""
        return f"{'truncated: ' if self.truncated else ''}{name}{kind} at byte {self.at} {self.what}"


class _Found(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem


def locate(
    data, message, *, start: int = 0, end: int | None = None, base: int = 0, prefix: str = "",
    strict: bool = False, first_only: bool = False,
) -> Problem | None:
    """The first problem in ``data[start:end]`` read as ``message`` (a class, instance or
    descriptor), or None when the walk finds none.

    ``base`` is added to every reported offset (``data`` is a part of a file starting there);
    ``prefix`` is the path of the message in its file; ``first_only`` walks only the first field.
    The end of ``data`` is taken as the end of the file.
    """
    desc = getattr(message, "DESCRIPTOR", message)
    buf = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    walker = _Walker(buf, base, strict)
    try:
        walker.message(start, len(buf) if end is None else end, desc, prefix, 0, first_only=first_only)
    except _Found as found:
        return found.problem
    except RecursionError:
        return Problem(base + start, prefix, "a message", desc.name, f"nests fields more than {MAX_DEPTH} deep")
    return None


def _kind(field: _F | None, owner) -> str:
    if field is None:
        return f"unknown to {owner.name}" if owner is not None else "in a group"
    if field.type == _F.TYPE_MESSAGE:
        return "map entry" if field.message_type.GetOptions().map_entry else field.message_type.name
    return _TYPE_NAMES.get(field.type, "value")


def _wire_types(field: _F) -> tuple[int, ...]:
    """The wire types protobuf reads as ``field``'s value."""
    if field.type in _LENGTH:
        return (2,)
    own = 1 if field.type in _FIXED64 else 5 if field.type in _FIXED32 else 0
    return (own, 2) if field.is_repeated else (own,)


class _Walker:
    def __init__(self, buf, base: int, strict: bool) -> None:
        self.buf, self.base, self.strict, self.size = buf, base, strict, len(buf)

    def fail(self, at: int, path: str, label: tuple[str, str], what: str, end: int | None = None) -> _Found:
        """The problem of field ``label`` (what, type) at ``at``; ``end``: the end it overruns."""
        truncated = end is not None and end >= self.size
        return _Found(Problem(self.base + at, path, *label, what, truncated=truncated))

    def ends(self, end: int, path: str) -> str:
        """How the end a value overruns is named: the file's, or its enclosing message's."""
        if end >= self.size:
            return f"the file ends at byte {self.base + end}"
        where = f"its enclosing `{path}`" if path else "its message"
        return f"{where} ends at byte {self.base + end}"

    def varint(self, pos: int, end: int, at: int, path: str, field: tuple[str, str], encl: str,
               limit: int = 10) -> tuple[int, int]:
        """(value, position after it) of the varint at ``pos``."""
        try:
            return decode(self.buf, pos, end, limit)
        except VarintError as bad:
            if bad.kind == "short":
                raise self.fail(at, path, field, f"has a varint cut short: {self.ends(end, encl)}", end) from None
            raise self.fail(at, path, field, f"has a varint longer than {limit} bytes") from None

    def message(self, pos: int, end: int, desc, path: str, depth: int, group: int = 0,
                first_only: bool = False) -> int:
        """Walk the fields of ``buf[pos:end]`` (a group's until its end tag); the position after."""
        kind = desc.name if desc is not None else "group"
        if depth > MAX_DEPTH:
            raise self.fail(pos, path, ("a message", kind), f"is nested more than {MAX_DEPTH} levels deep")
        seen: dict[int, int] = {}
        key = None  # a map entry's key, once read (names the entry in paths)
        while pos < end:
            at = pos
            tag, pos = self.varint(pos, end, at, path, ("a tag", kind), path, limit=5)
            number, wt = tag >> 3, tag & 7
            if tag > 0xFFFFFFFF or number == 0 or number > _MAX_FIELD or wt in (6, 7):
                raise self.fail(at, path, ("a tag", kind), f"is invalid (field {number}, wire type {wt})")
            if wt == 4:
                if group and number == group:
                    return pos
                raise self.fail(at, path, ("a tag", kind), f"ends a group (field {number}) that was never started")
            field = desc.fields_by_number.get(number) if desc is not None else None
            label = (f"field {number}", _kind(field, desc))
            if field is not None and wt not in _wire_types(field):
                if self.strict:
                    want = " or ".join(_WIRE_NAMES[w] for w in _wire_types(field))
                    raise self.fail(at, _join(path, field, seen, key), label,
                                    f"has the wrong wire type ({_WIRE_NAMES[wt]}; {desc.name} declares {want})")
                label = (label[0], f"{label[1]} written as {_WIRE_NAMES[wt]}, so unknown")
                field = None  # protobuf keeps it as an unknown field
            name = _join(path, field, seen, key) if field is not None else f"{path}.{number}".lstrip(".")
            if wt == 0:
                value, pos = self.varint(pos, end, at, name, label, path)
                if field is not None and number == 1 and desc.GetOptions().map_entry:
                    key = value
            elif wt in (1, 5):
                size = 8 if wt == 1 else 4
                if end - pos < size:
                    raise self.fail(at, name, label, f"needs {size} bytes, but {self.ends(end, path)}", end)
                pos += size
            elif wt == 3:
                pos = self.message(pos, end, None, name, depth + 1, group=number)
            else:
                n, pos = self.varint(pos, end, at, name, label, path)
                if n > end - pos:
                    raise self.fail(at, name, label, f"is {n} bytes long, but {self.ends(end, path)}", end)
                if field is not None:
                    value = self.value(pos, pos + n, field, at, name, label, depth)
                    if number == 1 and desc.GetOptions().map_entry:
                        key = value
                pos += n
            if field is not None:
                seen[number] = seen.get(number, 0) + 1
            if first_only:
                return pos
        if group:
            raise self.fail(pos, path, ("a group", ""), f"never ends: {self.ends(end, path)}", end)
        return pos

    def value(self, s: int, e: int, field: _F, at: int, name: str, label: tuple[str, str], depth: int):
        """Check a length-delimited value; a string's text (a map key names its entry)."""
        buf = self.buf
        if field.type == _F.TYPE_MESSAGE:
            if not self.strict and _decodes(field.message_type, buf[s:e]):
                return None
            self.message(s, e, field.message_type, name, depth + 1)
        elif field.type == _F.TYPE_STRING:
            try:
                return bytes(buf[s:e]).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.fail(at, name, label, f"is not valid UTF-8 (byte {self.base + s + exc.start})") from None
        elif field.type == _F.TYPE_BYTES:
            return bytes(buf[s:e])
        elif field.type in _FIXED64 or field.type in _FIXED32:
            size = 8 if field.type in _FIXED64 else 4
            if (e - s) % size:
                raise self.fail(at, name, label, f"holds {e - s} bytes of packed {size}-byte numbers")
        else:
            pos = s
            while pos < e:
                _, pos = self.varint(pos, e, at, name, label, name)
        return None


def _join(path: str, field: _F, seen: dict[int, int], key) -> str:
    """``path.field``, with ``[i]`` for the i-th value of a repeated field, or ``[key]`` for a
    map entry once its key is known."""
    out = f"{path}.{field.name}" if path else field.name
    if field.is_repeated and not (field.message_type is not None and field.message_type.GetOptions().map_entry):
        out += f"[{seen.get(field.number, 0)}]"
    if key is not None and field.number == 2 and field.containing_type.GetOptions().map_entry:
        out = f"{path}[{key!r}]" if path else f"[{key!r}]"
    return out


def _decodes(desc, data) -> bool:
    """True when protobuf parses ``data`` as message ``desc``."""
    try:
        GetMessageClass(desc).FromString(bytes(data))
    except (_message.DecodeError, ValueError, RuntimeError):
        return False
    return True
