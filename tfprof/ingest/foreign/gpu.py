"""GPU events of a foreign trace, each linked to the op that launched it (docs/FOREIGN.md, 'GPU events').

A kernel, memcpy or memset runs on a GPU stream, away from the host thread that asked for it. The
trace ties the two through a correlation id: the GPU event and the runtime call that launched it
(``cudaLaunchKernel``, ``cudaMemcpyAsync``, …) carry the same one (Kineto's ``correlation`` arg, an
XSpace's ``correlation_id`` stat; the reader puts it in the ``correlation`` column). The launch call
sits inside the op that made it on its host thread, and the innermost such op (``nesting.nearest``)
is the op the GPU time belongs to. Both steps are joins over whole columns: GPU event -> launch call
on the correlation, launch call -> enclosing op by the row ``op_parent`` already gives.

A GPU event the reader names an op of its own (``own_op``: an XLA kernel, the execution of the HLO
instruction it ran) is that op's execution, whatever launched it. A GPU event that links to no op
keeps a node of its own: the op node whose path equals its own
path when the reader gave it one (an XSpace device event naming its TensorFlow op), else, when its
launch call sits in a scope (a ``record_function`` annotation, a module) but in no op, one under
that scope's path (apex's fused optimizers launch their kernels so, from inside
``Optimizer.step#…``), else one under ``UNLINKED_SCOPE``. Those events are counted in the
``unlinked_gpu_event`` validation finding.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from tfprof.ingest.foreign import codes

UNLINKED_SCOPE = "[unlinked GPU events]"
"""The scope of the nodes made for GPU events that link to no op."""

_STREAM = r"(?i)stream\D*?(\d+)"  # Kineto's `stream 7`, XSpace's `Stream #14(Compute)`


def kind(category: pl.Expr, name: pl.Expr, direction: pl.Expr) -> pl.Expr:
    """The ``kernels.kind`` of a GPU event from its category and name (Kineto: ``gpu_memcpy``,
    ``Memcpy HtoD (Pageable -> Device)``; XSpace: ``MemcpyH2D``), or for an MTIA copy
    (``dma_request``) its ``direction`` arg (``HOST_TO_DEVICE``)."""
    cat, low = category.fill_null("").str.to_lowercase(), name.str.to_lowercase()
    way = pl.when(direction.is_not_null()).then(direction.str.to_lowercase()).otherwise(low)
    memcpy = cat.str.contains("memcpy") | low.str.contains("memcpy") | direction.is_not_null()
    return (
        pl.when(cat.str.contains("memset") | low.str.contains("memset")).then(pl.lit("memset"))
        .when(memcpy & way.str.contains(r"htod|h2d|host_to_device")).then(pl.lit("memcpy_htod"))
        .when(memcpy & way.str.contains(r"dtoh|d2h|device_to_host")).then(pl.lit("memcpy_dtoh"))
        .when(memcpy & way.str.contains(r"dtod|d2d|device_to_device")).then(pl.lit("memcpy_dtod"))
        .when(memcpy).then(pl.lit("memcpy_other"))
        .when(low.str.contains(r"nccl|rccl")).then(pl.lit("communication"))
        .otherwise(pl.lit("compute"))
    )


def events(ev: pl.DataFrame, op_parent: np.ndarray, own_path: pl.Series, scope_parent: np.ndarray) -> pl.DataFrame:
    """One row per GPU event (``ev`` rows with role ``op`` on an accelerator): ``row``,
    ``event_id``, its ``device``, ``stream``, ``name``, ``category``, ``op_type``, ``start_ns``,
    ``dur_ns``, ``correlation``, ``kind``, the op execution that launched it (``op_row``: its
    ``ev`` row, null for none) and why none (``why``), the scope its launch call sits in when
    no op holds it (``scope_row``: the nearest enclosing op or scope of each row is
    ``scope_parent``), and ``path``: the path a node of its own would have (``own_path``, the
    scope path of each GPU row, in row order)."""
    text = ("device", "name", "category", "op_type", "thread", "process")  # categoricals while building
    gpu = ev.lazy().filter((pl.col("role") == "op") & pl.col("accelerator")).collect().with_columns(
        own_path.alias("path"), *(pl.col(c).cast(pl.String) for c in text))
    if "copy_direction" not in gpu.columns:  # (build.ABSENT_COLUMNS: only an MTIA trace's copies have one)
        gpu = gpu.with_columns(pl.lit(None, pl.String).alias("copy_direction"))
    gpu = gpu.with_columns((pl.col("own_op").fill_null(False) if "own_op" in gpu.columns else pl.lit(False))
                           .alias("own_op"))  # (build.ABSENT_COLUMNS too: only XLA's kernels are ops of their own)
    launch_rows = np.flatnonzero((ev["correlation"].is_not_null() & ~ev["accelerator"]).to_numpy())
    launches = ev[launch_rows].select(
        "correlation", "event_id", pl.col("name").cast(pl.String).alias("launch"),
        pl.Series("op_row", op_parent[launch_rows]),
        pl.Series("scope_row", np.where(op_parent[launch_rows] < 0, scope_parent[launch_rows], -1)),
    ).sort(pl.col("op_row") < 0, "event_id").unique("correlation", keep="first", maintain_order=True).drop("event_id")
    linked = gpu.join(launches, on="correlation", how="left")
    has_op = (pl.col("op_row") >= 0) & ~pl.col("own_op")
    thread = pl.col("thread")
    return linked.with_columns(
        pl.when(has_op).then(pl.col("op_row")).alias("op_row"),
        pl.when(~has_op & (pl.col("scope_row") >= 0)).then(pl.col("scope_row")).alias("scope_row"),
        pl.when(pl.col("own_op")).then(pl.lit(None, pl.String))
        .when(pl.col("correlation").is_null()).then(pl.lit("it carries no correlation id"))
        .when(pl.col("launch").is_null()).then(pl.lit("no launch call has its correlation id"))
        .when(~has_op).then(pl.lit("no op encloses its launch call `") + pl.col("launch") + "`")
        .alias("why"),
        # (text tests on the few distinct threads and names, not on every GPU event)
        _per_distinct(linked, ("thread",), thread.str.extract(_STREAM, 1).fill_null(thread.str.strip_chars()))
        .alias("stream"),
        _per_distinct(linked, ("category", "name", "copy_direction"),
                      kind(pl.col("category"), pl.col("name"), pl.col("copy_direction"))).alias("kind"),
    ).select("row", "event_id", "device", "stream", "name", "category", "op_type", "start_ns", "dur_ns",
             "correlation", "kind", "op_row", "scope_row", "why", "path", "thread", "process", "own_op")


def _per_distinct(frame: pl.DataFrame, columns: tuple[str, ...], expr: pl.Expr) -> pl.Series:
    """``expr`` (which reads only ``columns``) worked out once per distinct combination of their
    values in ``frame`` and gathered back per row."""
    first, inverse = codes.distinct(*(frame[c] for c in columns))
    return frame[first].select(expr).to_series().gather(inverse)


def own_nodes(gpu: pl.DataFrame, op_paths: pl.Series, scope_path: Callable[[np.ndarray], pl.Series]) -> pl.DataFrame:
    """The GPU events of ``gpu`` no launch links to an op, each with the node ``path`` it goes
    to: its own when it is an op of its own (``own_op``) or an op node's path equals it, else its
    own under the scope of its launch call (``scope_path`` spells the paths of ``ev`` rows), else
    under ``UNLINKED_SCOPE``; ``linked`` says whether the first (False: counted as unlinked)."""
    alone = gpu.filter(pl.col("op_row").is_null())
    named = alone["path"].is_in(op_paths.implode()) | alone["own_op"]
    scoped = ~named & alone["scope_row"].is_not_null()
    under = pl.Series("under", [UNLINKED_SCOPE] * len(alone), pl.String)
    if scoped.any():
        at = np.flatnonzero(scoped.to_numpy())
        under = under.scatter(at, scope_path(alone["scope_row"].gather(at).to_numpy()))
    return alone.with_columns(
        named.alias("linked"),
        pl.when(named).then(pl.col("path")).otherwise(under + "/" + pl.col("path")).alias("path"),
        pl.when(scoped).then(pl.lit("kept under the scope of its launch call"))
        .otherwise(pl.lit("kept as a node of its own")).alias("kept"),
    )


def findings_rows(unlinked: pl.DataFrame) -> list[tuple]:
    """(node name, step, detail) of the first few unlinked GPU events, for the validation table."""
    out = []
    for r in unlinked.sort("event_id").head(5).iter_rows(named=True):
        corr = "" if r["correlation"] is None else f", correlation {r['correlation']}"
        out.append((r["path"], r["step"], f"event {r['event_id']} on {r['device']}/stream:{r['stream']}{corr}: "
                                          f"{r['why']}; {r['kept']}"))
    return out
