"""The canonical-encoding check of attr values: a raw AttrValue slice is used as it is only when
it is exactly what protobuf's deterministic serializer writes (``is_canonical``); other attr
values are re-serialized through protobuf on the Python side.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.wire.fields import read_varint, utf8_ok

# Field kinds of the canonical-encoding check (see is_canonical).
(K_NONE, K_I64, K_I32, K_BOOL, K_BYTES, K_STR, K_MSG, K_O_I64, K_O_I32, K_O_BOOL, K_O_F32, K_O_BYTES, K_O_STR,
 K_O_MSG, K_R_MSG, K_R_BYTES, K_P_I64, K_P_I32, K_P_U32, K_P_BOOL, K_P_F32, K_P_F64) = range(22)
(M_ATTR, M_LIST, M_SHAPE, M_DIM, M_TENSOR, M_HANDLE, M_DTS, M_VARIANT) = range(8)


def _attr_spec() -> tuple[np.ndarray, np.ndarray]:
    """Field kind and sub-message of AttrValue and everything it embeds (attr_value.proto & co).

    Fields missing here (NameAttrList, whose map order is up to the writer) are K_NONE: such an
    attr is re-serialized through protobuf.
    """
    kind = np.zeros((8, 20), np.int64)
    sub = np.zeros((8, 20), np.int64)

    def put(m, f, k, s=0):
        kind[m, f] = k
        sub[m, f] = s

    for f, k, s in ((1, K_O_MSG, M_LIST), (2, K_O_BYTES, 0), (3, K_O_I64, 0), (4, K_O_F32, 0), (5, K_O_BOOL, 0),
                    (6, K_O_I32, 0), (7, K_O_MSG, M_SHAPE), (8, K_O_MSG, M_TENSOR), (9, K_O_STR, 0)):
        put(M_ATTR, f, k, s)
    for f, k, s in ((2, K_R_BYTES, 0), (3, K_P_I64, 0), (4, K_P_F32, 0), (5, K_P_BOOL, 0), (6, K_P_I32, 0),
                    (7, K_R_MSG, M_SHAPE), (8, K_R_MSG, M_TENSOR)):
        put(M_LIST, f, k, s)
    put(M_SHAPE, 2, K_R_MSG, M_DIM)
    put(M_SHAPE, 3, K_BOOL)
    put(M_DIM, 1, K_I64)
    put(M_DIM, 2, K_STR)
    for f, k, s in ((1, K_I32, 0), (2, K_MSG, M_SHAPE), (3, K_I32, 0), (4, K_BYTES, 0), (5, K_P_F32, 0),
                    (6, K_P_F64, 0), (7, K_P_I32, 0), (8, K_R_BYTES, 0), (9, K_P_F32, 0), (10, K_P_I64, 0),
                    (11, K_P_BOOL, 0), (12, K_P_F64, 0), (13, K_P_I32, 0), (14, K_R_MSG, M_HANDLE),
                    (15, K_R_MSG, M_VARIANT), (16, K_P_U32, 0), (17, K_P_I64, 0), (18, K_BYTES, 0)):
        put(M_TENSOR, f, k, s)
    for f, k, s in ((1, K_STR, 0), (2, K_STR, 0), (3, K_STR, 0), (4, K_I64, 0), (5, K_STR, 0), (6, K_R_MSG, M_DTS)):
        put(M_HANDLE, f, k, s)
    put(M_DTS, 1, K_I32)
    put(M_DTS, 2, K_MSG, M_SHAPE)
    put(M_VARIANT, 1, K_STR)
    put(M_VARIANT, 2, K_BYTES)
    put(M_VARIANT, 3, K_R_MSG, M_TENSOR)
    return kind, sub


SPEC_KIND, SPEC_SUB = _attr_spec()


@njit(cache=True, _nrt=False)
def _minimal_varint(buf, s, e):
    """(value, new pos, canonical): canonical when no trailing zero groups pad it."""
    v, p = read_varint(buf, s, e)
    if p < 0:
        return v, p, False
    n = p - s
    # No trailing zero groups; a 10th byte can only carry bit 63 (protobuf drops the rest).
    return v, p, (n == 1 or buf[p - 1] != 0) and (n < 10 or buf[p - 1] == 1)


@njit(cache=True, _nrt=False)
def _is_int32(v):
    return -2147483648 <= v <= 2147483647


@njit(cache=True, _nrt=False)
def is_canonical(buf, s, e, kind, sub, stack):
    """True when ``buf[s:e]`` is an AttrValue exactly as protobuf's deterministic serializer writes it.

    That is: fields in ascending number order, no unknown fields, proto3 scalars only when not
    zero, oneof members at most once, repeated numbers packed (and never empty), minimal varints,
    int32 values sign-extended, bools 0/1, strings valid UTF-8, no maps. Then the raw slice equals
    ``AttrValue.FromString(slice).SerializeToString(deterministic=True)``.
    """
    depth = 0
    msg = M_ATTR
    last = 0
    oneof = False
    end = e
    pos = s
    while True:
        if pos == end:
            if depth == 0:
                return True
            depth -= 1
            end = stack[depth, 0]
            msg = stack[depth, 1]
            last = stack[depth, 2]
            oneof = stack[depth, 3] != 0
            continue
        t, p, ok = _minimal_varint(buf, pos, end)
        if p < 0 or not ok or t >> 32:
            return False
        f = t >> 3
        wt = t & 7
        if f <= 0 or f >= 20:
            return False
        k = kind[msg, f]
        if k == K_NONE or f < last:
            return False
        if f == last and k != K_R_MSG and k != K_R_BYTES:
            return False
        last = f
        if k >= K_O_I64 and k <= K_O_MSG:
            if oneof:
                return False
            oneof = True
        if k == K_I64 or k == K_I32 or k == K_BOOL or k == K_O_I64 or k == K_O_I32 or k == K_O_BOOL:
            if wt != 0:
                return False
            v, p, ok = _minimal_varint(buf, p, end)
            if p < 0 or not ok:
                return False
            if (k == K_I64 or k == K_I32) and v == 0:
                return False
            if (k == K_I32 or k == K_O_I32) and not _is_int32(v):
                return False
            if (k == K_BOOL and v != 1) or (k == K_O_BOOL and v != 0 and v != 1):
                return False
            pos = p
            continue
        if k == K_O_F32:
            if wt != 5 or end - p < 4:
                return False
            pos = p + 4
            continue
        if wt != 2:
            return False
        n, ps, ok = _minimal_varint(buf, p, end)
        if ps < 0 or not ok or n < 0 or n > end - ps:
            return False
        pe = ps + n
        if k == K_MSG or k == K_O_MSG or k == K_R_MSG:
            if depth >= stack.shape[0]:
                return False
            stack[depth, 0] = end
            stack[depth, 1] = msg
            stack[depth, 2] = last
            stack[depth, 3] = 1 if oneof else 0
            depth += 1
            msg = sub[msg, f]
            last = 0
            oneof = False
            end = pe
            pos = ps
            continue
        pos = pe
        if k == K_BYTES or k == K_STR:
            if pe == ps:
                return False
        if k == K_STR or k == K_O_STR:
            if not utf8_ok(buf, ps, pe):
                return False
        elif k == K_P_F32 or k == K_P_F64:
            w = 4 if k == K_P_F32 else 8
            if pe == ps or (pe - ps) % w:
                return False
        elif k == K_P_I64 or k == K_P_I32 or k == K_P_U32 or k == K_P_BOOL:
            if pe == ps:
                return False
            q = ps
            while q < pe:
                v, q, ok = _minimal_varint(buf, q, pe)
                if q < 0 or not ok:
                    return False
                if k == K_P_I32 and not _is_int32(v):
                    return False
                if k == K_P_U32 and (v < 0 or v > 0xFFFFFFFF):
                    return False
                if k == K_P_BOOL and v != 0 and v != 1:
                    return False
