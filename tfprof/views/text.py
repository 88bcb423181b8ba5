"""Text renderers: tfprof's reports from the frames ``tfprof.queries`` returns.

A renderer only formats rows; it never decides what is shown. ``report`` adds the doc block
above ``Profile:`` that tfprof prints for stdout and file output.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tfprof.views.format import (
    FIELDS,
    MISSING_STREAM_WARNING,
    doc_block,
    fmt_number,
    fmt_shape,
    time_fields,
)

# Legend and line order of the single-node (scope, graph) views (tfprof_show.cc FormatNode).
_TREE_METRIC_ORDER = ("params", "float_ops", "bytes", "peak_bytes", "residual_bytes", "output_bytes")


def tree_legend(select: Sequence[str]) -> str:
    """``node name | …`` for the scope and graph views."""
    legends = [FIELDS[f].legend for f in _TREE_METRIC_ORDER if f in select]
    legends += [FIELDS[f].legend for f in time_fields(select)]
    extras = {"device": "assigned devices", "op_types": "op types", "occurrence": "op count (run|defined)"}
    legends += [text for key, text in extras.items() if key in select]
    if "input_shapes" in select:
        legends.append("input shapes")
    return "node name | " + " | ".join(legends) + "\n"


def _pair(row: dict, field: str) -> str:
    f = FIELDS[field]
    total = f.fmt(row["total_" + f.column])
    own = f.fmt(row[f.column]) if row["accounted"] else "--"
    return f"{own}/{total}"


def _input_shapes(shapes) -> str:
    parts = []
    for s in shapes or ():
        dims = s["dims"]
        parts.append(f"{s['input_idx']}:{fmt_shape(dims)}" if dims else f"{s['input_idx']}:unknown")
    return "|".join(parts)


def tree_line(row: dict, select: Sequence[str]) -> str:
    """One node of the scope or graph view (spec 7.3.2), without indentation."""
    items: list[str] = []
    if "params" in select:
        shape = fmt_shape(row["shape"] or ())
        if shape:
            items.append(shape)
        items.append(_pair(row, "params") + " params")
    if "float_ops" in select:
        items.append(_pair(row, "float_ops") + " flops")
    for f in ("bytes", "peak_bytes", "residual_bytes", "output_bytes"):
        if f in select:
            items.append(_pair(row, f))
    for f in time_fields(select):
        items.append(_pair(row, f))
    if "device" in select and row["device"]:
        items.append(row["device"])
    if "op_types" in select:
        items.append("|".join(row["op_types"] or ()))
    if "occurrence" in select:
        acc = row["accounted"]
        run = (fmt_number(row["run_count"]) if acc else "--") + "/" + fmt_number(row["total_run_count"])
        definition = ("1" if acc else "--") + "/" + fmt_number(row["total_definition_count"])
        items.append(f"{run}|{definition}")
    if "input_shapes" in select:
        items.append(_input_shapes(row["input_shapes"]))
    return f"{row['name']} ({', '.join(items)})"


def render_tree(frame: pl.DataFrame, select: Sequence[str]) -> str:
    """Legend plus one indented line per displayed node, in the frame's order."""
    lines = [tree_legend(select)]
    for row in frame.iter_rows(named=True):
        lines.append(" " * row["indent"] + tree_line(row, select) + "\n")
    return "".join(lines)


def report(cmd: str, body: str, select: Sequence[str], *, miss_accelerator_stream: bool = False) -> str:
    """What tfprof writes for stdout/file output: [warning] + doc block + ``Profile:`` + body."""
    warning = MISSING_STREAM_WARNING if miss_accelerator_stream else ""
    return warning + doc_block(cmd, select) + "Profile:\n" + body
