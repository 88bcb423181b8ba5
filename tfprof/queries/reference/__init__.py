"""The reference backend: a view spec (``tfprof.queries.spec.TreeSpec``) executed with DuckDB
SQL (``tfprof/queries/sql/*.sql``) and polars expressions only, no compiled kernels.

It is slow and plain on purpose: tests hold the fast engine (``tfprof.queries.scope``,
``graph``, ``op``, ``code``) equal to it, so that the kernels are an optimisation of a view
anyone can read, not its only statement. ``run(prof, spec)`` returns the printed rows in
display order and the root's totals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.metrics import node_frame
from tfprof.queries.reference.display import show_tree
from tfprof.queries.reference.groups import show_groups
from tfprof.queries.reference.layouts import LAYOUTS
from tfprof.queries.reference.sql import Sql
from tfprof.queries.spec import TreeSpec

__all__ = ["ReferenceResult", "run", "sql_backend"]

# What runs the SQL files: DuckDB here (``Sql``), or another engine with the same ``run``
# method (``tfprof.catalog.spark.SparkSql``) inside ``sql_backend``.
_BACKENDS: list[Callable[[], Sql]] = []


@contextlib.contextmanager
def sql_backend(make: Callable[[], Sql]) -> Iterator[None]:
    """Run the SQL files meanwhile on what ``make()`` returns (an object with ``Sql``'s
    ``run`` and ``close``)."""
    _BACKENDS.append(make)
    try:
        yield
    finally:
        _BACKENDS.remove(make)


@dataclass(frozen=True)
class ReferenceResult:
    """The printed rows (without the root) in display order, and the root's totals."""

    rows: pl.DataFrame
    root: dict[str, int]


def run(prof: Profile, spec: TreeSpec) -> ReferenceResult:
    """Execute ``spec`` on ``prof``."""
    nodes = node_frame(prof, spec.step)  # each node's self values for the step (ReInit)
    sql = _BACKENDS[-1]() if _BACKENDS else Sql()
    try:
        if spec.layout == "groups":
            rows, root = show_groups(sql, prof, spec, nodes)
        else:
            forest = LAYOUTS[spec.layout](sql, prof, spec, nodes)
            rows, root = show_tree(sql, forest, spec, code_mode=spec.layout == "code")
    finally:
        sql.close()
    return ReferenceResult(rows=rows, root=root)


def tree_frame(prof: Profile, spec: TreeSpec) -> pl.DataFrame:
    """A scope or graph view's rows as the engine returns them (``tfprof.queries.scope.scope``):
    the root row first, the printed details attached; computed by ``run``, no kernel."""
    from tfprof.queries.metrics import attach_details, extras_for
    from tfprof.queries.scope import SCOPE_PARENT, with_root

    result = run(prof, spec)
    rows = result.rows.drop("id", strict=False)
    defaults = {"shape": [], "op_types": [SCOPE_PARENT]} if spec.layout == "scope" else {}
    rows = attach_details(rows, node_frame(prof, spec.step, extras_for(spec.options)), defaults)
    return with_root(rows, result.root, spec.root_op_type)
