"""The advisor's reports: evidence rows -> tfprof's report strings, the printed text, AdviceProto.

One renderer per built-in checker (``RENDERERS``), each returning the checker's list of
reports exactly as tfprof words them (docs/TFPROF_BEHAVIOUR.md, 'Advisor'), and the GPU checks'
(``advice_gpu``); any other checker (a user's SQL file) reports its ``report`` column. ``render_text`` prints the advice as tfprof does, and
``advice_proto`` builds the AdviceProto it returns.

>>> import polars as pl
>>> reports("AcceleratorUtilizationChecker", pl.DataFrame({"device": ["/gpu:0"], "utilization": [0.312]}))
['device: /gpu:0 low utilization: 0.31']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import polars as pl

from tfprof.schema.proto import tfprof_output_pb2
from tfprof.views.advice_gpu import GPU_RENDERERS
from tfprof.views.units import fmt_time

REPORT_COLUMN = "report"  # the column a SQL checker's rows put their report in


def utilization_reports(rows: pl.DataFrame) -> list[str]:
    """One line per device; tfprof words "low" the same below 0.5 whatever the severity."""
    return [
        f"device: {r['device']} {'utilization' if r['utilization'] >= 0.5 else 'low utilization'}: {r['utilization']:.2f}"
        for r in rows.iter_rows(named=True)
    ]


OPERATION_REPORTS = {
    "unfused_batch_norm": "Maybe use faster FusedBatchNorm instead of BatchNorm",
    "nhwc_on_gpu": "Found operation using NHWC data_format on GPU. Maybe NCHW is faster.",
}


def operation_reports(rows: pl.DataFrame) -> list[str]:
    """One sentence per finding."""
    return [OPERATION_REPORTS[f] for f in rows["finding"]]


def _times(r: dict) -> str:
    return (
        f"cpu: {fmt_time(r['cpu_exec_micros'])}, accelerator: {fmt_time(r['accelerator_exec_micros'])}, "
        f"total: {fmt_time(r['exec_micros'])}"
    )


_SECTION_LINES: dict[str, Callable[[dict], str | None]] = {
    "op": lambda r: f"top {r['rank']} operation type: {r['name']}, {_times(r)} ({r['share']:.2f}%)",
    "scope": lambda r: f"top {r['rank']} graph node: {r['name']}, {_times(r)}",
    # the start node (depth -1) is evidence, not a line
    "code": lambda r: None if r["depth"] < 0 else f"{'  ' * r['depth']}{r['name']}, {_times(r)}",
}


def expensive_operation_reports(rows: pl.DataFrame) -> list[str]:
    """One multi-line report per section that has rows, in the rows' section order."""
    out = []
    for section in rows["section"].unique(maintain_order=True):
        part = rows.filter(pl.col("section") == section)
        lines = (_SECTION_LINES[section](r) for r in part.iter_rows(named=True))
        out.append("\n".join(line for line in lines if line is not None))
    return out


def sql_reports(rows: pl.DataFrame) -> list[str]:
    """A user checker: its ``report`` column, one report per row."""
    return [str(r) for r in rows[REPORT_COLUMN]]


RENDERERS: dict[str, Callable[[pl.DataFrame], list[str]]] = {
    "AcceleratorUtilizationChecker": utilization_reports,
    "OperationChecker": operation_reports,
    "ExpensiveOperationChecker": expensive_operation_reports,
    **GPU_RENDERERS,  # the GPU checks of foreign traces (views/advice_gpu.py)
}


def reports(checker: str, rows: pl.DataFrame) -> list[str]:
    """The reports of ``checker`` for its evidence ``rows``."""
    return RENDERERS.get(checker, sql_reports)(rows)


# What tfprof prints on stderr when a check lacks an input (expensive_operation_checker.h).
MISSING_NOTES = {
    "run_meta": ("Missing RunMetadata info. Skip {name}", "Missing run_meta for {name}"),
    "code_traces": ("Missing op_log (code traces) for {name}",),
}


def missing_notes(checker: str, missing: Sequence[str]) -> list[str]:
    """tfprof's stderr lines for the inputs a checker found missing."""
    return [note.format(name=checker) for kind in missing for note in MISSING_NOTES[kind]]


def render_text(advice: Mapping[str, Sequence[str]]) -> str:
    """What tfprof prints: per checker ``\\n<name>:\\n``, then each report and a newline."""
    return "".join(f"\n{name}:\n" + "".join(r + "\n" for r in reps) for name, reps in advice.items())


def advice_proto(advice: Mapping[str, Sequence[str]]) -> tfprof_output_pb2.AdviceProto:
    """The AdviceProto tfprof returns: ``checkers[name].reports``."""
    proto = tfprof_output_pb2.AdviceProto()
    for name, reps in advice.items():
        proto.checkers[name].reports.extend(reps)
    return proto
