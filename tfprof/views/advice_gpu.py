"""The GPU checks' reports (docs/ADVISOR.md, 'GPU checks'): evidence rows -> sentences, and their numbers formatted.

Times print as tfprof prints them (``fmt_time``: ``999us``, ``1.23ms``, ``3.61sec``), sizes as
its memory sizes, shares as percentages with two decimals. ``display`` gives the same formats
for each evidence row, for the JSON document and the UI. ``status_report`` and
``skipped_report`` are the one-line reports of a check that had nothing to read or did not
apply to the profile's framework.

>>> import polars as pl
>>> pageable_reports(pl.DataFrame({"name": ["Memcpy HtoD (Pageable -> Device)"], "count": [2],
...     "total_ns": [3_880_000], "bytes": [38_535_168], "steps": [1]}))[0][:74]
'2 host-to-device copies from pageable memory (`Memcpy HtoD (Pageable -> De'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from tfprof.views.units import fmt_memory, fmt_time

NAME_WIDTH = 72  # longer event names are cut to this many characters in a report
TOP_NAMES = 5  # rows a report lists by name

STATUS_REPORTS = {
    "no_gpu_events": "no GPU events (kernels, copies, memsets): nothing to check on this capture",
    "no_trace": "no trace events: this check reads Kineto and XSpace traces, not tfprof's own profiles",
    "store_predates_kernels": "this store was written before tfprof kept a `kernels` table, which this check "
    "reads: ingest the trace again (tfprof ingest TRACE --out STORE --force)",
}
FRAMEWORK_LABELS = {"tensorflow": "TensorFlow", "pytorch": "PyTorch", "jax": "JAX", "unknown": "an unknown framework"}


def status_report(status: str) -> str:
    """The one line of a check that had nothing to read."""
    return STATUS_REPORTS.get(status, status)


def skipped_report(frameworks: Sequence[str], found: str) -> str:
    """The one line of a check skipped because the profile is from another framework."""
    wanted = " or ".join(FRAMEWORK_LABELS.get(f, f) for f in frameworks)
    return f"skipped: a check for {wanted} profiles; this profile is from {FRAMEWORK_LABELS.get(found, found)}"


def ns(value: int | float | None) -> str:
    """A time in ns as tfprof prints times (whole microseconds and up)."""
    return "--" if value is None else fmt_time(value / 1000)


def pct(share: float | None) -> str:
    """A share (0-1) as a percentage."""
    return "--" if share is None else f"{100 * share:.2f}%"


def short(name: str | None) -> str:
    """An event name in backticks, cut to ``NAME_WIDTH`` characters."""
    if name is None:
        return "--"
    return f"`{name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + '...'}`"


def count(n: int, noun: str) -> str:
    """``1 kernel``, ``2 kernels``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _step(r: dict) -> str:
    return f"step {r['step']}, device {r['device']}"


def idle_reports(rows: pl.DataFrame) -> list[str]:
    """One line per (device, step)."""
    out = []
    for r in rows.iter_rows(named=True):
        if r["gap_after_name"] is None and r["gap_before_name"] is None:
            where = "idle the whole step"
        elif r["gap_after_name"] is None:
            where = f"at the step's start, before {short(r['gap_before_name'])}"
        else:
            where = f"after {short(r['gap_after_name'])}"
        out.append(f"{_step(r)}: idle {pct(r['idle_share'])} of {ns(r['window_ns'])} ({ns(r['idle_ns'])}); "
                   f"longest gap {ns(r['longest_gap_ns'])} {where}")
    return out


def launch_reports(rows: pl.DataFrame) -> list[str]:
    """A total line, then the kernel names with the most short kernels."""
    if rows.height == 0:
        return ["no kernel ran shorter than the call that launched it"]
    graphs = "/".join(sorted(set(rows["runtime"])))  # CUDA, HIP, or CUDA/HIP
    head = (f"{count(rows['short_kernels'].sum(), 'kernel')} ran shorter than their launch call: kernel time "
            f"{ns(rows['kernel_ns'].sum())}, launch time {ns(rows['launch_ns'].sum())}; fuse them or use {graphs} graphs")
    return [head] + [
        f"{short(r['name'])}: {r['short_kernels']} of {r['launched']} ({pct(r['short_share'])}), "
        f"kernel {ns(r['kernel_ns'])} vs launch {ns(r['launch_ns'])}"
        for r in rows.head(TOP_NAMES).iter_rows(named=True)
    ]


def sync_reports(rows: pl.DataFrame) -> list[str]:
    """One line per step: its outermost syncs' count and time, then each name's."""
    if rows.height == 0:
        return ["no host-device syncs"]
    out = []
    for part in rows.partition_by("step", maintain_order=True):
        names = ", ".join(f"{r['name']} x{r['count']} ({ns(r['total_ns'])})" for r in part.iter_rows(named=True))
        out.append(f"step {part['step'][0]}: {count(part['outer_count'].sum(), 'host-device sync')}, "
                   f"{ns(part['outer_ns'].sum())}: {names}")
    return out


def pageable_reports(rows: pl.DataFrame) -> list[str]:
    """One line per copy name."""
    if rows.height == 0:
        return ["no host-to-device copies from pageable memory"]
    return [
        f"{r['count']} host-to-device {'copy' if r['count'] == 1 else 'copies'} from pageable memory "
        f"({short(r['name'])}) in {count(r['steps'], 'step')}: "
        f"{ns(r['total_ns'])}" + (f", {fmt_memory(r['bytes'])}" if r.get("bytes") is not None else "")
        + "; pin the host memory (pin_memory=True) and copy with non_blocking=True"
        for r in rows.iter_rows(named=True)
    ]


def comm_reports(rows: pl.DataFrame) -> list[str]:
    """One line per device: its exposed share, and its most exposed kernel name."""
    if rows.height == 0:
        return ["no NCCL/RCCL kernels"]
    out = []
    for part in rows.partition_by("device", maintain_order=True):
        comm, exposed = part["comm_ns"].sum(), part["exposed_ns"].sum()
        top = part.row(0, named=True)
        out.append(f"device {top['device']}: {pct(exposed / comm if comm else 0.0)} of communication time with no "
                   f"compute kernel running ({ns(exposed)} of {ns(comm)}, {count(part['count'].sum(), 'kernel')}); most "
                   f"exposed: {short(top['name'])} {ns(top['exposed_ns'])}")
    return out


def queue_reports(rows: pl.DataFrame) -> list[str]:
    """One line per (device, step), with the verdict first."""
    if rows.height == 0:
        return ["no stream ran two operations: nothing to check"]
    out = []
    for r in rows.iter_rows(named=True):
        verdict = "CPU-bound launch queue" if r["cpu_bound"] else "launch queue kept up"
        spacing = (f" (median gap {ns(r['median_gap_ns'])}, launch spacing {ns(r['median_spacing_ns'])})"
                   if r["bound_ops"] else "")
        out.append(f"{_step(r)}: {verdict}: {r['bound_ops']} of {r['ops']} operations ({pct(r['bound_share'])}) "
                   f"waited for their launch, covering {ns(r['bound_idle_ns'])} of the device's {ns(r['idle_ns'])} "
                   f"idle time{spacing}")
    return out


GPU_RENDERERS: dict[str, Callable[[pl.DataFrame], list[str]]] = {
    "GpuIdleChecker": idle_reports,
    "KernelLaunchChecker": launch_reports,
    "HostSyncChecker": sync_reports,
    "PageableCopyChecker": pageable_reports,
    "CommOverlapChecker": comm_reports,
    "LaunchQueueChecker": queue_reports,
}


def _formatter(column: str) -> Callable | None:
    """How a GPU check's evidence column prints: durations (``*_ns`` but not a point in time),
    shares, sizes; None for the rest."""
    if column.endswith("_ns") and "start" not in column:
        return ns
    if column.endswith("_share"):
        return pct
    if column == "bytes":
        return lambda b: "--" if b is None else fmt_memory(b)
    return None


def _cell_formatter(column: str) -> Callable:
    """How any check's evidence column reads on a page: the GPU checks' formats, tfprof's own
    times in whole µs (``*_micros``), fractions as percentages (``utilization``), the
    ExpensiveOperationChecker's ``share`` (already a percentage) with two decimals, counts with
    separators, and an absent value as ``--``."""
    found = _formatter(column)
    if found is not None:
        return found
    if column.endswith("_micros"):
        return lambda v: "--" if v is None else fmt_time(v)
    if column == "utilization":
        return pct
    if column == "share":
        return lambda v: "--" if v is None else f"{v:.2f}%"
    if column.endswith("_bytes"):
        return lambda v: "--" if v is None else fmt_memory(v)
    if column.endswith("_event") or column in ("step", "rank", "depth", "event_id", "node_id", "device"):
        return lambda v: "--" if v is None else str(v)  # identifiers, not amounts
    return lambda v: "--" if v is None else f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else (
        f"{v:.4g}" if isinstance(v, float) else str(v))


def evidence_cells(rows: pl.DataFrame) -> tuple[list[str], list[dict]]:
    """Any check's evidence as a page shows it: its columns but the points in time (``*start*``,
    ``*end_micros``: absolute clock readings, in the JSON and SQL for those who want them), and
    per row each cell's text."""
    columns = [c for c in rows.columns if not ("start" in c or c.endswith("end_micros") or c.endswith("end_ns"))]
    formats = {c: _cell_formatter(c) for c in columns}
    return columns, [{c: formats[c](r[c]) for c in columns} for r in rows.iter_rows(named=True)]


def display(checker: str, rows: pl.DataFrame) -> list[dict] | None:
    """Per evidence row, its formatted times, shares and sizes (None: not a GPU check)."""
    if checker not in GPU_RENDERERS:
        return None
    shown = {c: f for c in rows.columns if (f := _formatter(c)) is not None}
    return [{c: f(r[c]) for c, f in shown.items()} for r in rows.iter_rows(named=True)]
