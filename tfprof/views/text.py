"""Text renderers: tfprof's reports from the frames ``tfprof.queries`` returns.

A renderer only formats rows; it never decides what is shown. ``report`` adds the doc block
above ``Profile:`` that tfprof prints for stdout and file output.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tfprof.views.columns import tree_bytes, tree_text
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


def _join_lines(lines: pl.Series) -> str:
    """The lines, each ended by a newline, as one string (joined by polars, not in Python)."""
    return (lines + "\n").str.join("").item() if len(lines) else ""


def render_tree(frame: pl.DataFrame, select: Sequence[str], after: pl.Series | None = None, *, head: str = "") -> str:
    """``head``, the legend, then one indented line per displayed node, in the frame's order;
    ``after`` (one string per row, e.g. a tensor's values) is printed under its row's line."""
    return tree_text(frame, select, after=after, prefix=head + tree_legend(select))


def report_head(cmd: str, select: Sequence[str], *, miss_accelerator_stream: bool = False) -> str:
    """What tfprof writes for stdout/file output above the body: [warning] + doc block + ``Profile:``."""
    warning = MISSING_STREAM_WARNING if miss_accelerator_stream else ""
    return warning + doc_block(cmd, select) + "Profile:\n"


def report(cmd: str, body: str, select: Sequence[str], *, miss_accelerator_stream: bool = False) -> str:
    """``report_head`` + ``body``."""
    return report_head(cmd, select, miss_accelerator_stream=miss_accelerator_stream) + body


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


def render_code(frame: pl.DataFrame, select: Sequence[str], *, head: str = "") -> str:
    """``head``, the legend, then one indented line per displayed call-stack node."""
    return tree_text(frame, select, code=True, prefix=head + multi_legend(select))


def render_code_bytes(frame: pl.DataFrame, select: Sequence[str], *, head: str = "") -> memoryview:
    """``render_code`` as UTF-8 bytes (``tfprof.views.columns.decode`` makes the text)."""
    return tree_bytes(frame, select, code=True, prefix=head + multi_legend(select))
