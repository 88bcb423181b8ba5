"""The code view: graph nodes arranged by the Python call stacks that created them
(docs/TFPROF_BEHAVIOUR.md, 'Code view').

The call-stack tree is the trie over the op-log traces (``code_frames``) that ingest keeps as
an index (``tfprof.queries.indexes.code_trie``): each trie node is a distinct path prefix, its
children ordered by creation. The view sums the picked member nodes onto it, and the display
pass is ``tfprof.queries.forest.display`` in PrintCode mode.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from tfprof.profile import Profile
from tfprof.queries.forest import display, keep_accounted, under_root
from tfprof.queries.indexes.code_trie import static_trie
from tfprof.queries.metrics import attach, extras_for, node_frame, node_numbers, with_samples
from tfprof.queries.op import member_sets, picked_members
from tfprof.queries.scope import counted_columns, divided
from tfprof.queries.spec import ROOT, TreeSpec, as_spec, sample_names
from tfprof.schema.metrics import maxed


def code_tree(prof: Profile, spec: TreeSpec, metrics: tuple[str, ...] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The trie of call stacks and the picked member nodes (each with its trie node ``tid``).

    One row per trie node, in pre-order (``tid`` = ``pos`` = the row), with self values summed
    over its picked member nodes, ``accounted`` and ``parent`` (the parent's ``pos``, -1 at the
    top). The sums are one scatter over the members into per-node arrays: the trie of a large
    profile has millions of nodes, few of them with members. ``metrics`` limits the summed
    columns to those and what the spec orders and filters on (``counted_columns``; default:
    every metric and ``run_count``)."""
    index = prof.index("code_trie", static_trie)
    trie, labels, leaves = index["trie"], index["labels"], index["leaves"]
    own = counted_columns(spec, metrics)
    counted = own + sample_names(spec)
    # Members attach at the innermost trace of their path (the leaf).
    opts = spec.options
    if metrics is None:
        nodes = node_frame(prof, spec.step, extras_for(opts))
    else:  # a report's members: what it sums, filters on and prints (not every node's strings)
        nodes = attach(prof, node_numbers(prof, spec.step).select("node_id", *own), extras_for(opts))
        if "device" in opts.select:
            nodes = nodes.join(
                prof.lazy("nodes").select("node_id", pl.col("canonical_device").cast(pl.String).alias("device")).collect(),
                on="node_id", how="left", maintain_order="left",
            )
    members = at_leaves(leaves, with_samples(prof, nodes, spec))
    picked = picked_members(members, spec)
    del members
    n = trie.height
    largest = [c for c in counted if c in maxed()]  # a line holds its largest member's
    counted = [c for c in counted if c not in largest]
    values = np.zeros((len(counted) + 1, n), np.int64)  # + the member count, "definitions"
    member_values = np.empty((len(counted) + 1, picked.height), np.int64)
    for i, c in enumerate(counted):
        member_values[i] = picked[c].to_numpy()
    member_values[len(counted)] = 1
    at = picked["tid"].to_numpy().astype(np.int64)
    _scatter_add(at, member_values, values)
    if largest:  # their rows go before the member count (the values' last row): no copy without them
        most = np.zeros((len(largest), n), np.int64)
        _scatter_max(at, np.array([picked[c].to_numpy() for c in largest], dtype=np.int64), most)
        counted += largest
        values = np.concatenate([values[:-1], most, values[-1:]])
    label = trie["label"].to_numpy()
    pos = np.arange(n, dtype=np.int64)
    frame = pl.DataFrame(
        {
            "tid": pos,
            "pos": pos,
            "parent": trie["parent"],
            "name": _label_names(labels["trace"]).gather(label),  # 4 bytes a node where it can
            "name_rank": labels["name_rank"].to_numpy().astype(np.int32)[label],
            **{c: values[i] for i, c in enumerate(counted)},
            "definitions": values[len(counted)],
            "accounted": (values[len(counted)] > 0) | (spec.account is None),
        }
    )
    sets = member_sets(opts)
    if sets:  # device / op-type sets: only where the report prints them
        frame = frame.join(picked.group_by("tid").agg(*sets), on="tid", how="left", maintain_order="left")
    return frame, picked


def _label_names(traces: pl.Series) -> pl.Series:
    """The labels as an Enum (with the root's name among its categories), or as strings where
    two labels are equal."""
    values = traces.to_list()
    if len(set(values)) != len(values):
        return traces
    return traces.cast(pl.Enum([*values, *([ROOT] if ROOT not in values else [])]))


@njit(cache=True, nogil=True)
def _scatter_add(at, values, out):  # pragma: no cover - numba
    """``out[:, at[i]] += values[:, i]`` for every i (repeated targets add up)."""
    for j in range(values.shape[0]):
        for i in range(at.shape[0]):
            out[j, at[i]] += values[j, i]


@njit(cache=True, nogil=True)
def _scatter_max(at, values, out):  # pragma: no cover - numba
    """``out[:, at[i]] = max(out[:, at[i]], values[:, i])`` for every i."""
    for j in range(values.shape[0]):
        for i in range(at.shape[0]):
            if values[j, i] > out[j, at[i]]:
                out[j, at[i]] = values[j, i]


def code(prof: Profile, spec: TreeSpec, metrics: tuple[str, ...] | None = None) -> tuple[pl.DataFrame, int, pl.DataFrame]:
    """The displayed code tree (root first), the number of unaccounted gradient groups, and the
    picked member nodes with their trie node ``tid``. With ``metrics`` (what a report prints),
    only those self and total columns and what the spec orders and filters on: on a trie of
    millions of nodes the other columns are most of the memory."""
    spec = as_spec("code", spec, prof)
    parts = list(code_tree(prof, spec, metrics))
    members = parts.pop()
    unaccounted = unaccounted_groups(prof)
    # A report's rows keep what it prints: name, accounted, the metrics and their totals, the sets.
    # The forest is handed over (no reference kept here), so display can free it as it goes;
    # multi views sort `occurrence` by the node's own member count (tfprof_show_multi.h SortNodes).
    own = counted_columns(spec, metrics)
    own = (*own, *divided(own))
    keep = None if metrics is None else ["name", "accounted", "devices", "op_types", *own,
                                         *("total_" + m for m in (*own, *sample_names(spec)))]
    rows, root = display(keep_accounted(parts.pop()), spec, keep=keep)
    if metrics is None:  # the public rows: names as strings
        rows = rows.with_columns(pl.col("name").cast(pl.String))
    return with_code_root(rows, root), unaccounted, members


def at_leaves(leaves: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """``nodes`` that have a code trace, each with the trie node its stack ends at (``tid``)."""
    return leaves.join(nodes, left_on="member", right_on="node_id").rename({"member": "node_id"})


def unaccounted_groups(prof: Profile) -> int:
    """The gradient groups the code view cannot place (none when the trie is empty)."""
    index = prof.index("code_trie", static_trie)
    return int(index["unmatched"]["gradient_groups"][0]) if index["trie"].height else 0


def with_code_root(rows: pl.DataFrame, root: dict[str, int]) -> pl.DataFrame:
    """The code view's displayed ``rows`` under the root row holding ``root``'s totals."""
    root_row = pl.DataFrame(  # typed Series: inferring a type per Python scalar costs milliseconds
        [
            *(pl.Series(k, [v], pl.Float64 if isinstance(v, float) else pl.Int64) for k, v in root.items()),
            pl.Series("name", [ROOT]).cast(rows.schema["name"]),
            pl.Series("accounted", [False], pl.Boolean),
        ]
    )
    return under_root(rows, root_row)


def warm_up() -> None:
    """Load the code view's compiled kernel (see ``tfprof.queries.forest.warm_up``)."""
    _scatter_add(np.zeros(1, np.int64), np.ones((1, 1), np.int64), np.zeros((1, 1), np.int64))
