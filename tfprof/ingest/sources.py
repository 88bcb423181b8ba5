"""Reading input files and parsing them as the protobuf message they claim to be.

Every failure becomes a one-line ``InputError`` that names the file, what is wrong with it and
what to do. Files are only ever opened for reading.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import TypeVar

from google.protobuf import message as _message
from google.protobuf import text_format

from tfprof.errors import InputError, InputNotFoundError, ProfileFormatError

M = TypeVar("M", bound=_message.Message)

# What each input is called in messages, and the flag that passes it.
KINDS = {
    "graph": ("GraphDef", "--graph_path"),
    "run_meta": ("RunMetadata", "--run_meta_path"),
    "op_log": ("OpLogProto", "--op_log_path"),
    "profile": ("ProfileProto", "--profile_path"),
}


def in_memory(source: object) -> bool:
    """True for an input given in memory: bytes, or a protobuf message (ours or TensorFlow's)."""
    return isinstance(source, (bytes, bytearray, memoryview)) or (
        hasattr(source, "SerializeToString") and hasattr(source, "DESCRIPTOR")
    )


def _memory_bytes(source: object, what: str) -> bytes:
    # A message of another kind would parse into nonsense: check its type by name, so that
    # TensorFlow's own classes (package `tensorflow`) are accepted as well as ours.
    # An empty input parses as an empty message, which the readers' checks then reject.
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if source.DESCRIPTOR.name != what:
        raise InputError(f"expected a {what} message, got a `{source.DESCRIPTOR.full_name}`")
    return source.SerializeToString()


def read_bytes(path: str | os.PathLike | bytes | _message.Message, kind: str) -> bytes:
    """The bytes of ``path``, a file, or of an input given in memory (bytes or a message); a
    missing, unreadable or empty input raises an ``InputError``."""
    what, flag = KINDS.get(kind, (kind, "the input"))
    if in_memory(path):
        return _memory_bytes(path, what)
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"a {what} is given as a path, bytes or a protobuf message, not a `{type(path).__name__}`")
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError.given_as(p, flag)
    if p.is_dir():
        raise ProfileFormatError(f"`{p}` is a directory, expected a {what} file (given as {flag})")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ProfileFormatError(f"`{p}` cannot be read: {exc.strerror or exc}") from None
    if not data:
        raise ProfileFormatError(f"`{p}` is empty, expected a {what} file (given as {flag})")
    return data


def read_mapped(path: str | os.PathLike | bytes | _message.Message, kind: str) -> bytes | mmap.mmap:
    """``read_bytes``, but a file is mapped read-only (``mmap``) rather than read whole: its pages
    are read as they are touched, and a reader that goes through it once may drop them behind it.
    An input given in memory, or a file that cannot be mapped, is read as ``read_bytes`` reads it."""
    if in_memory(path) or not isinstance(path, (str, os.PathLike)) or not Path(path).is_file():
        return read_bytes(path, kind)
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        pass
    return read_bytes(path, kind)


def parse_binary(cls: type[M], data: bytes) -> M | None:
    """Parse ``data`` as binary ``cls``; None when it is not valid wire format."""
    msg = cls()
    try:
        msg.ParseFromString(data)
    except (_message.DecodeError, ValueError, RuntimeError):
        return None
    return msg


def parse_text(cls: type[M], data: bytes) -> M | None:
    """Parse ``data`` as text-format ``cls``; None when it is not valid text format for it."""
    return _parse_text(cls, data)[0]


def _parse_text(cls: type[M], data: bytes) -> tuple[M | None, str]:
    """(message, "") or (None, where and why the text does not parse)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, f"text format, line {line} column {column}: byte {exc.start} is not UTF-8"
    msg = cls()
    try:
        # Fields we do not declare (function library, debug info) are skipped, not errors.
        text_format.Parse(text, msg, allow_unknown_field=True)
    except text_format.ParseError as exc:
        return None, _text_problem(exc, text)
    except RecursionError:
        return None, "text format: messages nested too deep"
    except (ValueError, RuntimeError) as exc:
        return None, f"text format: {one_line(str(exc))}"
    return msg, ""


def _text_problem(exc: text_format.ParseError, text: str) -> str:
    """``line L column C: message`` from protobuf's ``L:C : 'the line': message``."""
    line, column, message = exc.GetLine(), exc.GetColumn(), str(exc)
    if line is None:
        return f"text format: {one_line(message)}"
    message = message.split(" : ", 1)[1] if " : " in message else message
    previous = not message.startswith("'")  # about the token before the current one (else: the current)
    if message.startswith("'': ") or (previous and column is not None and _last_token(text, line, column)):
        # the text ran out (protobuf points at the last token it read): say where it ends
        end_line, end_column = text.count("\n") + 1, len(text) - text.rfind("\n")
        message = message[4:] if message.startswith("'': ") else message
        return f"text format, line {end_line} column {end_column}: the text ends here: {one_line(message)}"
    lines = text.splitlines()
    quoted = f"'{lines[line - 1]}': " if 0 < line <= len(lines) else None
    if quoted and message.startswith(quoted):
        message = message[len(quoted):]
    elif message.startswith("'") and "': " in message:  # the tokenizer's line, e.g. '' at the end
        message = message.split("': ", 1)[1]
    where = f"line {line} column {column}" if column is not None else f"line {line}"
    return f"text format, {where}: {one_line(message)}"


def _last_token(text: str, line: int, column: int) -> bool:
    """True when nothing but one token follows line ``line``, column ``column`` of ``text``."""
    lines = text.split("\n")
    if not 0 < line <= len(lines):
        return False
    rest = text[sum(len(s) + 1 for s in lines[: line - 1]) + column - 1:].strip()
    quoted = len(rest) > 1 and rest[0] in "\"'" and rest[-1] == rest[0] and "\n" not in rest
    return not rest or quoted or not any(c.isspace() for c in rest)


def one_line(text: str, limit: int = 160) -> str:
    """``text`` on one line of printable characters, cut at ``limit`` characters."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def binary_problem(cls: type[M], data: bytes) -> str:
    """Where and why ``data`` does not decode as binary ``cls`` (see ``tfprof.ingest.locate``)."""
    from tfprof.ingest.locate import locate

    problem = locate(data, cls)
    return str(problem) if problem is not None else "protobuf cannot decode it as wire format"


def parse(cls: type[M], data: bytes, path, kind: str, *, text_first: bool = False, plausible=None) -> M:
    """``data`` parsed as ``cls``, or the ``damaged`` error saying where it fails.

    ``text_first``: text format is tried first (when the bytes look like text), then binary, as
    tfprof reads a GraphDef; otherwise binary first, then text when the binary parse fails or
    gives a message ``plausible`` rejects (another kind of file can parse as wire format).
    A file that looks like text is reported as text (line and column), others as binary (the
    failing field and its byte offset).
    """
    text = looks_like_text(data)
    msg, text_error = _parse_text(cls, data) if text and text_first else (None, "")
    if msg is None:
        msg = parse_binary(cls, data)
    if not text_first and text and (msg is None or (plausible is not None and not plausible(msg))):
        msg, text_error = _parse_text(cls, data)
    if msg is not None:
        return msg
    if not text_error and mostly_text(data):  # text with a stray byte: said as text, line and column
        text_error = _parse_text(cls, data)[1]
    raise damaged(path, kind, text_error or binary_problem(cls, data))


REPLACEMENT = "\ufffd".encode()  # EF BF BD: what a UTF-8 text conversion writes for each byte that is not text
MIN_REPLACEMENTS = 3  # in a genuine binary file the three bytes come by chance about once in 16 MB
MIN_REPLACED_SHARE = 0.01  # of the bytes looked at: a JSON trace naming a few U+FFFD is no rewritten binary


def said_if_rewritten(exc: ProfileFormatError, paths) -> ProfileFormatError:
    """``exc`` (a file of ``paths`` did not read), or, when the file it names was saved as text
    (``rewritten_as_text``), the error that says so: what failed to decode is then beside the
    point."""
    for path in paths:
        if not isinstance(path, (str, os.PathLike)) or not path or f"`{path}`" not in str(exc):
            continue
        try:
            with open(path, "rb") as f:
                why = rewritten_as_text(f.read(1 << 20))
        except OSError:
            continue
        if why is not None:
            return ProfileFormatError(f"`{path}` cannot be read: {why}")
    return exc


def rewritten_as_text(data: bytes) -> str | None:
    """Why a binary file that does not decode is damaged, when its first MB holds the mark of a
    text conversion (``REPLACEMENT`` at least ``MIN_REPLACEMENTS`` times, making up at least
    ``MIN_REPLACED_SHARE`` of those bytes) and its head is not text (``looks_like_text``): the
    file was saved as text (a web page's text view, an editor, a text-mode copy), which replaced
    every byte that was not UTF-8 and cannot be undone; None otherwise."""
    head = data[:1 << 20]
    found = head.count(REPLACEMENT)
    if found < MIN_REPLACEMENTS or 3 * found < MIN_REPLACED_SHARE * len(head):
        return None
    if looks_like_text(head):
        return None  # no control byte: text (a trace naming U+FFFD), which a conversion loses nothing of
    return (f"it was saved as text: {found:,} places in its first MB hold the bytes EF BF BD (U+FFFD), which a "
            "text conversion writes where a binary file's bytes are not text, and the original bytes are lost; "
            "get the file again as raw bytes (a raw download, not a page's text)")


def looks_like_text(data: bytes) -> bool:
    """True when ``data`` is printable UTF-8 text (a text-format proto), not binary wire format."""
    head = data[:4096]
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the 4096 boundary is still text.
        if exc.start < len(head) - 4:
            return False
    return all(b >= 0x20 or b in b"\t\n\r\f\v" for b in head)


def mostly_text(data: bytes) -> bool:
    """True when nearly every byte of the head of ``data`` is printable ASCII or white space:
    a text file with a few stray bytes, rather than wire format."""
    head = data[:4096]
    printable = sum(head.count(bytes([b])) for b in range(0x20, 0x7F)) + sum(head.count(c) for c in b"\t\n\r")
    return printable >= 0.95 * len(head)


def damaged(path: str | os.PathLike, kind: str, problem: str) -> ProfileFormatError:
    """The error for a file that is not a valid ``kind`` (named as the flag that passed it)."""
    what, flag = KINDS[kind]
    if in_memory(path):
        return ProfileFormatError(f"the {what} given in memory is not valid ({problem})")
    article = "an" if what[0] in "AEIOU" else "a"
    return ProfileFormatError(
        f"`{path}` is not a valid {what} ({problem}); pass {article} {what} file as {flag}, "
        "and check that the file is complete"
    )
