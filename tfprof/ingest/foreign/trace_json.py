"""Chrome-trace JSON (Kineto's ``.pt.trace.json``, plain or gzip) read into one Arrow table of raw events.

Fast path: one numba pass over the file's bytes (mapped, not read whole or copied) walks the
``traceEvents`` array, validating it, and notes where each event's fields lie; the columns are
gathered from those spans straight into Arrow buffers (``trace_columns``, ``kineto_events``), a
window of the file at a time, whose pages are dropped once gathered; only the rare event with
an escape or an unusual number is decoded by Python's ``json``. The reference path (the
reference engine) parses with Python's ``json``; both give the same table, ``args`` as compact
JSON text.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from tfprof import kernels
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.ingest.foreign import trace_columns
from tfprof.ingest.foreign.progress import Tell, silent
from tfprof.ingest.foreign.trace_layout import CUT, IN_STRING, MAX_DEPTH, NOT_OBJECT, OPEN, TOO_DEEP
from tfprof.ingest.sources import one_line

GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, which some tools write before JSON; skipped
# Top-level keys and categories that only PyTorch's Kineto writes: a Chrome trace with none of them is another tool's
KINETO_KEYS = ("schemaVersion", "baseTimeNanoseconds", "deviceProperties", "traceName")
KINETO_CATEGORIES = ("python_function", "user_annotation", "gpu_user_annotation", "cpu_instant_event", "cuda_runtime",
                     "cuda_driver", "ac2g", "fwdbwd")
# A gzipped trace inflates to at most INFLATE_RATIO times its size (at least INFLATE_FLOOR bytes)
# unless LIMIT_VARIABLE says otherwise: Kineto's JSON compresses about 15x, a bomb about 1000x.
LIMIT_VARIABLE = "TFPROF_MAX_INFLATED"
INFLATE_RATIO = 100
INFLATE_FLOOR = 64 << 20
_IN_PIECE = 1 << 16  # compressed bytes fed at a time
_NONZERO = re.compile(rb"[^\x00]")


def decompress(path: Path, data: bytes) -> bytes | bytearray:
    """``data``, gunzipped when it starts with gzip's magic bytes (every member of a multi-member
    file), a piece at a time: inflating past ``inflate_limit`` stops with an error naming the file."""
    if data[:len(GZIP_MAGIC)] != GZIP_MAGIC:
        return data
    limit, why = inflate_limit(len(data))
    out = bytearray()
    view, start = memoryview(data), 0
    try:
        while start < len(data):  # a member
            member, pos = zlib.decompressobj(16 + zlib.MAX_WBITS), start
            while not member.eof:
                if pos >= len(data):
                    raise EOFError("it ends inside the compressed data")
                piece = view[pos:pos + _IN_PIECE]
                pos += len(piece)
                while piece and not member.eof:  # at most the bytes left under the limit, then one more
                    out += member.decompress(piece, limit + 1 - len(out))
                    if len(out) > limit:
                        raise ProfileFormatError(f"`{path}` inflates to more than {_size(limit)}, {why}; if the file "
                                                 f"is genuine, set {LIMIT_VARIABLE} to a larger size (e.g. "
                                                 f"{LIMIT_VARIABLE}=16GB)")
                    piece = member.unconsumed_tail
            start = pos - len(member.unused_data)
            nonzero = _NONZERO.search(data, start)  # gzip allows zero padding after a member
            start = nonzero.start() if nonzero else len(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ProfileFormatError(
            f"`{path}` is not a complete gzip file ({one_line(str(exc))}); check that the file is complete"
        ) from None
    return out


def inflate_limit(compressed: int) -> tuple[int, str]:
    """The most bytes a gzipped trace of ``compressed`` bytes may inflate to, and what sets it:
    ``TFPROF_MAX_INFLATED`` when set, else ``INFLATE_RATIO`` times the compressed size, at least
    ``INFLATE_FLOOR`` (docs/SECURITY.md, 'Bad input from elsewhere')."""
    text = os.environ.get(LIMIT_VARIABLE, "").strip()
    if not text:
        return max(INFLATE_FLOOR, INFLATE_RATIO * compressed), (
            f"over {INFLATE_RATIO} times its size: far more than a Chrome trace compresses, so it is refused as a "
            "likely decompression bomb")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", text, re.IGNORECASE)
    if not match:
        raise OptionError(f"{LIMIT_VARIABLE}=`{text}` is not a size; give bytes or a size such as 500MB or 16GB")
    unit = (match[2] or "B").upper()
    scale = 1024 ** "BKMGT".index(unit[0]) if "I" in unit else 1000 ** "BKMGT".index(unit[0])
    return int(float(match[1]) * scale), f"the limit {LIMIT_VARIABLE} sets"


def _size(n: int) -> str:
    return f"{n:,} bytes" if n < 10_000 else f"{n / 1e6:,.1f} MB"


def _array_start(data) -> tuple[int, bool]:
    """(first byte inside the events array or -1, whether the file is the array form)."""
    head = bytes(data[:64])
    if head.lstrip().startswith(b"["):
        return head.index(b"[") + 1, True
    key = _find(data, b'"traceEvents"', 0)
    return (_find(data, b"[", key) + 1 if key >= 0 else -1), False


def _find(data, what: bytes, start: int) -> int:
    """``data.find(what, start)``, for a memoryview too (which has no ``find``)."""
    if not isinstance(data, memoryview):
        return data.find(what, start)
    found = re.compile(re.escape(what)).search(data, start)
    return found.start() if found else -1


def _whole(data) -> bytes | bytearray:
    """``data`` as ``json.loads`` takes it (a mapped file's view copied)."""
    return bytes(data) if isinstance(data, memoryview) else data


def _incomplete(path: Path, why: str) -> ProfileFormatError:
    return ProfileFormatError(f"`{path}` is not a complete Chrome trace ({why}); check that the file is complete")


def read_events(path: Path, data, tell: Tell = silent) -> tuple[dict, pa.Table]:
    """(the top-level object without its events, the events as a table: ``trace_columns.ORDER``).
    ``data``: the file's bytes or its ``mmap`` (``sources.read_mapped``), or a list holding
    them, which is emptied so that the bytes are freed as soon as the events' columns are
    gathered. A mapped file is read through a memoryview, a window of pages at a time, each
    dropped from memory once its events' columns are gathered (``_dropper``); a gzipped one is
    read whole. ``tell`` is told the share of the events array gathered, a window at a time."""
    if isinstance(data, list):
        data = data.pop()
    if isinstance(data, mmap.mmap) and data[:len(GZIP_MAGIC)] == GZIP_MAGIC:
        data = data[:]
    mapped = data if isinstance(data, mmap.mmap) else None
    if mapped is not None:
        data = memoryview(mapped)
    gzipped = data[:len(GZIP_MAGIC)] == GZIP_MAGIC
    data = decompress(path, data)
    skip = len(BOM) if data[:len(BOM)] == BOM else 0
    if skip:
        data = data[skip:]
    if not looks_like_json(data):
        raise ProfileFormatError(_not_json(path, data, gzipped))
    if not kernels.enabled():
        return _read_reference(path, data)
    start, array_form = _array_start(data)
    if start <= 0:
        raise ProfileFormatError(_no_events_array(path, data))
    if array_form and bytes(data[start:start + 64]).lstrip()[:1] not in (b"{", b"]"):
        raise ProfileFormatError(_not_events(path, data))
    body = np.frombuffer(data, dtype=np.uint8)
    drop, size = _dropper(mapped, skip) if mapped is not None else None, len(body)

    def release(lo: int, hi: int) -> None:
        if drop is not None:
            drop(lo, hi)
        tell(hi / size, "events")

    origin = trace_columns.origin_of(data, start)
    status, end, table = trace_columns.scanned_table(path, body, start, array_form, release, origin)
    del body
    if table is None or status == OPEN:
        # a Chrome trace in array form may leave its array open (the format allows it); a cut event may not
        if not (table is not None and array_form and bytes(data[-64:]).rstrip()[-1:] in (b"}", b",")):
            raise _scan_error(path, data, status, end, array_form)
        end = len(data)
    top = {} if array_form else _top_level(path, data, start, end)
    return top, table


def _dropper(mapped: mmap.mmap, skip: int):
    """A function that drops the pages of ``mapped`` that hold only bytes ``lo`` to ``hi`` (from
    ``skip``) and before from memory: they are the file's, read again should they be touched."""
    page = mmap.PAGESIZE
    if not hasattr(mmap, "MADV_DONTNEED"):
        return None

    def release(lo: int, hi: int) -> None:
        first, last = (skip + lo) // page * page, (skip + hi) // page * page
        if last > first:
            mapped.madvise(mmap.MADV_DONTNEED, first, last - first)

    return release


def _scan_error(path: Path, data, status: int, end: int, array_form: bool) -> ProfileFormatError:
    if status == IN_STRING:
        return _incomplete(path, "it ends inside a string")
    if status in (CUT, OPEN):
        return _incomplete(path, "it ends before the events array does")
    if status == NOT_OBJECT and array_form and not bytes(data[:end]).strip(b"[ \t\r\n\xef\xbb\xbf"):
        return ProfileFormatError(_not_events(path, data))
    if status == NOT_OBJECT:
        return ProfileFormatError(f"`{path}` is not a valid Chrome trace (an item of its `traceEvents` at byte "
                                  f"{end:,} is not an event object)")
    if status == TOO_DEEP:
        return ProfileFormatError(f"`{path}` is not a valid Chrome trace (JSON nested deeper than {MAX_DEPTH} "
                                  f"levels at byte {end:,})")
    near = one_line(bytes(data[end:end + 24]).decode("utf-8", "replace"))
    return ProfileFormatError(f"`{path}` is not a valid Chrome trace (invalid JSON at byte {end:,}: `{near}`)")


def _read_reference(path: Path, data) -> tuple[dict, pa.Table]:
    """``read_events`` with Python's json (the reference engine)."""
    start, _ = _array_start(data)
    origin = trace_columns.origin_of(data, start) if start > 0 else 0
    try:
        doc = json.loads(_whole(data), parse_float=trace_columns.Number if origin else None)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _incomplete(path, one_line(str(exc))) from None
    top, events = ({}, doc) if isinstance(doc, list) else (doc, doc.get("traceEvents") if isinstance(doc, dict) else None)
    if not isinstance(events, list):
        raise ProfileFormatError(_no_events_array(path, data))
    if isinstance(doc, list) and events and not isinstance(events[0], dict):
        raise ProfileFormatError(_not_events(path, data))
    top = {k: v for k, v in top.items() if k != "traceEvents"}
    return top, trace_columns.reference_table(path, events, origin)


def _top_level(path: Path, data: bytes, start: int, end: int) -> dict:
    """The top-level object with an empty events array (Kineto's options, base time, …)."""
    try:
        top = json.loads(bytes(data[:start]) + bytes(data[end:]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _incomplete(path, one_line(str(exc))) from None
    if not isinstance(top, dict):
        raise ProfileFormatError(f"`{path}` is not a Chrome trace: the top level is not an object")
    return top


def _not_json(path: Path, data: bytes | bytearray, gzipped: bool) -> str:
    """Why a gzip file holds no Chrome trace: an XSpace inside is named as one."""
    from tfprof.ingest.foreign import xcheck

    if gzipped and xcheck.looks_like_xspace(bytes(data[:1 << 16]), len(data) <= 1 << 16):
        return (f"`{path}` is a gzip-compressed {xcheck.WHAT[3:]}; tfprof reads an XSpace as the profiler writes it "
                "(`.xplane.pb`): gunzip it first")
    start = one_line(bytes(data[:24]).decode("utf-8", "replace"))
    return (f"`{path}` is gzip-compressed, but what it holds is not JSON (a Chrome trace such as PyTorch's Kineto "
            f"trace): it starts with `{start}`; {_EXPECTED}")


_EXPECTED = "pass a ProfileProto, a PyTorch (Kineto) trace or an XSpace file as --profile_path"


def _no_events_array(path: Path, data: bytes | bytearray) -> str:
    """The message for JSON that has no ``traceEvents`` array, naming its top-level keys when they are cheap to find."""
    keys = ""
    if len(data) <= 16 << 20:
        try:
            doc = json.loads(_whole(data))
        except (ValueError, UnicodeDecodeError):
            doc = None
        if isinstance(doc, dict) and doc:
            names = sorted(doc)
            keys = f"; its top-level keys: {one_line(', '.join(names[:10]))}{' …' if len(names) > 10 else ''}"
    return (f"`{path}` is not a valid ProfileProto (it is JSON text) nor a Chrome trace (it has no `traceEvents` "
            f"array{keys}); {_EXPECTED}")


def _not_events(path: Path, data: bytes | bytearray) -> str:
    start = one_line(bytes(data[:24]).decode("utf-8", "replace"))
    return (f"`{path}` is not a valid ProfileProto (it is JSON text) nor a Chrome trace (a JSON array, but its items "
            f"are not event objects: it starts with `{start}`); {_EXPECTED}")


def without_ops(path: Path, top: dict, categories, events: int, op_categories) -> str:
    """The message for a Chrome trace with no op event: an idle Kineto trace, or another tool's trace
    (no Kineto key or category). ``categories``: the events' ``cat`` column (a polars Series)."""
    found = sorted(categories.drop_nulls().unique().to_list())
    listed = ", ".join(one_line(str(c)) for c in found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
    wanted = ", ".join(op_categories)
    if any(k in top for k in KINETO_KEYS) or set(found) & set(KINETO_CATEGORIES):
        return (f"`{path}` is a PyTorch (Kineto) trace without op events (no event with `cat` {wanted}; it has "
                f"{listed or 'none'}); did the profiler record an active step with the model running?")
    has = f"its categories: {listed}" if found else "none has a `cat`"
    return (f"`{path}` is a Chrome trace (JSON), but not a PyTorch (Kineto) trace: it has no op events (none of its "
            f"{events:,} events has `cat` {wanted}; {has}); tfprof reads torch.profiler's export_chrome_trace files")


def looks_like_json(data: bytes | bytearray) -> bool:
    """True when ``data`` (not gzipped) starts as a JSON object or array (after a BOM and whitespace)."""
    head = bytes(data[:64])
    return (head[len(BOM):] if head.startswith(BOM) else head).lstrip()[:1] in (b"{", b"[")


def looks_like_trace(data: bytes) -> bool:
    """True when ``data`` (maybe gzipped) starts like Chrome-trace JSON: an array of objects, or an
    object with a ``traceEvents`` key near the top."""
    if data.startswith(GZIP_MAGIC):
        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:65536], 8192)
        except zlib.error:
            return False
    head = data[:8192]
    head = (head[len(BOM):] if head.startswith(BOM) else head).lstrip()
    if head.startswith(b"["):
        return head[1:].lstrip()[:1] in (b"{", b"]", b"")
    return head.startswith(b"{") and b'"traceEvents"' in data[:1 << 20]
