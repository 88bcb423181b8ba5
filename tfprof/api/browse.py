"""A view's displayed rows as a tree to browse piece by piece (the web UI's core, ``tfprof.ui``).

``browse(prof, cmd, options)`` runs the view as the CLI does (``run_view``) and keeps its rows
(``view_table``: the rows ``--format json`` prints for the same options) with the links a
reader needs to unfold them a level at a time: each row's parent, its children in display
order and the end of its subtree, all numpy arrays built with a loop over depth, never over
rows. A 705k-row view is built once; a shell then sends only the rows a person opens
(``rows_of``), the rows matching a search with their ancestors (``search``), or the rows wide
enough to draw in a flame graph of one subtree (``flame``).

A tree's rows nest as the view displayed them (``level``, ``parent_row`` of its result); a
list (the ``groups`` layout: the op view) has every row at the top level.

>>> import tfprof
>>> tree = browse(tfprof.load(tfprof.sample_path()), "scope", {"max_depth": 3})
>>> tree.rows_of(-1)[0]["name"], tree.rows_of(-1)[0]["children"] > 0
('_TFProfRoot', True)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from tfprof.api.run import options_for, run_view
from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries.launched import launched
from tfprof.queries.options import Options
from tfprof.queries.spec import ROOT
from tfprof.schema.metrics import BY_SELECT, METRIC_LIST, derived, kind_of
from tfprof.views.table import view_table

# order_by's name for the public column a reader sorts by (tfprof sorts by one metric,
# descending): each metric field's column, the name, and the run count (occurrence).
ORDER_OF_COLUMN = derived(lambda: {
    "name": "name",
    **{m.public_column: m.order_by for m in METRIC_LIST if m.order_by},
    "run_count": "occurrence",
})
# The flame graph's metrics: each select field's public column (a subtree total in the tree views).
FLAME_METRICS = {s: BY_SELECT[s].public_column for s in ("micros", "bytes", "params", "float_ops")}


@dataclass
class Tree:
    """One view's displayed rows (``table``, display order) and their links (module docstring)."""

    cmd: str
    options: Options
    layout: str  # the view's layout: "groups" is a list, the others trees
    table: pl.DataFrame  # the rows `--format json` prints: the columns of the selected fields
    full: pl.DataFrame  # the same rows with every metric column (a flame graph of any metric)
    lines: list[str] | None  # each row's line of the report (``ViewResult.lines``)
    notes: list[str]
    level: np.ndarray  # nesting level as shown (0: top level)
    parent: np.ndarray  # parent row, -1 at the top level
    end: np.ndarray  # one past the last row of each row's subtree
    order: np.ndarray  # rows grouped by parent (-1 first), display order within a parent
    first: np.ndarray  # order[first[p + 1]:first[p + 2]] are the children of row p (p = -1: top level)
    kernels: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # -select kernels: row -> its GPU work
    is_reversed: bool = False  # siblings in the opposite of the view's order (``reversed``)
    _before: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _flipped: Tree | None = field(default=None, repr=False)

    def reversed(self) -> Tree:
        """The same rows with every row's children in the opposite order (the page's two-way
        sort: tfprof sorts one way only); made once per tree."""
        if self._flipped is None:
            n = len(self.parent)
            order = np.lexsort((-np.arange(n), self.parent))  # grouped by parent, last row first
            self._flipped = replace(self, order=order, is_reversed=not self.is_reversed, _before={}, _flipped=self)
        return self._flipped

    @property
    def metrics(self) -> list[str]:
        """The metric columns of the rows, self and total side by side."""
        return [c for c in self.table.columns if c not in ("name", "depth", "node_id", "accounted")]

    def children(self, row: int) -> np.ndarray:
        return self.order[self.first[row + 1]:self.first[row + 2]]

    def rows_of(self, row: int, offset: int = 0, limit: int = 200) -> list[dict[str, Any]]:
        """Rows ``offset`` to ``offset + limit`` of ``row``'s children (-1: the top-level rows)."""
        return self.rows(self.children(row)[offset:offset + limit])

    def rows(self, index: np.ndarray | list[int]) -> list[dict[str, Any]]:
        """Rows by position: ``i``, ``name``, ``level``, ``parent``, ``children`` (how many),
        ``accounted``, ``values`` (the metric columns in ``metrics`` order), ``line`` and, with
        ``-select kernels``, ``kernels`` (the GPU work the row's node launched: ``kind``, ``name``,
        ``runs``, ``micros``; ``tfprof.queries.launched``)."""
        index = np.asarray(index, dtype=np.int64)
        part = self.table[index]
        values = part.select(self.metrics).rows() if self.metrics else [()] * len(index)
        counts = self.first[index + 2] - self.first[index + 1]
        out = []
        for k, i in enumerate(index.tolist()):
            out.append({
                "i": i,
                "name": part["name"][k],
                "level": int(self.level[i]),
                "parent": int(self.parent[i]),
                "children": int(counts[k]),
                "accounted": bool(part["accounted"][k]),
                "values": list(values[k]),
                "line": self.lines[i] if self.lines is not None else None,
                **({"kernels": self.kernels.get(i, [])} if "kernels" in self.options.select else {}),
            })
        return out

    def subtree(self, row: int, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` rows below ``row`` (-1: every row) in display order, each with its
        parent: what opening every level of it shows, in one answer (``Expand all``)."""
        lo, hi = (0, len(self.level)) if row < 0 else (row + 1, int(self.end[row]))
        return self.rows(np.arange(lo, min(hi, lo + limit)))

    def ancestors(self, row: int) -> list[int]:
        """``row``'s ancestors, the top-level one first."""
        chain = []
        while (row := int(self.parent[row])) >= 0:
            chain.append(row)
        return chain[::-1]

    def search(self, text: str, limit: int = 100) -> tuple[list[int], int]:
        """Rows whose name contains ``text`` (case-insensitive, literal), in display order: the
        first ``limit`` and how many there are."""
        hits = np.flatnonzero(self.table["name"].str.to_lowercase().str.contains(text.lower(), literal=True).to_numpy())
        return hits[:limit].tolist(), len(hits)

    def flame(self, metric: str, row: int = -1, fraction: float = 1 / 4000, limit: int = 20000) -> dict[str, Any]:
        """The subtree of ``row`` (-1: everything) as flame-graph boxes: each row's ``x`` (its
        start) and ``w`` (its ``metric``: subtree totals in the tree views, the self value in
        the op view) in the metric's unit, children laid back to back from their parent's start
        in display order; rows narrower than ``fraction`` of the whole are left out (and so is
        what is below them), at most ``limit`` rows."""
        column = FLAME_METRICS[metric]
        flat = self.layout == "groups"
        values = self.full[column if flat else "total_" + column].to_numpy().astype(np.float64)
        lo, hi = (0, len(values)) if row < 0 else (row, int(self.end[row]))
        span = np.arange(lo, hi)
        width = values[lo:hi]
        parent = self.parent[lo:hi]
        before = self._offsets(metric, values)[lo:hi]
        level = self.level[lo:hi] - (0 if row < 0 else self.level[row])
        top = float(width[level == 0].sum())
        x = np.where(level == 0, before, 0.0) if row < 0 else np.zeros(hi - lo)
        for d in range(1, int(level.max(initial=0)) + 1):  # a parent's start is known before its children's
            here = np.flatnonzero(level == d)
            x[here] = x[parent[here] - lo] + before[here]
        keep = width >= top * fraction
        if not flat:  # what is below a dropped row is dropped too
            for d in range(1, int(level.max(initial=0)) + 1):
                here = np.flatnonzero((level == d) & keep)
                keep[here] = keep[parent[here] - lo]
        kept = np.flatnonzero(keep)[:limit]
        names = self.table["name"][span[kept]].to_list()
        return {
            "metric": metric, "kind": kind_of(column), "total": float(top), "root": row,
            "i": span[kept].tolist(), "level": level[kept].tolist(), "x": x[kept].tolist(), "w": width[kept].tolist(),
            "name": names, "dropped": int(len(span) - len(kept)),
            "small": self._small_runs(keep, parent, level, x, width, lo, flat),
        }

    def inverted(self, metric: str, fraction: float = 1 / 4000, limit: int = 20000) -> dict[str, Any]:
        """The view as an inverted (bottom-up) flame graph (``tfprof.queries.flame.inverted``):
        each row's own ``metric`` (where it is accounted) under the rows above it, frames of the
        same name merged; the same keys as ``flame`` (no row ``i``: a box is many rows), with
        ``inverted`` true."""
        from tfprof.queries.flame import inverted

        column = FLAME_METRICS[metric]
        own = self.full[column].to_numpy().astype(np.float64) * self.full["accounted"].to_numpy()
        # a stack ends below the tree's root row: `_TFProfRoot` is no caller
        roots = np.flatnonzero((self.level == 0) & (self.table["name"] == ROOT).to_numpy())
        parent = np.where(np.isin(self.parent, roots), -1, self.parent)
        boxes = inverted(self.table["name"], parent, own, fraction, limit)
        return {"metric": metric, "kind": kind_of(column), "total": boxes["total"], "root": -1,
                "i": [-1] * len(boxes["level"]), "level": boxes["level"], "x": boxes["x"], "w": boxes["w"],
                "name": boxes["name"], "dropped": int(boxes["dropped"] > 0), "small": {"level": []}, "inverted": True}

    def sandwich(self, metric: str, name: str, fraction: float = 1 / 4000, limit: int = 20000) -> dict[str, Any]:
        """Frame ``name``'s sandwich (``tfprof.queries.flame.sandwich``): its callers above it,
        its callees below, each merged by name, widths its subtree ``metric``; the keys of
        ``flame`` with ``sandwich`` (the frame) and ``callers`` (its box's level)."""
        from tfprof.queries.flame import sandwich

        column = FLAME_METRICS[metric]
        if self.layout == "groups":
            raise OptionError("a sandwich needs a tree: the callers and callees of a frame (scope, graph or code view)")
        if not (self.table["name"] == name).any():
            raise OptionError(f"no row named `{name[:80]}` in this view")
        roots = np.flatnonzero((self.level == 0) & (self.table["name"] == ROOT).to_numpy())
        parent = np.where(np.isin(self.parent, roots), -1, self.parent)
        total = self.full["total_" + column].to_numpy().astype(np.float64)
        boxes = sandwich(self.table["name"], parent, self.level, total, name, fraction, limit)
        return {"metric": metric, "kind": kind_of(column), "total": boxes["total"], "root": -1,
                "i": [-1] * len(boxes["level"]), "level": boxes["level"], "x": boxes["x"], "w": boxes["w"],
                "name": boxes["name"], "dropped": 0, "small": {"level": []}, "sandwich": name,
                "callers": boxes["callers"]}

    def _small_runs(self, keep: np.ndarray, parent: np.ndarray, level: np.ndarray, x: np.ndarray, width: np.ndarray,
                    lo: int, flat: bool) -> dict[str, list]:
        """The rows ``flame`` leaves out, as boxes: each run of consecutive siblings too narrow to
        draw, under a drawn parent (or at the top), becomes one box as wide as the run (``count``
        rows), so the graph shows where the small frames are instead of white space."""
        n = len(self.level)
        sibling = np.empty(n, np.int64)
        sibling[self.order] = np.arange(n) - self.first[self.parent[self.order] + 1]
        top_level = level == 0
        above_kept = top_level if flat else top_level | keep[np.where(top_level, 0, parent - lo)]
        small = np.flatnonzero(~keep & above_kept & (width > 0))
        if len(small) == 0:
            return {"level": [], "x": [], "w": [], "count": []}
        by_parent = np.where(top_level[small], -1, parent[small])
        rank = sibling[small + lo]
        order = np.lexsort((rank, by_parent))
        small, by_parent, rank = small[order], by_parent[order], rank[order]
        starts = np.flatnonzero(np.r_[True, (by_parent[1:] != by_parent[:-1]) | (rank[1:] != rank[:-1] + 1)])
        return {"level": level[small[starts]].tolist(), "x": x[small[starts]].tolist(),
                "w": np.add.reduceat(width[small], starts).tolist(), "count": np.diff(np.r_[starts, len(small)]).tolist()}


    def _offsets(self, metric: str, values: np.ndarray) -> np.ndarray:
        """Each row's offset within its parent: the widths of its earlier siblings (made once per metric)."""
        if metric not in self._before:
            frame = pl.DataFrame({"p": self.parent, "w": values})
            self._before[metric] = frame.select(pl.col("w").cum_sum().over("p") - pl.col("w")).to_series().to_numpy()
        return self._before[metric]


def browse(prof: Profile, cmd: str, options: Options | dict | None = None) -> Tree:
    """View ``cmd`` of ``prof`` with ``options`` as a ``Tree`` (module docstring)."""
    opts = options_for(cmd, options)  # over the view's own
    # the GPU work goes beside the rows, not into the report's lines (one line per row)
    result = run_view(prof, cmd, replace(opts, select=tuple(s for s in opts.select if s != "kernels")), full_rows=True)
    layout = result.layout
    work = {}
    if "kernels" in opts.select and layout in ("scope", "graph"):
        found = launched(prof, result.frame, opts.step).with_columns((pl.col("ns") / 1000).alias("micros"))
        for (row,), part in found.group_by("row", maintain_order=True):
            work[int(row)] = part.select("kind", "name", "runs", "micros").to_dicts()
    full = view_table(layout, result.frame, ours=True)
    table = full.select(view_table(layout, result.frame.head(0), result.options.select).columns)
    n = table.height
    if layout == "groups":
        level, parent = np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    else:
        level = result.frame["level"].to_numpy().astype(np.int64)
        parent = result.frame["parent_row"].to_numpy().astype(np.int64)
    order = np.argsort(parent, kind="stable")
    first = np.concatenate([[0], np.cumsum(np.bincount(parent + 1, minlength=n + 1))])
    return Tree(cmd=cmd, options=opts, layout=layout, table=table, full=full, lines=result.lines,
                notes=result.notes, level=level, parent=parent, end=_ends(level, parent), order=order, first=first,
                kernels=work)


def _by_level(level: np.ndarray) -> list[np.ndarray]:
    """The rows of each level, in display order (one stable sort, not one scan per level)."""
    order = np.argsort(level, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(level))]) if len(level) else np.zeros(1, dtype=np.int64)
    return [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1)]


def _ends(level: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """One past the last row of each subtree: the row plus the sizes of its descendants,
    summed from the deepest level up."""
    size = np.ones(len(level), dtype=np.int64)
    rows = _by_level(level)
    for d in range(len(rows) - 1, 0, -1):
        here = rows[d]
        size += np.bincount(parent[here], weights=size[here], minlength=len(level)).astype(np.int64)
    return np.arange(len(level)) + size


def command_line(cmd: str, path: str, options: Options) -> str:
    """The ``tfprof`` command that prints this view: the options that differ from the defaults."""
    default = Options().to_tfprof()
    words = ["tfprof", cmd, shlex.quote(path)]
    for name, value in options.to_tfprof().items():
        if name in ("output", "dump_to_file") or value == default.get(name):
            continue
        if isinstance(value, list):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        words += [f"--{name}", shlex.quote(str(value)) if value != "" else "''"]
    return " ".join(words)
