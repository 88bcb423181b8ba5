"""A view's displayed rows as stacks of names with values: what flame graphs and name-stack pprof draw.

Every view prints a tree (scope, graph, code: each row's ``parent_row``) or a list (the
``groups`` layout: the op view). Here each
displayed row becomes one stack, the names from the top of the tree down to it, and per metric
the row's *exclusive* value: for a tree, its displayed total less the displayed totals of its
shown children; for the op view's list, the row's own value (one frame per op type). A flame
graph adds a frame's value to those of the stacks below it, so each frame then measures what the
view prints as that row's total (op view: its self value), wherever shown children add up to no
more than their parent; where they add up to more (a quirk of hidden levels in the graph view),
the exclusive value is 0 rather than negative.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tfprof.errors import OptionError
from tfprof.queries.options import Options
from tfprof.schema.metrics import BY_SELECT, derived, exported

# select name -> the frame's self column (its subtree is total_<column>): the metrics a stack
# can carry, tfprof's pprof metrics.
STACK_METRICS = derived(lambda: {m.select: m.column for m in exported("stacks")})


def unit_of(select: str) -> str:
    """The pprof unit of a stack metric: microseconds, bytes or count."""
    return BY_SELECT[select].unit if select in BY_SELECT else "count"


def stack_metrics(opts: Options, kind: str) -> tuple[str, ...]:
    """The selected fields a stack output carries, in ``STACK_METRICS`` order (times first: a
    one-metric file takes the first), or an error naming the valid ones when none is a metric."""
    picked = tuple(s for s in STACK_METRICS if s in opts.select)
    if not picked:
        raise OptionError(
            f"-output {kind} needs a numeric select field (got `{','.join(opts.select)}`); "
            f"valid: {', '.join(STACK_METRICS)}"
        )
    return picked


@dataclass(frozen=True)
class Stacks:
    """Displayed rows as stacks: ``names`` (each row's own name), ``parent`` (the row of its
    displayed parent, -1 at the top), and per select name the exclusive ``values`` (int64) and
    their ``units`` (``unit_of``; times of a foreign profile in nanoseconds: its exact unit)."""

    names: list[str]
    parent: np.ndarray
    values: dict[str, np.ndarray]
    units: dict[str, str] = field(default_factory=dict)

    def unit(self, select: str) -> str:
        return self.units.get(select) or unit_of(select)

    def paths(self) -> list[list[str]]:
        """Each row's stack, top first (rows come in pre-order, so a parent precedes its children)."""
        out: list[list[str]] = []
        for i, name in enumerate(self.names):
            p = int(self.parent[i])
            out.append([*out[p], name] if p >= 0 else [name])
        return out


def view_stacks(layout: str, frame: pl.DataFrame, select: tuple[str, ...]) -> Stacks:
    """The stacks of the displayed ``frame`` (``ViewResult.frame``) of a view of ``layout``
    for the select names ``select`` (keys of ``STACK_METRICS``)."""
    names = frame["name"].cast(pl.String).to_list()
    values: dict[str, np.ndarray] = {}
    # exact times (µs as floats: a foreign profile's, tfprof.queries.ticks) go out as whole ns
    units = {s: "nanoseconds" for s in select if frame.schema[STACK_METRICS[s]].is_float()}

    def ints(column: str, s: str) -> np.ndarray:
        values = frame[column].fill_null(0)
        if s in units:
            values = (values * 1000).round(0)
        return values.cast(pl.Int64).to_numpy()

    if layout == "groups":  # a list: every row at the top, its own value
        parent = np.full(frame.height, -1, np.int64)
        for s in select:
            values[s] = ints(STACK_METRICS[s], s).clip(0)
        return Stacks(names, parent, values, units)
    parent = frame["parent_row"].to_numpy().astype(np.int64)
    has = parent >= 0
    for s in select:
        total = ints("total_" + STACK_METRICS[s], s)
        children = np.zeros(frame.height, np.int64)
        np.add.at(children, parent[has], total[has])
        values[s] = np.maximum(total - children, 0)
    return Stacks(names, parent, values, units)


def as_tree(layout: str, frame: pl.DataFrame) -> pl.DataFrame:
    """A tree frame (``name``, ``level``, ``parent_row``, ``total_exec_micros``) of the rows of a
    view of ``layout``: a tree's rows as they are; a list (``groups``) under a root
    (``_TFProfRoot``, the root its proto returns) holding the sum, each row a child timed by its
    own time."""
    if layout != "groups":
        return frame
    own = frame["exec_micros"].fill_null(0).cast(pl.Int64).clip(0)
    return pl.DataFrame(
        {
            "name": ["_TFProfRoot", *frame["name"].cast(pl.String).to_list()],
            "level": [0] + [1] * frame.height,
            "parent_row": [-1] + [0] * frame.height,
            "total_exec_micros": [int(own.sum() or 0), *own.to_list()],
        },
        schema={"name": pl.String, "level": pl.Int64, "parent_row": pl.Int64, "total_exec_micros": pl.Int64},
    )
