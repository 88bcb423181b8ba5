"""The inverted (bottom-up) flame graph of a displayed tree: each row's own value charged to its
stack read from the row up, so the frames that take the time come first and their callers stack
above them. Frames of the same name at the same place in the inverted stacks are one box: a
function called from many places is one wide box at the bottom, split above by its callers.

The stacks are merged one level at a time over all rows at once: level ``k`` keys each stack by
(its level ``k - 1`` key, the name ``k`` rows up), numbered densely, so the work is one pass per
level, not per row.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def inverted(names: pl.Series, parent: np.ndarray, own: np.ndarray, fraction: float = 1 / 4000,
             limit: int = 20_000) -> dict[str, list]:
    """Boxes of the inverted flame graph of a tree whose rows have ``names``, ``parent`` (the
    displayed parent's row, -1 at the top) and ``own`` (each row's own value): per box its
    ``level`` (0: the frames themselves), ``x`` and ``w`` (in ``own``'s unit), ``name`` and
    ``parent_box``; siblings widest first. A box narrower than ``fraction`` of the total is
    left out with what is above it; at most ``limit`` boxes. Also ``total`` and ``dropped``
    (the stacks' value in boxes left out).

    >>> b = inverted(pl.Series(["main", "f", "g", "f"]), np.array([-1, 0, 0, 2]), np.array([0, 5, 1, 3]))
    >>> list(zip(b["level"], b["name"], b["w"]))
    [(0, 'f', 8.0), (0, 'g', 1.0), (1, 'main', 5.0), (1, 'g', 3.0), (1, 'main', 1.0), (2, 'main', 3.0)]
    """
    code, label = _codes(names)
    value = np.asarray(own, dtype=np.float64)
    total = float(value[value > 0].sum())
    out: dict[str, list] = {"level": [], "x": [], "w": [], "name": [], "parent_box": []}
    frame = np.flatnonzero(value > 0)  # one stack per row with a value of its own, at that row
    weight = value[frame]
    key = np.full(len(frame), -1, np.int64)  # each stack's box at the level before (-1: none yet)
    below = _Level.first()
    level = 0
    while len(frame) and below.boxes < limit:
        here = _level(out, below, level, key, code, label, frame, weight, total * fraction, limit)
        # on up: stacks in kept boxes whose frame has a parent
        alive = (here.ids[here.inverse] >= 0) & (parent[frame] >= 0)
        weight, key = weight[alive], here.inverse[alive]
        frame = parent[frame[alive]]
        below = here
        level += 1
    out["total"] = total  # type: ignore[assignment]
    out["dropped"] = total - sum(w for w, lv in zip(out["w"], out["level"]) if lv == 0)  # type: ignore[assignment]
    return out


def sandwich(names: pl.Series, parent: np.ndarray, level: np.ndarray, total: np.ndarray, target: str,
             fraction: float = 1 / 4000, limit: int = 20_000) -> dict[str, list]:
    """The sandwich of frame ``target``: its callers stacked above it and its callees below it,
    each merged by name, in one set of boxes (``level`` 0 the top). ``total`` is each row's
    subtree value; each outermost row named ``target`` (none of its ancestors is) counts with
    its subtree once. The target's box is at level ``callers`` (the number of caller levels).
    ``level``: each row's depth (0 at the top).

    >>> b = sandwich(pl.Series(["main", "f", "g", "f", "h"]), np.array([-1, 0, 0, 2, 3]), np.array([0, 1, 1, 2, 3]),
    ...              np.array([10, 5, 4, 3, 2]), "f")
    >>> sorted((lv, n, w) for lv, n, w in zip(b["level"], b["name"], b["w"]))
    [(0, 'main', 3.0), (1, 'g', 3.0), (1, 'main', 5.0), (2, 'f', 8.0), (3, 'h', 2.0)]
    """
    code, label = _codes(names)
    value = np.asarray(total, dtype=np.float64)
    is_target = (label == target).to_numpy()
    # the outermost rows of the target: none of their ancestors is one (a level at a time)
    inside = np.zeros(len(parent), np.bool_)
    for d in range(1, int(level.max(initial=0)) + 1):
        rows = np.flatnonzero(level == d)
        up = parent[rows]
        inside[rows] = (up >= 0) & (inside[np.maximum(up, 0)] | is_target[np.maximum(up, 0)])
    outermost = is_target & ~inside
    roots = np.flatnonzero(outermost)
    whole = float(value[roots].sum())
    callers = inverted(names, parent, np.where(outermost, value, 0.0), fraction, limit)
    up = max(callers["level"], default=0)
    out: dict[str, list] = {"level": [], "x": [], "w": [], "name": [], "parent_box": []}
    for lv, x, w, n in zip(callers["level"], callers["x"], callers["w"], callers["name"]):
        if lv > 0:  # level 0 is the target itself: drawn once, from the callees' side
            out["level"].append(up - lv)
            out["x"].append(x)
            out["w"].append(w)
            out["name"].append(n)
            out["parent_box"].append(-1)
    # the callees: the targets' subtrees merged by the path below the target
    frame = roots
    key = np.full(len(frame), -1, np.int64)
    below = _Level.first()
    level = 0
    side: dict[str, list] = {"level": [], "x": [], "w": [], "name": [], "parent_box": []}
    while len(frame) and below.boxes < limit:
        here = _level(side, below, level, key, code, label, frame, value[frame], whole * fraction, limit)
        key_of = np.full(len(parent), -1, np.int64)
        kept = here.ids[here.inverse] >= 0
        key_of[frame[kept]] = here.inverse[kept]
        children = np.flatnonzero((parent >= 0) & (key_of[np.maximum(parent, 0)] >= 0))
        frame, key = children, key_of[parent[children]]
        below = here
        level += 1
    out["level"] += [up + lv for lv in side["level"]]
    for k in ("x", "w", "name"):
        out[k] += side[k]
    out["parent_box"] += [-1] * len(side["level"])
    out["total"] = whole  # type: ignore[assignment]
    out["callers"] = up  # type: ignore[assignment]
    return out


def _codes(names: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """Each name's code (equal names, equal codes) and the names as strings."""
    label = names.cast(pl.String)
    return label.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64), label


class _Level:
    """One level's boxes as the next level needs them: ``inverse`` (each walker's box),
    ``ids`` (each box's index in the output, -1 where left out), ``x`` and ``boxes`` (how many
    the output holds)."""

    def __init__(self, inverse, ids, x, boxes):
        self.inverse, self.ids, self.x, self.boxes = inverse, ids, x, boxes

    @classmethod
    def first(cls) -> _Level:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), 0)


def _level(out, below: _Level, level: int, key, code, label, frame, weight, least: float, limit: int) -> _Level:
    """Merge the walkers (``frame`` rows, ``weight`` each, ``key``: their box at the level
    before) by (box below, name) into boxes, lay the boxes out within their box below (widest
    first, then by code), append those at least ``least`` wide to ``out``."""
    uniq, inverse = np.unique(np.stack([key, code[frame]], axis=1), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    width = np.bincount(inverse, weights=weight, minlength=len(uniq))
    kept = width >= least
    up = uniq[:, 0]
    order = np.lexsort((uniq[:, 1], -width, up))
    start = np.where(up >= 0, below.x[np.maximum(up, 0)] if len(below.x) else 0.0, 0.0)
    ordered_up = up[order]
    ends = np.cumsum(np.where(kept[order], width[order], 0.0))
    group_start = np.r_[0, np.flatnonzero(ordered_up[1:] != ordered_up[:-1]) + 1]
    base = np.repeat(np.r_[0.0, ends][group_start], np.diff(np.r_[group_start, len(order)]))
    x = np.zeros(len(uniq))
    x[order] = start[order] + np.r_[0.0, ends][:-1] - base
    keep_idx = order[kept[order]][: max(limit - below.boxes, 0)]
    ids = np.full(len(uniq), -1, np.int64)
    ids[keep_idx] = below.boxes + np.arange(len(keep_idx))
    rep = np.zeros(len(uniq), np.int64)  # a row of each box, for its name
    rep[inverse] = frame
    out["level"] += [level] * len(keep_idx)
    out["x"] += x[keep_idx].tolist()
    out["w"] += width[keep_idx].tolist()
    out["name"] += label.gather(rep[keep_idx]).to_list()
    under = up[keep_idx]
    out["parent_box"] += (np.where(under >= 0, below.ids[np.maximum(under, 0)], -1) if len(below.ids)
                          else np.full(len(under), -1)).tolist()
    return _Level(inverse, ids, x, below.boxes + len(keep_idx))
