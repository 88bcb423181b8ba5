"""The one place that decides which engine executes a view's spec, and what every engine returns.

A spec (``tfprof.queries.spec.TreeSpec``) runs on one of three engines, chosen here and only
here, for the report (``tfprof.api.run``), the diff (``tfprof.api.diff``), the UI and Spark alike:

* the **numba engine** of its layout (``scope``, ``graph``, ``groups`` → ``op_view``, ``code``),
  while ``tfprof.kernels.enabled()``;
* the **reference backend** (``tfprof.queries.reference``: polars and DuckDB SQL) otherwise,
  for the tree layouts (the ``groups`` layout is polars either way and the ``code`` layout has
  no kernel-free path but the reference);
* the reference backend with its SQL on **another SQL engine** (``--engine spark``) while one is
  installed (``reference.sql_backend``), for every layout.

Every engine returns ``Displayed``: the displayed rows in display order (a tree's root first,
with ``level`` and ``parent_row``), the root's totals (a list's), the member nodes a multi-node
row stands for, and the code view's count of gradient groups it could not place.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import polars as pl

from tfprof import kernels
from tfprof.profile import Profile
from tfprof.queries.code import code
from tfprof.queries.graph import graph
from tfprof.queries.op import op_view
from tfprof.queries.scope import scope
from tfprof.queries.spec import TreeSpec

# each tree layout's numba engine (``groups`` and ``code`` below: they return more than rows)
_TREES = {"scope": scope, "graph": graph}


@dataclass
class Displayed:
    """What an engine returns for a spec (module docstring)."""

    rows: pl.DataFrame
    root: dict[str, int] = field(default_factory=dict)
    members: pl.DataFrame | None = None
    unaccounted: int = 0


def on_kernels(prof: Profile, layout: str) -> bool:
    """Whether a view of ``layout`` on ``prof`` runs on the compiled kernels (the code view
    always does; the others once the kernels are compiled or the profile is large)."""
    return layout == "code" or kernels.use_kernels(nodes=prof.row_counts()["nodes"])


def on_sql_backend() -> bool:
    """True while the reference backend's SQL runs on another engine (``--engine spark``): every
    layout then runs there, not on its local engine."""
    # a module another thread is still importing has no `active` yet: nothing can have made it active
    active = getattr(sys.modules.get("tfprof.queries.reference"), "active", None)
    return active is not None and active()


def _reference():
    from tfprof.queries import reference  # DuckDB: imported only where it runs

    return reference


def displayed(prof: Profile, spec: TreeSpec, metrics: tuple[str, ...] | None = None) -> Displayed:
    """Run ``spec`` on ``prof`` on the engine this module picks. ``metrics`` (self columns): a
    report needs only those, and the numba trees then carry only them (and what the spec sorts
    and filters on); the other engines return every column."""
    if prof.executor is not None:  # its numbers live elsewhere (a Spark aggregate): its views run there
        return prof.executor(spec)
    layout = spec.layout
    on_sql = on_sql_backend()
    if layout in _TREES:
        if kernels.enabled() and not on_sql:
            return Displayed(_TREES[layout](prof, spec, metrics))
        return Displayed(_reference().tree_frame(prof, spec))
    if layout == "groups":
        view = _reference().op_view(prof, spec) if on_sql else op_view(prof, spec)
        return Displayed(view.rows, dict(view.root), view.members)
    rows, unaccounted, members = _reference().code_view(prof, spec) if on_sql else code(prof, spec, metrics)
    return Displayed(rows, {}, members, unaccounted)
