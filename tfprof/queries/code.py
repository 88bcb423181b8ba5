"""The code view: graph nodes arranged by the Python call stacks that created them (spec 5.4).

The call-stack tree is a trie over the op-log traces (``code_frames``), keyed per level by the
trace string ``<file basename>:<line>:<function>``. Gradient nodes are folded onto a parallel
`` (gradient)`` copy of their forward op's stack. Everything is built from whole frames: each
trie node is a distinct path prefix, its children are ordered by creation (tfprof inserts
nodes in name order, then the gradient paths), and the display pass is
``tfprof.queries.forest.display`` in PrintCode mode.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.errors import TfprofError
from tfprof.profile import Profile
from tfprof.queries.forest import display, subtree_sums
from tfprof.queries.metrics import node_frame
from tfprof.queries.op import MULTI_MIN_FILTERS, picked_members
from tfprof.queries.options import Options
from tfprof.queries.scope import ROOT
from tfprof.queries.tree import METRICS, is_all, matches

GRADIENT_SUFFIX = " (gradient)"
_SEP = "\x1f"  # joins trace strings into a path key (cannot occur in a trace string's role)


class NoCodeTraces(TfprofError):
    """The profile has no code traces (no op log with traces was given)."""


def trace_strings(frames: pl.LazyFrame) -> pl.LazyFrame:
    """``trace``: tfprof's short form of each frame (spec 5.4.2)."""
    function = pl.col("function").cast(pl.String)
    short = pl.when(function.str.len_bytes() < 20).then(function).otherwise(function.str.head(17) + "...")
    base = pl.col("file").cast(pl.String).str.replace(r"^.*/", "")
    return frames.with_columns(
        pl.concat_str(base, pl.lit(":"), pl.col("lineno").cast(pl.String), pl.lit(":"), short).alias("trace")
    )


def forward_names(names: pl.Expr) -> pl.Expr:
    """For gradient nodes, the forward op name between `gradients/` and `_grad/`; else null.

    tfprof (tfprof_code.cc IsGradNode) takes the text after the first ``gradients/`` up to the
    first ``_grad/``; when ``_grad/`` comes first its unsigned length wraps and it takes the rest
    of the name — reproduced.
    """
    g = names.str.find("gradients/", literal=True)
    s = names.str.find("_grad/", literal=True)
    start = g + len("gradients/")
    length = s - start
    return (
        pl.when(g.is_null() | s.is_null() | (length == 0))
        .then(None)
        .when(length < 0)
        .then(names.str.slice(start))
        .otherwise(names.str.slice(start, length))
    )


def code_tree(prof: Profile, opts: Options) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The trie of call stacks and the picked member nodes (each with its trie ``path``).

    One row per trie node, in pre-order, with self values summed over its picked member nodes,
    ``accounted`` and ``parent`` (the parent's ``pos``, -1 at the top)."""
    nodes = node_frame(prof, opts.step).sort("name").with_row_index("rank").with_columns(pl.col("rank").cast(pl.Int64))
    frames = (
        trace_strings(prof.lazy("code_frames"))
        .select("node_id", "depth", "trace")
        .collect()
        .join(nodes.select("node_id", "name", "rank"), on="node_id")
    )
    if frames.height == 0:
        raise NoCodeTraces("No code trace information")
    nodes = nodes.with_columns(forward_names(pl.col("name")).alias("forward"))
    traced = frames.select("node_id").unique()
    forward = nodes.join(traced, on="node_id", how="semi").filter(pl.col("forward").is_null())
    grads = nodes.join(traced, on="node_id", how="semi").filter(pl.col("forward").is_not_null())

    # Paths: forward nodes by their own traces (phase 0, creation by name rank); gradient nodes
    # by their forward op's traces + suffix (phase 1, creation by the forward name's rank).
    fwd_paths = frames.join(forward.select("node_id"), on="node_id").with_columns(
        pl.lit(0).alias("phase"), pl.col("rank").alias("creator"), pl.col("node_id").alias("member")
    )
    fwd_by_name = forward.select(pl.col("name").alias("forward"), pl.col("node_id").alias("fwd_id"))
    grads = grads.join(fwd_by_name, on="forward", how="left")
    missing = grads.filter(pl.col("fwd_id").is_null())["forward"].n_unique()
    grad_ranks = grads.select("forward").unique().sort("forward").with_row_index("grank")
    grad_paths = (
        grads.filter(pl.col("fwd_id").is_not_null())
        .join(grad_ranks, on="forward")
        .select(pl.col("node_id").alias("member"), "fwd_id", pl.col("grank").cast(pl.Int64))
        .join(frames.select(pl.col("node_id").alias("fwd_id"), "depth", "trace"), on="fwd_id")
        .with_columns(
            (pl.col("trace") + GRADIENT_SUFFIX).alias("trace"), pl.lit(1).alias("phase"), pl.col("grank").alias("creator")
        )
    )
    paths = pl.concat(
        [
            fwd_paths.select("member", "depth", "trace", "phase", "creator"),
            grad_paths.select("member", "depth", "trace", "phase", "creator"),
        ]
    ).sort("member", "phase", "depth")
    paths = paths.with_columns(
        pl.col("trace").implode().over(["member", "phase"], mapping_strategy="join").alias("_all")
    )
    paths = paths.with_columns(
        pl.col("_all").list.head(pl.col("depth") + 1).list.join(_SEP).alias("path"),
        (pl.col("phase") * (1 << 40) + pl.col("creator")).alias("key"),
    ).drop("_all")
    trie = paths.group_by("path").agg(
        pl.col("trace").first().alias("name"), pl.col("depth").first().alias("level"), pl.col("key").min()
    )
    trie = trie.with_columns(
        pl.when(pl.col("level") > 0).then(pl.col("path").str.replace(r"\x1f[^\x1f]*$", "")).alias("parent_path")
    )
    # Pre-order with children in creation order: sort by the path of creation keys.
    trie = _key_paths(trie).sort("keypath").with_row_index("pos").with_columns(pl.col("pos").cast(pl.Int64))
    trie = trie.join(
        trie.select(pl.col("path").alias("parent_path"), pl.col("pos").alias("parent")), on="parent_path", how="left"
    ).with_columns(pl.col("parent").fill_null(-1))

    # Members attach at the innermost trace of their path (the leaf).
    leaf_of = paths.group_by("member").agg(pl.col("path").sort_by("depth").last().alias("path"))
    members = leaf_of.join(nodes.drop("forward"), left_on="member", right_on="node_id").rename({"member": "node_id"})
    picked = picked_members(members, opts)
    sums = picked.group_by("path").agg(
        *(pl.col(m).sum() for m in METRICS),
        pl.col("run_count").sum(),
        pl.len().alias("definitions"),
        pl.col("device").fill_null("").unique().sort().alias("devices"),
        pl.col("op_types").list.explode(keep_nulls=False, empty_as_null=False).unique().sort().alias("op_types"),
    )
    trie = trie.join(sums, on="path", how="left").with_columns(
        *(pl.col(m).fill_null(0) for m in (*METRICS, "run_count", "definitions")),
        ((pl.col("definitions").fill_null(0) > 0) | pl.lit(is_all(opts.account_type_regexes))).alias("accounted"),
    )
    trie = trie.sort("pos").with_columns(pl.lit(missing).alias("_unaccounted_gradients"))
    return trie, picked


def _key_paths(trie: pl.DataFrame) -> pl.DataFrame:
    """``keypath``: the creation keys from the top of the trie down to each node."""
    link = trie.select("path", "parent_path", "key")
    walk = link.select("path", pl.col("parent_path").alias("cur"), pl.concat_list("key").alias("keypath"))
    done = []
    while walk.height:
        done.append(walk.filter(pl.col("cur").is_null()))
        walk = walk.filter(pl.col("cur").is_not_null()).join(
            link.rename({"path": "cur", "parent_path": "up", "key": "k"}), on="cur"
        ).select("path", pl.col("up").alias("cur"), pl.concat_list("k", "keypath").alias("keypath"))
    return trie.join(pl.concat(done).select("path", "keypath"), on="path")


def _kept(trie: pl.DataFrame) -> pl.DataFrame:
    """Account: keep accounted trie nodes and their ancestors, renumbered in pre-order."""
    parent = trie["parent"].to_numpy().astype(np.int64)
    accounted_below = subtree_sums(parent, trie["accounted"].to_numpy().astype(np.int64).reshape(-1, 1))
    keep = accounted_below[:, 0] > 0
    kept = trie.filter(pl.Series(keep))
    new_pos = np.full(len(parent), -1, np.int64)
    new_pos[kept["pos"].to_numpy()] = np.arange(kept.height)
    old_parent = kept["parent"].to_numpy()
    return kept.with_columns(
        pl.Series("pos", np.arange(kept.height)),
        pl.Series("parent", np.where(old_parent >= 0, new_pos[np.maximum(old_parent, 0)], -1)),
    )


def code(prof: Profile, opts: Options) -> tuple[pl.DataFrame, int, pl.DataFrame]:
    """The displayed code tree (root first), the number of unaccounted gradient groups, and the
    picked member nodes with their trie ``path``."""
    trie, members = code_tree(prof, opts)
    unaccounted = int(trie["_unaccounted_gradients"][0]) if trie.height else 0
    forest = _kept(trie.drop("_unaccounted_gradients"))

    def show(frame: pl.DataFrame) -> pl.Expr:
        cond = pl.lit(True)
        for option, column in MULTI_MIN_FILTERS.items():
            threshold = getattr(opts, option)
            if threshold:
                cond = cond & (pl.col(column) >= threshold)
        if not is_all(opts.show_name_regexes):
            cond = cond & matches("name", opts.show_name_regexes)
        if opts.hide_name_regexes:
            cond = cond & ~matches("name", opts.hide_name_regexes)
        return cond

    # multi views sort `occurrence` by the node's own member count (tfprof_show_multi.h SortNodes)
    rows, root = display(forest, opts, show, code_mode=True, order_columns={"occurrence": "definitions"})
    root_row = pl.DataFrame({**root, "name": [ROOT], "indent": [0], "accounted": [False]})
    return pl.concat([root_row, rows], how="diagonal_relaxed"), unaccounted, members
