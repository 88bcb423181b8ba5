"""``tfprof steps``'s table: per step and device, the step time and its parts as tfprof formats
times, each part with its share of the step (``tfprof.queries.breakdown``).

>>> import polars as pl
>>> rows = pl.DataFrame({"step": [0], "device": ["0"], "window_ns": [2_000_000], "compute_ns": [1_500_000],
...     "communication_ns": [0], "memcpy_ns": [100_000], "idle_ns": [400_000], "utilization": [0.8],
...     "communication_total_ns": [0], "overlapped_ns": [0]})
>>> print(render_breakdown(rows), end="")
step  device  step time  compute         communication  memcpy/memset  idle           busy   comm hidden by compute
0     gpu:0   2.00ms     1.50ms (75.0%)  0us (0.0%)     100us (5.0%)   400us (20.0%)  80.0%  --
"""

from __future__ import annotations

import polars as pl

from tfprof.views.units import aligned, fmt_time_ns

_PARTS = (("compute", "compute_ns"), ("communication", "communication_ns"), ("memcpy/memset", "memcpy_ns"),
          ("idle", "idle_ns"))
_UNLINKED = (("unlinked: no correlation id", "unlinked_no_correlation_ns"),
             ("unlinked: launched before the capture", "unlinked_before_capture_ns"),
             ("unlinked: launched outside any op", "unlinked_outside_ops_ns"))


def render_breakdown(rows: pl.DataFrame) -> str:
    """The table (module docstring); a profile without accelerator work lists its step times and
    says so. A whole-trace row (``step`` null) reads ``total``; the unlinked time's columns, when
    the rows have them, follow the parts (the busy time of work no op launched, its share of the
    step)."""
    if rows.height == 0:
        return "no steps: this profile records no step or accelerator time\n"
    if rows["device"].null_count() == rows.height:
        table = [("step", "step time")] + [(_step(r["step"]), fmt_time_ns(r["window_ns"])) for r in rows.iter_rows(named=True)]
        return aligned(table) + "no accelerator work in this profile: step times only\n"
    extra = [(name, c) for name, c in _UNLINKED if c in rows.columns]
    table = [("step", "device", "step time", *(name for name, _ in (*_PARTS, *extra)), "busy", "comm hidden by compute")]
    for r in rows.iter_rows(named=True):
        window = r["window_ns"]
        parts = [f"{fmt_time_ns(r[c])} ({_pct(r[c], window)})" if r[c] is not None else "--" for _, c in (*_PARTS, *extra)]
        hidden = ("--" if not r["communication_total_ns"] else
                  f"{fmt_time_ns(r['overlapped_ns'])} of {fmt_time_ns(r['communication_total_ns'])} "
                  f"({_pct(r['overlapped_ns'], r['communication_total_ns'])})")
        table.append((_step(r["step"]), f"gpu:{r['device']}", fmt_time_ns(window), *parts,
                      f"{100 * r['utilization']:.1f}%", hidden))
    return aligned(table)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "--"


def _step(step: int | None) -> str:
    return "total" if step is None else str(step)
