"""The numba kernels of the synthetic ProfileProto generator (``synthlib.py``).

Always imported under this one module name (``benchmarks/`` on ``sys.path``), like ``synthlib``,
so that numba's cache of the kernels is shared by the scripts and the tests.

They work on ``synthlib._Slots``' tables (the columns are named here) and make the first
generator's random draws in its order: numpy's PCG64 and ``Generator.permutation`` (for the
shuffles of the maps inside each node), the pool of code-trace draws, and numba's
``np.random`` (the per-step records, in output order).
"""

from __future__ import annotations

import numpy as np
from numba import njit

T0_MICROS = 1_795_324_129_607_070  # a plausible epoch time in µs
STEP_PERIOD = 400_000

# Columns of the slot table (one row per slot) and of the per-item tables.
(C_NAME, C_NAME_LEN, C_NAME_TAIL, C_NAME_TAIL_LEN, C_RENAMED, C_OP, C_SHAPE, C_SHAPE_LEN, C_TRAINABLE, C_DEV_EVEN,
 C_DEV_ODD, C_FLOAT_OPS, C_RUNS, C_CATEGORY, C_BOUND) = range(15)
CAT_VAR_CONST, CAT_SHAPE, CAT_RELU = 1, 2, 3  # C_CATEGORY: what the draw of which nodes run looks at
I_REF, I_SLOT, I_IN_TOWER = range(3)  # in_items, src_items: the input node, its output slot, id moved by tower
A_CLASS, A_HEAD, A_HEAD_LEN, A_TAIL, A_TAIL_LEN = range(5)  # attr_items: a whole entry, or a _class split
O_ENTRY, O_ENTRY_LEN, O_BYTES = range(3)  # out_items
OP_NAME, OP_NAME_LEN, OP_HEAVY, OP_LIB = range(4)  # op_table; OP_LIB..OP_LIB+5: the op library's frames
F_FILE, F_FUNC, F_LINE, F_TEXT = range(4)  # frame_table; F_TEXT..F_TEXT+6: by line % 7
N_DEVICES = 7  # consts rows: the devices (cpu, gpu, stream:all, streams), then these
K_DEVICE, K_TRAINABLE, K_CLASS, K_ODD = 0, N_DEVICES, N_DEVICES + 1, N_DEVICES + 2
N_STACK, N_WRAPPERS, N_LIB = 6, 5, 6  # frame_table: the stack's frames, the wrappers', then libraries'


# ------------------------------------------------------------------------------ numpy's PCG64, in numba

# default_rng's bit generator (128-bit LCG, XSL-RR output) and Generator.permutation's draws
# (shuffle: random_interval, masked rejection on 32-bit halves of one 64-bit draw). A state is
# uint64[6]: state high, low, increment high, low, whether a 32-bit half is buffered, that half.
_U1, _U32, _U58, _U63, _U64 = np.uint64(1), np.uint64(32), np.uint64(58), np.uint64(63), np.uint64(64)
_LOW32 = np.uint64(0xFFFFFFFF)
_MUL_HI, _MUL_LO = np.uint64(0x2360ED051FC65DA4), np.uint64(0x4385DF649FCCF645)


@njit(cache=True)
def _mulhi(a, b):
    """The high 64 bits of a 64 x 64-bit product."""
    a0, a1, b0, b1 = a & _LOW32, a >> _U32, b & _LOW32, b >> _U32
    p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
    mid = (p00 >> _U32) + (p01 & _LOW32) + (p10 & _LOW32)
    return a1 * b1 + (p01 >> _U32) + (p10 >> _U32) + (mid >> _U32)


@njit(cache=True)
def _pcg_next64(st):
    hi, lo = st[0], st[1]
    new_lo = lo * _MUL_LO
    new_hi = _mulhi(lo, _MUL_LO) + lo * _MUL_HI + hi * _MUL_LO
    lo = new_lo + st[3]
    hi = new_hi + st[2] + (_U1 if lo < new_lo else np.uint64(0))
    st[0], st[1] = hi, lo
    x = hi ^ lo
    rot = hi >> _U58
    return (x >> rot) | (x << ((_U64 - rot) & _U63))


@njit(cache=True)
def _pcg_next32(st):
    if st[4]:
        st[4] = 0
        return st[5]
    v = _pcg_next64(st)
    st[4] = 1
    st[5] = v >> _U32
    return v & _LOW32


@njit(cache=True)
def permute(st, perm, m, shuffle):
    """``perm[:m]`` = ``Generator.permutation(m)`` when shuffling (and m > 1), else 0..m-1."""
    for k in range(m):
        perm[k] = k
    if not shuffle or m < 2:
        return
    for k in range(m - 1, 0, -1):
        top = np.uint64(k)
        mask = top
        for sh in (1, 2, 4, 8, 16, 32):
            mask |= mask >> np.uint64(sh)
        v = _pcg_next32(st) & mask
        while v > top:
            v = _pcg_next32(st) & mask
        j = np.int64(v)
        perm[k], perm[j] = perm[j], perm[k]


def pcg_get(rng: np.random.Generator) -> np.ndarray:
    s = rng.bit_generator.state
    m = (1 << 64) - 1
    st, inc = s["state"]["state"], s["state"]["inc"]
    return np.array([st >> 64, st & m, inc >> 64, inc & m, s["has_uint32"], s["uinteger"]], np.uint64)


def pcg_set(rng: np.random.Generator, st: np.ndarray) -> None:
    hi, lo, ihi, ilo, has, half = (int(x) for x in st)
    rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": hi << 64 | lo, "inc": ihi << 64 | ilo},
                               "has_uint32": has, "uinteger": half}


# ------------------------------------------------------------------------------ kernels


@njit(cache=True)
def _locate(i, l0, period):
    """(slot, tower) of node i."""
    if i < l0:
        return i, 0
    q = i - l0
    return l0 + q % period, 1 + q // period


@njit(cache=True)
def _frame_of(f, n_wrap, op_row):
    """The frame table row of a trace's frame f: the stack, n_wrap wrappers, the op library."""
    if f < N_STACK:
        return f
    if f < N_STACK + n_wrap:
        return N_STACK + (f - N_STACK) % N_WRAPPERS
    return op_row[OP_LIB + f - N_STACK - n_wrap]


@njit(cache=True)
def _trace_shape(stream, pos, lo, hi, exact):
    """(frames, wrappers) of the trace whose draws start at ``pos``: "lo..hi frames" asks for a
    depth; the default asks for 5..15 of the 12 named frames; an exact depth adds wrappers."""
    depth = lo + stream[pos] % (hi - lo + 1)
    if depth <= N_STACK + N_LIB:
        return depth, 0
    if exact:
        return depth, depth - N_STACK - N_LIB
    return N_STACK + N_LIB, 0


@njit(cache=True)
def _sid(sid_of, n_sid, k):
    if sid_of[k] == 0:  # tfprof's string ids are small integers handed out in order of first use
        n_sid[0] += 1
        sid_of[k] = n_sid[0]


@njit(cache=True)
def trace_pass(stream, avail, i, pos, n_added, l0, period, slot, op_table, frame_table, lo, hi, exact, sid_of, n_sid,
               tpos):
    """Nodes i.. in id order while ``stream`` surely holds their trace draws: where each node's
    draws start (``tpos``), and the string ids in order of first use. Returns (next node, pos)."""
    most = 1 + (hi if exact else min(hi, N_STACK + N_LIB))
    while i < n_added and pos + most <= avail:
        s, t = _locate(i, l0, period)
        op = slot[s, C_OP]
        tpos[i] = pos
        nf, n_wrap = _trace_shape(stream, pos, lo, hi, exact)
        for f in range(nf):
            fr = frame_table[_frame_of(f, n_wrap, op_table[op])]
            line = fr[F_LINE] + stream[pos + 1 + f] % 40
            _sid(sid_of, n_sid, fr[F_FILE])
            _sid(sid_of, n_sid, fr[F_FUNC])
            _sid(sid_of, n_sid, fr[F_TEXT + line % 7])
        pos += 1 + nf
        i += 1
    return i, pos


@njit(cache=True)
def shuffle_pass(st, n, l0, period, in_start, attr_start, src_start, out_start, odd_attrs, width, s_hi, s_lo,
                 s_half):
    """Keep the PCG64 state at each node, then make its four shuffles (inputs, attrs, src, outputs)."""
    perm = np.empty(width, np.int64)
    for i in range(n):
        s, t = _locate(i, l0, period)
        s_hi[i], s_lo[i] = st[0], st[1]
        s_half[i] = np.int64(st[5]) if st[4] else -1
        permute(st, perm, in_start[s + 1] - in_start[s], True)
        odd = 2 if odd_attrs and i % 97 == 0 else 0
        permute(st, perm, attr_start[s + 1] - attr_start[s] + odd, True)
        permute(st, perm, src_start[s + 1] - src_start[s], True)
        permute(st, perm, out_start[s + 1] - out_start[s], True)


@njit(cache=True)
def run_pass(r, n, l0, period, slot, all_run, loops, run, step_period, loop):
    """Which nodes run, every how many steps, how many times a step (the first generator's draw)."""
    for i in range(n):
        s, t = _locate(i, l0, period)
        run[i], step_period[i], loop[i] = slot[s, C_RUNS], 1, 1
        if all_run:
            run[i] = 1
            continue
        cat = slot[s, C_CATEGORY]
        if cat == CAT_VAR_CONST and r[i] < 0.5:
            run[i] = 0  # variables and constants mostly do not show up in the step stats
        if cat == CAT_SHAPE and r[i] < 0.3:
            step_period[i] = 5  # e.g. a summary-like op that runs every 5th step
        if loops and cat == CAT_RELU and r[i] < 0.05:
            loop[i] = 3  # inside a while loop


@njit(cache=True)
def seed_numba(seed):
    np.random.seed(seed)


@njit(cache=True)
def _put_varint(out, pos, v):
    u = np.uint64(v)
    while u >= np.uint64(0x80):
        out[pos] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(u)
    return pos + 1


@njit(cache=True)
def _put_int(out, pos, field, v):
    """A proto3 int64 field (left out when zero)."""
    if v == 0:
        return pos
    pos = _put_varint(out, pos, field << 3)
    return _put_varint(out, pos, v)


@njit(cache=True)
def _open(out, pos, field):
    """Start a length-delimited field; returns (payload start, length byte position)."""
    pos = _put_varint(out, pos, field << 3 | 2)
    return pos + 1, pos


@njit(cache=True)
def _open_entry(out, pos, field, key):
    """Start map entry ``field`` and write its key (always, zero too); returns (position, length
    byte position) for the value and ``_close``."""
    pos, lenpos = _open(out, pos, field)
    pos = _put_varint(out, pos, 1 << 3)
    return _put_varint(out, pos, key), lenpos


@njit(cache=True)
def _put_int_entry(out, pos, field, key, value):
    """A whole map<int64, int64> entry (key and value written even when zero)."""
    pos, lenpos = _open_entry(out, pos, field, key)
    pos = _put_varint(out, pos, 2 << 3)
    pos = _put_varint(out, pos, value)
    return _close(out, lenpos, pos)


@njit(cache=True)
def _close(out, lenpos, pos):
    """Finish a field opened with ``_open``: write its length, moving the payload if it needs > 1 byte."""
    n = pos - lenpos - 1
    if n < 0x80:
        out[lenpos] = n
        return pos
    k = 1
    m = n >> 7
    while m:
        k += 1
        m >>= 7
    payload = out[lenpos + 1:pos].copy()
    out[lenpos + k:pos + k - 1] = payload
    _put_varint(out, lenpos, n)
    return pos + k - 1


@njit(cache=True)
def _put_raw(out, pos, src, off, n):
    out[pos:pos + n] = src[off:off + n]
    return pos + n


@njit(cache=True)
def _put_bytes(out, pos, field, src, off, n):
    pos = _put_varint(out, pos, field << 3 | 2)
    pos = _put_varint(out, pos, n)
    return _put_raw(out, pos, src, off, n)


@njit(cache=True)
def _put_renamed(out, pos, blob, head, head_len, tail, tail_len, renamed, tower):
    """head, then (for a template) the tower number and tail."""
    pos = _put_raw(out, pos, blob, head, head_len)
    if renamed:
        digits = 1
        while tower >= 10 ** digits:
            digits += 1
        for d in range(digits):
            out[pos + digits - 1 - d] = 48 + (tower // 10 ** d) % 10
        pos = _put_raw(out, pos + digits, blob, tail, tail_len)
    return pos


@njit(cache=True)
def write_chunk(out, j, order, n, tables, traces, draws, shuffle, odd_attrs, step_ids, step_order, dev_rank):
    """Write the nodes map entries of nodes ``order[j:]`` into ``out`` while they surely fit.

    Returns (bytes written, next j). ``tables``: the _Slots arrays; ``traces``: the stream of
    trace draws and where each node's start, the string ids, the asked depth; ``draws``: which
    nodes run, their step period and loop count, their PCG64 state before their shuffles.
    ``step_order`` is the steps' shuffled order, carried from node to node and call to call.
    """
    (l0, period, blob, slot, in_start, in_items, attr_start, attr_items, src_start, src_items, out_start, out_items,
     op_table, op_micros, frame_table, consts, width) = tables
    stream, tpos, sid_of, lo, hi, exact, with_trace = traces
    run, step_period, loop, s_hi, s_lo, s_half, increment = draws
    st = np.zeros(6, np.uint64)
    st[2], st[3] = increment[0], increment[1]
    perm = np.empty(width, np.int64)
    devs = np.empty(4, np.int64)
    n_steps = len(step_ids)
    pos = 0
    while j < len(order):
        i = order[j]
        s, tower = _locate(i, l0, period)
        if pos + slot[s, C_BOUND] > len(out):
            break
        j += 1
        op = slot[s, C_OP]
        dev = slot[s, C_DEV_EVEN] if tower % 2 == 0 else slot[s, C_DEV_ODD]
        kind = 0 if not run[i] else (2 if dev == 1 else 1)  # 1 ran on the cpu, 2 on the gpu
        base = l0 + (tower - 1) * period  # the tower's first node
        if shuffle:
            st[0], st[1] = s_hi[i], s_lo[i]
            st[4] = 0
            if s_half[i] >= 0:
                st[4], st[5] = 1, s_half[i]
        p, lp0 = _open_entry(out, pos, 1, i)  # ProfileProto.nodes entry
        p, lp1 = _open(out, p, 2)  # ProfileNode, fields in number order as TensorFlow's C++ writes them
        p, lp = _open(out, p, 1)
        p = _put_renamed(out, p, blob, slot[s, C_NAME], slot[s, C_NAME_LEN], slot[s, C_NAME_TAIL],
                         slot[s, C_NAME_TAIL_LEN], slot[s, C_RENAMED], tower)
        p = _close(out, lp, p)
        a0 = in_start[s]
        permute(st, perm, in_start[s + 1] - a0, shuffle)
        for q in range(in_start[s + 1] - a0):
            k = perm[q]
            ref = in_items[a0 + k, I_REF] + (base if in_items[a0 + k, I_IN_TOWER] else 0)
            p = _put_int_entry(out, p, 2, k, ref)
        p = _put_raw(out, p, blob, slot[s, C_SHAPE], slot[s, C_SHAPE_LEN])
        if kind:
            p = _put_bytes(out, p, 5, blob, consts[K_DEVICE + dev, 0], consts[K_DEVICE + dev, 1])
        p = _put_bytes(out, p, 5, blob, op_table[op, OP_NAME], op_table[op, OP_NAME_LEN])
        if slot[s, C_TRAINABLE]:
            p = _put_bytes(out, p, 5, blob, consts[K_TRAINABLE, 0], consts[K_TRAINABLE, 1])
        if kind:
            p = _put_bytes(out, p, 6, blob, consts[K_DEVICE + dev, 0], consts[K_DEVICE + dev, 1])
            p = _put_bytes(out, p, 7, blob, consts[K_DEVICE, 0], consts[K_DEVICE, 1])
        if slot[s, C_FLOAT_OPS]:
            p = _put_varint(out, p, 8 << 3)
            p = _put_varint(out, p, slot[s, C_FLOAT_OPS])
        p = _put_bytes(out, p, 9, blob, op_table[op, OP_NAME], op_table[op, OP_NAME_LEN])
        if with_trace:
            t0 = tpos[i]
            nf, n_wrap = _trace_shape(stream, t0, lo, hi, exact)
            if nf:
                p, lp = _open(out, p, 10)
                for f in range(nf):
                    fr = frame_table[_frame_of(f, n_wrap, op_table[op])]
                    line = fr[F_LINE] + stream[t0 + 1 + f] % 40
                    p, lp2 = _open(out, p, 1)  # CodeDef.Trace: file and function by id, some with the line by id
                    p = _put_varint(out, p, 2 << 3)
                    p = _put_varint(out, p, line)
                    p = _put_varint(out, p, 5 << 3)
                    p = _put_varint(out, p, -1)
                    p = _put_varint(out, p, 6 << 3)
                    p = _put_varint(out, p, sid_of[fr[F_FILE]])
                    p = _put_varint(out, p, 7 << 3)
                    p = _put_varint(out, p, sid_of[fr[F_FUNC]])
                    if line % 3 == 0:
                        p = _put_varint(out, p, 8 << 3)
                        p = _put_varint(out, p, sid_of[fr[F_TEXT + line % 7]])
                    p = _close(out, lp2, p)
                p = _close(out, lp, p)
        a0 = attr_start[s]
        n_attr = attr_start[s + 1] - a0
        odd = 2 if odd_attrs and i % 97 == 0 else 0
        permute(st, perm, n_attr + odd, shuffle)
        for q in range(n_attr + odd):
            k = perm[q]
            if k >= n_attr:  # the odd attrs come last, before the shuffle
                p = _put_raw(out, p, blob, consts[K_ODD + k - n_attr, 0], consts[K_ODD + k - n_attr, 1])
                continue
            at = attr_items[a0 + k]
            if not at[A_CLASS]:
                p = _put_raw(out, p, blob, at[A_HEAD], at[A_HEAD_LEN])
                continue
            p, lp = _open(out, p, 11)  # _class: list { s: "loc:@tower_<t>/..." }
            p = _put_bytes(out, p, 1, blob, consts[K_CLASS, 0], consts[K_CLASS, 1])
            p, lp2 = _open(out, p, 2)
            p, lp3 = _open(out, p, 1)
            p, lp4 = _open(out, p, 2)
            p = _put_renamed(out, p, blob, at[A_HEAD], at[A_HEAD_LEN], at[A_TAIL], at[A_TAIL_LEN], 1, tower)
            p = _close(out, lp4, p)
            p = _close(out, lp3, p)
            p = _close(out, lp2, p)
            p = _close(out, lp, p)
        if kind:
            heavy_gpu = dev == 1 and op_table[op, OP_HEAVY] != 0
            p = _put_execs(out, p, i, n, kind, np.int64(step_period[i]), np.int64(loop[i]), op_micros[op], heavy_gpu,
                           out_items[out_start[s]:out_start[s + 1], O_BYTES], blob, consts, shuffle, step_ids, step_order,
                           n_steps, dev_rank, devs)
        if i:
            p = _put_varint(out, p, 13 << 3)
            p = _put_varint(out, p, i)
        a0 = src_start[s]
        permute(st, perm, src_start[s + 1] - a0, shuffle)
        for q in range(src_start[s + 1] - a0):
            k = perm[q]
            ref = src_items[a0 + k, I_REF] + (base if src_items[a0 + k, I_IN_TOWER] else 0)
            p = _put_int_entry(out, p, 14, ref, src_items[a0 + k, I_SLOT])
        a0 = out_start[s]
        permute(st, perm, out_start[s + 1] - a0, shuffle)
        for q in range(out_start[s + 1] - a0):
            k = perm[q]
            p = _put_raw(out, p, blob, out_items[a0 + k, O_ENTRY], out_items[a0 + k, O_ENTRY_LEN])
        p = _close(out, lp1, p)
        pos = _close(out, lp0, p)
    return pos, j


@njit(cache=True)
def _put_execs(out, p, i, n, kind, every, k, dur_mu, heavy_gpu, out_bytes, dev, dev_off, shuffle, steps, step_order,
               n_steps, dev_rank, devs):
    """Node i's ExecProfile per step it ran in (ProfileNode.execs, field 12), from numba's np.random."""
    if shuffle:
        np.random.shuffle(step_order)
    n_alloc = 2 if heavy_gpu else 0
    total_out = 0
    for o in range(len(out_bytes)):
        total_out += out_bytes[o]
    for si in range(n_steps):
        s = steps[step_order[si]]
        if s < 0 or s % every:
            continue
        p, lp2 = _open_entry(out, p, 12, s)  # execs entry
        p, lp3 = _open(out, p, 2)
        base = T0_MICROS + s * STEP_PERIOD + i * STEP_PERIOD // (2 * n)
        starts = np.empty(k, np.int64)
        durs = np.empty(k, np.int64)
        kstarts = np.empty(k, np.int64)
        kdurs = np.empty(k, np.int64)
        for r in range(k):
            starts[r] = base + r * 3 * (dur_mu + 5) + np.random.randint(0, 30)
            d = int(np.random.exponential(dur_mu))
            durs[r] = d if d > 0 else 1
            kstarts[r] = starts[r] + 2 + np.random.randint(0, 20)
            kd = int(np.random.exponential(dur_mu * 4))
            kdurs[r] = kd if kd > 0 else 1
        first = starts[0]
        last = 0
        for r in range(k):
            last = max(last, starts[r] + durs[r])
            if kind == 2:
                last = max(last, kstarts[r] + kdurs[r])
        p = _put_int(out, p, 1, k)
        p = _put_int(out, p, 2, first)
        p = _put_int(out, p, 3, last)
        canon = 0 if kind == 1 else 1
        if kind == 2:  # accelerator_execs[stream:all]
            p, lp4 = _open(out, p, 4)
            p = _put_bytes(out, p, 1, dev, dev_off[K_DEVICE + 2, 0], dev_off[K_DEVICE + 2, 1])
            p, lp5 = _open(out, p, 2)
            for r in range(k):
                p, lp6 = _open(out, p, 1)
                p, lp7 = _open(out, p, 1)
                p = _put_varint(out, p, kstarts[r])
                p = _put_varint(out, p, kdurs[r])
                p = _close(out, lp7, p)
                p = _close(out, lp6, p)
            p = _close(out, lp5, p)
            p = _close(out, lp4, p)
        # cpu_execs[canonical device]
        p, lp4 = _open(out, p, 5)
        p = _put_bytes(out, p, 1, dev, dev_off[K_DEVICE + canon, 0], dev_off[K_DEVICE + canon, 1])
        p, lp5 = _open(out, p, 2)
        for r in range(k):
            p, lp6 = _open(out, p, 1)
            p, lp7 = _open(out, p, 1)
            p = _put_varint(out, p, starts[r])
            p = _put_varint(out, p, durs[r])
            p = _close(out, lp7, p)
            p = _close(out, lp6, p)
        p = _close(out, lp5, p)
        p = _close(out, lp4, p)
        # devices, sorted
        nd = 1
        devs[0] = canon
        if kind == 2:
            devs[1] = 2
            devs[2] = 3 + i % 4  # the node's stream
            nd = 3
        for x in range(1, nd):
            y = x
            while y > 0 and dev_rank[devs[y]] < dev_rank[devs[y - 1]]:
                devs[y], devs[y - 1] = devs[y - 1], devs[y]
                y -= 1
        for x in range(nd):
            c = devs[x]
            p = _put_bytes(out, p, 6, dev, dev_off[K_DEVICE + c, 0], dev_off[K_DEVICE + c, 1])
        # memory_execs, one per canonical execution
        for r in range(k):
            p, lp4 = _open(out, p, 7)
            temp = np.random.randint(0, 4) * 256
            pers = 0
            if r == 0 and np.random.random() < 0.02:
                pers = 1024
            p = _put_int(out, p, 1, starts[r] + durs[r])
            if kind == 1:
                p = _put_int(out, p, 2, temp)
                p = _put_int(out, p, 3, pers)
            else:
                p = _put_int(out, p, 4, temp)
                p = _put_int(out, p, 5, pers)
            p = _put_int(out, p, 6, total_out + temp + pers)
            p = _put_int(out, p, 7, total_out + temp + pers)
            p = _put_int(out, p, 8, total_out // 2 + pers)
            p = _put_int(out, p, 9, total_out)
            if kind == 2:
                p = _put_int(out, p, 10, (1 << 28) + np.random.randint(0, 1 << 20) * 256)
            for o in range(len(out_bytes)):
                p, lp5 = _open_entry(out, p, 11, o)
                p, lp6 = _open(out, p, 2)
                p = _put_int(out, p, 1, out_bytes[o])
                p = _put_int(out, p, 2, 0x7F0000000000 + np.random.randint(0, 1 << 30) * 256)
                p = _close(out, lp6, p)
                p = _close(out, lp5, p)
            p = _close(out, lp4, p)
        for r in range(n_alloc):  # allocations
            p, lp4 = _open(out, p, 11)
            p = _put_int(out, p, 1, starts[0] + r)
            b = out_bytes[0] if len(out_bytes) else 256
            p = _put_int(out, p, 2, b if r % 2 == 0 else -b)
            p = _close(out, lp4, p)
        p = _close(out, lp3, p)
        p = _close(out, lp2, p)
    return p
