"""A view's displayed rows as a public table: one row per printed line, stable column names.

The queries return frames shaped for their renderers (``indent``, ``pos``, ``runs``,
``parameters``, ...). ``view_table`` keeps what a reader of the report needs, under the
names the tables use (``params``, ``run_count``), with self and total side by side:

>>> import tfprof
>>> from tfprof.api import run_view
>>> t = view_table("scope", run_view(tfprof.load(tfprof.sample_path()), "scope", {"max_depth": 1}).frame)
>>> t.columns[:4], t["name"][0], t["depth"][0]
(['name', 'depth', 'node_id', 'accounted'], '_TFProfRoot', 0)
"""

from __future__ import annotations

import polars as pl

from tfprof.schema import METRICS

# Query-frame names that differ from the public ones.
_RENAMES = {
    "parameters": "params",
    "total_parameters": "total_params",
    "runs": "run_count",
    "definitions": "definition_count",
}

# Public columns, with their meaning. A view has those its rows carry: node_id only in the
# scope and graph views; definition_count only in op and code; total_run_count and
# total_definition_count not in op. Every metric column is Int64 and never null.
_SELF: dict[str, str] = {
    "name": "node name (scope, graph), op type (op) or `file:line:function` (code); the root is `_TFProfRoot`",
    "depth": "nesting level as printed, root 0 (op view: the row's position in the sorted op list, which "
    "max_depth limits)",
    "node_id": "graph node id; null for the root and for name scopes that are not nodes (scope, graph views)",
    "accounted": "whether the row's own values count (tfprof prints `--` for the self value when false)",
    "exec_micros": "execution time, accelerator plus cpu (µs)",
    "accelerator_exec_micros": "accelerator execution time (µs)",
    "cpu_exec_micros": "cpu execution time (µs)",
    "requested_bytes": "memory requested (bytes)",
    "peak_bytes": "peak memory (bytes)",
    "residual_bytes": "memory not freed at the end of the step (bytes)",
    "output_bytes": "memory of the outputs (bytes)",
    "params": "parameters (count)",
    "float_ops": "float operations (count)",
    "run_count": "times run (count)",
    "definition_count": "graph nodes aggregated in the row (op, code views; count)",
}
# Each metric is followed by its total (tfprof's total_*: in the op view a cumulative sum): the
# schema's METRICS under their public names, then the counts.
_PAIRED = (*(_RENAMES.get(m, m) for m in METRICS), "run_count", "definition_count")
_TOTAL = "total of the subtree (scope, graph, code) or, in the op view, of this row and the accounted rows after it"
COLUMNS: dict[str, str] = {
    **{c: _SELF[c] for c in ("name", "depth", "node_id", "accounted")},
    **{k: v for m in _PAIRED for k, v in ((m, _SELF[m]), ("total_" + m, f"{_TOTAL}: {_SELF[m]}"))},
}


# The public metric columns each select field shows (with their ``total_`` pairs); select names
# that are no metric (device, op_types, input_shapes, tensor_value) add no column.
SELECT_COLUMNS: dict[str, tuple[str, ...]] = {
    "micros": ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros"),
    "accelerator_micros": ("accelerator_exec_micros",),
    "cpu_micros": ("cpu_exec_micros",),
    "bytes": ("requested_bytes",),
    "peak_bytes": ("peak_bytes",),
    "residual_bytes": ("residual_bytes",),
    "output_bytes": ("output_bytes",),
    "params": ("params",),
    "float_ops": ("float_ops",),
    "occurrence": ("run_count", "definition_count"),
}


def view_table(cmd: str, frame: pl.DataFrame, select: tuple[str, ...] | None = None) -> pl.DataFrame:
    """The public table of view ``cmd``'s displayed rows (``ViewResult.frame``), in display order.

    With ``select`` (tfprof's select names), only the metric columns those fields print are kept,
    beside ``name``, ``depth``, ``node_id`` and ``accounted``; without it, every metric."""
    renamed = frame.rename({k: v for k, v in _RENAMES.items() if k in frame.columns})
    if cmd == "op":
        depth = pl.col("depth")
    else:  # the tree views indent two spaces per printed level
        depth = pl.col("indent") // 2
    metrics = [c for c in list(COLUMNS)[4:] if c in renamed.columns]
    out = renamed.with_columns(
        depth.cast(pl.Int64).alias("depth"),
        *(pl.col(c).cast(pl.Int64).fill_null(0) for c in metrics),  # the code view's root has no self values
        pl.col("accounted").fill_null(False),
    )
    if select is None:
        return out.select(c for c in COLUMNS if c in out.columns)
    shown = {c for f in select for m in SELECT_COLUMNS.get(f, ()) for c in (m, "total_" + m)}
    return out.select(c for c in COLUMNS if c in out.columns and (c in list(COLUMNS)[:4] or c in shown))
