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
    code = names.cast(pl.String).cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    label = names.cast(pl.String)
    value = np.asarray(own, dtype=np.float64)
    total = float(value[value > 0].sum())
    out: dict[str, list] = {"level": [], "x": [], "w": [], "name": [], "parent_box": []}
    stack = np.flatnonzero(value > 0)  # one stack per row with a value of its own, at that row
    weight = value[stack]
    frame = stack.copy()  # the row each stack is at, k levels up
    key = np.full(len(stack), -1, np.int64)  # each stack's box at the level before (-1: none yet)
    box_x = np.zeros(0)  # the boxes of the level before: their x
    box_id = np.zeros(0, np.int64)  # ... and their index in the output
    first_box = 0
    level = 0
    while len(stack) and first_box < limit:
        pairs = np.stack([key, code[frame]], axis=1)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        width = np.bincount(inverse, weights=weight, minlength=len(uniq))
        kept = width >= total * fraction
        # siblings (same box below) widest first, then by name; x from the box below's start
        up = uniq[:, 0]
        order = np.lexsort((uniq[:, 1], -width, up))
        x = np.zeros(len(uniq))
        start = np.where(up >= 0, box_x[np.maximum(up, 0)] if len(box_x) else 0.0, 0.0)
        ordered_up = up[order]
        ends = np.cumsum(np.where(kept[order], width[order], 0.0))
        group_start = np.r_[0, np.flatnonzero(ordered_up[1:] != ordered_up[:-1]) + 1]
        base = np.repeat(np.r_[0.0, ends][group_start], np.diff(np.r_[group_start, len(order)]))
        x[order] = start[order] + np.r_[0.0, ends][:-1] - base
        keep_idx = order[kept[order]][: max(limit - first_box, 0)]
        ids = np.full(len(uniq), -1, np.int64)
        ids[keep_idx] = first_box + np.arange(len(keep_idx))
        # a representative row's name for each box (every stack in it has the same name there)
        rep = np.zeros(len(uniq), np.int64)
        rep[inverse] = frame
        out["level"] += [level] * len(keep_idx)
        out["x"] += x[keep_idx].tolist()
        out["w"] += width[keep_idx].tolist()
        out["name"] += label.gather(rep[keep_idx]).to_list()
        below = up[keep_idx]
        out["parent_box"] += (np.where(below >= 0, box_id[np.maximum(below, 0)], -1) if len(box_id)
                              else np.full(len(below), -1)).tolist()
        first_box += len(keep_idx)
        # on up: stacks in kept boxes whose frame has a parent
        alive = (ids[inverse] >= 0) & (parent[frame] >= 0)
        box_x, box_id = x, ids
        stack, weight, key = stack[alive], weight[alive], inverse[alive]
        frame = parent[frame[alive]]
        level += 1
    out["total"] = total  # type: ignore[assignment]
    out["dropped"] = total - sum(w for w, lv in zip(out["w"], out["level"]) if lv == 0)  # type: ignore[assignment]
    return out
