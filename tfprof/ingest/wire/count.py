"""The count kernel: validates each node of a batch and counts the rows of each table it gives,
so that the fill kernel can write into preallocated columns.

Every field is checked against the wire-type table (``fields._WT``) and every length and
varint against the end of its message before it is used.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.wire.errors import E_UNUSUAL
from tfprof.ingest.wire.fields import (
    W_CODE_DEF,
    W_EXEC,
    W_EXEC_TIME,
    W_MEMORY,
    W_NODE,
    W_TRACE,
    W_TWO_NUMBERS,
    check_message,
    entry_fast,
    read_entry,
    read_field,
    read_packed,
    tuple_values,
)

# Per-node counters (count kernel) and the row tables they size (fill kernel).
# C_STRB counts the bytes of the strings the fill kernel copies out (op, op types, attr names and
# values, inline trace strings), so that building the Arrow tables never touches the file again.
(C_INPUTS, C_TYPES, C_OSH, C_ODIMS, C_ATTRS, C_FRAMES, C_STEPS, C_EXDEV, C_EXECS, C_MEM, C_OMEM, C_ALLOC, C_SHAPE,
 C_STRB, C_SRC, C_ACCENT, C_CPUENT) = range(17)
NCOUNT = 17
NROWT = 14  # C_INPUTS..C_STRB are row/value tables

# Node-level errors in the kernels' err arrays (wire errors are stored as they are).
_E_NONAME, _E_ID, E_STEP, E_INPUT = 10, 11, 12, 13


@njit(cache=True, _nrt=False)
def _count_map_of_tuples(buf, s, e):
    """Validate a map<int32, Tuple> entry; returns the Tuple's length."""
    _, _, _, _, vs, ve, st = read_entry(buf, s, e, 0, 2)
    if st < 0:
        return st
    return tuple_values(buf, vs, ve, None, 0, 0)


@njit(cache=True, _nrt=False)
def _count_times(buf, s, e):
    """Validate an ExecTime; returns its number of ``times`` (Tuples)."""
    n = 0
    pos = s
    while pos < e:
        f, _, _, ts, te, pos = read_field(buf, pos, e, W_EXEC_TIME)
        if pos < 0:
            return pos
        if f == 1:
            k = tuple_values(buf, ts, te, None, 0, 0)
            if k < 0:
                return k
            n += 1
    return n


@njit(cache=True, _nrt=False)
def _count_exec(buf, s, e, cnt):
    """Validate an ExecProfile and add its rows to ``cnt``."""
    pos = s
    while pos < e:
        f, _, _, ps, pe, pos = read_field(buf, pos, e, W_EXEC)
        if pos < 0:
            return pos
        if f == 4 or f == 5:  # accelerator_execs, cpu_execs: map<string, ExecTime>
            _, _, _, _, vs, ve, st = entry_fast(buf, ps, pe, 2, 2)
            n = _count_times(buf, vs, ve) if st >= 0 else st
            if n < 0:
                return n
            if st == 0:
                cnt[C_ACCENT if f == 4 else C_CPUENT] += 1
                cnt[C_EXECS] += n
        elif f == 6:  # devices
            cnt[C_EXDEV] += 1
        elif f == 7:  # memory_execs
            cnt[C_MEM] += 1
            q = ps
            while q < pe:  # ExecMemory
                g, _, _, ms, me, q = read_field(buf, q, pe, W_MEMORY)
                if q < 0:
                    return q
                if g == 11:  # output_memory: map<int32, Memory>
                    _, _, _, _, vs, ve, st = entry_fast(buf, ms, me, 0, 2)
                    valid = check_message(buf, vs, ve, W_TWO_NUMBERS) if st >= 0 else st
                    if valid < 0:
                        return valid
                    if st == 0:
                        cnt[C_OMEM] += 1
        elif f == 11:  # allocations
            st = check_message(buf, ps, pe, W_TWO_NUMBERS)
            if st < 0:
                return st
            cnt[C_ALLOC] += 1
    return 0


@njit(cache=True, _nrt=False)
def _count_trace(buf, s, e, cnt):
    """Validate a CodeDef: count its frames and the bytes of their inline strings."""
    pos = s
    while pos < e:
        f, _, _, ts, te, pos = read_field(buf, pos, e, W_CODE_DEF)
        if pos < 0:
            return pos
        if f != 1:
            continue
        q = ts
        seen = 0
        while q < te:  # a Trace
            g, wt, _, a, b, q = read_field(buf, q, te, W_TRACE)
            if q < 0:
                return q
            if wt == 2 and (g == 1 or g == 3 or g == 4):  # file, function, line
                if seen & (1 << g):  # protobuf keeps the last, but checks the first is UTF-8
                    return E_UNUSUAL
                seen |= 1 << g
                cnt[C_STRB] += b - a
        cnt[C_FRAMES] += 1
    return 0


@njit(cache=True, _nrt=False)
def _count_node(buf, s, e, cnt):
    """Validate one ProfileNode and count its rows; returns (status, last name start, name length, id)."""
    pos = s
    name_s = -1
    name_n = 0
    nid = np.int64(0)
    seen = 0
    while pos < e:
        f, wt, v, ps, pe, pos = read_field(buf, pos, e, W_NODE)
        if pos < 0:
            return pos, name_s, name_n, nid
        st = 0
        if f == 6 or f == 7 or f == 9:  # canonical_device, host_device, op: one string each
            if seen & (1 << f):  # protobuf keeps the last, but checks the first is UTF-8
                return E_UNUSUAL, name_s, name_n, nid
            seen |= 1 << f
        if f == 1:  # name
            name_s = ps
            name_n = pe - ps
        elif f == 13:  # id
            nid = v
        elif f == 4:  # shape, packed or not
            k = 1 if wt == 0 else read_packed(buf, ps, pe, None, 0, 0)
            if k < 0:
                return k, name_s, name_n, nid
            cnt[C_SHAPE] += k
        elif f == 5 or f == 9:  # op_types, op
            cnt[C_STRB] += pe - ps
            cnt[C_TYPES] += 1 if f == 5 else 0
        elif f == 2 or f == 3 or f == 14:  # inputs, outputs, src_output_index: maps of numbers
            _, _, _, _, _, _, st = read_entry(buf, ps, pe, 0, 0)
            if f == 2 and st == 0:
                cnt[C_INPUTS] += 1
            elif f == 14 and st == 0:
                cnt[C_SRC] += 1
        elif f == 10:  # trace
            st = _count_trace(buf, ps, pe, cnt)
        elif f == 11:  # attrs: map<string, AttrValue>
            _, ks, ke, _, vs, ve, st = read_entry(buf, ps, pe, 2, 2)
            if st == 0:
                cnt[C_ATTRS] += 1
                cnt[C_STRB] += ke - ks + ve - vs
        elif f == 12:  # execs: map<int64, ExecProfile>
            _, _, _, _, vs, ve, st = entry_fast(buf, ps, pe, 0, 2)
            if st == 0:
                st = _count_exec(buf, vs, ve, cnt)
                cnt[C_STEPS] += 1
        elif f == 15 or f == 16:  # output_shapes, input_shapes: map<int32, Tuple>
            k = _count_map_of_tuples(buf, ps, pe)
            if k < 0:
                st = k
            elif k >= 0 and f == 15:
                cnt[C_OSH] += 1
                cnt[C_ODIMS] += k
        if st < 0:
            return st, name_s, name_n, nid
    return 0, name_s, name_n, nid


@njit(cache=True, nogil=True, _nrt=False)
def count_kernel(buf, idx, node_s, node_e, keys, counts, err, errpos, name_pos):
    for j in range(len(idx)):
        i = idx[j]
        st, nm_s, nm_n, nid = _count_node(buf, node_s[i], node_e[i], counts[i])
        name_pos[i] = nm_s
        if st < 0:
            err[i] = st
            errpos[i] = node_s[i]
        elif nm_s < 0 or nm_n == 0:
            err[i] = _E_NONAME
        elif nid != keys[i]:
            err[i] = _E_ID

