"""Indexes: tables derived from a profile's tables that depend on no view option.

Each entry of ``INDEXES`` builds a dict of named Arrow tables from a Profile, or returns None
when the profile has nothing to index. ``Profile.index(name, build)`` builds an index once per
profile; a store saves every index at ingest (``tfprof.api.inputs.write_indexes``), so a view on a
freshly opened store reads the index instead of rebuilding it.

The builders use numpy, Arrow and numba kernels only: an ingest never loads polars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from tfprof.queries.indexes import checks
from tfprof.queries.indexes.code_trie import code_trie_index, static_trie
from tfprof.queries.indexes.graph_csr import graph_structure
from tfprof.queries.indexes.means import step_means
from tfprof.queries.indexes.scope_tree import scope_layout

if TYPE_CHECKING:
    from tfprof.profile import Profile

# In build order: the graph structure first, as it sorts the node names (``names.name_order``),
# which the scope layout and the code trie then reuse.
INDEXES: dict[str, Callable[[Profile], dict[str, pa.Table] | None]] = {
    "graph_structure": graph_structure,
    "step_means": step_means,
    "scope_layout": scope_layout,
    "code_trie": code_trie_index,
}

# What an index read back from a store is checked against before use (Profile.index).
for _build, _check in ((graph_structure, checks.graph_structure), (step_means, checks.step_means),
                       (scope_layout, checks.scope_layout), (code_trie_index, checks.code_trie),
                       (static_trie, checks.code_trie)):
    _build.check = _check

