"""The shape every index read back from a store must have before a kernel walks it.

An index is derived data, saved at ingest and trusted when a view reads it: its positions
index arrays inside compiled kernels, where a value out of range reads or writes outside them.
A store's manifest catches accidental damage by size and checksum; these checks, a few
vectorised passes over the index (about a millisecond each at 70k nodes), also keep a store
whose files agree with its manifest but not with each other (a crafted one) from crashing a
view. Node ids need only be integers: the views look them up (``arrays.rows_of``) or join on
them, and an id no node has finds nothing. Each check returns what is wrong, or None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # polars is not imported here: an ingest, which builds indexes, never loads it
    import polars as pl

    from tfprof.profile import Profile


def _ints(frame: pl.DataFrame | None, column: str) -> np.ndarray | None:
    """The column's values as int64, None when it is missing, not integers, or has nulls."""
    if frame is None or column not in frame.columns or not frame[column].dtype.is_integer() \
            or frame[column].null_count():
        return None
    return frame[column].to_numpy().astype(np.int64, copy=False)


def _text(frame: pl.DataFrame | None, column: str) -> bool:
    return frame is not None and column in frame.columns and str(frame[column].dtype) == "String"


def _within(values: np.ndarray | None, low: int, high: int) -> bool:
    return values is not None and (not len(values) or (values.min() >= low and values.max() < high))


def _parents_before(parent: np.ndarray | None) -> bool:
    """True when each parent is -1 or an earlier position (a pre-order), checked a million
    at a time: a large profile's trie has tens of millions of nodes."""
    if parent is None:
        return False
    step = 1 << 20
    for a in range(0, len(parent), step):
        part = parent[a: a + step]
        if part.min() < -1 or (part >= np.arange(a, a + len(part))).any():
            return False
    return True


def _ids(frame: pl.DataFrame | None, column: str, nulls: bool = False) -> bool:
    """True when the column holds node ids: integers (null where ``nulls`` allows)."""
    return (frame is not None and column in frame.columns and frame[column].dtype.is_integer()
            and (nulls or not frame[column].null_count()))


def graph_structure(parts: dict[str, pl.DataFrame], prof: Profile) -> str | None:
    n = prof.row_counts()["nodes"]
    perm, starts, children, roots = (_ints(parts.get(k), k) for k in ("perm", "starts", "children", "roots"))
    if perm is None or len(perm) != n or not _within(perm, 0, n) or (np.bincount(perm, minlength=n) != 1).any():
        return "perm is not a permutation of the nodes"
    if starts is None or children is None or len(starts) != n + 1 or starts[0] != 0 or starts[-1] != len(children) \
            or (np.diff(starts) < 0).any():
        return "starts do not delimit the children"
    if not _within(children, 0, n) or not _within(roots, 0, n):
        return "a child or root is not a node"
    return None


def step_means(parts: dict[str, pl.DataFrame], prof: Profile) -> str | None:
    metrics = parts.get("metrics")
    if not _ids(metrics, "node_id") or metrics.height != prof.row_counts()["nodes"]:
        return "it does not hold one row per node"
    bad = [c for c in metrics.columns if not metrics[c].dtype.is_integer()]
    return f"column {bad[0]} is not integers" if bad else None


def scope_layout(parts: dict[str, pl.DataFrame], prof: Profile) -> str | None:
    layout = parts.get("layout")
    pos, parent = _ints(layout, "pos"), _ints(layout, "parent")
    if pos is None or parent is None or not np.array_equal(pos, np.arange(len(pos))):
        return "positions are not 0, 1, 2, ..."
    if not _parents_before(parent):
        return "a parent does not come before its child"
    if not _text(layout, "name") or "name_rank" not in layout.columns or not layout["name_rank"].dtype.is_integer():
        return "names or name ranks are missing"
    return None if _ids(layout, "node_id", nulls=True) else "node ids are missing"


def code_trie(parts: dict[str, pl.DataFrame], prof: Profile) -> str | None:
    trie, labels, leaves = (parts.get(k) for k in ("trie", "labels", "leaves"))
    parent, label = _ints(trie, "parent"), _ints(trie, "label")
    if label is None or not _parents_before(parent):
        return "a trie node's parent does not come before it"
    if not _text(labels, "trace") or _ints(labels, "name_rank") is None:
        return "labels are missing"
    if not _within(label, 0, labels.height):
        return "a trie node's label is not a label"
    if not _ids(leaves, "member") or not _within(_ints(leaves, "tid"), 0, len(parent)):
        return "a leaf is not a trie node of a node"
    groups = _ints(parts.get("unmatched"), "gradient_groups")
    return None if groups is not None and len(groups) == 1 else "the count of unmatched gradient groups is missing"
