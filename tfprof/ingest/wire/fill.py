"""The fill kernel: walks each node of a batch again and writes its values straight into the
columns the count kernel sized (one 2-D array per table, one row per column).

The count kernel has validated these very bytes (they sit in a private buffer), so the walk
does not check wire types again; a row count that disagrees with the count kernel's would mean
the input changed under us (``E_CHANGED``). A node's map entries, and an exec record's, are
first collected in scratch lists and written in key order, the last entry of a key winning
(``order.map_order``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.wire.canonical import is_canonical
from tfprof.ingest.wire.count import (
    C_ATTRS,
    C_FRAMES,
    C_INPUTS,
    C_ODIMS,
    C_OSH,
    C_SHAPE,
    C_SRC,
    C_STEPS,
    C_TYPES,
    E_INPUT,
    NROWT,
)
from tfprof.ingest.wire.devices import device_code
from tfprof.ingest.wire.errors import E_CHANGED
from tfprof.ingest.wire.fields import UNCHECKED, entry_fast, i32, read_entry, read_field, read_packed, tuple_values
from tfprof.ingest.wire.fill_rows import (
    S_AT,
    S_EX,
    S_IN,
    S_ORD_A,
    S_OSH,
    S_SRC,
    S_STR,
    S_TMP_A,
    S_TOUCH,
    next_row,
    push,
    put_str,
)
from tfprof.ingest.wire.fill_steps import fill_steps
from tfprof.ingest.wire.order import attr_order, map_order

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
        f, _, _, ts, te, pos = read_field(buf, pos, e, UNCHECKED)
        if pos < 0:
            return E_CHANGED
        if f != 1:
            continue
        r = next_row(rows, lim, C_FRAMES)
        if r < 0:
            return r
        for k in range(3):
            str_s[k] = str_e[k] = str_id[k] = 0
        lineno = fsl = np.int64(0)
        q = ts
        while q < te:
            g, wt, v, a, b, q = read_field(buf, q, te, UNCHECKED)
            if q < 0:
                return E_CHANGED
            if wt == 2 and (g == 1 or g == 3 or g == 4):  # file, function, line
                k = 0 if g == 1 else g - 2
                str_s[k] = a
                str_e[k] = b
            elif g == 2:
                lineno = i32(v)
            elif g == 5:
                fsl = i32(v)
            elif 6 <= g <= 8:  # file_id, function_id, line_id
                str_id[g - 6] = v
        o_frames[0, r] = nid
        o_frames[1, r] = r - rows[C_FRAMES + NROWT]
        o_frames[2, r] = lineno
        o_frames[3, r] = fsl
        for k in range(3):
            # tfprof: `t.file or id_to_string[t.file_id]` (likewise function, line)
            if str_e[k] > str_s[k]:
                o_frames[4 + k, r] = -2
                if put_str(buf, str_s[k], str_e[k], sbuf, rows, lim, o_frames, 7 + 2 * k, r) < 0:
                    return E_CHANGED
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
        f, wt, v, ps, pe, pos = read_field(buf, pos, e, UNCHECKED)
        if pos < 0:
            return E_CHANGED
        if f == 4 and wt == 0:  # shape, one value
            r = next_row(rows, lim, C_SHAPE)
            if r < 0:
                return r
            o_shape[r] = v
        elif f == 4:  # shape, packed
            r = rows[C_SHAPE]
            k = read_packed(buf, ps, pe, o_shape, r, lim[C_SHAPE])
            if k < 0 or r + k > lim[C_SHAPE]:
                return E_CHANGED
            rows[C_SHAPE] = r + k
        elif f == 8:  # float_ops
            o_nodes[5, j] = v
        elif f == 5:  # op_types
            r = next_row(rows, lim, C_TYPES)
            if r < 0 or put_str(buf, ps, pe, sbuf, rows, lim, o_types, 1, r) < 0:
                return E_CHANGED
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
            k, _, _, v, _, _, st = read_entry(buf, ps, pe, 0, 0)
            if f == 2:
                n_in = push(scr, S_IN, n_in, cnt[C_INPUTS], i32(k), v, 0, 0)
            else:
                n_src = push(scr, S_SRC, n_src, cnt[C_SRC], k, i32(v), 0, 0)
        elif f == 11:  # attrs: map<string, AttrValue>
            _, ks, ke, _, vs, ve, st = read_entry(buf, ps, pe, 2, 2)
            n_at = push(scr, S_AT, n_at, cnt[C_ATTRS], ks, ke, vs, ve)
        elif f == 12:  # execs: map<int64, ExecProfile>
            k, _, _, _, vs, ve, st = entry_fast(buf, ps, pe, 0, 2)
            n_ex = push(scr, S_EX, n_ex, cnt[C_STEPS], k, vs, ve, 0)
        elif f == 15:  # output_shapes: map<int32, Tuple>
            k, _, _, _, vs, ve, st = read_entry(buf, ps, pe, 0, 2)
            n_osh = push(scr, S_OSH, n_osh, cnt[C_OSH], i32(k), vs, ve, 0)
    if min(n_in, n_src, n_at, n_ex, n_osh) < 0:
        return E_CHANGED
    # nodes
    o_nodes[0, j] = nid
    if put_str(buf, op_s, op_e, sbuf, rows, lim, o_nodes, 1, j) < 0:
        return E_CHANGED
    o_nodes[3, j] = device_code(buf, cd_s, cd_e, dev, miss, j) if cd_e > cd_s else -1
    o_nodes[4, j] = device_code(buf, hd_s, hd_e, dev, miss, j) if hd_e > hd_s else -1
    n_shape = rows[C_SHAPE] - rows[C_SHAPE + NROWT]
    params = np.int64(1) if n_shape > 0 else np.int64(0)
    for r in range(rows[C_SHAPE + NROWT], rows[C_SHAPE]):
        if o_shape[r] < 0:
            params = 0
        params *= o_shape[r]
    o_nodes[6, j] = params
    o_nodes[7, j] = n_shape
    order = scr[S_ORD_A]
    # node_inputs: by input index, the last entry of an index wins
    for x in range(map_order(scr[S_IN], n_in, order, scr[S_TMP_A])):
        y = order[x]
        pid = scr[S_IN + 1, y]
        p = np.searchsorted(keys, pid)
        if p >= len(keys) or keys[p] != pid:
            if errv[j, 0] == 0:
                errv[j, 0] = E_INPUT
                errv[j, 1] = pid
            p = 0
        slot = np.int64(0)
        for z in range(n_src - 1, -1, -1):
            if scr[S_SRC, z] == pid:
                slot = scr[S_SRC + 1, z]
                break
        r = next_row(rows, lim, C_INPUTS)
        if r < 0:
            return r
        o_inputs[0, r] = nid
        o_inputs[1, r] = scr[S_IN, y]
        o_inputs[2, r] = pid
        o_inputs[3, r] = p
        o_inputs[4, r] = slot
    # output_shapes: by slot
    for x in range(map_order(scr[S_OSH], n_osh, order, scr[S_TMP_A])):
        y = order[x]
        r = next_row(rows, lim, C_OSH)
        d0 = rows[C_ODIMS]
        nd = tuple_values(buf, scr[S_OSH + 1, y], scr[S_OSH + 2, y], o_odims, d0, lim[C_ODIMS])
        if r < 0 or nd < 0 or d0 + nd > lim[C_ODIMS]:
            return E_CHANGED
        o_osh[0, r] = nid
        o_osh[1, r] = scr[S_OSH, y]
        o_osh[2, r] = d0
        o_osh[3, r] = nd
        rows[C_ODIMS] = d0 + nd
    # node_attrs: by name
    kind, sub, stack = spec
    for x in range(attr_order(buf, scr[S_AT], scr[S_AT + 1], n_at, order)):
        y = order[x]
        r = next_row(rows, lim, C_ATTRS)
        if (r < 0 or put_str(buf, scr[S_AT, y], scr[S_AT + 1, y], sbuf, rows, lim, o_attrs, 1, r) < 0
                or put_str(buf, scr[S_AT + 2, y], scr[S_AT + 3, y], sbuf, rows, lim, o_attrs, 3, r) < 0):
            return E_CHANGED
        o_attrs[0, r] = nid
        o_attrs[5, r] = 1 if is_canonical(buf, scr[S_AT + 2, y], scr[S_AT + 3, y], kind, sub, stack) else 0
    out6 = (o_steps, o_exdev, o_execs, o_mem, o_omem, o_alloc)
    return fill_steps(buf, nid, j, n_ex, step_set, dev, scr, rows, lim, out6, miss, errv)


@njit(cache=True, nogil=True, _nrt=False)
def fill_kernel(buf, idx, node_s, node_e, node_ids, counts, base, keys, step_set, ids, dev, spec, out, used, err,
                 errv, miss, scr, rows, lim, stack):
    kind, sub = spec
    for jj in range(len(idx)):
        j = idx[jj]
        for t in range(NROWT):
            rows[t] = base[j, t]
            rows[t + NROWT] = base[j, t]
            lim[t] = base[j, t] + counts[j, t]
        st = _fill_node(buf, node_s[j], node_e[j], node_ids[j], j, counts[j], rows, lim, keys, step_set, ids, dev,
                        (kind, sub, stack), scr, out, miss, errv)
        if st < 0:
            err[j] = st
        for t in range(NROWT):
            used[j, t] = rows[t] - base[j, t]


@njit(cache=True, _nrt=False)
def compact_rows(arr, base, used):
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
