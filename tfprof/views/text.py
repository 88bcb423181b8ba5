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


# ----------------------------------------------------------------------------- multi-node views

_MULTI_MEMORY = ("bytes", "peak_bytes", "residual_bytes", "output_bytes")


def multi_legend(select: Sequence[str], occurrence: str = "op occurrence (run|defined)") -> str:
    """``node name | …`` for the op and code views (bytes first, params after time)."""
    legends = [FIELDS[f].legend for f in _MULTI_MEMORY if f in select]
    legends += [FIELDS[f].legend for f in time_fields(select)]
    legends += [FIELDS[f].legend for f in ("params", "float_ops") if f in select]
    extras = {"device": "assigned devices", "op_types": "op types", "occurrence": occurrence}
    legends += [text for key, text in extras.items() if key in select]
    if "input_shapes" in select:
        legends.append("input shapes")
    return "node name | " + " | ".join(legends) + "\n"


def _pct_item(text: str, own: int, total: int, root_total: int, guard: int) -> str:
    cum = pct = 0.0
    if guard > 0:
        cum = 100.0 * total / root_total if root_total else float("inf")
        pct = 100.0 * own / root_total if root_total else float("inf")
    return "%30s" % f"{text} ({cum:.2f}%, {pct:.2f}%)"


def op_line(row: dict, root: dict, select: Sequence[str], input_block: str = "") -> str:
    """One row of the op view (spec 7.4)."""
    items: list[str] = []
    for f in _MULTI_MEMORY:
        if f in select:
            col = FIELDS[f].column
            # memory columns guard on the row's own bytes (tfprof_op.cc FormatMemoryNode)
            items.append(_pct_item(FIELDS[f].fmt(row[col]), row[col], row["total_" + col], root["total_" + col], row[col]))
    for f in time_fields(select):
        col = FIELDS[f].column
        items.append(_pct_item(FIELDS[f].fmt(row[col]), row[col], row["total_" + col], root["total_" + col], row["total_" + col]))
    for f, unit in (("params", "params"), ("float_ops", "float_ops")):
        if f in select:
            col = FIELDS[f].column
            text = f"{fmt_number(row[col])} {unit}"
            items.append(_pct_item(text, row[col], row["total_" + col], root["total_" + col], row["total_" + col]))
    if "device" in select:
        items.append("|".join(row["devices"] or ()))
    if "op_types" in select:
        items.append("|".join(row["op_types"] or ()))
    if "occurrence" in select:
        items.append("%10s" % f"{row['runs']}|{row['definitions']}")
    line = "%-25s%s\n" % (row["name"], ", ".join(items))
    if "input_shapes" in select and input_block:
        line = f"{line}\n{input_block}\n\n"
    return line


def input_shape_block(members: pl.DataFrame) -> str:
    """The ``input_type:`` lines under an op row: members grouped by their input shapes."""
    if members.height == 0:
        return ""
    sigs: dict[str, list[int]] = {}
    for row in members.iter_rows(named=True):
        entries = []
        for s in row["input_shapes"] or ():
            dims = s["dims"]
            entries.append(f"{s['input_idx']}:{fmt_shape(dims)}" if dims else f"{s['input_idx']}:unknown")
        sig = "input_type: " + ",\t".join(entries)
        agg = sigs.setdefault(sig, [0, 0, 0])
        agg[0] += 1
        agg[1] += row["run_count"]
        agg[2] += row["exec_micros"]
    ordered = sorted(sigs.items(), key=lambda kv: (-kv[1][1], kv[0]))
    return "\n".join(
        f"{sig}\t(run*{runs}|defined*{count})\texec_time: {FIELDS['micros'].fmt(us)}"
        for sig, (count, runs, us) in ordered
    )


def render_op(rows: pl.DataFrame, root: dict, members: pl.DataFrame, select: Sequence[str]) -> str:
    """Legend plus one line per displayed op (the root is not printed)."""
    out = [multi_legend(select)]
    by_op = members.partition_by("op", as_dict=True) if "input_shapes" in select and members.height else {}
    for row in rows.iter_rows(named=True):
        block = input_shape_block(by_op.get((row["name"],), members.clear())) if by_op else ""
        out.append(op_line(row, root, select, block))
    return "".join(out)


def code_line(row: dict, select: Sequence[str]) -> str:
    """One node of the code view (spec 7.3.3), without indentation."""
    items: list[str] = []
    for f in _MULTI_MEMORY:
        if f in select:
            items.append(_pair(row, f))
    for f in time_fields(select):
        items.append(_pair(row, f))
    if "params" in select:
        items.append(_pair(row, "params") + " params")
    if "float_ops" in select:
        items.append(_pair(row, "float_ops") + " flops")
    if "device" in select and row.get("devices"):
        items.append("|".join(row["devices"]))
    if "op_types" in select:
        items.append("|".join(row.get("op_types") or ()))
    if "occurrence" in select:
        items.append("occurrence N/A in code view")
    if "input_shapes" in select:
        items.append("input_shapes N/A in code view")
    return f"{row['name']} ({', '.join(items)})"


def render_code(frame: pl.DataFrame, select: Sequence[str]) -> str:
    """Legend plus one indented line per displayed call-stack node."""
    lines = [multi_legend(select)]
    for row in frame.iter_rows(named=True):
        lines.append(" " * row["indent"] + code_line(row, select) + "\n")
    return "".join(lines)
