"""The code view as a pprof profile (docs/TFPROF_BEHAVIOUR.md, 'pprof output'): samples, locations, functions and
strings.

tfprof (tfprof_code.cc PprofProfileImpl) walks the displayed code tree in pre-order. Every
shown node below a shown node (not the root) is a *location* keyed by (caller file, callee
function, caller line) with one line naming the *callee's* function; every shown leaf adds one
sample per graph node of the true leaves of the full call tree below it, keyed by the graph
node name, with its stack of locations leaf first and the values [1, <selected metric>]. Ids
and string indices are handed out in the order of first use during that walk, and each table
is written sorted by its key. This module computes all of it from whole frames; the renderer
(``tfprof.views.pprof``) adds the sample types and comment and encodes the message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries.code import code_tree
from tfprof.queries.forest import subtree_sums
from tfprof.queries.indexes.code_trie import GRADIENT_SUFFIX, forward_names, static_trie
from tfprof.queries.options import Options
from tfprof.queries.spec import as_spec
from tfprof.queries.ticks import NS, is_time, time_scale
from tfprof.schema.metrics import derived, exported

# select value -> the member column tfprof puts in sample value[1] (Samples::Add): the metrics
# that pprof exports (schema.metrics), times first
PPROF_METRICS = derived(lambda: {m.select: m.column for m in exported("pprof")})


def check_pprof(layout: str, opts: Options) -> None:
    """tfprof's pprof pre-checks (tfprof_code.cc ShowInternal;
    docs/TFPROF_BEHAVIOUR.md, 'Code view steps'), as errors, for a view of ``layout``."""
    if layout != "code":
        raise OptionError("Only 'code' view supports pprof output now.")
    if len(opts.select) != 1:
        raise OptionError(
            f"Can only select 1 attribute for pprof output (got `{','.join(opts.select)}`); "
            f"valid: {', '.join(PPROF_METRICS)}"
        )
    if opts.select[0] not in PPROF_METRICS:
        raise OptionError(f"pprof doesn't support -select={opts.select[0]}; valid: {', '.join(PPROF_METRICS)}")


@dataclass(frozen=True)
class PprofData:
    """A pprof profile as tables: ``strings`` (the string table so far, index = position),
    ``samples`` (key, location_ids leaf first, count, value, label_key, label_str; in key
    order), ``functions`` (id, name, filename, start_line; key order) and ``locations`` (id,
    function_id, line; key order). ``select`` is the sampled attribute; ``unit``, where set,
    the unit of its values in place of tfprof's (``nanoseconds``: a time of a foreign profile,
    whose values are ns, ``tfprof.queries.ticks``)."""

    select: str
    strings: list[str]
    samples: pl.DataFrame
    functions: pl.DataFrame
    locations: pl.DataFrame
    unit: str = ""


def _levels(parent: np.ndarray) -> np.ndarray:
    """Depth of each node of a forest given by parent positions (-1 at the top); one numpy
    step per level."""
    depth = np.zeros(parent.shape[0], np.int64)
    has = parent >= 0
    while True:
        new = np.where(has, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            return depth
        depth = new


def trie_traces(prof: Profile) -> pl.DataFrame:
    """Each call-tree node's own frame: ``tid``, ``file``, ``lineno``, ``function`` (with the
    gradient suffix on gradient paths) and ``func_start_line``.

    tfprof keeps the trace of the node that created the call-tree node (CodeNode::AddChildren):
    the first forward node by name through it, or for a gradient path the first forward op by
    name. Trace strings are unique only per parent, so two frames with equal strings (same base
    name, line and a long function name's first 17 characters) share a node and its creator's
    frame.
    """
    index = prof.index("code_trie", static_trie)
    trie, leaves = index["trie"], index["leaves"]
    parent = trie["parent"].to_numpy().astype(np.int64)
    depth = _levels(parent)
    nodes = prof.lazy("nodes").select("node_id", "name").collect()
    owners = leaves.rename({"member": "node_id"}).join(nodes, on="node_id")
    owners = (
        owners.with_columns(pl.Series("forward", forward_names(owners["name"].to_arrow()), pl.String))
        .join(nodes.rename({"node_id": "fwd_id", "name": "forward"}), on="forward", how="left")
        .with_columns(
            pl.coalesce("forward", "name").alias("creator_name"),
            pl.coalesce("fwd_id", "node_id").alias("frame_owner"),
            pl.col("forward").is_not_null().alias("gradient"),
            pl.col("tid").alias("pos"),  # the trie's rows are in pre-order: a node's tid is its pos
        )
    )
    # every (member, call-tree node on its path): walk up from the leaves, one level per step
    pos = owners["pos"].to_numpy().astype(np.int64)
    member_row = np.arange(owners.height)
    rows, at = [], []
    while pos.size:
        rows.append(member_row)
        at.append(pos)
        keep = parent[pos] >= 0
        member_row, pos = member_row[keep], parent[pos[keep]]
    paths = pl.DataFrame(
        {"row": np.concatenate(rows) if rows else np.zeros(0, np.int64),
         "pos": np.concatenate(at) if at else np.zeros(0, np.int64)}
    )
    creators = (
        paths.join(owners.select(pl.int_range(pl.len()).alias("row"), "creator_name", "frame_owner", "gradient"), on="row")
        .sort("creator_name")
        .group_by("pos", maintain_order=True).first()
        .join(pl.DataFrame({"pos": np.arange(depth.shape[0]), "depth": depth.astype(np.int32)}), on="pos")
    )
    frames = prof.lazy("code_frames").select(
        pl.col("node_id").alias("frame_owner"), "depth", pl.col("file").cast(pl.String), "lineno",
        pl.col("function").cast(pl.String), "func_start_line",
    ).collect()
    return (
        creators.join(frames, on=["frame_owner", "depth"])
        .select(
            pl.col("pos").alias("tid"), "file", "lineno",
            pl.when(pl.col("gradient")).then(pl.col("function") + GRADIENT_SUFFIX).otherwise("function").alias("function"),
            "func_start_line",
        )
    )


def function_label(file: pl.Expr, function: pl.Expr) -> pl.Expr:
    """tfprof's function name: ``<file base name without extension>:<function>``."""
    base = file.str.replace(r"^.*/", "")
    stem = pl.when(base.str.contains(".", literal=True)).then(base.str.replace(r"\.[^.]*$", "")).otherwise(base)
    return pl.concat_str(stem, pl.lit(":"), function)


def pprof_data(prof: Profile, opts: Options, frame: pl.DataFrame) -> PprofData:
    """The pprof profile of the code view's displayed ``frame`` (root first, display order)."""
    check_pprof("code", opts)
    select = opts.select[0]
    traces = prof.memo("pprof_trie_traces", lambda: trie_traces(prof))
    trie, picked = code_tree(prof, as_spec("code", opts, prof))

    # Displayed rows: level, displayed parent row, leaf flag, own frame.
    n = frame.height
    level = frame["level"].to_numpy().astype(np.int64)
    dparent = frame["parent_row"].to_numpy().astype(np.int64)
    leaf = np.r_[level[1:] <= level[:-1], True] if n else np.zeros(0, np.bool_)
    leaf[:1] = False  # the root has no trace: never a sample
    shown = frame.select("tid").with_row_index("row").with_columns(
        pl.col("row").cast(pl.Int64), pl.Series("dparent", dparent), pl.Series("leaf", leaf)
    ).join(traces, on="tid", how="left", maintain_order="left")

    # Locations: a shown node under a shown node that is not the root (callee = the node).
    caller = shown.select(pl.col("row").alias("dparent"), pl.col("file").alias("caller_file"),
                          pl.col("lineno").alias("caller_line"))
    calls = (
        shown.filter(pl.col("dparent") > 0).join(caller, on="dparent", how="left", maintain_order="left")
    )
    loc_key = ["caller_file", "function", "caller_line"]
    locations = calls.unique(loc_key, keep="first", maintain_order=True).with_row_index("loc_id", offset=1)
    fun_key = ["file", "function", "func_start_line"]
    functions = (
        locations.unique(fun_key, keep="first", maintain_order=True).with_row_index("fun_id", offset=1)
        .with_columns(function_label(pl.col("file"), pl.col("function")).alias("label"))
    )
    locations = locations.join(functions.select(*fun_key, "fun_id"), on=fun_key, how="left", maintain_order="left")
    calls = calls.join(locations.select(*loc_key, "loc_id"), on=loc_key, how="left", maintain_order="left")

    # Samples: per shown leaf, the graph nodes of the true leaves of the full tree below it
    # (tfprof's FetchAllLeaf: children in creation order), each node's members by name.
    parent = trie["parent"].to_numpy().astype(np.int64)
    size = subtree_sums(parent, np.ones((trie.height, 1), np.int64))[:, 0]
    true_leaf = size == 1
    span = shown.filter(pl.col("leaf")).select("row", "tid").join(trie.select("tid", "pos"), on="tid")
    starts = span["pos"].to_numpy()
    ends = starts + size[starts]
    counts = np.maximum(ends - starts, 0)
    under = np.repeat(starts, counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
    below = pl.DataFrame({"row": np.repeat(span["row"].to_numpy(), counts), "pos": under}).filter(
        pl.Series(true_leaf[under] if under.size else np.zeros(0, np.bool_))
    )
    metric = PPROF_METRICS[select]
    members = (
        below.join(trie.select("pos", "tid"), on="pos")
        .join(picked.select("tid", "name", pl.col(metric).alias("value")), on="tid")
        .sort("row", "pos", "name")
        # tfprof appends `@` to a sample key until it is new (Samples::Add)
        .with_columns(pl.int_range(pl.len()).over("name").alias("dup"))
        .with_columns((pl.col("name") + pl.lit("@").repeat_by(pl.col("dup")).list.join("")).alias("key"))
    )
    stacks = _stacks(calls, shown)

    # String table, in order of first use along the walk, then the renderer's tail strings.
    new_fun = functions.select("row", pl.concat_list("label", "file").alias("s"))
    sampled = members.select("row", pl.concat_list(pl.lit("graph node:"), "name").alias("s"))
    ordered = (
        pl.concat([
            new_fun.select("row", pl.lit(0, pl.Int64).alias("part"), pl.lit(0, pl.UInt32).alias("i"), "s"),
            sampled.with_row_index("i").select("row", pl.lit(1, pl.Int64).alias("part"), "i", "s"),
        ])
        .sort("row", "part", "i")
        .explode("s")
        .select("s")
    )
    table = pl.concat([pl.DataFrame({"s": [""]}), ordered]).unique("s", keep="first", maintain_order=True)["s"]
    index = {s: i for i, s in enumerate(table.to_list())}
    ids = pl.DataFrame({"s": list(index), "idx": list(index.values())}, schema={"s": pl.String, "idx": pl.Int64})

    samples = (
        members.join(stacks, on="row", how="left")
        .with_columns(pl.col("location_ids").fill_null(pl.lit([], pl.List(pl.UInt32))))
        .join(ids.rename({"s": "name", "idx": "label_str"}), on="name", how="left")
        .with_columns(pl.lit(index.get("graph node:", 0)).alias("label_key"), pl.lit(1, pl.Int64).alias("count"))
        .sort("key")
        .select("key", "location_ids", "count", "value", "label_key", "label_str")
    )
    fun_out = (
        functions.join(ids.rename({"s": "label", "idx": "name"}), on="label")
        .join(ids.rename({"s": "file", "idx": "filename"}), on="file")
        .sort(fun_key)
        .select(pl.col("fun_id").alias("id"), "name", "filename", pl.col("func_start_line").alias("start_line"))
    )
    loc_out = locations.sort(loc_key).select(
        pl.col("loc_id").alias("id"), pl.col("fun_id").alias("function_id"), pl.col("caller_line").alias("line")
    )
    unit = "nanoseconds" if is_time(metric) and time_scale(prof) == NS else ""
    return PprofData(select=select, strings=table.to_list(), samples=samples, functions=fun_out, locations=loc_out,
                     unit=unit)


def _stacks(calls: pl.DataFrame, shown: pl.DataFrame) -> pl.DataFrame:
    """Per shown row, the location ids from it up to the child of a top-level node, leaf first."""
    loc_of = np.zeros(shown.height, np.int64)
    loc_of[calls["row"].to_numpy()] = calls["loc_id"].to_numpy()
    dparent = shown["dparent"].to_numpy()
    leaves = np.flatnonzero(shown["leaf"].to_numpy())
    rows, ids, cur, k = [], [], leaves.copy(), []
    step = 0
    owner = leaves.copy()
    while cur.size:
        has = loc_of[cur] > 0
        rows.append(owner[has])
        ids.append(loc_of[cur][has])
        k.append(np.full(int(has.sum()), step))
        up = dparent[cur]
        keep = up > 0
        owner, cur = owner[keep], up[keep]
        step += 1
    if not rows:
        return pl.DataFrame(schema={"row": pl.Int64, "location_ids": pl.List(pl.UInt32)})
    return (
        pl.DataFrame({"row": np.concatenate(rows), "k": np.concatenate(k), "id": np.concatenate(ids).astype(np.uint32)})
        .sort("row", "k")
        .group_by("row", maintain_order=True)
        .agg(pl.col("id").alias("location_ids"))
    )
