"""``steps(prof)``: where each step's time goes on each accelerator, one row per (step, device)
(``tfprof.queries.breakdown``; ``tfprof steps`` prints it)."""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile

WINDOWS = ("next", "marker", "kernels")
"""``steps``' choices of ``window`` (``tfprof.queries.advisor.trace.WINDOWS``)."""


def steps(prof: Profile, window: str = "next", drop_last_step: bool = False, total: bool = False,
          unlinked: bool = False) -> pl.DataFrame:
    """Per step and device: ``window_ns`` (the step's time), its parts ``compute_ns``,
    ``communication_ns`` (not hidden by compute), ``memcpy_ns`` and ``idle_ns`` (they add up to
    it), ``utilization``, ``communication_total_ns`` and ``overlapped_ns`` (hidden by compute).

    The peers' conventions on request: ``window="marker"`` (the step marker's own span) or
    ``"kernels"`` (HTA's and XProf's GPU step: the span of the step's device events),
    ``drop_last_step`` (HTA's);
    ``total`` adds a whole-trace row per device (``step`` null), ``unlinked`` the busy time of
    device events linked to no op, per reason (``unlinked_no_correlation_ns``,
    ``unlinked_before_capture_ns``, ``unlinked_outside_ops_ns``). A bad ``window`` raises
    ``tfprof.errors.OptionError``.

    >>> import tfprof
    >>> rows = tfprof.steps(tfprof.load(tfprof.sample_path("torch")))
    >>> rows["step"].to_list(), rows["device"].to_list()  # a CPU capture: step times only
    ([2, 3], [None, None])
    """
    from tfprof.queries.breakdown import breakdown

    return breakdown(prof, window, drop_last_step, total, unlinked)


def steps_report(rows: pl.DataFrame) -> str:
    """``steps``' rows as ``tfprof steps`` prints them: times as tfprof formats them, each part
    with its share of the step (``tfprof.views.breakdown_text``)."""
    from tfprof.views.breakdown_text import render_breakdown

    return render_breakdown(rows)
