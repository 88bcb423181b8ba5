"""The fill kernel's per-step rows of one node: from its exec records (ExecProfile), the
node_steps, exec_devices, execs, memory, output_memory and allocations rows."""

from __future__ import annotations

import numpy as np
from numba import njit

from tfprof.ingest.wire.count import C_ALLOC, C_EXDEV, C_EXECS, C_MEM, C_OMEM, C_STEPS, E_STEP
from tfprof.ingest.wire.devices import device_code
from tfprof.ingest.wire.errors import E_CHANGED
from tfprof.ingest.wire.fields import UNCHECKED, entry_fast, i32, read_field, read_varint, tuple_values
from tfprof.ingest.wire.fill_rows import (
    S_ACC,
    S_CPU,
    S_DV,
    S_EX,
    S_OM,
    S_ORD_A,
    S_ORD_B,
    S_PAIR,
    S_TMP_A,
    S_TMP_B,
    push,
    step_row,
)
from tfprof.ingest.wire.order import map_order


@njit(cache=True, _nrt=False)
def _two_numbers(buf, s, e):
    """Varint fields 1 and 2 of a small message (Memory: bytes, ptr; AllocationRecord:
    alloc_micros, alloc_bytes), 0 when absent; and a status."""
    a = b = np.int64(0)
    pos = s
    while pos < e:
        f, wt, v, _, _, pos = read_field(buf, pos, e, UNCHECKED)
        if pos < 0:
            return a, b, E_CHANGED
        if f == 1 and wt == 0:
            a = v
        elif f == 2 and wt == 0:
            b = v
    return a, b, 0


@njit(cache=True, _nrt=False, inline="always")
def _fill_memory(buf, s, e, nid, step, seq, scr, rows, lim, o_mem, o_omem):
    """ExecMemory ``buf[s:e]``: its memory row, then its output_memory rows by slot."""
    r = step_row(o_mem, rows, lim, C_MEM, nid, step)
    if r < 0:
        return r
    o_mem[2, r] = seq
    for c in range(3, 13):
        o_mem[c, r] = 0
    n = 0
    pos = s
    while pos < e:
        f, wt, v, ms, me, pos = read_field(buf, pos, e, UNCHECKED)
        if pos < 0:
            return E_CHANGED
        if f <= 10 and wt == 0:  # memory_micros ... allocator_bytes_in_use
            o_mem[2 + f, r] = v
        elif f == 11 and wt == 2:  # output_memory: map<int32, Memory>
            k, _, _, _, vs, ve, st = entry_fast(buf, ms, me, 0, 2)
            n = push(scr, S_OM, n, scr.shape[1], i32(k), vs, ve, 0)
    if n < 0:
        return n
    order = scr[S_ORD_B]
    for x in range(map_order(scr[S_OM], n, order, scr[S_TMP_B])):
        y = order[x]
        ro = step_row(o_omem, rows, lim, C_OMEM, nid, step)
        size, ptr, st = _two_numbers(buf, scr[S_OM + 1, y], scr[S_OM + 2, y])
        if ro < 0 or st < 0:
            return E_CHANGED
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
        v0, q = read_varint(buf, s + 2, e)
        v1 = np.int64(0)
        if q > 0 and q < e:
            v1, q = read_varint(buf, q, e)
        if q == e:
            return v0, v1
    pair[0] = pair[1] = 0
    tuple_values(buf, s, e, pair, np.int64(0), np.int64(2))  # (not literals: one compiled version)
    return pair[0], pair[1]


@njit(cache=True, _nrt=False, inline="always")
def _fill_times(buf, s, e, nid, step, code, kind, pair, rows, lim, o_execs):
    """The execs rows of ExecTime ``buf[s:e]``, on device ``code``; ``kind`` 0: accelerator, 1: cpu."""
    pos = s
    while pos < e:
        f, _, _, ts, te, pos = read_field(buf, pos, e, UNCHECKED)
        if pos < 0:
            return E_CHANGED
        if f != 1:
            continue
        r = step_row(o_execs, rows, lim, C_EXECS, nid, step)
        if r < 0:
            return r
        o_execs[2, r] = code
        o_execs[3, r] = kind
        o_execs[4, r], o_execs[5, r] = _start_duration(buf, ts, te, pair)
    return 0


@njit(cache=True, _nrt=False)
def fill_steps(buf, nid, j, n_ex, step_set, dev, scr, rows, lim, out, miss, errv):
    """The per-step rows of node ``j`` (node_steps, exec_devices, execs, memory, output_memory,
    allocations), from the ``n_ex`` execs entries (step, ExecProfile) that ``_fill_node`` listed."""
    o_steps, o_exdev, o_execs, o_mem, o_omem, o_alloc = out
    rank = dev[1][2]
    dv = scr[S_DV]
    cap = scr.shape[1]
    steps = scr[S_ORD_A]
    for xs in range(map_order(scr[S_EX], n_ex, steps, scr[S_TMP_A])):
        step, pos, e = scr[S_EX, steps[xs]], scr[S_EX + 1, steps[xs]], scr[S_EX + 2, steps[xs]]
        p = np.searchsorted(step_set, step)
        if p >= len(step_set) or step_set[p] != step:
            if errv[j, 0] == 0 or (errv[j, 0] == E_STEP and step < errv[j, 1]):
                errv[j, 0] = E_STEP
                errv[j, 1] = step
        # The ExecProfile: its node_steps row, its memory and allocations rows as they come, its
        # device lists collected for the exec_devices and execs rows below.
        r = step_row(o_steps, rows, lim, C_STEPS, nid, step)
        if r < 0:
            return r
        for c in range(2, 5):
            o_steps[c, r] = 0
        n_acc = n_cpu = nd = nmem = 0
        while pos < e:
            f, _, v, ps, pe, pos = read_field(buf, pos, e, UNCHECKED)
            if pos < 0:
                return E_CHANGED
            if f <= 3:  # run_count, all_start_micros, latest_end_micros
                o_steps[1 + f, r] = v
            elif f == 4 or f == 5:  # accelerator_execs, cpu_execs: map<device, ExecTime>
                _, ks, ke, _, vs, ve, st = entry_fast(buf, ps, pe, 2, 2)
                if st < 0:
                    return E_CHANGED
                c = rank[device_code(buf, ks, ke, dev, miss, j)]
                if f == 4:
                    n_acc = push(scr, S_ACC, n_acc, cap, c, vs, ve, 0)
                else:
                    n_cpu = push(scr, S_CPU, n_cpu, cap, c, vs, ve, 0)
            elif f == 6:  # devices
                if nd >= len(dv):
                    return E_CHANGED
                dv[nd] = (device_code(buf, ps, pe, dev, miss, j) << 32) | nd
                nd += 1
            elif f == 7:  # memory_execs
                st = _fill_memory(buf, ps, pe, nid, step, nmem, scr, rows, lim, o_mem, o_omem)
                if st < 0:
                    return st
                nmem += 1
            elif f == 11:  # allocations
                micros, size, st = _two_numbers(buf, ps, pe)
                ra = step_row(o_alloc, rows, lim, C_ALLOC, nid, step)
                if ra < 0 or st < 0:
                    return E_CHANGED
                o_alloc[2, ra] = micros
                o_alloc[3, ra] = size
        if n_acc < 0 or n_cpu < 0:
            return E_CHANGED
        # exec_devices: sorted by device (stable), duplicates kept
        for x in range(1, nd):
            y = x
            while y > 0 and rank[dv[y] >> 32] < rank[dv[y - 1] >> 32]:
                tmp = dv[y]
                dv[y] = dv[y - 1]
                dv[y - 1] = tmp
                y -= 1
        for x in range(nd):
            r = step_row(o_exdev, rows, lim, C_EXDEV, nid, step)
            if r < 0:
                return r
            o_exdev[2, r] = dv[x] >> 32
            o_exdev[3, r] = dv[x] & 0xFFFFFFFF  # position in the file, for the reference's dictionary order
        # execs: accelerator then cpu, each by device, each map keeping its last entry per device
        order = scr[S_ORD_B]
        for kind in range(2):
            lst = S_ACC if kind == 0 else S_CPU
            for x in range(map_order(scr[lst], n_acc if kind == 0 else n_cpu, order, scr[S_TMP_B])):
                y = order[x]
                code = dev[1][3, scr[lst, y]]  # rank -> code
                st = _fill_times(buf, scr[lst + 1, y], scr[lst + 2, y], nid, step, code, kind, scr[S_PAIR], rows,
                                 lim, o_execs)
                if st < 0:
                    return st
    return 0
