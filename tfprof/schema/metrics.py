"""The metrics, as data: one ``Metric`` record per number a view shows for its rows.

A record says everything the layers ask about a metric: the select name that shows it, the
query frames' column (its subtree is ``total_`` + column) and the public tables' name for it,
its kind (the number format and the pprof/stack unit), its meaning, the ``order_by`` value
that sorts on it, the ``min_*`` option that filters on it and on which of its values, how it
aggregates, and which exports carry it. The option tables of the views (``queries.spec``), the
engines' summed columns, the pprof, stack and proto outputs, the diff, the gates, the UI's
columns and the help are derived from the registry when asked; the text renderer's cells are
``views.fields``.

The registry holds tfprof's metrics (and ``macs``) and any a user registers at run time
(``register``): an additive one with the expression that computes each node's own value from
the node frame, or a ratio of two additive ones (each row's own and subtree value divided).

>>> [m.select for m in metric_list()][:4]
['bytes', 'peak_bytes', 'residual_bytes', 'output_bytes']
>>> by_select()["params"].public, by_public()["params"].column
('params', 'parameters')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tfprof.errors import OptionError

KINDS = ("time", "memory", "number", "ratio")  # number formats: µs/ns as times, bytes, counts, quotients
UNITS = {"time": "microseconds", "memory": "bytes", "number": "count", "ratio": "ratio"}  # pprof's sample units
# How a row's value over its subtree is made: the engines add the subtree's own values (sum) or
# take the largest (max; a row of many nodes, an op type or a code line, holds its largest
# member's); a ratio divides the subtree totals of its two additive metrics (``of``).
AGGREGATES = ("sum", "max", "ratio")
# select names that are fields but not metrics (``queries.options.SELECT_FIELDS``'s others)
_NOT_METRICS = ("tensor_value", "device", "op_types", "occurrence", "input_shapes", "kernels")


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
    aggregate: str = "sum"  # one of AGGREGATES
    exports: frozenset[str] = frozenset({"pprof", "stacks", "proto"})  # what carries it besides the views
    ours: bool = False  # not tfprof's: shown only where selected
    # how the text report prints it (views.fields): its legend entry, its doc-block line, its
    # place in the single-node and multi-node lines, the unit after a tree cell's value and
    # the op view's unit (None: the value formatted by its kind)
    legend: str = ""
    field_doc: str = ""
    rank: tuple[float, float] = (0, 0)
    cell_unit: str = ""
    op_unit: str | None = None
    # a registered additive or largest-of metric: a polars expression over the node's self values
    # (``queries.metrics.with_computed``: the node frame's metric columns) giving its own value
    compute: Any = None
    of: tuple[str, str] | None = None  # a ratio: the select names of its numerator and denominator

    @property
    def public_column(self) -> str:
        return self.public or self.column

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    @property
    def summed(self) -> bool:
        """Whether the engines add it up (a ratio is divided from two that are)."""
        return self.aggregate == "sum"


_ACCELERATOR = ("accelerator execution time: Time spent executing on the accelerator. "
                "This is normally measured by the actual hardware library.")
_CPU = ("cpu execution time: The time from the start to the end of the operation. It's the sum of actual cpu "
        "run time plus the time that it spends waiting if part of computation is launched asynchronously.")

_BUILT_IN: tuple[Metric, ...] = (
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

_REGISTRY: dict[str, Metric] = {m.select: m for m in _BUILT_IN}
_BUILT_IN_NAMES = frozenset(_REGISTRY)
_generation = [0]


def metric_list() -> tuple[Metric, ...]:
    """Every metric now: tfprof's (and ``macs``) in their order, then the registered ones."""
    return tuple(_REGISTRY.values())


def by_select() -> dict[str, Metric]:
    return dict(_REGISTRY)


def by_column() -> dict[str, Metric]:
    return {m.column: m for m in _REGISTRY.values()}


def by_public() -> dict[str, Metric]:
    return {m.public_column: m for m in _REGISTRY.values()}


def registered() -> tuple[Metric, ...]:
    """The metrics ``register`` added, in the order they were."""
    return tuple(m for s, m in _REGISTRY.items() if s not in _BUILT_IN_NAMES)


def summed() -> tuple[str, ...]:
    """The self columns the engines add up into ``total_*``, times first, then memory, then
    counts (GraphNodeProto's order; ``macs`` and registered metrics after tfprof's of their kind)."""
    return tuple(m.column for m in sorted((m for m in _REGISTRY.values() if m.summed), key=lambda m: KINDS.index(m.kind)))


def maxed() -> tuple[str, ...]:
    """The self columns whose subtree value is the largest of the subtree's own (``max``)."""
    return tuple(m.column for m in _REGISTRY.values() if m.aggregate == "max")


def ratios() -> tuple[Metric, ...]:
    return tuple(m for m in _REGISTRY.values() if m.aggregate == "ratio")


def computed() -> tuple[Metric, ...]:
    """The registered additive and largest-of metrics: each node's value is computed from the
    node frame."""
    return tuple(m for m in _REGISTRY.values() if m.compute is not None)


def generation() -> int:
    """A number that changes whenever the registry does (a key for what is derived from it)."""
    return _generation[0]


class _Derived:
    """A value made from the registry by ``make``, made again after the registry changes."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make, self._made, self._at = make, None, -1

    def _value(self):
        if self._at != _generation[0]:
            self._made, self._at = self._make(), _generation[0]
        return self._made

    def __repr__(self) -> str:
        return repr(self._value())


class DerivedMap(_Derived, Mapping):
    """A dict derived from the registry (``derived``), read-only."""

    def __getitem__(self, key):
        return self._value()[key]

    def __iter__(self):
        return iter(self._value())

    def __len__(self) -> int:
        return len(self._value())


class DerivedSeq(_Derived, Sequence):
    """A tuple derived from the registry (``derived``), read-only."""

    def __getitem__(self, index):
        return self._value()[index]

    def __len__(self) -> int:
        return len(self._value())

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]


def derived(make: Callable[[], Any]) -> Any:
    """A module-level table (dict or tuple) made from the registry by ``make``, that stays true
    when metrics are registered: the layers keep their tables' names and read them as before."""
    first = make()
    return DerivedMap(make) if isinstance(first, Mapping) else DerivedSeq(make)


def register(metric: Metric) -> Metric:
    """Add ``metric`` to every view, output, option and shell of this process; return it.

    An additive metric (``aggregate="sum"``) or a largest-of one (``"max"``) needs ``compute``;
    a ratio (``aggregate="ratio"``,
    ``kind="ratio"``) needs ``of``, two additive metrics' select names. Its select name, column,
    ``order_by`` and threshold must be new. Raises ``OptionError`` naming what is wrong.
    """
    taken = {n for m in _REGISTRY.values() for n in (m.select, m.column, m.public_column)} | set(_NOT_METRICS)
    checks = [
        (metric.select.isidentifier(), f"a metric's select name is an identifier, not `{metric.select}`"),
        (not {metric.select, metric.column, metric.public_column} & taken,
         f"metric `{metric.select}`: its select name or column is taken"),
        (metric.kind in KINDS, f"metric `{metric.select}`: kind `{metric.kind}` is none of {', '.join(KINDS)}"),
        (metric.aggregate in AGGREGATES,
         f"metric `{metric.select}`: aggregate `{metric.aggregate}` is none of {', '.join(AGGREGATES)}"),
        (metric.order_by is None or metric.order_by not in {m.order_by for m in _REGISTRY.values()} | {"name", "depth", "occurrence"},
         f"metric `{metric.select}`: order_by `{metric.order_by}` is taken"),
        (metric.threshold is None or (metric.threshold.startswith("min_") and metric.threshold.isidentifier()
                                      and metric.threshold not in {m.threshold for m in _REGISTRY.values()}
                                      | {"min_occurrence"}),
         f"metric `{metric.select}`: threshold `{metric.threshold}` is taken or not a min_* name"),
    ]
    if metric.aggregate in ("sum", "max"):
        checks.append((metric.compute is not None and metric.kind != "ratio",
                       f"metric `{metric.select}`: a {metric.aggregate} metric needs `compute`, an expression over the "
                       "node frame"))
    else:
        parts = [_REGISTRY.get(s) for s in metric.of or ()]
        checks.append((len(parts) == 2 and all(p is not None and p.summed for p in parts) and metric.kind == "ratio",
                       f"metric `{metric.select}`: a ratio has kind `ratio` and `of`: two additive metrics' select names"))
    checks.append((metric.public is None, f"metric `{metric.select}`: a registered metric's public name is its column"))
    for ok, message in checks:
        if not ok:
            raise OptionError(message)
    # not tfprof's: shown only where selected; GraphNodeProto has no field for it; a ratio does
    # not add up, so no pprof or stack file carries one
    exports = metric.exports - {"proto"} - ({"pprof", "stacks"} if metric.aggregate != "sum" else set())
    metric = replace(metric, ours=True, exports=exports)
    _REGISTRY[metric.select] = metric
    _generation[0] += 1
    return metric


def unregister(select: str) -> None:
    """Take back a metric ``register`` added (tfprof's stay)."""
    if select in _BUILT_IN_NAMES or select not in _REGISTRY:
        raise OptionError(f"`{select}` is no registered metric")
    if any(m.of and select in m.of for m in _REGISTRY.values()):
        raise OptionError(f"`{select}` is part of a registered ratio: unregister that first")
    del _REGISTRY[select]
    _generation[0] += 1


def with_parts(columns) -> tuple[str, ...]:
    """``columns`` (query-frame self columns, ``total_`` allowed) with each ratio's replaced by
    its parts' (the columns an engine must sum to show or sort on it)."""
    ratio_of = {m.column: ratio_parts(m) for m in ratios()}
    out: list[str] = []
    for c in columns:
        bare = c.removeprefix("total_")
        out += [c.replace(bare, p) for p in ratio_of[bare]] if bare in ratio_of else [c]
    return tuple(dict.fromkeys(out))


def ratio_parts(metric: Metric) -> tuple[str, str]:
    """The self columns a ratio divides: numerator, denominator."""
    num, den = metric.of  # type: ignore[misc]
    return _REGISTRY[num].column, _REGISTRY[den].column


def exported(export: str) -> tuple[Metric, ...]:
    """The metrics an export carries, times first, then memory, then counts (a file of one
    metric takes the first selected)."""
    return tuple(sorted((m for m in _REGISTRY.values() if export in m.exports), key=lambda m: KINDS.index(m.kind)))


# The registry's tables, live: they follow ``register``.
METRIC_LIST = derived(metric_list)
BY_SELECT = derived(by_select)
BY_COLUMN = derived(by_column)
BY_PUBLIC = derived(by_public)
METRICS = derived(summed)  # the self columns the engines add up


def kind_of(public_column: str) -> str:
    """The number format of a public column (``total_`` prefix allowed): a metric's kind, or
    ``number`` for the counts (run_count, definition_count)."""
    metric = by_public().get(public_column.removeprefix("total_"))
    return metric.kind if metric is not None else "number"
