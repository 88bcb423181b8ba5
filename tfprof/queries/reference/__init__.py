"""The reference backend: a view spec (``tfprof.queries.spec.TreeSpec``) executed with DuckDB
SQL (``tfprof/queries/sql/*.sql``) and polars expressions only, no compiled kernels.

It is slow and plain on purpose: tests hold the fast engine (``tfprof.queries.scope``,
``graph``, ``op``, ``code``) equal to it, so that the kernels are an optimisation of a view
anyone can read, not its only statement. ``run(prof, spec)`` returns the printed rows in
display order and the root's totals; ``tree_frame``, ``op_view`` and ``code_view`` return them
in the shapes the views' engines return, which is how ``--engine spark`` runs every view here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.metrics import node_frame
from tfprof.queries.op import OpView
from tfprof.queries.reference.display import show_tree
from tfprof.queries.reference.groups import show_groups
from tfprof.queries.reference.layouts import LAYOUTS
from tfprof.queries.reference.sql import Sql
from tfprof.queries.spec import TreeSpec
from tfprof.queries.ticks import scaled_spec, time_scale

__all__ = ["ReferenceResult", "active", "code_view", "op_view", "run", "sql_backend", "tree_frame"]

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


def active() -> bool:
    """True inside ``sql_backend``: the views then run here, their SQL on that engine."""
    return bool(_BACKENDS)


@dataclass(frozen=True)
class ReferenceResult:
    """The printed rows (without the root) in display order, and the root's totals."""

    rows: pl.DataFrame
    root: dict[str, int]


def run(prof: Profile, spec: TreeSpec) -> ReferenceResult:
    """Execute ``spec`` on ``prof``."""
    spec = scaled_spec(spec, time_scale(prof))
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


def _members(prof: Profile, spec: TreeSpec) -> pl.DataFrame:
    """The picked member nodes with what the reports print about them (``op`` or ``tid``
    says where each belongs)."""
    from tfprof.queries.metrics import extras_for
    from tfprof.queries.op import picked_members, with_group

    nodes = node_frame(prof, spec.step, extras_for(spec.options))
    if spec.layout == "groups":
        nodes = with_group(prof, nodes, spec)
    else:
        from tfprof.queries.code import at_leaves
        from tfprof.queries.indexes.code_trie import static_trie

        nodes = at_leaves(prof.index("code_trie", static_trie)["leaves"], nodes)
    return picked_members(nodes, spec)


def _with_sets(rows: pl.DataFrame, members: pl.DataFrame, spec: TreeSpec, key: str, row_key: str) -> pl.DataFrame:
    """``rows`` with the device and op-type sets of the members whose ``key`` is the row's
    ``row_key``, where the report prints them."""
    from tfprof.queries.op import member_sets

    sets = member_sets(spec.options)
    if not sets:
        return rows
    grouped = members.group_by(key).agg(*sets).select(pl.col(key).cast(rows.schema[row_key]).alias(row_key),
                                                      pl.exclude(key))
    return rows.join(grouped, on=row_key, how="left", maintain_order="left")


def op_view(prof: Profile, spec: TreeSpec) -> OpView:
    """The op view (``tfprof.queries.op.op_view``'s ``OpView``) computed by ``run``: the rows,
    cut and ordered by the SQL, with the members' sets attached."""
    result = run(prof, spec)
    members = _members(prof, spec)
    rows = _with_sets(result.rows.with_columns(pl.lit(True).alias("accounted")), members, spec, "op", "name")
    return OpView(rows=rows, root=result.root, members=members.filter(pl.col("op").is_in(rows["name"].implode())))


def code_view(prof: Profile, spec: TreeSpec) -> tuple[pl.DataFrame, int, pl.DataFrame]:
    """The code view as ``tfprof.queries.code.code`` returns it (rows root first, unaccounted
    gradient groups, picked members), computed by ``run``."""
    from tfprof.queries.code import unaccounted_groups, with_code_root

    result = run(prof, spec)
    members = _members(prof, spec)
    rows = _with_sets(result.rows.rename({"id": "tid"}), members, spec, "tid", "tid")
    return with_code_root(rows, result.root), unaccounted_groups(prof), members
