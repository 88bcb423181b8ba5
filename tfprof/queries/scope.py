"""The scope view: nodes arranged by name scope (spec 5.1), as one frame of displayed rows.

``scope(prof, opts)`` returns the displayed tree in display (pre-)order, root first, with
``depth`` (root = 1), ``indent``, ``accounted``, the node's self values and its ``total_*``
values as tfprof prints them. Each step of tfprof's pipeline (Account, SearchRoot, PrintScope
with lifting, SortNodes, account_displayed_op_only) is a whole-frame operation here.
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.metrics import node_frame
from tfprof.queries.options import Options
from tfprof.queries.tree import (
    METRICS,
    SINGLE_MIN_FILTERS,
    closure,
    is_all,
    matches,
    should_show,
    sort_key,
    subtree_sums,
    with_self,
)

ROOT = "_TFProfRoot"
SCOPE_PARENT = "_kTFScopeParent"  # op type of synthetic scope parents
_PARENT_RX = r"/[^/]*$"  # tfprof cuts a name at its last '/' (no normalisation: `a//b` -> `a/`)


def scope_nodes(nodes: pl.DataFrame) -> pl.DataFrame:
    """Real nodes plus synthetic parents for every missing name prefix, with ``sid`` and ``parent``.

    ``sid`` is the rank of the name in byte order, so ordering siblings by ``sid`` is tfprof's
    child order (its node map is ordered by name).
    """
    frames = [nodes]
    known = nodes.select("name")
    frontier = nodes.select("name")
    while frontier.height:
        frontier = (
            frontier.filter(pl.col("name").str.contains("/", literal=True))
            .select(pl.col("name").str.replace(_PARENT_RX, ""))
            .unique()
            .join(known, on="name", how="anti")
        )
        known = pl.concat([known, frontier])
        frames.append(frontier)
    tree = (
        pl.concat(frames, how="diagonal").sort("name").with_row_index("sid").with_columns(pl.col("sid").cast(pl.Int64))
    )
    sid = tree.select(pl.col("name").alias("parent_name"), pl.col("sid").alias("parent"))
    return (
        tree.with_columns(
            pl.when(pl.col("name").str.contains("/", literal=True))
            .then(pl.col("name").str.replace(_PARENT_RX, ""))
            .alias("parent_name")
        )
        .join(sid, on="parent_name", how="left")
        .drop("parent_name")
        .sort("sid")
    )


def _fill_synthetic(tree: pl.DataFrame) -> pl.DataFrame:
    zero = [pl.col(m).fill_null(0) for m in (*METRICS, "run_count")]
    return tree.with_columns(
        *zero,
        pl.col("op_types").fill_null(pl.lit([SCOPE_PARENT])),
        pl.col("shape").fill_null(pl.lit([], dtype=pl.List(pl.Int64))),
    )


def accounted(frame: pl.DataFrame, opts: Options) -> pl.Expr:
    """ReAccount: `[".*"]` accounts everything, else any op type fully matching any regex."""
    if is_all(opts.account_type_regexes):
        return pl.lit(True)
    return pl.col("op_types").list.eval(matches(pl.element(), opts.account_type_regexes)).list.any()


def scope(prof: Profile, opts: Options) -> pl.DataFrame:
    """The displayed scope tree, root first, in display order."""
    tree = _fill_synthetic(scope_nodes(node_frame(prof, opts.step)))
    anc = closure(tree)

    # Account (spec 5.1.2): keep accounted nodes and the ancestors of accounted nodes; totals
    # add the self values of every kept node, accounted or not (spec 5.1.3 quirk).
    tree = tree.with_columns(accounted(tree, opts).alias("accounted"))
    acc_ids = tree.filter("accounted")["sid"]
    kept_ids = pl.concat([acc_ids, anc.filter(pl.col("sid").is_in(acc_ids.implode()))["anc"]]).unique()
    tree = tree.filter(pl.col("sid").is_in(kept_ids.implode()))
    anc = anc.filter(pl.col("sid").is_in(kept_ids.implode()))
    values = tree.select("sid", *METRICS, "run_count")
    tree = tree.join(subtree_sums(with_self(anc, tree["sid"]), values), on="sid", how="left")
    root_totals = values.select(
        *(pl.col(m).sum().alias("total_" + m) for m in (*METRICS, "run_count")),
        pl.len().alias("total_definition_count"),
    )

    # Pre-order position over the kept tree: the incoming order of every child list.
    tree = _preorder(tree, anc)

    # SearchRoot (spec 5.1.5): the first start-matching node along each path.
    if is_all(opts.start_name_regexes):
        tree = tree.with_columns(pl.col("parent").is_null().alias("is_start"))
    else:
        hit = tree.with_columns(matches("name", opts.start_name_regexes).alias("m")).filter("m")["sid"]
        below_hit = anc.filter(pl.col("anc").is_in(hit.implode()))["sid"]
        tree = tree.with_columns(
            (pl.col("sid").is_in(hit.implode()) & ~pl.col("sid").is_in(below_hit.implode())).alias("is_start")
        )
    starts = tree.filter("is_start").select(pl.col("sid").alias("start"), pl.col("level").alias("start_level"))
    in_start = with_self(anc, tree["sid"]).join(starts, left_on="anc", right_on="start").select(
        "sid", pl.col("anc").alias("start"), "start_level"
    )
    tree = tree.join(in_start, on="sid", how="inner").with_columns(
        (pl.col("level") - pl.col("start_level") + 2).alias("depth")
    )
    anc = anc.join(tree.select("sid", "start"), on="sid").join(
        tree.select(pl.col("sid").alias("anc"), pl.col("start").alias("anc_start")), on="anc"
    ).filter(pl.col("start") == pl.col("anc_start")).select("sid", "anc")

    # PrintScope (spec 5.1.4): visit while no ancestor is trimmed or at max_depth; show by
    # ShouldShow; hidden nodes are transparent.
    root_visits = 1 <= opts.max_depth and not _trimmed(ROOT, opts)
    blocked = tree.filter(
        matches("name", opts.trim_name_regexes) | (pl.col("depth") > opts.max_depth)
    )["sid"]
    under_blocked = anc.filter(pl.col("anc").is_in(blocked.implode()))["sid"]
    tree = tree.with_columns(
        (pl.lit(root_visits) & ~pl.col("sid").is_in(under_blocked.implode())).alias("visited")
    )
    tree = tree.filter(pl.col("visited") & should_show(tree, opts, SINGLE_MIN_FILTERS))

    # Displayed parent: the nearest shown ancestor (else the root, sid -1).
    shown_anc = anc.join(tree.select(pl.col("sid").alias("anc"), pl.col("depth").alias("anc_depth")), on="anc")
    dparent = shown_anc.sort("anc_depth", descending=True).group_by("sid").agg(pl.col("anc").first().alias("dparent"))
    tree = tree.join(dparent, on="sid", how="left").with_columns(pl.col("dparent").fill_null(-1))

    if opts.account_displayed_op_only:
        shown_values = tree.select("sid", *METRICS, "run_count")
        recomputed = subtree_sums(with_self(shown_anc.select("sid", "anc"), tree["sid"]), shown_values)
        tree = tree.drop(recomputed.columns[1:]).join(recomputed, on="sid")
        root_totals = shown_values.select(
            *(pl.col(m).sum().alias("total_" + m) for m in (*METRICS, "run_count")),
            (pl.len() + 1).alias("total_definition_count"),  # the root counts itself here (quirk)
        )

    tree = _display_order(tree, opts)
    root = root_totals.with_columns(
        pl.lit(-1, pl.Int64).alias("sid"),
        pl.lit(ROOT).alias("name"),
        pl.lit(1).alias("depth"),
        pl.lit(0).alias("indent"),
        pl.lit(False).alias("accounted"),
        pl.lit([], dtype=pl.List(pl.Int64)).alias("shape"),
        *(pl.lit(0, pl.Int64).alias(m) for m in (*METRICS, "run_count")),
        pl.lit([SCOPE_PARENT], dtype=pl.List(pl.String)).alias("op_types"),  # the root is a scope parent too
    )
    return pl.concat([root, tree], how="diagonal_relaxed").select(_OUTPUT)


_OUTPUT = [
    "sid",
    "node_id",
    "name",
    "depth",
    "indent",
    "accounted",
    "shape",
    "device",
    "op_types",
    "input_shapes",
    "run_count",
    *METRICS,
    "total_definition_count",
    "total_run_count",
    *(f"total_{m}" for m in METRICS),
]


def _trimmed(name: str, opts: Options) -> bool:
    return bool(pl.select(matches(pl.lit(name), opts.trim_name_regexes)).item())


def _preorder(tree: pl.DataFrame, anc: pl.DataFrame) -> pl.DataFrame:
    """Add ``level`` (0 = top) and ``pre``: the position in a pre-order walk, children by name."""
    path = (
        with_self(anc, tree["sid"])
        .sort("anc")  # sids are name ranks, and an ancestor's name is a prefix: path order
        .group_by("sid")
        .agg(pl.col("anc").alias("path"), (pl.len() - 1).alias("level"))
    )
    # Ordering by the list of ancestor sids is a pre-order walk with children in name order.
    ordered = path.sort("path").with_row_index("pre").select("sid", "level", "pre")
    return tree.join(ordered, on="sid")


def _display_order(tree: pl.DataFrame, opts: Options) -> pl.DataFrame:
    """Sort each node's displayed children (SortNodes) and lay the tree out in pre-order."""
    cols, desc = sort_key(opts.order_by)
    ranked = tree.sort(cols, descending=desc).with_columns(
        pl.int_range(pl.len()).over("dparent").alias("rank")
    )
    # Path of ranks from the root: follow dparent links one level at a time.
    link = ranked.select("sid", "dparent", "rank")
    walk = ranked.select("sid", pl.col("dparent").alias("cur"), pl.concat_list("rank").alias("key"))
    while True:
        pending = walk.filter(pl.col("cur") != -1)
        if not pending.height:
            break
        step = pending.join(link.rename({"sid": "cur", "dparent": "up", "rank": "r"}), on="cur")
        walk = pl.concat(
            [
                walk.filter(pl.col("cur") == -1),
                step.select("sid", pl.col("up").alias("cur"), pl.concat_list("r", "key").alias("key")),
            ]
        )
    keys = walk.select("sid", "key", (pl.col("key").list.len() * 2).alias("indent"))
    return ranked.join(keys, on="sid").sort("key").drop("key", "rank")
