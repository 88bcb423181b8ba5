"""Scope paths of a foreign trace's events, and the scope an autograd backward op is placed in.

A path is the labels of an event's enclosing ops and scopes, outermost first, and its own,
joined by ``/``. PyTorch runs the backward pass on its autograd thread, outside every module, so
its ops would land at the top of the scope view with no tie to the layer they differentiate. Each
op that runs an autograd node carries the ``Sequence number`` of the forward op that made the node
(on the forward thread, the same number, which later forward ops may share; PyTorch 2 also links
the two with a ``fwdbwd`` flow, which says which of them), and TensorFlow names gradients
``gradients/<forward op>_grad/…``: a backward op is renamed that way after its forward op's path,
so that the scope view groups it under ``gradients/`` mirroring the model, and the code view folds
it into the forward op's lines as ``(gradient)``, as it does for TensorFlow's own gradients.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof import kernels
from tfprof.ingest.foreign import codes, nesting

GRADIENTS = "gradients/"
GRAD_SUFFIX = "_grad/"
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "  # the op that runs an autograd node
BACKWARD_NAME = r"Backward\d*$"  # an autograd node's own name (PyTorch 1.8 has no wrapper op)
FORWARD_PART = rf"^{GRADIENTS}(.*?){GRAD_SUFFIX.rstrip('/')}/((?:{BACKWARD_PREFIX}[^/]*|[^/]*Backward\d*)(?:/|$))"
"""Matches a backward op's path up to its root: group 1 is the forward op's path (a name, not
ops around it), group 2 the root's label on."""

Renamed = tuple[np.ndarray, pl.Series]
"""(rows, the labels that replace theirs)."""


def scope_paths(label: pl.Series, scope_parent: np.ndarray, rows: np.ndarray,
                renamed: Renamed | None = None) -> pl.Series:
    """The scope path of each row in ``rows``, with ``renamed`` rows labelled anew. Each distinct
    path is a (parent path, label) pair, numbered in one pass over the rows (a parent comes before
    its children); only the distinct paths are spelled out, level by level."""
    need = np.zeros(len(label), dtype=np.bool_)
    need[rows] = True
    anc = scope_parent[rows]
    while (anc >= 0).any():  # the ancestors of the rows asked for need a path too
        anc = anc[anc >= 0]
        anc = anc[~need[anc]]
        need[anc] = True
        anc = scope_parent[anc]
    labels = codes.of(label)
    at = np.full(len(label), -1, dtype=np.int64)
    if renamed is not None and len(renamed[0]):
        labels = labels.copy()
        labels[renamed[0]] = labels.max(initial=0) + codes.of(renamed[1])
        at[renamed[0]] = np.arange(len(renamed[0]))
    args = (np.ascontiguousarray(scope_parent, dtype=np.int64), labels, need, int(labels.max(initial=0)))
    if kernels.enabled():
        pid, parent_of, first, depth = kernels.compiled(_path_ids_py)(*args)
    else:
        pid, parent_of, first, depth = _path_ids_py(*args)
    own = label.gather(first).cast(pl.String)
    new = at[first]
    if (new >= 0).any():
        own = own.scatter(np.flatnonzero(new >= 0), renamed[1].gather(new[new >= 0]))
    spelled = own
    for d in range(1, int(depth.max(initial=0)) + 1):
        at_depth = np.flatnonzero(depth == d)
        spelled = spelled.scatter(at_depth, spelled.gather(parent_of[at_depth]) + "/" + own.gather(at_depth))
    return spelled.gather(pid[rows])


def _path_ids_py(scope_parent: np.ndarray, label: np.ndarray, need: np.ndarray, labels: int):
    """(the path id of each row, -1 where not ``need``ed; per path: its parent path's id, -1 at
    the top, the first row with it and its depth). A path is its parent's path and a label code."""
    n = len(scope_parent)
    pid = np.full(n, -1, dtype=np.int64)
    parent_of = np.empty(n, dtype=np.int64)
    first = np.empty(n, dtype=np.int64)
    depth = np.empty(n, dtype=np.int64)
    seen = {np.int64(-1): np.int64(-1)}  # typed by this entry; real keys are >= 0
    count = 0
    for i in range(n):
        if not need[i]:
            continue
        p = scope_parent[i]
        up = pid[p] if p >= 0 else -1
        key = (up + 1) * (labels + 1) + label[i]
        k = seen.get(key, -1)
        if k < 0:
            k = count
            seen[key] = k
            parent_of[k] = up
            first[k] = i
            depth[k] = depth[up] + 1 if up >= 0 else 0
            count += 1
        pid[i] = k
    return pid, parent_of[:count], first[:count], depth[:count]


def backward_scopes(ev: pl.DataFrame, parent: np.ndarray, is_op: np.ndarray, label: pl.Series,
                    scope_parent: np.ndarray) -> tuple[np.ndarray, Renamed | None]:
    """(``scope_parent`` with each backward root at the top, those roots renamed
    ``gradients/<forward path>_grad/<label>``). A backward root is an op flagged ``backward``
    with a ``seq`` and no backward op around it. Its forward op is the one the trace links it to
    (``linked``: a ``fwdbwd`` flow); for a root without such a link, the op of the same process
    and ``seq``, not backward nor inside one, that started last at or before it (of several
    starting then, the innermost). Roots without either stay where they are."""
    if "seq" not in ev.columns or ev["seq"].null_count() == len(ev):
        return scope_parent, None
    has_seq = ev["seq"].is_not_null().to_numpy() & is_op
    backward = ev["backward"].fill_null(False).to_numpy() & is_op
    in_backward = nesting.nearest(parent, backward) >= 0
    is_root = backward & has_seq & ~in_backward
    is_forward = has_seq & ~backward & ~in_backward
    roots, forward = np.flatnonzero(is_root), np.flatnonzero(is_forward)
    if not len(roots) or not len(forward):
        return scope_parent, None
    process = codes.of(ev["process"])
    start, seq = ev["start_ns"].to_numpy(), ev["seq"].to_numpy()
    by_flow = linked(ev, parent, is_root, is_forward)

    def keyed(rows: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame({"process": process[rows], "seq": seq[rows], "start": start[rows], "row": rows})

    candidates = keyed(forward).group_by("process", "seq", "start").agg(pl.col("row").max()).sort("start")
    match = keyed(roots[~np.isin(roots, by_flow["row"].to_numpy())]).sort("start").join_asof(
        candidates, on="start", by=["process", "seq"], strategy="backward", suffix="_forward", check_sortedness=False)
    match = pl.concat([by_flow, match.select("row", "row_forward")]).filter(
        pl.col("row_forward").is_not_null()).sort("row")
    if match.is_empty():
        return scope_parent, None
    rows, forward_rows = match["row"].to_numpy(), match["row_forward"].to_numpy()
    names = (GRADIENTS + scope_paths(label, scope_parent, forward_rows) + GRAD_SUFFIX
             + label.gather(rows).cast(pl.String))
    scope_parent = scope_parent.copy()
    scope_parent[rows] = -1
    return scope_parent, (rows, names)


FORWARD_BACKWARD = "fwdbwd"  # the category of Kineto's flows from a forward op to its backward node's op


def linked(ev: pl.DataFrame, parent: np.ndarray, is_root: np.ndarray, is_forward: np.ndarray) -> pl.DataFrame:
    """(``row``: a backward root, ``row_forward``: its forward op) as the trace's ``fwdbwd`` flows
    link them. PyTorch writes the flow's ``s`` end at the forward op's start on its thread and the
    ``f`` end at the start of the op named after the autograd node, inside the root. The forward op
    is the innermost op around the ``s`` end (``parent``) that starts there, is a forward op
    (``is_forward``) and has the root's ``seq``; the root is the ``f`` end's nearest ``is_root``
    op. A flow with no start or several, or a root that flows link to different forward ops, links
    nothing (the root is then matched by its sequence number)."""
    none = pl.DataFrame(schema={"row": pl.Int64, "row_forward": pl.Int64})
    if "flow_id" not in ev.columns or "category" not in ev.columns:
        return none
    ends = ev.lazy().filter((pl.col("category").cast(pl.String) == FORWARD_BACKWARD)
                            & pl.col("role").is_in(["flow_start", "flow_end"])).select(
        pl.col("flow_id").cast(pl.String), pl.col("role").cast(pl.String), "row", "start_ns").collect()
    if ends.is_empty():
        return none
    ends = ends.filter((pl.col("role") == "flow_end") | (pl.len().over("flow_id", "role") == 1))  # one start each
    flows = ends.filter(pl.col("role") == "flow_start").join(ends.filter(pl.col("role") == "flow_end"),
                                                              on="flow_id", suffix="_end")
    if flows.is_empty():
        return none
    at_end = parent[flows["row_end"].to_numpy()]
    root = np.where(at_end >= 0, np.where(is_root[np.maximum(at_end, 0)], at_end,
                                          nesting.nearest(parent, is_root)[np.maximum(at_end, 0)]), -1)
    seq = ev["seq"].to_numpy()
    start = ev["start_ns"].to_numpy()
    begins = flows["start_ns"].to_numpy()
    forward = np.full(len(root), -1, dtype=np.int64)
    here = np.where(root >= 0, parent[flows["row"].to_numpy()], -1)  # walk out from the `s` end, a level a time
    while (todo := here >= 0).any():
        at = here[todo]
        found = is_forward[at] & (start[at] == begins[todo]) & (seq[at] == seq[root[todo]])
        forward[np.flatnonzero(todo)[found]] = at[found]
        here[np.flatnonzero(todo)[found]] = -1
        later = np.flatnonzero(todo)[~found]
        here[later] = parent[here[later]]
    pairs = pl.DataFrame({"row": root, "row_forward": forward}).filter((pl.col("row") >= 0)
                                                                        & (pl.col("row_forward") >= 0))
    return pairs.unique().filter(pl.len().over("row") == 1).sort("row")
