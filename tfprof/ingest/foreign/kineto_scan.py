"""One numba pass over a Chrome trace's ``traceEvents`` array, in place over the file's bytes.

``scan`` walks the array once, validating the JSON as it goes, and notes for each event where
the values the readers use lie (``SLOTS``: the event's string fields, its ``args`` object, and
the few args keys Kineto's reader looks up), as byte spans relative to the event's start, and
``ts``/``dur`` as float64. Every span it keeps is already the text both paths give: a string's
characters, or a number, ``true`` or ``false`` written as Python's ``json.dumps`` writes it; an
``args`` object is kept as its bytes with the whitespace outside strings dropped (``MINIFY``),
which is ``json.dumps(args, separators=(",", ":"), ensure_ascii=False)`` when its numbers and
strings are canonical. An event with anything else (a backslash escape, a number written
another way, a ``ts`` that is a string, an exact-decimal miss) is flagged ``PYTHON``: the
caller decodes those few with Python's ``json``. A number is parsed into an integer mantissa
and divided or multiplied by an exact power of ten: when the mantissa is below 2**53 and the
power at most 22, that one IEEE operation is correctly rounded, so the value is Python's
``float`` of the same text; otherwise the event goes to Python.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.foreign.trace_layout import (  # noqa: F401 (kineto_events takes them from here)
    ARG_KEYS,
    ARGS,
    BAD,
    CUT,
    FIELDS,
    IN_STRING,
    MAX_DEPTH,
    MINIFY,
    NON_ASCII,
    NOT_OBJECT,
    OK,
    OPEN,
    PYTHON,
    SLOTS,
    SPLIT,
    TOO_DEEP,
)

TS, DUR = 100, 101  # key codes of the two number fields


def _table(words):
    width = max(len(w) for w in words)
    out = np.zeros((len(words), width), np.uint8)
    for k, w in enumerate(words):
        out[k, :len(w)] = np.frombuffer(w.encode(), np.uint8)
    return out, np.array([len(w) for w in words], np.int64)


EVENT_KEYS, EVENT_LENS = _table([*FIELDS, "args", "ts", "dur"])
EVENT_CODES = np.array([*range(len(FIELDS) + 1), TS, DUR], np.int64)
ARG_TABLE, ARG_LENS = _table(list(ARG_KEYS))
LITERALS, LITERAL_LENS = _table(["true", "false", "null", "NaN", "Infinity"])
STRING_BYTES = np.zeros(256, np.uint8)  # inside a string: 0 plain, 1 quote, 2 backslash, 3 control, 4 non-ASCII
STRING_BYTES[34], STRING_BYTES[92], STRING_BYTES[:32], STRING_BYTES[128:] = 1, 2, 3, 4
_POW10 = np.array([10.0 ** k for k in range(23)])


@njit(cache=True, nogil=True)
def grow(a, size):
    """``a`` copied into a new array of ``size`` rows (its other dimensions kept), the rest unset."""
    out = np.empty((size,) + a.shape[1:], a.dtype)
    out[:len(a)] = a
    return out


@njit(cache=True, nogil=True)
def lookup(buf, s, e, keys, lens):
    """The row of ``keys`` equal to ``buf[s:e]``, or -1."""
    for k in range(len(lens)):
        if lens[k] != e - s:
            continue
        same = True
        for j in range(e - s):
            if buf[s + j] != keys[k, j]:
                same = False
                break
        if same:
            return k
    return -1


@njit(cache=True, nogil=True)
def ws(buf, i, n):
    while i < n:
        c = buf[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            break
        i += 1
    return i


@njit(cache=True, nogil=True)
def string(buf, i, n):
    """``buf[i]`` is a quote: (the index after the closing quote, flags); the index is IN_STRING
    when the bytes end first, BAD at a raw control character (strict JSON refuses one)."""
    flags = 0
    i += 1
    while i < n:
        c = buf[i]
        kind = STRING_BYTES[c]
        if kind == 0:
            i += 1
            continue
        if kind == 1:
            return i + 1, flags
        if kind == 2:
            flags |= PYTHON
            i += 2
            continue
        if kind == 3:
            return BAD, flags
        flags |= NON_ASCII
        i += 1
    return IN_STRING, flags


@njit(cache=True, nogil=True)
def literal(buf, i, n):
    """A ``true``, ``false``, ``null``, ``NaN`` or ``Infinity`` at ``i``: (its end, which: 1 true,
    2 false, 3 null, 4 NaN, 5 Infinity), or (BAD/CUT, 0)."""
    kind = -1
    c = buf[i]
    for k in range(len(LITERAL_LENS)):
        if LITERALS[k, 0] == c:
            kind = k
            break
    if kind < 0:
        return BAD, 0
    size = LITERAL_LENS[kind]
    for j in range(size):
        if i + j >= n:
            return CUT, 0
        if buf[i + j] != LITERALS[kind, j]:
            return BAD, 0
    return i + size, kind + 1


@njit(cache=True, nogil=True)
def number(buf, i, n):
    """A JSON number (or ``-Infinity``) at ``i``: (end, value, exact, canonical); end is BAD or CUT
    when it is not one. ``exact``: ``value`` is Python's float of the text; ``canonical``: the text
    is what ``json.dumps`` writes for the value ``json.loads`` gives."""
    neg = buf[i] == 45
    if neg:
        i += 1
        if i < n and buf[i] == 73:
            end, kind = literal(buf, i, n)
            if kind != 5:
                return (end if end < 0 else BAD), 0.0, False, False
            return end, -np.inf, True, True
    if i >= n:
        return CUT, 0.0, False, False
    if buf[i] < 48 or buf[i] > 57:
        return BAD, 0.0, False, False
    mant, sig, frac, lead, int_digits = 0, 0, 0, 0, 0
    zero_int = buf[i] == 48
    while i < n and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        if sig > 0 or d:
            sig += 1
            if sig <= 19:
                mant = mant * 10 + d
        int_digits += 1
        i += 1
    if zero_int and int_digits > 1:
        return BAD, 0.0, False, False
    has_frac, last_zero, exp = False, False, 0
    if i < n and buf[i] == 46:
        has_frac = True
        i += 1
        start = i
        while i < n and 48 <= buf[i] <= 57:
            d = buf[i] - 48
            if sig > 0 or d:
                sig += 1
                if sig <= 19:
                    mant = mant * 10 + d
            elif zero_int:
                lead += 1
            frac += 1
            last_zero = d == 0
            i += 1
        if i == start:
            return (CUT if i >= n else BAD), 0.0, False, False
    has_exp = False
    if i < n and (buf[i] == 101 or buf[i] == 69):
        has_exp = True
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        start = i
        while i < n and 48 <= buf[i] <= 57:
            if exp < 100000:
                exp = exp * 10 + buf[i] - 48
            i += 1
        if i == start:
            return (CUT if i >= n else BAD), 0.0, False, False
        if eneg:
            exp = -exp
    if i >= n:
        return CUT, 0.0, False, False  # a number is never the last byte of a trace
    if has_exp:
        canonical = False
    elif has_frac:
        # repr's digits: at most 15 significant, no trailing zero but `X.0`, fixed notation from 1e-4
        canonical = sig <= 15 and not (last_zero and frac > 1) and (mant == 0 or not zero_int or lead < 4)
    else:
        canonical = not (neg and mant == 0) and sig <= 18  # a longer one may be beyond 64 bits
    power = exp - frac
    while mant > 9007199254740992 and power < 0 and mant % 10 == 0:  # `…325.0`: trailing zeros
        mant //= 10
        power += 1
    exact = sig <= 19 and mant <= 9007199254740992 and -22 <= power <= 22 and not (neg and mant == 0)
    value = 0.0
    if exact:
        value = mant * _POW10[power] if power >= 0 else mant / _POW10[-power]
        if neg:
            value = -value
    return i, value, exact, canonical


@njit(cache=True, nogil=True)
def shifted(buf, i, e, origin):
    """(whether read, the value) of the number ``buf[i:e]``, µs, less ``origin`` µs, worked out
    in whole ns so that the float of the difference holds them exactly: a float of an epoch time
    in µs (16 digits before the point) cannot hold its 3 decimals. Not read (Python's ``json``
    decodes it instead): an exponent, a fourth decimal that is not 0, more than 9e15 µs."""
    neg = buf[i] == 45
    if neg:
        i += 1
    whole = 0
    while i < e and 48 <= buf[i] <= 57:
        if whole > 900000000000000:
            return False, 0.0
        whole = whole * 10 + buf[i] - 48
        i += 1
    ns = whole * 1000
    if i < e and buf[i] == 46:
        i += 1
        scale = 100
        while i < e and 48 <= buf[i] <= 57:
            if scale == 0 and buf[i] != 48:
                return False, 0.0
            ns += (buf[i] - 48) * scale
            scale //= 10
            i += 1
    if i != e:
        return False, 0.0
    return True, ((-ns if neg else ns) - origin * 1000) / 1000.0


@njit(cache=True, nogil=True)
def key_hash(buf, s, e):
    """FNV-1a of ``buf[s:e]``: equal keys hash equal (a collision only sends an event to Python)."""
    h = np.uint64(14695981039346656037)
    for j in range(s, e):
        h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
    return h


@njit(cache=True, nogil=True)
def container(buf, i, n, stack, starts, hashes, evstart, rel, ln, row, capture):
    """Walk the object or array at ``i`` to its end: (end or a status, flags). With ``capture``
    (an ``args`` object), its top-level ``ARG_KEYS`` values are noted in slots 9-17 of ``row``,
    and an object at any depth that repeats a key is flagged ``PYTHON``: Python's ``json`` keeps
    the last value in the first one's place, so the bytes are not the text. ``hashes[:top]`` holds
    the key hashes of the open objects, the one open at depth ``d`` from ``starts[d]``; more keys
    than ``hashes`` holds also go to Python. ``want``: 0 a value, 1 a key or ``}``, 2 a key, 3 ``:``,
    4 ``,`` or a closer, 5 a value or ``]``."""
    flags = 0
    depth = 0
    top = 0
    key = -1
    want = 0
    while i < n:
        c = buf[i]
        if c == 32 or c == 10 or c == 13 or c == 9:
            flags |= MINIFY
            i += 1
            continue
        if want == 4:
            if c == 44:
                want = 2 if stack[depth - 1] == 1 else 0
                i += 1
                continue
            if c == 125 or c == 93:
                if (c == 125) != (stack[depth - 1] == 1):
                    return BAD, flags
                depth -= 1
                top = starts[depth]
                i += 1
                if depth == 0:
                    return i, flags
                continue
            return BAD, flags
        if want == 3:
            if c != 58:
                return BAD, flags
            want = 0
            i += 1
            continue
        if c == 34:
            end, sflags = string(buf, i, n)
            if end < 0:
                return end, flags
            flags |= sflags
            if want == 1 or want == 2:
                key = lookup(buf, i + 1, end - 1, ARG_TABLE, ARG_LENS) if capture and depth == 1 else -1
                if capture:
                    h = key_hash(buf, i + 1, end - 1)
                    for j in range(starts[depth - 1], top):
                        if hashes[j] == h:
                            flags |= PYTHON
                            break
                    if top < len(hashes):
                        hashes[top] = h
                        top += 1
                    else:
                        flags |= PYTHON
                want = 3
            else:
                if key >= 0 and depth == 1:
                    rel[row, 9 + key] = i + 1 - evstart
                    ln[row, 9 + key] = end - 2 - i
                key = -1
                want = 4
            i = end
            continue
        if want == 1 or want == 2:
            if c == 125 and want == 1:
                depth -= 1
                top = starts[depth]
                i += 1
                if depth == 0:
                    return i, flags
                want = 4
                continue
            return BAD, flags
        # a value (want 0 or 5)
        if c == 123 or c == 91:
            if depth >= MAX_DEPTH:
                return TOO_DEEP, flags
            if key >= 0 and depth == 1:
                flags |= PYTHON
            key = -1
            stack[depth] = 1 if c == 123 else 2
            starts[depth] = top
            depth += 1
            i += 1
            want = 1 if c == 123 else 5
            continue
        if c == 93 and want == 5:
            depth -= 1
            top = starts[depth]
            i += 1
            if depth == 0:
                return i, flags
            want = 4
            continue
        if c == 45 or 48 <= c <= 57:
            end, value, exact, canonical = number(buf, i, n)
            if end < 0:
                return end, flags
            if not canonical:
                flags |= PYTHON
            kind = 0
        else:
            end, kind = literal(buf, i, n)
            if end < 0:
                return end, flags
        if key >= 0 and depth == 1:
            if kind <= 2:
                rel[row, 9 + key] = i - evstart
                ln[row, 9 + key] = end - i
            elif kind > 3:
                flags |= PYTHON
        key = -1
        i = end
        want = 4
    return CUT, flags
