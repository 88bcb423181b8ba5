"""Where the fill kernel writes: the rows of its scratch array, the next row of a table, lists of
map entries kept in scratch, and strings copied to the batch's string buffer."""

from __future__ import annotations

from numba import njit

from tfprof.ingest.wire.count import C_STRB
from tfprof.ingest.wire.errors import E_CHANGED

# Rows of the fill kernel's scratch array (one per thread, see batch._fill_scratch). Each list of
# map entries takes 4 rows: the key, then up to three values (value, or payload start and end).
(S_IN, S_SRC, S_AT, S_EX, S_OSH, S_ACC, S_CPU, S_OM) = range(0, 32, 4)
(S_DV, S_ORD_A, S_TMP_A, S_ORD_B, S_TMP_B, S_PAIR, S_TOUCH, S_STR) = range(32, 40)  # S_STR: 3 rows
NSCR = 42


@njit(cache=True, _nrt=False, inline="always")
def next_row(rows, lim, t):
    """The next row of table ``t`` (``rows[t]`` advances); E_CHANGED past the count kernel's count."""
    r = rows[t]
    if r >= lim[t]:
        return E_CHANGED
    rows[t] = r + 1
    return r


@njit(cache=True, _nrt=False, inline="always")
def step_row(o, rows, lim, t, nid, step):
    """``next_row`` of a per-step table, with its node_id and step columns written."""
    r = next_row(rows, lim, t)
    if r >= 0:
        o[0, r] = nid
        o[1, r] = step
    return r


@njit(cache=True, _nrt=False, inline="always")
def push(scr, row, n, cap, k, a, b, c):
    """Append (k, a, b, c) to the list of ``n`` entries in scratch rows ``row..row+3``; returns the
    new length, or E_CHANGED (which stays) past ``cap`` entries."""
    if n < 0 or n >= cap:
        return E_CHANGED
    scr[row, n] = k
    scr[row + 1, n] = a
    scr[row + 2, n] = b
    scr[row + 3, n] = c
    return n + 1


@njit(cache=True, _nrt=False, inline="always")
def put_str(buf, s, e, sbuf, rows, lim, o, col, r):
    """Copy string ``buf[s:e]`` to the batch's string buffer and write where it went there, start
    and end, to ``o[col, r]`` and ``o[col + 1, r]``; 0, or E_CHANGED when there is no room."""
    at = rows[C_STRB]
    n = e - s
    if n < 0 or at + n > lim[C_STRB]:
        return E_CHANGED
    for k in range(n):
        sbuf[at + k] = buf[s + k]
    rows[C_STRB] = at + n
    o[col, r] = at
    o[col + 1, r] = at + n
    return 0
