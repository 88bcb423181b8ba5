"""The select fields: one registry entry per field says everything a renderer needs to print it.

An entry gives the field's doc-block lines, its legend text, the frame columns it reads (a
metric's self column; ``total_`` + column is its subtree), its number format, its cells in the
single-node views (scope, graph), the code view and the op view, and its place in each line.
The legend (``text.legend``), the doc block, the polars lines and the byte writer's program
(``columns``) and the op view's lines all iterate ``FIELDS``, so a cell cannot appear without
its legend entry or the other way round. tfprof writes them as separate if-chains
(tfprof_show.cc ``FormatNode`` / ``FormatLegend``), which is how its two sides drift.

Cells are data. A tree or code cell is a tuple of items; an item is a tuple of pieces
(``lines.Program``'s language: ``("lit", text)``, ``("val", column, kind)``, ``("own", column,
kind)`` printing ``--`` where the row is not accounted, ``("acc", text, other)``) or a ``Row``
(one string of the row, left out where null). An op cell is ``("pct", guard, unit)``,
``("join", column)`` or ``("runs", width)``; ``text.op_line`` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from tfprof.schema.metrics import BY_SELECT, derived, registered
from tfprof.views.units import FORMATS

Piece = tuple


@dataclass(frozen=True)
class Row:
    """An item that is one string of the row, left out of the line where null. Where the frame
    lacks column ``needs``, ``missing`` (pieces) stands in, or with ``missing`` None the item is
    left out."""

    expr: pl.Expr
    needs: str | None = None
    missing: tuple[Piece, ...] | None = None


Item = tuple[Piece, ...] | Row


@dataclass(frozen=True)
class Field:
    """One select field. ``rank`` is its position in the single-node (scope, graph) and the
    multi-node (op, code) lines and legends; a field with no legend prints nothing there."""

    name: str
    doc: tuple[str, ...]
    legend: str | None = None
    multi_legend: str | None = None  # the op and code views' legend where it differs
    column: str | None = None  # a metric's self column; its subtree is total_<column>
    kind: str | None = None  # number format of the metric: a key of units.FORMATS
    tree: tuple[Item, ...] = ()  # cell in the scope and graph views
    code: tuple[Item, ...] = ()  # cell in the code view
    op: tuple | None = None  # cell in the op view
    rank: tuple[float, float] = (0, 0)
    implied_by: tuple[str, ...] = ()  # select names that show this field too

    @property
    def fmt(self) -> Callable[[Any], str]:
        """The metric's per-value formatter (``fmt_number`` / ``fmt_time`` / ``fmt_memory``)."""
        return FORMATS[self.kind]  # type: ignore[index]

    def shown(self, select: Iterable[str]) -> bool:
        select = set(select)
        return self.name in select or any(s in select for s in self.implied_by)

    def legend_for(self, multi: bool) -> str | None:
        return (self.multi_legend or self.legend) if multi else self.legend


def _pair(column: str, kind: str, unit: str = "") -> tuple[Piece, ...]:
    """``own/total`` of a metric: tfprof's ``--`` for a row not accounted, then the subtree."""
    return (("own", column, kind), ("lit", "/"), ("val", "total_" + column, kind), ("lit", unit))


def _metric(
    name: str, legend: str, column: str, kind: str, doc: str, rank: tuple[float, float], *,
    unit: str = "", op_unit: str | None = None, implied_by: tuple[str, ...] = (),
) -> Field:  # fmt: skip
    """A metric: ``own/total`` + ``unit`` in the tree and code views, ``text (cum%, self%)`` in
    the op view (``text``: the value formatted, or with ``op_unit`` the number and that unit)."""
    cell = (_pair(column, kind, unit),)
    # tfprof: the op view prints a memory cell's percentages only where the row's own bytes are
    # positive, the others' where its total is (tfprof_op.cc FormatMemoryNode vs FormatNode)
    op = ("pct", "own" if kind == "memory" else "total", op_unit)
    return Field(name, (doc,), legend, None, column, kind, cell, cell, op, rank, implied_by)


def _metric_of(select: str, implied_by: tuple[str, ...] = ()) -> Field:
    """The field of the metric ``select``, from its record (``tfprof.schema.metrics``)."""
    m = BY_SELECT[select]
    field = _metric(m.select, m.legend, m.column, m.kind, m.field_doc, m.rank, unit=m.cell_unit, op_unit=m.op_unit,
                    implied_by=implied_by)
    if m.kind == "ratio":  # a quotient has no share of a total: the op view prints it as the trees do
        field = replace(field, op=("ratio", m.cell_unit))
    return field


def _registered_fields() -> tuple[Field, ...]:
    """The fields of the metrics registered at run time, after tfprof's in every line and legend;
    a record without text gets its select name as legend and ``name: doc`` as its doc line."""
    out = []
    for k, m in enumerate(registered()):
        field = _metric_of(m.select)
        out.append(replace(field, legend=m.legend or m.select, doc=(m.field_doc or f"{m.select}: {m.doc}",),
                           rank=m.rank if m.rank != (0, 0) else (20 + k, 20 + k)))
    return tuple(out)


def _dims_text(dims: pl.Expr) -> pl.Expr:
    return dims.list.eval(pl.element().cast(pl.String)).list.join("x")


def _input_shapes_expr() -> pl.Expr:
    entry = pl.concat_str(
        pl.element().struct.field("input_idx").cast(pl.String),
        pl.lit(":"),
        pl.when(pl.element().struct.field("dims").list.len() > 0)
        .then(_dims_text(pl.element().struct.field("dims")))
        .otherwise(pl.lit("unknown")),
    )
    return pl.col("input_shapes").list.eval(entry).list.join("|").fill_null("")


_DOC_OP_TYPES = (
    "op_types: The attributes of the operation, includes the Kernel name device placed on and user-defined strings."
)
_OP_TYPES = Row(pl.col("op_types").list.join("|").fill_null(""))

# Every select field tfprof knows. The ranks give tfprof's two line orders: params first in
# scope/graph (tfprof_show.cc), bytes first in op/code (tfprof_show_multi.cc).
_BUILT_IN: dict[str, Field] = {
    f.name: f
    for f in (
        replace(
            _metric_of("params"),  # a variable's shape, then its count
            tree=(Row(pl.when(pl.col("shape").list.len() > 0).then(_dims_text(pl.col("shape")))),
                  _pair("parameters", "number", " params")),
            op=("pct", "total", "params"),
        ),
        _metric_of("float_ops"),
        _metric_of("bytes"),
        _metric_of("peak_bytes"),
        _metric_of("residual_bytes"),
        _metric_of("output_bytes"),
        # tfprof: `micros` prints all three times and the doc lines of all three (docs/TFPROF_BEHAVIOUR.md, 'Doc block')
        replace(_metric_of("micros"), doc=tuple(BY_SELECT[s].field_doc for s in
                                                ("micros", "cpu_micros", "accelerator_micros"))),
        _metric_of("accelerator_micros", implied_by=("micros",)),
        _metric_of("cpu_micros", implied_by=("micros",)),
        # ours, not tfprof's (docs/COMPATIBILITY.md): printed only where selected
        _metric_of("macs"),
        Field(
            "device", ("device: which device is placed on.",), "assigned devices",
            tree=(Row(pl.col("device").cast(pl.String), needs="device"),),
            code=(Row(pl.when(pl.col("devices").list.len() > 0).then(pl.col("devices").list.join("|")),
                      needs="devices"),),
            op=("join", "devices"), rank=(9, 9),
        ),
        Field(
            "op_types", (_DOC_OP_TYPES,), "op types",
            tree=(_OP_TYPES,), code=(_OP_TYPES,), op=("join", "op_types"), rank=(10, 10),
        ),
        Field(
            "occurrence", ("occurrence: The number of times it occurs",),
            "op count (run|defined)", "op occurrence (run|defined)",
            tree=((("own", "run_count", "number"), ("lit", "/"), ("val", "total_run_count", "number"), ("lit", "|"),
                   ("acc", "1", "--"), ("lit", "/"), ("val", "total_definition_count", "number")),),
            code=((("lit", "occurrence N/A in code view"),),),
            op=("runs", 10), rank=(11, 11),
        ),
        Field(
            "input_shapes", ("input shape: The shape of input tensors",), "input shapes",
            tree=(Row(_input_shapes_expr(), needs="input_shapes", missing=(("lit", ""),)),),
            code=((("lit", "input_shapes N/A in code view"),),),
            rank=(12, 12),  # the op view prints them in a block under the line (text.input_shape_block)
        ),
        Field("tensor_value", ("tensor_value: Not supported now.",)),  # a note under the line (tensor_text)
        # ours: lines under the row (launched_text)
        Field("kernels", ("kernels: The GPU kernels, copies and memsets each node launched, listed under its line.",)),
    )
}



class _Fields(MutableMapping):
    """The fields: tfprof's (and ours) in a dict that can be written to (a field that is not a
    metric), then the registered metrics' (``tfprof.schema.metrics.register``), made from their
    records when the registry changes."""

    def __init__(self, own: dict[str, Field]) -> None:
        self._own = own
        self._registered = derived(lambda: {f.name: f for f in _registered_fields()})

    def __getitem__(self, name: str) -> Field:
        return self._own[name] if name in self._own else self._registered[name]

    def __setitem__(self, name: str, field: Field) -> None:
        self._own[name] = field

    def __delitem__(self, name: str) -> None:
        del self._own[name]

    def __iter__(self):
        yield from self._own
        yield from (n for n in self._registered if n not in self._own)

    def __len__(self) -> int:
        return sum(1 for _ in self)


FIELDS: MutableMapping[str, Field] = _Fields(_BUILT_IN)

# The fields with a metric column, for callers that only want numbers.
METRICS: dict[str, Field] = derived(lambda: {name: f for name, f in FIELDS.items() if f.column})


def shown(select: Sequence[str], *, multi: bool) -> list[Field]:
    """The fields ``select`` prints, in the line order of the single-node or multi-node views."""
    fields = [f for f in FIELDS.values() if f.legend is not None and f.shown(select)]
    return sorted(fields, key=lambda f: f.rank[multi])


def cells(select: Sequence[str], view: str, columns: Iterable[str]) -> list[tuple[tuple[Piece, ...], pl.Expr | None]]:
    """The items of a ``view`` ("tree" or "code") line, in order, for a frame with ``columns``:
    each ``(pieces, None)``, or ``((), expr)`` for a row string left out where null."""
    columns = set(columns)
    out: list[tuple[tuple[Piece, ...], pl.Expr | None]] = []
    for f in shown(select, multi=view == "code"):
        for item in getattr(f, view):
            if not isinstance(item, Row):
                out.append((item, None))
            elif item.needs is None or item.needs in columns:
                out.append(((), item.expr))
            elif item.missing is not None:
                out.append((item.missing, None))
    return out


def time_fields(select: Sequence[str]) -> list[str]:
    """The time fields ``select`` prints: ``micros`` prints all three."""
    return [f.name for f in shown(select, multi=False) if f.kind == "time"]
