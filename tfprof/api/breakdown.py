"""``steps(prof)``: where each step's time goes on each accelerator, one row per (step, device)
(``tfprof.queries.breakdown``; ``tfprof steps`` prints it)."""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile


def steps(prof: Profile) -> pl.DataFrame:
    """Per step and device: ``window_ns`` (the step's time), its parts ``compute_ns``,
    ``communication_ns`` (not hidden by compute), ``memcpy_ns`` and ``idle_ns`` (they add up to
    it), ``utilization``, ``communication_total_ns`` and ``overlapped_ns`` (hidden by compute).

    >>> import tfprof
    >>> rows = tfprof.steps(tfprof.load(tfprof.sample_path("torch")))
    >>> rows["step"].to_list(), rows["device"].to_list()  # a CPU capture: step times only
    ([2, 3], [None, None])
    """
    from tfprof.queries.breakdown import breakdown

    return breakdown(prof)


def steps_report(rows: pl.DataFrame) -> str:
    """``steps``' rows as ``tfprof steps`` prints them: times as tfprof formats them, each part
    with its share of the step (``tfprof.views.breakdown_text``)."""
    from tfprof.views.breakdown_text import render_breakdown

    return render_breakdown(rows)
