"""Numba kernels over an XSpace's events, line by line off the raw bytes (``xwalk`` found the
lines): each event's metadata id, offset and duration, its ``args`` JSON text, and where the stats
the classification reads (``SPECIALS``) lie.

An event's stats are its metadata's stats, then its own, as a dict by stat name: a name seen again
keeps its first place and takes the later value. ``args`` is ``json.dumps`` of that dict, written
straight into one byte buffer (``xrender``): the names come pre-quoted from a table (``key_txt``),
doubles from a table of their texts computed once per distinct value in Python. One pass
usually does it all, every str value checked as UTF-8 on the way; the caller runs it again when
the pass met doubles (their texts were not known yet) or when ``out``, the buffer it writes into,
ran out (sized generously: untouched pages of a numpy buffer cost no memory). The stats named in
``SPECIALS`` are recorded as *hits* (event, column, where the winning stat lies) and turned into
whole columns by ``column`` and ``ints``.
"""

from __future__ import annotations

from numba import njit

from tfprof.ingest.foreign.xrender import (
    BYTES,
    DOUBLE,
    INT64,
    REF,
    STR,
    UINT64,
    bits,
    find,
    lookup,
    put,
    put_bytes,
    put_hex,
    put_int,
    put_json_str,
    put_table,
    stat,
)
from tfprof.ingest.foreign.xwalk import L_E, L_PLANE, L_S, M_E, M_S
from tfprof.ingest.wire.fields import read_len, read_tag, read_varint, skip

SPECIALS = ("hlo_op", "hlo_module", "tf_op", "program_id", "step_num", "correlation_id", "requested_bytes",
            "tf_function_call", "_p", "_pt", "_c", "_ct")
"""The stats the classification reads; ``spcol`` maps a name index to its place here. Hit columns
0-2 are texts (``str()`` of the value), 3-6 integers, 7 a presence (``tf_function_call``); 8 and 9
are the producer and consumer flows (``_p`` with its ``_pt``, ``_c`` with its ``_ct``)."""
C_INTS, C_PRESENCE, C_PRODUCER, C_CONSUMER = 3, 7, 8, 9
H_EVENT, H_COL, H_S, H_E, H_S2, H_E2 = range(6)  # columns of a hit row
S_STAMP, S_KIND, S_VALUE, S_VS, S_VE, S_SS, S_SE = range(7)  # columns of the per-name scratch
# the kernel's counters (N_FULL: 0, or ``out`` ran out and this is the room a run needs)
N_EVENTS, N_DOUBLES, N_HITS, N_BYTES, N_FULL = range(5)
DOUBLE_BOUND = 24  # the longest ``repr`` of a double: -2.2250738585072014e-308


@njit(cache=True, _nrt=False)
def _take(buf, ss, se, plane, sd, skeys, svals, stab, empty, scratch, order, cnt, mark):
    """Add the stat ``buf[ss:se]`` to the event's dict (``scratch``, a row per name index; ``order``:
    the names in their first places); the dict's new size, or < 0 when the stat is damaged."""
    meta, kind, value, vs, ve, status = stat(buf, ss, se, True)
    if status < 0:
        return status
    nm = lookup(sd, skeys, svals, stab, plane, meta)
    if nm < 0:
        nm = empty
    if scratch[nm, S_STAMP] != mark:
        scratch[nm, S_STAMP] = mark
        order[cnt] = nm
        cnt += 1
    scratch[nm, S_KIND] = kind
    scratch[nm, S_VALUE] = value
    scratch[nm, S_VS] = vs
    scratch[nm, S_VE] = ve
    scratch[nm, S_SS] = ss
    scratch[nm, S_SE] = se
    return cnt


@njit(cache=True, _nrt=False)
def _ref(value, plane, sd, skeys, svals, stab, empty):
    """The name index a ref value points at (the empty name's when none: a uint64 past int64's
    range never names an id)."""
    nm = lookup(sd, skeys, svals, stab, plane, value) if value >= 0 else -1
    return empty if nm < 0 else nm


@njit(cache=True, _nrt=False)
def _bound(kind, vs, ve, kmax):
    """The most bytes ``_json_value`` writes for a value."""
    if kind == STR:
        return 6 * (ve - vs) + 2
    if kind == BYTES:
        return 2 * (ve - vs) + 2
    return kmax if kind == REF else DOUBLE_BOUND


# (inlined, as ``_text`` is: called once per stat, a call passing this many arrays cost more than
# the value's writing; keras x3300's events kernel 0.81 -> 0.60 s)
@njit(cache=True, _nrt=False, inline="always")
def _json_value(buf, nm, scratch, plane, sd, skeys, svals, stab, empty, key_txt, key_off, dkeys, didx, djs_txt,
                djs_off, dbl, n, out, o, write):
    """``json.dumps`` of name ``nm``'s value. A double before its text is known (no ``dkeys``) is
    recorded in ``dbl`` and takes its most bytes, unwritten: the caller runs again."""
    kind = scratch[nm, S_KIND]
    value = scratch[nm, S_VALUE]
    vs = scratch[nm, S_VS]
    if kind == DOUBLE:
        if len(dkeys) == 0:
            if n[N_DOUBLES] < len(dbl):
                dbl[n[N_DOUBLES]] = bits(buf, vs)
            n[N_DOUBLES] += 1
            return o + DOUBLE_BOUND
        return put_table(djs_txt, djs_off, find(dkeys, didx, 0, len(dkeys), bits(buf, vs)), out, o, write)
    if kind == INT64 or kind == UINT64:
        return put_int(out, o, value, kind, write)
    if kind == STR:
        return put_json_str(buf, vs, scratch[nm, S_VE], out, o, write)
    if kind == BYTES:
        o = put(out, o, 34, write)
        o = put_hex(buf, vs, scratch[nm, S_VE], out, o, write)
        return put(out, o, 34, write)
    if kind == REF:
        return put_table(key_txt, key_off, _ref(value, plane, sd, skeys, svals, stab, empty), out, o, write)
    for c in (110, 117, 108, 108):  # null
        o = put(out, o, c, write)
    return o


@njit(cache=True, _nrt=False)
def _event(buf, s, e, k, li, plane, md, mkeys, mvals, mtab, ents, sd, skeys, svals, stab, empty, key_txt, key_off,
           kmax, spcol, sp, dkeys, didx, djs_txt, djs_off, ev_line, ev_ent, ev_off, ev_dur, dbl, out, offs, valid,
           hits, scratch, order, n):
    """Event ``k`` (the XEvent ``buf[s:e]`` on line ``li``): 0, or < 0 when it is damaged."""
    meta = offset = dur = 0
    pos = s
    while pos < e:
        f, wt, pos = read_tag(buf, pos, e)
        if pos < 0:
            return pos
        if (f == 1 or f == 2 or f == 3 or f == 5) and wt == 0:
            v, pos = read_varint(buf, pos, e)
            if f == 1:
                meta = v
            elif f == 2:
                offset = v
            elif f == 3:
                dur = v
            else:
                offset = 0  # num_occurrences replaces the start (a oneof)
        else:
            pos = skip(buf, pos, e, wt, f)
        if pos < 0:
            return pos
    ent = lookup(md, mkeys, mvals, mtab, plane, meta)
    ev_line[k] = li
    ev_ent[k] = ent
    ev_off[k] = offset
    ev_dur[k] = dur
    mark = k + 1
    cnt = 0
    for own in range(2):  # the metadata's stats, then the event's
        if own:
            pos, end, field = s, e, 4
        elif ent >= 0:
            pos, end, field = ents[ent, M_S], ents[ent, M_E], 5
        else:
            continue
        while pos < end:
            f, wt, pos = read_tag(buf, pos, end)
            if pos < 0:
                return pos
            if f == field and wt == 2:
                a, b = read_len(buf, pos, end)
                if a < 0:
                    return a
                cnt = _take(buf, a, b, plane, sd, skeys, svals, stab, empty, scratch, order, cnt, mark)
                if cnt < 0:
                    return cnt
                pos = b
            else:
                pos = skip(buf, pos, end, wt, f)
                if pos < 0:
                    return pos
    o = n[N_BYTES]
    h = n[N_HITS]
    if cnt:
        bound = 2
        for j in range(cnt):
            nm = order[j]
            bound += key_off[nm + 1] - key_off[nm] + 4 + _bound(scratch[nm, S_KIND], scratch[nm, S_VS],
                                                                 scratch[nm, S_VE], kmax)
        if o + bound > len(out):  # from here on only measured, and the room a run needs noted
            n[N_FULL] = max(n[N_FULL], o + bound)
        write = n[N_FULL] == 0
        o = put(out, o, 123, write)
        for j in range(cnt):
            nm = order[j]
            if j:
                o = put(out, o, 44, write)
                o = put(out, o, 32, write)
            o = put_table(key_txt, key_off, nm, out, o, write)
            o = put(out, o, 58, write)
            o = put(out, o, 32, write)
            o = _json_value(buf, nm, scratch, plane, sd, skeys, svals, stab, empty, key_txt, key_off, dkeys, didx,
                            djs_txt, djs_off, dbl, n, out, o, write)
            c = spcol[nm]
            if c >= 0 and c != 9 and c != 11:  # a special stat (a flow's type goes with its id)
                if h < len(hits):
                    nm2 = sp[c + 1] if c >= 8 else -1
                    two = nm2 >= 0 and scratch[nm2, S_STAMP] == mark
                    hits[h, H_EVENT] = k
                    hits[h, H_COL] = c if c < 8 else (C_PRODUCER if c == 8 else C_CONSUMER)
                    hits[h, H_S] = scratch[nm, S_SS]
                    hits[h, H_E] = scratch[nm, S_SE]
                    hits[h, H_S2] = scratch[nm2, S_SS] if two else -1
                    hits[h, H_E2] = scratch[nm2, S_SE] if two else -1
                h += 1
        o = put(out, o, 125, write)
    offs[k + 1] = o
    valid[k] = cnt > 0
    n[N_BYTES] = o
    n[N_HITS] = h
    return 0


@njit(cache=True, nogil=True, _nrt=False)
def skip_events(buf, pos, end, count):
    """Where the line payload ``buf[pos:end]`` goes on after its first ``count`` events (the
    outline's walk checked the line)."""
    while pos < end and count > 0:
        f, wt, pos = read_tag(buf, pos, end)
        if f == 4 and wt == 2:
            _, pos = read_len(buf, pos, end)
            count -= 1
        else:
            pos = skip(buf, pos, end, wt, f)
    return pos


@njit(cache=True, nogil=True, _nrt=False)
def events(buf, lines, md, mkeys, mvals, mtab, ents, sd, skeys, svals, stab, empty, key_txt, key_off, kmax, spcol, sp,
           dkeys, didx, djs_txt, djs_off, ev_line, ev_ent, ev_off, ev_dur, dbl, out, offs, valid, hits, scratch, order,
           n):
    """Every event of every line, in the file's order (``_event``); 0, or < 0 when one is damaged.
    ``md``/``mkeys``/``mvals``/``mtab``: the event metadata entry row of each key, by plane
    (``xrender.lookup``); ``sd``/``skeys``/``svals``/``stab`` likewise the name index of each stat
    metadata id; ``empty``: the index of the name "" (a stat of an unknown id); ``kmax``: the
    longest quoted name. The caller runs it again when ``n`` says that ``out``, ``hits`` or ``dbl``
    ran out, or that doubles were met before their texts were known."""
    for li in range(len(lines)):
        plane = lines[li, L_PLANE]
        pos = lines[li, L_S]
        end = lines[li, L_E]
        while pos < end:
            f, wt, pos = read_tag(buf, pos, end)
            if f == 4 and wt == 2:
                a, b = read_len(buf, pos, end)
                if n[N_EVENTS] >= len(ev_line):
                    return -6
                r = _event(buf, a, b, n[N_EVENTS], li, plane, md, mkeys, mvals, mtab, ents, sd, skeys, svals, stab,
                           empty, key_txt, key_off, kmax, spcol, sp, dkeys, didx, djs_txt, djs_off, ev_line, ev_ent,
                           ev_off, ev_dur, dbl, out, offs, valid, hits, scratch, order, n)
                if r < 0:
                    return r
                n[N_EVENTS] += 1
                pos = b
            else:
                pos = skip(buf, pos, end, wt, f)  # (the outline's walk checked the line)
    return 0


@njit(cache=True, _nrt=False, inline="always")
def _text(buf, ss, se, plane, none_text, sd, skeys, svals, stab, empty, raw_txt, raw_off, dkeys, didx, drep_txt, drep_off,
          out, o, write):
    """``str()`` of the stat ``buf[ss:se]``'s value: (end, whether it is None); a None value is
    written ``None`` when ``none_text``."""
    _, kind, value, vs, ve, _ = stat(buf, ss, se, False)
    if kind == DOUBLE:
        return put_table(drep_txt, drep_off, find(dkeys, didx, 0, len(dkeys), bits(buf, vs)), out, o, write), False
    if kind == INT64 or kind == UINT64:
        return put_int(out, o, value, kind, write), False
    if kind == STR:
        return put_bytes(buf, vs, ve, out, o, write), False
    if kind == BYTES:
        return put_hex(buf, vs, ve, out, o, write), False
    if kind == REF:
        return put_table(raw_txt, raw_off, _ref(value, plane, sd, skeys, svals, stab, empty), out, o, write), False
    if none_text:
        for c in (78, 111, 110, 101):  # None
            o = put(out, o, c, write)
    return o, True


@njit(cache=True, _nrt=False)
def column(buf, hits, col, ev_line, lines, sd, skeys, svals, stab, empty, raw_txt, raw_off, dkeys, didx, drep_txt, drep_off,
           write, out, offs, valid):
    """Text hit column ``col`` as one string per event (Arrow offsets and validity: null where
    the event has no such stat, or its value is None); a flow column (``C_PRODUCER``,
    ``C_CONSUMER``) as ``f"{type}:{id}"``, ``type`` empty when absent. Returns the text's size."""
    o = 0
    done = 0
    for h in range(len(hits)):
        if hits[h, H_COL] != col:
            continue
        k = hits[h, H_EVENT]
        if write:
            for j in range(done, k + 1):
                offs[j] = o
        done = k + 1
        plane = lines[ev_line[k], L_PLANE]
        null = False
        if col >= C_PRODUCER:
            if hits[h, H_S2] >= 0:
                o, _ = _text(buf, hits[h, H_S2], hits[h, H_E2], plane, True, sd, skeys, svals, stab, empty, raw_txt, raw_off,
                             dkeys, didx, drep_txt, drep_off, out, o, write)
            o = put(out, o, 58, write)
            o, _ = _text(buf, hits[h, H_S], hits[h, H_E], plane, True, sd, skeys, svals, stab, empty, raw_txt, raw_off, dkeys,
                         didx, drep_txt, drep_off, out, o, write)
        else:
            o, null = _text(buf, hits[h, H_S], hits[h, H_E], plane, False, sd, skeys, svals, stab, empty, raw_txt, raw_off,
                            dkeys, didx, drep_txt, drep_off, out, o, write)
        if write:
            valid[k] = not null
    if write:
        for j in range(done, len(offs)):
            offs[j] = o
    return o


@njit(cache=True, _nrt=False)
def ints(buf, hits, col, values, valid):
    """Integer hit column ``col``: the value of an int64 or uint64 stat (its int64 bits), else
    null; the presence column (``C_PRESENCE``): whether the event has the stat."""
    for h in range(len(hits)):
        if hits[h, H_COL] != col:
            continue
        k = hits[h, H_EVENT]
        _, kind, value, _, _, _ = stat(buf, hits[h, H_S], hits[h, H_E], False)
        if col == C_PRESENCE:
            valid[k] = True
        elif kind == INT64 or kind == UINT64:
            values[k] = value
            valid[k] = True
