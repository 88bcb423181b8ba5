"""``overview(prof)``: what a user should see first about a profile — its facts, the op types
that take the time, and each step's time and how busy its accelerators were. The UI's Overview
page draws it (the advisor's findings come beside it, from ``tfprof.api.advice``)."""

from __future__ import annotations

from typing import Any

from tfprof.profile import Profile
from tfprof.queries.options import Options

TOP = 10  # op types listed


def overview(prof: Profile, top: int = TOP) -> dict[str, Any]:
    """``source``, ``facts`` (``tfprof.summarize``'s model facts), ``total_micros`` (the
    execution time of every op, mean over steps as the op view sums it), ``top_ops`` (the
    ``top`` op types by execution time: ``name``, ``micros``, ``share`` of the total, ``count``
    of nodes), ``step_count`` and ``step_window_ns`` (the steps' median window: the op time is
    summed over threads and devices, so it can exceed a step) and ``steps`` (``tfprof.steps``'
    rows: per step and device, its time and utilization).

    >>> import tfprof
    >>> o = overview(tfprof.load(tfprof.sample_path()))
    >>> o["top_ops"][0]["name"], round(o["top_ops"][0]["share"], 3)
    ('Conv2D', 0.939)
    """
    from tfprof.api.breakdown import steps
    from tfprof.api.run import run_view
    from tfprof.api.summary import summarize
    from tfprof.views.table import view_table

    opts = Options(order_by="micros", max_depth=max(top - 1, 0), select=("micros", "occurrence"))
    result = run_view(prof, "op", opts, full_rows=True)
    table = view_table(result.layout, result.frame, opts.select)
    # the first row's cumulative total is every accounted op type's (the list is cut after it is summed)
    total = float(table["total_exec_micros"][0]) if table.height else 0.0
    top_ops = [{"name": r["name"], "micros": float(r["exec_micros"]),
                "share": float(r["exec_micros"]) / total if total else 0.0, "count": r["definition_count"]}
               for r in table.iter_rows(named=True)]
    summary = summarize(prof)
    rows = steps(prof)
    windows = rows.unique("step").get_column("window_ns").drop_nulls()  # a step's window is the same on every device
    return {"source": summary.source, "facts": summary.facts, "total_micros": total, "top_ops": top_ops,
            "step_count": windows.len(), "step_window_ns": round(windows.median()) if windows.len() else None,
            "steps": rows.select("step", "device", "window_ns", "utilization").to_dicts()}


def findings(prof: Profile) -> list[str]:
    """The advisor's first line of each checker that reports something (``name: line``)."""
    from tfprof.api.advice import advise

    return [f"{name}: {reports[0].splitlines()[0]}" for name, reports in advise(prof).reports.items() if reports]


def overview_report(found: dict[str, Any], said: list[str]) -> str:
    """``tfprof overview``'s text of ``overview``'s dict and ``findings``' lines."""
    from tfprof.views.overview_text import render_overview

    return render_overview(found, said)
