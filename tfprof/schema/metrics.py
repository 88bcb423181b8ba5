"""The metrics, as data: one ``Metric`` record per number a view adds up over its rows.

A record says everything the layers ask about a metric: the select name that shows it, the
query frames' column (its subtree is ``total_`` + column) and the public tables' name for it,
its kind (the number format and the pprof/stack unit), its meaning, the ``order_by`` value
that sorts on it, the ``min_*`` option that filters on it and on which of its values, how it
aggregates, and which exports carry it. The option tables of the views (``queries.spec``), the
pprof and stack outputs, the diff, the gates and the UI's columns are derived from
``METRIC_LIST``; the text renderer's cells are ``views.fields``.

>>> [m.select for m in METRIC_LIST][:4]
['bytes', 'peak_bytes', 'residual_bytes', 'output_bytes']
>>> BY_SELECT["params"].public, BY_PUBLIC["params"].column
('params', 'parameters')
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("time", "memory", "number")  # number formats: µs/ns as times, bytes, counts
UNITS = {"time": "microseconds", "memory": "bytes", "number": "count"}  # pprof's sample units
AGGREGATES = ("sum",)  # how a row's total is made from its subtree's values (the engines add)


@dataclass(frozen=True)
class Metric:
    """One metric (module docstring)."""

    select: str  # tfprof's select name: `micros`
    column: str  # the query frames' self column: `exec_micros`; its subtree total_<column>
    kind: str  # one of KINDS
    doc: str  # what one value is, for the public table's column docs
    public: str | None = None  # the public tables' name of the column, where it differs
    order_by: str | None = None  # the order_by value sorting on it (None: none)
    threshold: str | None = None  # the min_* option filtering on it (None: none)
    threshold_on_self: bool = False  # single-node trees compare the node's own value, not its total
    aggregate: str = "sum"
    exports: frozenset[str] = frozenset({"pprof", "stacks"})  # the files that carry it besides the views
    ours: bool = False  # not tfprof's: shown only where selected
    # how the text report prints it (views.fields): its legend entry, its doc-block line, its
    # place in the single-node and multi-node lines, the unit after a tree cell's value and
    # the op view's unit (None: the value formatted by its kind)
    legend: str = ""
    field_doc: str = ""
    rank: tuple[float, float] = (0, 0)
    cell_unit: str = ""
    op_unit: str | None = None

    @property
    def public_column(self) -> str:
        return self.public or self.column

    @property
    def unit(self) -> str:
        return UNITS[self.kind]


_ACCELERATOR = ("accelerator execution time: Time spent executing on the accelerator. "
                "This is normally measured by the actual hardware library.")
_CPU = ("cpu execution time: The time from the start to the end of the operation. It's the sum of actual cpu "
        "run time plus the time that it spends waiting if part of computation is launched asynchronously.")

METRIC_LIST: tuple[Metric, ...] = (
    Metric("bytes", "requested_bytes", "memory", "memory requested (bytes)", order_by="bytes",
           threshold="min_bytes", legend="requested bytes", rank=(2, 0),
           field_doc="requested bytes: The memory requested by the operation, accumulatively."),
    Metric("peak_bytes", "peak_bytes", "memory", "peak memory (bytes)", order_by="peak_bytes",
           threshold="min_peak_bytes", legend="peak bytes", rank=(3, 1),
           field_doc="peak bytes: The peak amount of memory that the operation is holding at some point."),
    Metric("residual_bytes", "residual_bytes", "memory", "memory not freed at the end of the step (bytes)",
           order_by="residual_bytes", threshold="min_residual_bytes", legend="residual bytes", rank=(4, 2),
           field_doc="residual bytes: The memory not de-allocated after the operation finishes."),
    Metric("output_bytes", "output_bytes", "memory", "memory of the outputs (bytes)", order_by="output_bytes",
           threshold="min_output_bytes", legend="output bytes", rank=(5, 3),
           field_doc="output bytes: The memory that is output from the operation (not necessarily allocated by "
                     "the operation)"),
    Metric("micros", "exec_micros", "time",
           "execution time, accelerator plus cpu (µs; a foreign profile's exact, with a fraction)",
           order_by="micros", threshold="min_micros", legend="total execution time", rank=(6, 4),
           field_doc="total execution time: Sum of accelerator execution time and cpu execution time."),
    Metric("accelerator_micros", "accelerator_exec_micros", "time", "accelerator execution time (µs)",
           order_by="accelerator_micros", threshold="min_accelerator_micros", legend="accelerator execution time",
           rank=(7, 5), field_doc=_ACCELERATOR),
    Metric("cpu_micros", "cpu_exec_micros", "time", "cpu execution time (µs)", order_by="cpu_micros",
           threshold="min_cpu_micros", legend="cpu execution time", rank=(8, 6), field_doc=_CPU),
    Metric("params", "parameters", "number", "parameters (count)", public="params", order_by="params",
           threshold="min_params", threshold_on_self=True, legend="# parameters", rank=(0, 7),
           field_doc="param: Number of parameters (in the Variable).", cell_unit=" params", op_unit="params"),
    Metric("float_ops", "float_ops", "number", "float operations (count)", order_by="float_ops",
           threshold="min_float_ops", threshold_on_self=True, legend="# float_ops", rank=(1, 8),
           field_doc="flops: Number of float operations. Note: Please read the implementation for the math behind "
                     "it.", cell_unit=" flops", op_unit="float_ops"),
    Metric("macs", "macs", "number",
           "multiply-accumulates of the matrix product and convolution rules (count; ours: only where selected)",
           order_by="macs", exports=frozenset(), ours=True, legend="# MACs", rank=(1.5, 8.5),
           field_doc="macs: Number of multiply-accumulates (one multiply-add each) of the matrix product and "
                     "convolution FLOPs rules: float_ops = 2 * macs for them.", cell_unit=" MACs", op_unit="MACs"),
)

BY_SELECT: dict[str, Metric] = {m.select: m for m in METRIC_LIST}
BY_COLUMN: dict[str, Metric] = {m.column: m for m in METRIC_LIST}
BY_PUBLIC: dict[str, Metric] = {m.public_column: m for m in METRIC_LIST}


def exported(export: str) -> tuple[Metric, ...]:
    """The metrics an export carries, times first, then memory, then counts (a file of one
    metric takes the first selected)."""
    return tuple(sorted((m for m in METRIC_LIST if export in m.exports), key=lambda m: KINDS.index(m.kind)))


def kind_of(public_column: str) -> str:
    """The number format of a public column (``total_`` prefix allowed): a metric's kind, or
    ``number`` for the counts (run_count, definition_count)."""
    metric = BY_PUBLIC.get(public_column.removeprefix("total_"))
    return metric.kind if metric is not None else "number"
