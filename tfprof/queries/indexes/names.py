"""The nodes in name order, which the graph structure and the code trie both start from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow.compute as pc

from tfprof.queries.arrays import in_id_order, string_parts

if TYPE_CHECKING:
    from tfprof.profile import Profile


def name_order(prof: Profile) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The node ids ascending, their rows in name order (bytewise, as tfprof compares names),
    and the names as offsets and bytes (``string_parts``), in id order; computed once per profile
    (the indexes built at ingest share it)."""

    def compute() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        nodes, ids = in_id_order(prof.columns("nodes", ["node_id", "name"]))
        by_name = pc.sort_indices(nodes.column("name")).to_numpy().astype(np.int64)
        offsets, data = string_parts(nodes.column("name"))
        return ids, by_name, offsets, data

    return prof.memo(("indexes", "name_order"), compute)
