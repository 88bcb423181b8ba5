"""``tfprof overview``'s text: the profile's facts, the op types by execution time with their
share, each step's time and utilization, and the advisor's first finding of each checker
(``tfprof.api.overview``).

>>> print(render_overview({"source": "profile", "facts": {"nodes": 3}, "total_micros": 30.0,
...     "step_count": 1, "step_window_ns": 31_000,
...     "top_ops": [{"name": "MatMul", "micros": 20.0, "share": 2 / 3, "count": 2}],
...     "steps": [{"step": 0, "device": None, "window_ns": 31_000, "utilization": None}]},
...     ["ExpensiveOperationChecker: top 1 operation type: MatMul"]), end="")
profile, 1 step of 31us; op time 30us per step, summed over threads and devices
<BLANKLINE>
nodes               3
<BLANKLINE>
op types by execution time (share of all ops):
MatMul  20us  66.7%  2 nodes
<BLANKLINE>
steps:
step 0  31us
<BLANKLINE>
advisor:
ExpensiveOperationChecker: top 1 operation type: MatMul
"""

from __future__ import annotations

from typing import Any

from tfprof.views.summary import render_facts
from tfprof.views.units import aligned, fmt_time, fmt_time_ns


def render_overview(o: dict[str, Any], findings: list[str]) -> str:
    """The text (module docstring): ``o`` from ``overview``, ``findings`` one line per checker."""
    head = f"{o['source']}, {_steps(o)}op time {fmt_time(o['total_micros'])} per step, summed over threads and devices\n\n"
    facts = render_facts(o["facts"]) + "\n" if o["facts"] else ""
    ops = aligned([(r["name"], fmt_time(r["micros"]), f"{100 * r['share']:.1f}%",
                     f"{r['count']} node{'s' if r['count'] != 1 else ''}") for r in o["top_ops"]], right=(1, 2))
    steps = aligned([(f"step {r['step']}" + (f" gpu:{r['device']}" if r["device"] is not None else ""),
                       fmt_time_ns(r["window_ns"]),
                       f"{100 * r['utilization']:.1f}% busy" if r["utilization"] is not None else "")
                      for r in o["steps"]], right=(1,))
    return "".join([
        head, facts,
        "\nop types by execution time (share of all ops):\n", ops or "no op ran\n",
        "\nsteps:\n", steps or "no steps\n",
        "\nadvisor:\n", "".join(f + "\n" for f in findings) or "no findings\n",
    ])


def _steps(o: dict[str, Any]) -> str:
    """``6 steps of 76.87ms (median); ``, so that the op time beside it is not read as a step's length."""
    n = o.get("step_count") or 0
    if not n:
        return ""
    length = fmt_time_ns(o["step_window_ns"])
    return f"1 step of {length}; " if n == 1 else f"{n} steps of {length} (median); "
