"""Per-node frames for one ``step`` option value (docs/TFPROF_BEHAVIOUR.md, 'Steps and averaging' and
'Single-node views'): each graph node's *self*
values as tfprof's ReInit(step) sets them (``tfprof.queries.indexes.means``) with what the views
print about it.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries.arrays import rows_of
from tfprof.queries.indexes.means import step_means, step_numbers, step_samples
from tfprof.schema.metrics import computed, generation


def node_metrics(prof: Profile, step: int = -1) -> pl.LazyFrame:
    """Per node: the step metrics for option ``step`` (see ``step_numbers``)."""
    return pl.from_arrow(step_numbers(prof, step)).lazy()


def node_frame(prof: Profile, step: int = -1, extras: tuple[str, ...] = ()) -> pl.DataFrame:
    """Every graph node with its self values for ``step`` and what the views print about it.

    Columns: node_id, name, shape, device (canonical device or null), parameters, float_ops,
    run_count, the three times and the four byte metrics; with ``extras``, also ``op_types``
    (sorted list) and ``input_shapes`` (list of ``{input_idx, dims}``; dims null for tfprof's
    ``unknown``). Everything is computed once per profile and step.
    """
    frame = prof.memo(("node_frame", step, generation()), lambda: _node_frame(prof, step))
    return attach(prof, frame, extras)


def with_samples(prof: Profile, nodes: pl.DataFrame, spec) -> pl.DataFrame:
    """``nodes`` (a ``node_frame``, every node in node-id order) with a column per sample of
    ``spec`` (``TreeSpec.samples``): the node's self value in that step (a registered metric's
    computed from that step's node frame)."""
    if not spec.samples:
        return nodes
    from tfprof.queries.spec import sample_name

    made = {m.column for m in computed()}
    columns = tuple(dict.fromkeys(c for c, _ in spec.samples if c not in made))
    steps = sorted({s for _, s in spec.samples})
    values = prof.memo(("step_samples", columns, tuple(steps)),
                       lambda: step_samples(prof, columns, steps)) if columns else {}
    values = {**values, **{(c, s): node_frame(prof, s)[c].to_numpy() for c, s in spec.samples if c in made}}
    return nodes.with_columns(pl.Series(sample_name(c, s), values[c, s]) for c, s in spec.samples)


def extras_for(opts) -> tuple[str, ...]:
    """The per-node extras a view with ``opts`` prints or filters on."""
    out = []
    if "op_types" in opts.select or tuple(opts.account_type_regexes) != (".*",):
        out.append("op_types")
    if "input_shapes" in opts.select:
        out.append("input_shapes")
    return tuple(out)


def attach(prof: Profile, frame: pl.DataFrame, extras: tuple[str, ...]) -> pl.DataFrame:
    """``frame`` (keyed by node_id) with the requested extra columns joined on."""
    for extra in extras:
        if extra in frame.columns:
            continue
        other = prof.memo(extra, lambda e=extra: _EXTRAS[e](prof).collect())
        frame = frame.join(other, on="node_id", how="left", maintain_order="left")
    return frame


def node_numbers(prof: Profile, step: int = -1) -> pl.DataFrame:
    """``node_metrics`` for ``step`` collected, with ``params`` named ``parameters`` (the step
    means index for step -1): a node frame's numbers without its strings and lists."""
    if step < 0:
        metrics = prof.index("step_means", step_means)["metrics"]
    else:
        metrics = pl.from_arrow(step_numbers(prof, step))
    if "macs" not in metrics.columns:  # a means index written before macs were counted: none then
        metrics = metrics.with_columns(pl.lit(0, pl.Int64).alias("macs"))
    return with_computed(metrics.rename({"params": "parameters"}))


def with_computed(numbers: pl.DataFrame) -> pl.DataFrame:
    """``numbers`` (a node's self values, node-frame names) with each registered additive
    metric's own value, computed from them (``tfprof.schema.metrics.register``; null counts 0)."""
    made = computed()
    if not made:
        return numbers
    try:
        return numbers.with_columns(m.compute.cast(pl.Int64).fill_null(0).alias(m.column) for m in made)
    except pl.exceptions.PolarsError as exc:
        first = str(exc).strip().splitlines()[0]
        raise OptionError(f"a registered metric's compute expression failed on the node frame: {first}") from None


def _node_frame(prof: Profile, step: int) -> pl.DataFrame:
    static = (
        prof.lazy("nodes")
        .select("node_id", "name", "shape", pl.col("canonical_device").cast(pl.String).alias("device"))
        .collect()
    )
    if not static["node_id"].is_sorted():
        static = static.sort("node_id")
    metrics = node_numbers(prof, step)
    # Both sides hold every node once: in node-id order the rows pair up without a join (a
    # join and sort of a multi-million-row frame of strings and lists would triple its memory).
    if metrics.height == static.height and (metrics["node_id"] == static["node_id"]).all():
        return static.hstack(metrics.drop("node_id"))
    return static.join(metrics, on="node_id", how="left", maintain_order="left")


def op_types(prof: Profile) -> pl.LazyFrame:
    """Per node, its op types as a sorted list (byte order, as tfprof's std::set)."""
    return (
        prof.lazy("node_types")
        .with_columns(pl.col("op_type").cast(pl.String))
        .sort("node_id", "op_type")
        .group_by("node_id", maintain_order=True)
        .agg(pl.col("op_type").alias("op_types"))
    )


def input_shapes(prof: Profile) -> pl.LazyFrame:
    """Per node, the shape of each input: the producer's output shape at the recorded slot."""
    shapes = prof.lazy("output_shapes").select(
        pl.col("node_id").alias("input_id"), pl.col("slot").alias("output_slot"), "dims"
    )
    return (
        prof.lazy("node_inputs")
        .join(shapes, on=["input_id", "output_slot"], how="left")
        # tfprof prints an empty (unknown-rank) shape as `unknown`, like a missing one.
        .with_columns(pl.when(pl.col("dims").list.len() > 0).then(pl.col("dims")).alias("dims"))
        .sort("node_id", "input_idx")
        .group_by("node_id", maintain_order=True)
        .agg(pl.struct("input_idx", "dims").alias("input_shapes"))
    )


_EXTRAS = {"op_types": op_types, "input_shapes": input_shapes}

# What the views print about a node but never compute with: carried beside the tree, not in it,
# and attached to the displayed rows only.
DETAILS = ("shape", "device", "op_types", "input_shapes")


def node_rows(nodes: pl.DataFrame, node_ids: pl.Series) -> np.ndarray:
    """Each of ``node_ids``' row in ``nodes`` (a ``node_frame``, in node-id order); -1 where
    it has none (a null id: a synthetic parent)."""
    want = node_ids.fill_null(-1).to_numpy()
    return np.where(want >= 0, rows_of(nodes["node_id"].to_numpy(), want), -1)


def attach_details(rows: pl.DataFrame, nodes: pl.DataFrame, defaults: dict[str, object]) -> pl.DataFrame:
    """``rows`` with the detail columns of ``nodes`` (a ``node_frame``, in node-id order)
    gathered by ``node_id``; rows without a node (synthetic parents) get ``defaults``."""
    details = [c for c in DETAILS if c in nodes.columns]
    if not details:
        return rows
    row = node_rows(nodes, rows["node_id"])
    found = row >= 0
    picked = nodes.select(details)[pl.Series(np.maximum(row, 0))] if nodes.height else None
    cols = []
    for c in details:
        col = picked[c] if picked is not None else pl.Series(c, [None] * rows.height, dtype=nodes.schema[c])
        if not found.all():
            col = pl.select(pl.when(pl.Series(found)).then(col).otherwise(pl.lit(defaults.get(c), nodes.schema[c]))).to_series()
        cols.append(col.alias(c))
    return rows.with_columns(cols)
