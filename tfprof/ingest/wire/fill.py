"""The fill kernel: walks each node of a batch again and writes its values straight into the
columns the count kernel sized (one 2-D array per table, one row per column).

The count kernel has validated these very bytes (they sit in a private buffer), so the walk
does not check wire types again; a row count that disagrees with the count kernel's would mean
the input changed under us (``_E_CHANGED``). A node's map entries, and an exec record's, are
first collected in scratch lists and written in key order, the last entry of a key winning
(``order._map_order``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.wire.canonical import _canonical
from tfprof.ingest.wire.count import (_E_INPUT, _E_STEP, _NROWT, C_ALLOC, C_ATTRS, C_EXDEV, C_EXECS, C_FRAMES,
                                      C_INPUTS, C_MEM, C_ODIMS, C_OMEM, C_OSH, C_SHAPE, C_SRC, C_STEPS, C_STRB,
                                      C_TYPES)
from tfprof.ingest.wire.devices import _device
from tfprof.ingest.wire.fields import (_E_CHANGED, _UNCHECKED, _entry, _entry_fast, _field, _i32, _packed,
                                       _tuple_values, _varint)
from tfprof.ingest.wire.order import _attr_order, _map_order

# Rows of the fill kernel's scratch array (one per thread, see batch._fill_scratch). Each list of
# map entries takes 4 rows: the key, then up to three values (value, or payload start and end).
(S_IN, S_SRC, S_AT, S_EX, S_OSH, S_ACC, S_CPU, S_OM) = range(0, 32, 4)
(S_DV, S_ORD_A, S_TMP_A, S_ORD_B, S_TMP_B, S_PAIR, S_TOUCH, S_STR) = range(32, 40)  # S_STR: 3 rows
_NSCR = 42


# ================================================================================ rows and lists


@njit(cache=True, _nrt=False, inline="always")
def _next_row(rows, lim, t):
    """The next row of table ``t`` (``rows[t]`` advances); _E_CHANGED past the count kernel's count."""
    r = rows[t]
    if r >= lim[t]:
        return _E_CHANGED
    rows[t] = r + 1
    return r


@njit(cache=True, _nrt=False, inline="always")
def _step_row(o, rows, lim, t, nid, step):
    """``_next_row`` of a per-step table, with its node_id and step columns written."""
    r = _next_row(rows, lim, t)
    if r >= 0:
        o[0, r] = nid
        o[1, r] = step
    return r


@njit(cache=True, _nrt=False, inline="always")
def _push(scr, row, n, cap, k, a, b, c):
    """Append (k, a, b, c) to the list of ``n`` entries in scratch rows ``row..row+3``; returns the
    new length, or _E_CHANGED (which stays) past ``cap`` entries."""
    if n < 0 or n >= cap:
        return _E_CHANGED
    scr[row, n] = k
    scr[row + 1, n] = a
    scr[row + 2, n] = b
    scr[row + 3, n] = c
    return n + 1


@njit(cache=True, _nrt=False, inline="always")
def _put_str(buf, s, e, sbuf, rows, lim, o, col, r):
    """Copy string ``buf[s:e]`` to the batch's string buffer and write where it went there, start
    and end, to ``o[col, r]`` and ``o[col + 1, r]``; 0, or _E_CHANGED when there is no room."""
    at = rows[C_STRB]
    n = e - s
    if n < 0 or at + n > lim[C_STRB]:
        return _E_CHANGED
    for k in range(n):
        sbuf[at + k] = buf[s + k]
    rows[C_STRB] = at + n
    o[col, r] = at
    o[col + 1, r] = at + n
    return 0


# ================================================================================ exec records


@njit(cache=True, _nrt=False)
def _two_numbers(buf, s, e):
    """Varint fields 1 and 2 of a small message (Memory: bytes, ptr; AllocationRecord:
    alloc_micros, alloc_bytes), 0 when absent; and a status."""
    a = b = np.int64(0)
    pos = s
    while pos < e:
        f, wt, v, _, _, pos = _field(buf, pos, e, _UNCHECKED)
        if pos < 0:
            return a, b, _E_CHANGED
        if f == 1 and wt == 0:
            a = v
        elif f == 2 and wt == 0:
            b = v
    return a, b, 0


@njit(cache=True, _nrt=False, inline="always")
def _fill_memory(buf, s, e, nid, step, seq, scr, rows, lim, o_mem, o_omem):
    """ExecMemory ``buf[s:e]``: its memory row, then its output_memory rows by slot."""
    r = _step_row(o_mem, rows, lim, C_MEM, nid, step)
    if r < 0:
        return r
    o_mem[2, r] = seq
    for c in range(3, 13):
        o_mem[c, r] = 0
    n = 0
    pos = s
    while pos < e:
        f, wt, v, ms, me, pos = _field(buf, pos, e, _UNCHECKED)
        if pos < 0:
            return _E_CHANGED
        if f <= 10 and wt == 0:  # memory_micros ... allocator_bytes_in_use
            o_mem[2 + f, r] = v
        elif f == 11 and wt == 2:  # output_memory: map<int32, Memory>
            k, _, _, _, vs, ve, st = _entry_fast(buf, ms, me, 0, 2)
            n = _push(scr, S_OM, n, scr.shape[1], _i32(k), vs, ve, 0)
    if n < 0:
        return n
    order = scr[S_ORD_B]
    for x in range(_map_order(scr[S_OM], n, order, scr[S_TMP_B])):
        y = order[x]
        ro = _step_row(o_omem, rows, lim, C_OMEM, nid, step)
        size, ptr, st = _two_numbers(buf, scr[S_OM + 1, y], scr[S_OM + 2, y])
        if ro < 0 or st < 0:
            return _E_CHANGED
        o_omem[2, ro] = seq
        o_omem[3, ro] = scr[S_OM, y]
        o_omem[4, ro] = size
        o_omem[5, ro] = ptr
    return 0


@njit(cache=True, _nrt=False, inline="always")
def _start_duration(buf, s, e, pair):
    """The first two int64_values of Tuple ``buf[s:e]`` (0 when missing); the usual packed
    [start, duration] is decoded in line."""
    if e - s >= 4 and buf[s] == 0x0A and buf[s + 1] < 0x80 and s + 2 + buf[s + 1] == e:
        v0, q = _varint(buf, s + 2, e)
        v1 = np.int64(0)
        if q > 0 and q < e:
            v1, q = _varint(buf, q, e)
        if q == e:
            return v0, v1
    pair[0] = pair[1] = 0
    _tuple_values(buf, s, e, pair, np.int64(0), np.int64(2))  # (not literals: one compiled version)
    return pair[0], pair[1]


@njit(cache=True, _nrt=False, inline="always")
def _fill_times(buf, s, e, nid, step, code, kind, pair, rows, lim, o_execs):
    """The execs rows of ExecTime ``buf[s:e]``, on device ``code``; ``kind`` 0: accelerator, 1: cpu."""
    pos = s
    while pos < e:
        f, _, _, ts, te, pos = _field(buf, pos, e, _UNCHECKED)
        if pos < 0:
            return _E_CHANGED
        if f != 1:
            continue
        r = _step_row(o_execs, rows, lim, C_EXECS, nid, step)
        if r < 0:
            return r
        o_execs[2, r] = code
        o_execs[3, r] = kind
        o_execs[4, r], o_execs[5, r] = _start_duration(buf, ts, te, pair)
    return 0


@njit(cache=True, _nrt=False)
def _fill_steps(buf, nid, j, n_ex, step_set, dev, scr, rows, lim, out, miss, errv):
    """The per-step rows of node ``j`` (node_steps, exec_devices, execs, memory, output_memory,
    allocations), from the ``n_ex`` execs entries (step, ExecProfile) that ``_fill_node`` listed."""
    o_steps, o_exdev, o_execs, o_mem, o_omem, o_alloc = out
    rank = dev[1][2]
    dv = scr[S_DV]
    cap = scr.shape[1]
    steps = scr[S_ORD_A]
    for xs in range(_map_order(scr[S_EX], n_ex, steps, scr[S_TMP_A])):
        step, pos, e = scr[S_EX, steps[xs]], scr[S_EX + 1, steps[xs]], scr[S_EX + 2, steps[xs]]
        p = np.searchsorted(step_set, step)
        if p >= len(step_set) or step_set[p] != step:
            if errv[j, 0] == 0 or (errv[j, 0] == _E_STEP and step < errv[j, 1]):
                errv[j, 0] = _E_STEP
                errv[j, 1] = step
        # The ExecProfile: its node_steps row, its memory and allocations rows as they come, its
        # device lists collected for the exec_devices and execs rows below.
        r = _step_row(o_steps, rows, lim, C_STEPS, nid, step)
        if r < 0:
            return r
        for c in range(2, 5):
            o_steps[c, r] = 0
        n_acc = n_cpu = nd = nmem = 0
        while pos < e:
            f, _, v, ps, pe, pos = _field(buf, pos, e, _UNCHECKED)
            if pos < 0:
                return _E_CHANGED
            if f <= 3:  # run_count, all_start_micros, latest_end_micros
                o_steps[1 + f, r] = v
            elif f == 4 or f == 5:  # accelerator_execs, cpu_execs: map<device, ExecTime>
                _, ks, ke, _, vs, ve, st = _entry_fast(buf, ps, pe, 2, 2)
                if st < 0:
                    return _E_CHANGED
                c = rank[_device(buf, ks, ke, dev, miss, j)]
                if f == 4:
                    n_acc = _push(scr, S_ACC, n_acc, cap, c, vs, ve, 0)
                else:
                    n_cpu = _push(scr, S_CPU, n_cpu, cap, c, vs, ve, 0)
            elif f == 6:  # devices
                if nd >= len(dv):
                    return _E_CHANGED
                dv[nd] = (_device(buf, ps, pe, dev, miss, j) << 32) | nd
                nd += 1
            elif f == 7:  # memory_execs
                st = _fill_memory(buf, ps, pe, nid, step, nmem, scr, rows, lim, o_mem, o_omem)
                if st < 0:
                    return st
                nmem += 1
            elif f == 11:  # allocations
                micros, size, st = _two_numbers(buf, ps, pe)
                ra = _step_row(o_alloc, rows, lim, C_ALLOC, nid, step)
                if ra < 0 or st < 0:
                    return _E_CHANGED
                o_alloc[2, ra] = micros
                o_alloc[3, ra] = size
        if n_acc < 0 or n_cpu < 0:
            return _E_CHANGED
        # exec_devices: sorted by device (stable), duplicates kept
        for x in range(1, nd):
            y = x
            while y > 0 and rank[dv[y] >> 32] < rank[dv[y - 1] >> 32]:
                tmp = dv[y]
                dv[y] = dv[y - 1]
                dv[y - 1] = tmp
                y -= 1
        for x in range(nd):
            r = _step_row(o_exdev, rows, lim, C_EXDEV, nid, step)
            if r < 0:
                return r
            o_exdev[2, r] = dv[x] >> 32
            o_exdev[3, r] = dv[x] & 0xFFFFFFFF  # position in the file, for the reference's dictionary order
        # execs: accelerator then cpu, each by device, each map keeping its last entry per device
        order = scr[S_ORD_B]
        for kind in range(2):
            lst = S_ACC if kind == 0 else S_CPU
            for x in range(_map_order(scr[lst], n_acc if kind == 0 else n_cpu, order, scr[S_TMP_B])):
                y = order[x]
                code = dev[1][3, scr[lst, y]]  # rank -> code
                st = _fill_times(buf, scr[lst + 1, y], scr[lst + 2, y], nid, step, code, kind, scr[S_PAIR], rows,
                                 lim, o_execs)
                if st < 0:
                    return st
    return 0


# ================================================================================ nodes


@njit(cache=True, _nrt=False)
def _code_ref(ids, v):
    """Value code of id ``v`` in id_to_string; the code of "" when the id is unknown."""
    id_keys, id_code, empty_code = ids
    j = np.searchsorted(id_keys, v)
    if j < len(id_keys) and id_keys[j] == v:
        return id_code[j]
    return empty_code


@njit(cache=True, _nrt=False)
def _fill_trace(buf, s, e, nid, ids, rows, lim, o_frames, scr, sbuf):
    """The code_frames rows of CodeDef ``buf[s:e]``."""
    # Per frame, (file, function, line): where the inline text is, and the id; the row is written
    # once all are read (rows of 13 columns far apart: each written once, in one go).
    str_s, str_e, str_id = scr[S_STR], scr[S_STR + 1], scr[S_STR + 2]
    pos = s
    while pos < e:
        f, _, _, ts, te, pos = _field(buf, pos, e, _UNCHECKED)
        if pos < 0:
            return _E_CHANGED
        if f != 1:
            continue
        r = _next_row(rows, lim, C_FRAMES)
        if r < 0:
            return r
        for k in range(3):
            str_s[k] = str_e[k] = str_id[k] = 0
        lineno = fsl = np.int64(0)
        q = ts
        while q < te:
            g, wt, v, a, b, q = _field(buf, q, te, _UNCHECKED)
            if q < 0:
                return _E_CHANGED
            if wt == 2 and (g == 1 or g == 3 or g == 4):  # file, function, line
                k = 0 if g == 1 else g - 2
                str_s[k] = a
                str_e[k] = b
            elif g == 2:
                lineno = _i32(v)
            elif g == 5:
                fsl = _i32(v)
            elif 6 <= g <= 8:  # file_id, function_id, line_id
                str_id[g - 6] = v
        o_frames[0, r] = nid
        o_frames[1, r] = r - rows[C_FRAMES + _NROWT]
        o_frames[2, r] = lineno
        o_frames[3, r] = fsl
        for k in range(3):
            # tfprof: `t.file or id_to_string[t.file_id]` (likewise function, line)
            if str_e[k] > str_s[k]:
                o_frames[4 + k, r] = -2
                if _put_str(buf, str_s[k], str_e[k], sbuf, rows, lim, o_frames, 7 + 2 * k, r) < 0:
                    return _E_CHANGED
            else:
                o_frames[4 + k, r] = _code_ref(ids, str_id[k])
                o_frames[7 + 2 * k, r] = 0
                o_frames[8 + 2 * k, r] = 0
    return 0


@njit(cache=True, _nrt=False)
def _fill_node(buf, s, e, nid, j, cnt, rows, lim, keys, step_set, ids, dev, spec, scr, out, miss, errv):
    """Decode node ``j`` of the batch (bytes ``buf[s:e]``) into its rows; returns a status."""
    (o_nodes, o_shape, o_inputs, o_types, o_osh, o_odims, o_attrs, o_frames, o_steps, o_exdev, o_execs, o_mem,
     o_omem, o_alloc, sbuf) = out
    # Touch every cache line of the node front to back first: the exec records are decoded in
    # step order, which the file does not follow (C++ writes maps in hash order), and random
    # reads from memory would each wait for a cache miss; a sequential pass lets the hardware
    # prefetcher stream the node into cache.
    touch = np.uint8(0)
    for p in range(s, e, 64):
        touch ^= buf[p]
    scr[S_TOUCH, 0] = touch
    n_in = n_src = n_osh = n_at = n_ex = 0
    op_s = op_e = cd_s = cd_e = hd_s = hd_e = 0
    o_nodes[5, j] = 0
    pos = s
    while pos < e:
        f, wt, v, ps, pe, pos = _field(buf, pos, e, _UNCHECKED)
        if pos < 0:
            return _E_CHANGED
        if f == 4 and wt == 0:  # shape, one value
            r = _next_row(rows, lim, C_SHAPE)
            if r < 0:
                return r
            o_shape[r] = v
        elif f == 4:  # shape, packed
            r = rows[C_SHAPE]
            k = _packed(buf, ps, pe, o_shape, r, lim[C_SHAPE])
            if k < 0 or r + k > lim[C_SHAPE]:
                return _E_CHANGED
            rows[C_SHAPE] = r + k
        elif f == 8:  # float_ops
            o_nodes[5, j] = v
        elif f == 5:  # op_types
            r = _next_row(rows, lim, C_TYPES)
            if r < 0 or _put_str(buf, ps, pe, sbuf, rows, lim, o_types, 1, r) < 0:
                return _E_CHANGED
            o_types[0, r] = nid
        elif f == 6:
            cd_s, cd_e = ps, pe
        elif f == 7:
            hd_s, hd_e = ps, pe
        elif f == 9:
            op_s, op_e = ps, pe
        elif f == 10:
            st = _fill_trace(buf, ps, pe, nid, ids, rows, lim, o_frames, scr, sbuf)
            if st < 0:
                return st
        elif f == 2 or f == 14:  # inputs: map<int32, int64>; src_output_index: map<int64, int32>
            k, _, _, v, _, _, st = _entry(buf, ps, pe, 0, 0)
            if f == 2:
                n_in = _push(scr, S_IN, n_in, cnt[C_INPUTS], _i32(k), v, 0, 0)
            else:
                n_src = _push(scr, S_SRC, n_src, cnt[C_SRC], k, _i32(v), 0, 0)
        elif f == 11:  # attrs: map<string, AttrValue>
            _, ks, ke, _, vs, ve, st = _entry(buf, ps, pe, 2, 2)
            n_at = _push(scr, S_AT, n_at, cnt[C_ATTRS], ks, ke, vs, ve)
        elif f == 12:  # execs: map<int64, ExecProfile>
            k, _, _, _, vs, ve, st = _entry_fast(buf, ps, pe, 0, 2)
            n_ex = _push(scr, S_EX, n_ex, cnt[C_STEPS], k, vs, ve, 0)
        elif f == 15:  # output_shapes: map<int32, Tuple>
            k, _, _, _, vs, ve, st = _entry(buf, ps, pe, 0, 2)
            n_osh = _push(scr, S_OSH, n_osh, cnt[C_OSH], _i32(k), vs, ve, 0)
    if min(n_in, n_src, n_at, n_ex, n_osh) < 0:
        return _E_CHANGED
    # nodes
    o_nodes[0, j] = nid
    if _put_str(buf, op_s, op_e, sbuf, rows, lim, o_nodes, 1, j) < 0:
        return _E_CHANGED
    o_nodes[3, j] = _device(buf, cd_s, cd_e, dev, miss, j) if cd_e > cd_s else -1
    o_nodes[4, j] = _device(buf, hd_s, hd_e, dev, miss, j) if hd_e > hd_s else -1
    n_shape = rows[C_SHAPE] - rows[C_SHAPE + _NROWT]
    params = np.int64(1) if n_shape > 0 else np.int64(0)
    for r in range(rows[C_SHAPE + _NROWT], rows[C_SHAPE]):
        if o_shape[r] < 0:
            params = 0
        params *= o_shape[r]
    o_nodes[6, j] = params
    o_nodes[7, j] = n_shape
    order = scr[S_ORD_A]
    # node_inputs: by input index, the last entry of an index wins
    for x in range(_map_order(scr[S_IN], n_in, order, scr[S_TMP_A])):
        y = order[x]
        pid = scr[S_IN + 1, y]
        p = np.searchsorted(keys, pid)
        if p >= len(keys) or keys[p] != pid:
            if errv[j, 0] == 0:
                errv[j, 0] = _E_INPUT
                errv[j, 1] = pid
            p = 0
        slot = np.int64(0)
        for z in range(n_src - 1, -1, -1):
            if scr[S_SRC, z] == pid:
                slot = scr[S_SRC + 1, z]
                break
        r = _next_row(rows, lim, C_INPUTS)
        if r < 0:
            return r
        o_inputs[0, r] = nid
        o_inputs[1, r] = scr[S_IN, y]
        o_inputs[2, r] = pid
        o_inputs[3, r] = p
        o_inputs[4, r] = slot
    # output_shapes: by slot
    for x in range(_map_order(scr[S_OSH], n_osh, order, scr[S_TMP_A])):
        y = order[x]
        r = _next_row(rows, lim, C_OSH)
        d0 = rows[C_ODIMS]
        nd = _tuple_values(buf, scr[S_OSH + 1, y], scr[S_OSH + 2, y], o_odims, d0, lim[C_ODIMS])
        if r < 0 or nd < 0 or d0 + nd > lim[C_ODIMS]:
            return _E_CHANGED
        o_osh[0, r] = nid
        o_osh[1, r] = scr[S_OSH, y]
        o_osh[2, r] = d0
        o_osh[3, r] = nd
        rows[C_ODIMS] = d0 + nd
    # node_attrs: by name
    kind, sub, stack = spec
    for x in range(_attr_order(buf, scr[S_AT], scr[S_AT + 1], n_at, order)):
        y = order[x]
        r = _next_row(rows, lim, C_ATTRS)
        if (r < 0 or _put_str(buf, scr[S_AT, y], scr[S_AT + 1, y], sbuf, rows, lim, o_attrs, 1, r) < 0
                or _put_str(buf, scr[S_AT + 2, y], scr[S_AT + 3, y], sbuf, rows, lim, o_attrs, 3, r) < 0):
            return _E_CHANGED
        o_attrs[0, r] = nid
        o_attrs[5, r] = 1 if _canonical(buf, scr[S_AT + 2, y], scr[S_AT + 3, y], kind, sub, stack) else 0
    out6 = (o_steps, o_exdev, o_execs, o_mem, o_omem, o_alloc)
    return _fill_steps(buf, nid, j, n_ex, step_set, dev, scr, rows, lim, out6, miss, errv)


@njit(cache=True, nogil=True, _nrt=False)
def _fill_kernel(buf, idx, node_s, node_e, node_ids, counts, base, keys, step_set, ids, dev, spec, out, used, err,
                 errv, miss, scr, rows, lim, stack):
    kind, sub = spec
    for jj in range(len(idx)):
        j = idx[jj]
        for t in range(_NROWT):
            rows[t] = base[j, t]
            rows[t + _NROWT] = base[j, t]
            lim[t] = base[j, t] + counts[j, t]
        st = _fill_node(buf, node_s[j], node_e[j], node_ids[j], j, counts[j], rows, lim, keys, step_set, ids, dev,
                        (kind, sub, stack), scr, out, miss, errv)
        if st < 0:
            err[j] = st
        for t in range(_NROWT):
            used[j, t] = rows[t] - base[j, t]


@njit(cache=True, _nrt=False)
def _compact_rows(arr, base, used):
    """Move each node's ``used`` rows (``arr[:, row]``) from ``base`` down to close the gaps;
    returns the new row count."""
    r = 0
    for j in range(len(base)):
        b = base[j]
        if b != r:
            for k in range(used[j]):
                for c in range(arr.shape[0]):
                    arr[c, r + k] = arr[c, b + k]
        r += used[j]
    return r
