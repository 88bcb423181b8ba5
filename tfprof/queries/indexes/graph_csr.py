"""The graph view's structure
(docs/TFPROF_BEHAVIOUR.md, 'Graph view'), an index: nodes in name order and their inputs as
CSR arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tfprof.queries.arrays import rows_of
from tfprof.queries.indexes.names import name_order

if TYPE_CHECKING:
    from tfprof.profile import Profile


def structure(prof: Profile) -> dict[str, np.ndarray]:
    """The graph as CSR arrays over nodes in name order (it depends on no option): ``perm``
    (node-id order → name order), ``starts``/``children`` (each node's inputs that are nodes,
    in input order) and ``roots`` (nodes no one consumes).

    Inputs are linked by ``input_id``, the producer's id that ingest resolved from the input's
    name; only the names are sorted (bytewise, as tfprof orders them).
    """
    ids, perm, _, _ = name_order(prof)
    n = len(ids)
    gid = np.empty(n, np.int64)  # a node's row (node-id order) → its place in name order
    gid[perm] = np.arange(n)
    edges = prof.columns("node_inputs", ["node_id", "input_idx", "input_id"])
    consumer = rows_of(ids, edges.column("node_id").to_numpy())
    producer = rows_of(ids, edges.column("input_id").fill_null(-1).to_numpy())
    idx = edges.column("input_idx").to_numpy()
    del edges
    linked = (consumer >= 0) & (producer >= 0)  # inputs that are nodes, of nodes
    consumed = np.zeros(n, np.bool_)
    consumed[producer[linked]] = True
    parent, child, idx = gid[consumer[linked]], gid[producer[linked]], idx[linked]
    order = np.lexsort((idx, parent))
    return {
        "perm": perm,
        "starts": np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=n))]).astype(np.int64),
        "children": child[order],
        "roots": np.flatnonzero(~consumed[perm]).astype(np.int64),
    }


def graph_structure(prof: Profile) -> dict[str, pa.Table]:
    """The index of the graph's CSR arrays (see ``structure``), one single-column table each."""
    return {name: pa.table({name: values}) for name, values in structure(prof).items()}
