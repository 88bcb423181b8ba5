"""Wire-format primitives shared by every kernel: varints, tags, lengths, fields checked against
a table of wire types, map entries, packed numbers, UTF-8.

Errors are negative positions: a function that returns a position (or a range's start) returns
one of the ``_E_*`` codes of ``errors.py`` instead when the bytes are damaged.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof import varint
from tfprof.ingest.wire.errors import E_LENGTH, E_MISMATCH, E_UNUSUAL, E_VARINT, E_WIRE

# ================================================================================ field table

# The wire type of each field the kernels read, by message (tfprof_log.proto): ``read_field`` checks
# it, and a known field with another wire type is an error (``E_MISMATCH``). Fields not listed
# may be anything and are skipped.
_ANY, _VARINT, _LD, _PACKED = -1, 0, 2, 8  # _PACKED: a repeated number, packed (2) or not (0)
UNCHECKED = -1  # as a message: the fill kernel reads bytes the count kernel has checked
(W_PROFILE, W_NODE_NAME, W_NODE, W_CODE_DEF, W_TRACE, W_EXEC, W_EXEC_TIME, W_TUPLE, W_MEMORY,
 W_TWO_NUMBERS) = range(10)
_MESSAGES = {
    # ProfileProto: nodes (map), has_trace, steps, id_to_string (map), miss_accelerator_stream
    W_PROFILE: {1: _LD, 2: _VARINT, 3: _PACKED, 4: _LD, 5: _VARINT},
    W_NODE_NAME: {1: _LD},  # ProfileNode as the scan reads it: only the name
    # ProfileNode: every field up to 16 is a string, message or map but shape, float_ops and id
    W_NODE: {**{f: _LD for f in range(1, 17)}, 4: _PACKED, 8: _VARINT, 13: _VARINT},
    W_CODE_DEF: {1: _LD},  # traces
    # CodeDef.Trace: file, function, line (inline strings); lineno, func_start_line, *_id
    W_TRACE: {1: _LD, 3: _LD, 4: _LD, 2: _VARINT, 5: _VARINT, 6: _VARINT, 7: _VARINT, 8: _VARINT},
    # ExecProfile: run_count, all_start_micros, latest_end_micros; accelerator_execs, cpu_execs
    # (maps), devices, memory_execs, allocations
    W_EXEC: {1: _VARINT, 2: _VARINT, 3: _VARINT, 4: _LD, 5: _LD, 6: _LD, 7: _LD, 11: _LD},
    W_EXEC_TIME: {1: _LD},  # times
    W_TUPLE: {1: _PACKED},  # int64_values
    W_MEMORY: {**{f: _VARINT for f in range(1, 11)}, 11: _LD},  # ExecMemory: 10 numbers, output_memory
    # Memory (output_memory's values): bytes, ptr; AllocationRecord: alloc_micros, alloc_bytes
    W_TWO_NUMBERS: {1: _VARINT, 2: _VARINT},
}


def _wire_types() -> np.ndarray:
    table = np.full((len(_MESSAGES), 17), _ANY, np.int64)
    for msg, fields in _MESSAGES.items():
        for f, wt in fields.items():
            table[msg, f] = wt
    return table


_WT = _wire_types()


# ================================================================================ primitives


read_varint = varint.read  # (value, new pos); new pos E_VARINT (< 0) on a truncated or over-long varint


@njit(cache=True, _nrt=False)
def read_tag(buf, pos, end):
    """(field, wire type, new pos); new pos < 0 on a bad tag."""
    t, pos = read_varint(buf, pos, end)
    if pos < 0:
        return 0, 0, pos
    if t >> 32 or (t >> 3) == 0:
        return 0, 0, E_WIRE
    return t >> 3, t & 7, pos


@njit(cache=True, _nrt=False)
def read_len(buf, pos, end):
    """(payload start, payload end) of a length-delimited field; start < 0 on error."""
    n, pos = read_varint(buf, pos, end)
    if pos < 0:
        return pos, 0
    if n < 0 or n > end - pos:
        return E_LENGTH, 0
    return pos, pos + n


@njit(cache=True, _nrt=False)
def skip(buf, pos, end, wt, field):
    """Position after a field's value; < 0 when it is damaged."""
    if wt == 0:
        for k in range(10):
            if pos + k >= end:
                return E_VARINT
            if buf[pos + k] < 0x80:
                return pos + k + 1
        return E_VARINT
    if wt == 1:
        return pos + 8 if end - pos >= 8 else E_LENGTH
    if wt == 2:
        s, e = read_len(buf, pos, end)
        return e if s >= 0 else s
    if wt == 5:
        return pos + 4 if end - pos >= 4 else E_LENGTH
    if wt == 3:
        return E_UNUSUAL  # a (deprecated) group: protobuf itself decides, see Unusual
    return E_WIRE


@njit(cache=True, _nrt=False, inline="always")
def read_field(buf, pos, end, msg):
    """The field at ``pos`` of a message ``msg`` (``W_*``; ``UNCHECKED``: bytes the count kernel
    has checked): (field, wire type, varint value, payload start, payload end, next pos).

    A varint comes back as its value, a length-delimited field as its payload's range, anything
    else is skipped; next pos < 0 when the field is damaged or has the wrong wire type. Inlined
    everywhere: it reads every field of the file.
    """
    b = np.int64(buf[pos]) if pos < end else np.int64(0)
    if 8 <= b < 0x80:  # a one-byte tag (fields 1-15), decoded in line
        f = b >> 3
        wt = b & 7
        p = pos + 1
    else:
        f, wt, p = read_tag(buf, pos, end)
    if msg != UNCHECKED and p >= 0 and f < _WT.shape[1]:
        want = _WT[msg, f]
        if want != _ANY and wt != want and (want != _PACKED or (wt != 0 and wt != 2)):
            p = E_MISMATCH
    v = np.int64(0)
    s = e = p
    if p < 0:
        pass
    elif wt == 0:
        v, p = read_varint(buf, p, end)
        s = e = p
    elif wt == 2:
        s, e = read_len(buf, p, end)
        p = e if s >= 0 else s
    else:
        p = skip(buf, p, end, wt, f)
        s = e = p
    return f, wt, v, s, e, p


@njit(cache=True, _nrt=False)
def check_message(buf, s, e, msg):
    """Validate message ``buf[s:e]`` (``W_*``) without looking at its values; 0 or < 0."""
    pos = s
    while pos < e:
        pos = read_field(buf, pos, e, msg)[5]
        if pos < 0:
            return pos
    return 0


# ================================================================================ numbers


@njit(cache=True, _nrt=False)
def read_packed(buf, s, e, out, o, limit):
    """The varints of packed field ``buf[s:e]``: written to ``out[o:limit]`` (``out`` None: only
    counted); returns how many there are, < 0 when one is cut."""
    n = 0
    pos = s
    while pos < e:
        v, pos = read_varint(buf, pos, e)
        if pos < 0:
            return pos
        if out is not None:
            if o + n < limit:
                out[o + n] = v
        n += 1
    return n


@njit(cache=True, _nrt=False)
def tuple_values(buf, s, e, out, o, limit):
    """A Tuple's int64_values (packed or not): written to ``out[o:limit]`` (``out`` None: only
    counted); returns how many there are, < 0 when the Tuple is damaged."""
    n = 0
    pos = s
    while pos < e:
        f, wt, v, ps, pe, pos = read_field(buf, pos, e, W_TUPLE)
        if pos < 0:
            return pos
        if f == 1 and wt == 0:
            if out is not None:
                if o + n < limit:
                    out[o + n] = v
            n += 1
        elif f == 1:
            k = read_packed(buf, ps, pe, out, o + n, limit)
            if k < 0:
                return k
            n += k
    return n


@njit(cache=True, _nrt=False, inline="always")
def i32(v):
    """An int32 field's value (a negative int32 is written as a 10-byte varint)."""
    return np.int64(np.int32(v))


# ================================================================================ map entries


@njit(cache=True, _nrt=False)
def read_entry(buf, s, e, key_wt, val_wt, val_str=False):
    """A map entry: (key, key start, key end, value, value start, value end, status).

    Varint parts come back as values, length-delimited parts as ranges (empty at ``e`` when
    absent). A repeated number keeps the last; a repeated length-delimited key or value is left
    to the reference decoder (status ``E_UNUSUAL``): a message would have to be merged, and a
    string that is not kept must still be valid UTF-8 for protobuf. So is an entry with a field
    other than key and value: protobuf parses it (its value must decode) but keeps it as an
    unknown field of the parent instead of a map entry.
    """
    key = np.int64(0)
    ks = e
    ke = e
    val = np.int64(0)
    vs = e
    ve = e
    seen = False
    seen_key = False
    pos = s
    while pos < e:
        f, wt, pos = read_tag(buf, pos, e)
        if pos < 0:
            return key, ks, ke, val, vs, ve, pos
        if f == 1:
            if wt != key_wt:
                return key, ks, ke, val, vs, ve, E_MISMATCH
            if wt == 0:
                key, pos = read_varint(buf, pos, e)
            else:
                if seen_key:
                    return key, ks, ke, val, vs, ve, E_UNUSUAL
                seen_key = True
                ks, ke = read_len(buf, pos, e)
                pos = ke if ks >= 0 else ks
        elif f == 2:
            if wt != val_wt:
                return key, ks, ke, val, vs, ve, E_MISMATCH
            if wt == 0:
                val, pos = read_varint(buf, pos, e)
            else:
                if seen:
                    return key, ks, ke, val, vs, ve, E_UNUSUAL
                seen = True
                vs, ve = read_len(buf, pos, e)
                pos = ve if vs >= 0 else vs
        else:
            pos = skip(buf, pos, e, wt, f)
            if pos >= 0:
                pos = E_UNUSUAL
        if pos < 0:
            return key, ks, ke, val, vs, ve, pos
    return key, ks, ke, val, vs, ve, 0


@njit(cache=True, _nrt=False, inline="always")
def entry_fast(buf, s, e, key_wt, val_wt):
    """``read_entry`` with the layout every writer uses (key, then a length-delimited value, once
    each) decoded in line; anything else goes to ``read_entry``. Inlined where entries are hot."""
    if e - s >= 4 and val_wt == 2:
        if key_wt == 0 and buf[s] == 0x08:
            key, p = read_varint(buf, s + 1, e)
            if p > 0 and p < e and buf[p] == 0x12:
                vs, ve = read_len(buf, p + 1, e)
                if vs >= 0 and ve == e:
                    return key, e, e, np.int64(0), vs, ve, 0
        elif key_wt == 2 and buf[s] == 0x0A:
            ks, ke = read_len(buf, s + 1, e)
            if ks >= 0 and ke < e and buf[ke] == 0x12:
                vs, ve = read_len(buf, ke + 1, e)
                if vs >= 0 and ve == e:
                    return np.int64(0), ks, ke, np.int64(0), vs, ve, 0
    return read_entry(buf, s, e, key_wt, val_wt)


# ================================================================================ bytes


@njit(cache=True, _nrt=False)
def bytes_lt(buf, o1, l1, o2, l2):
    """Byte-wise ``buf[o1:o1+l1] < buf[o2:o2+l2]``."""
    n = min(l1, l2)
    for k in range(n):
        a = buf[o1 + k]
        b = buf[o2 + k]
        if a != b:
            return a < b
    return l1 < l2


@njit(cache=True, _nrt=False)
def bytes_eq(a, ao, b, bo, n):
    for k in range(n):
        if a[ao + k] != b[bo + k]:
            return False
    return True


@njit(cache=True, _nrt=False)
def utf8_ok(buf, s, e):
    """Strict UTF-8 check (no overlongs, surrogates or code points past U+10FFFF), as protobuf does."""
    pos = s
    while pos < e:
        c = buf[pos]
        if c < 0x80:
            pos += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n = 1
            lo, hi = 0x80, 0xBF
        elif 0xE0 <= c <= 0xEF:
            n = 2
            lo = 0xA0 if c == 0xE0 else 0x80
            hi = 0x9F if c == 0xED else 0xBF
        elif 0xF0 <= c <= 0xF4:
            n = 3
            lo = 0x90 if c == 0xF0 else 0x80
            hi = 0x8F if c == 0xF4 else 0xBF
        else:
            return False
        if pos + n >= e:
            return False
        c1 = buf[pos + 1]
        if c1 < lo or c1 > hi:
            return False
        for k in range(2, n + 1):
            ck = buf[pos + k]
            if ck < 0x80 or ck > 0xBF:
                return False
        pos += n + 1
    return True
