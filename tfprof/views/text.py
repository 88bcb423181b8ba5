"""Text renderers: tfprof's reports from the frames ``tfprof.queries`` returns.

A renderer only formats rows; it never decides what is shown. ``report`` adds the doc block
above ``Profile:`` that tfprof prints for stdout and file output.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tfprof.views.columns import tree_bytes, tree_lines, tree_text
from tfprof.views.fields import FIELDS, shown
from tfprof.views.format import COMMAND_HELP, MISSING_STREAM_WARNING
from tfprof.views.units import FORMATS, fmt_number, fmt_shape, fmt_time, fmt_time_ns


def legend(select: Sequence[str], *, multi: bool) -> str:
    """``node name | …``: the legend of every field ``select`` prints, in the line order of the
    single-node (scope, graph) or multi-node (op, code) views."""
    return "node name | " + " | ".join(f.legend_for(multi) for f in shown(select, multi=multi)) + "\n"


def tree_legend(select: Sequence[str]) -> str:
    """The legend of the scope and graph views (params first)."""
    return legend(select, multi=False)


def multi_legend(select: Sequence[str]) -> str:
    """The legend of the op and code views (bytes first, params after time)."""
    return legend(select, multi=True)


def doc_block(cmd: str, select: Sequence[str], view_doc: str | None = None) -> str:
    """The explanatory block printed above ``Profile:`` (docs/TFPROF_BEHAVIOUR.md, 'Doc block'):
    what the view's rows are (``view_doc``, for a view tfprof does not have), then each selected
    field's doc lines, ``select`` sorted by name."""
    lines = [line for s in sorted(select) for line in (FIELDS[s].doc if s in FIELDS else (f"Unknown select: {s}",))]
    head = view_doc if view_doc is not None else COMMAND_HELP.get(cmd, f"Unknown command: {cmd}")
    return "\nDoc:\n" + head + "\n" + "\n".join(lines) + "\n\n"


def _join_lines(lines: pl.Series) -> str:
    """The lines, each ended by a newline, as one string (joined by polars, not in Python)."""
    return (lines + "\n").str.join("").item() if len(lines) else ""


def render_tree(frame: pl.DataFrame, select: Sequence[str], after: pl.Series | None = None, *, head: str = "",
                ns: bool = False) -> str:
    """``head``, the legend, then one indented line per displayed node, in the frame's order;
    ``after`` (one string per row, e.g. a tensor's values) is printed under its row's line;
    ``ns``: the frame's times are in ns (``tfprof.queries.ticks``)."""
    return tree_text(frame, select, after=after, prefix=head + tree_legend(select), ns=ns)


def report_head(
    cmd: str, select: Sequence[str], *, miss_accelerator_stream: bool = False, view_doc: str | None = None,
    no_source: str | None = None, macs_gaps: tuple[bool, list[str]] | None = None, steps_note: str | None = None,
) -> str:
    """What tfprof writes for stdout/file output above the body: [warning] + doc block + ``Profile:``.
    ``no_source`` (foreign profiles only: docs/FOREIGN.md) names the fields the input cannot
    fill, printed on one line of its own after the doc block, so that their zeros are not read as measured.
    ``macs_gaps`` (``queries.flops.macs_gaps``; ours, only where ``macs`` is selected) adds a line
    saying which op types have no FLOPs rule, or that the store predates the MACs. ``steps_note``
    (foreign profiles of several steps) says what their step -1 times are."""
    warning = MISSING_STREAM_WARNING if miss_accelerator_stream else ""
    missing = f"No source in this profile: {no_source} (shown as 0).\n\n" if no_source else ""
    steps = f"{steps_note}\n\n" if steps_note else ""
    return warning + doc_block(cmd, select, view_doc) + missing + steps + macs_line(macs_gaps) + "Profile:\n"


_LISTED = 8  # op types named on the MACs line; the rest are counted (``tfprof check`` lists them all)


def macs_line(gaps: tuple[bool, list[str]] | None) -> str:
    """The MACs line of a report's head (empty without ``gaps``)."""
    if gaps is None:
        return ""
    stale, ops = gaps
    if stale:
        return ("No MACs in this store: it was written before tfprof counted them (shown as 0); "
                "ingest it again to fill them.\n\n")
    if not ops:
        return ""
    shown = ", ".join(ops[:_LISTED]) + (f" and {len(ops) - _LISTED} more" if len(ops) > _LISTED else "")
    return f"No FLOPs rule (0 MACs) for op types: {shown}.\n\n"


def report(cmd: str, body: str, select: Sequence[str], *, miss_accelerator_stream: bool = False) -> str:
    """``report_head`` + ``body``."""
    return report_head(cmd, select, miss_accelerator_stream=miss_accelerator_stream) + body


# ----------------------------------------------------------------------------- multi-node views

def _pct_item(text: str, own: int, total: int, root_total: int, guard: int) -> str:
    cum = pct = 0.0
    if guard > 0:
        cum = 100.0 * total / root_total if root_total else float("inf")
        pct = 100.0 * own / root_total if root_total else float("inf")
    return "%30s" % f"{text} ({cum:.2f}%, {pct:.2f}%)"


def _op_cell(cell: tuple, column: str | None, kind: str | None, row: dict, root: dict, ns: bool = False) -> str:
    """One item of an op-view line from a field's op cell (``tfprof.views.fields``)."""
    if cell[0] == "join":
        return "|".join(row[cell[1]] or ())
    if cell[0] == "runs":
        return "%*s" % (cell[1], f"{row['runs']}|{row['definitions']}")
    if cell[0] == "ratio":  # own/cumulative, as the trees print own/total
        return "%.2f/%.2f%s" % (row[column] or 0, row["total_" + column] or 0, cell[1])
    _, guard, unit = cell
    own, total = row[column], row["total_" + column]
    text = f"{fmt_number(own)} {unit}" if unit else FORMATS["time_ns" if ns and kind == "time" else kind](own)
    return _pct_item(text, own, total, root["total_" + column], own if guard == "own" else total)


def op_line(row: dict, root: dict, select: Sequence[str], input_block: str = "", ns: bool = False) -> str:
    """One row of the op view (docs/TFPROF_BEHAVIOUR.md, 'Op view rows'); ``ns`` as for ``render_tree``."""
    items = [_op_cell(f.op, f.column, f.kind, row, root, ns) for f in shown(select, multi=True) if f.op]
    line = "%-25s%s\n" % (row["name"], ", ".join(items))
    if "input_shapes" in select and input_block:
        line = f"{line}\n{input_block}\n\n"
    return line


def input_shape_block(members: pl.DataFrame, ns: bool = False) -> str:
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
        f"{sig}\t(run*{runs}|defined*{count})\texec_time: {(fmt_time_ns if ns else fmt_time)(us)}"
        for sig, (count, runs, us) in ordered
    )


def render_op(rows: pl.DataFrame, root: dict, members: pl.DataFrame, select: Sequence[str], *,
              ns: bool = False) -> str:
    """Legend plus one line per displayed op (the root is not printed); ``ns`` as for ``render_tree``."""
    out = [multi_legend(select)]
    by_op = members.partition_by("op", as_dict=True) if "input_shapes" in select and members.height else {}
    for row in rows.iter_rows(named=True):
        block = input_shape_block(by_op.get((row["name"],), members.clear()), ns) if by_op else ""
        out.append(op_line(row, root, select, block, ns))
    return "".join(out)


def row_lines(layout: str, frame: pl.DataFrame, select: Sequence[str], root: dict | None = None, *,
              ns: bool = False) -> list[str]:
    """Each displayed row's line of the report, as printed, without what a report prints under
    it (input shapes, tensor values, GPU work): a tree's from its rows (``level``: the
    indentation), a list's (``groups``: the op view) from its rows and ``root``."""
    if layout == "groups":
        return [op_line(row, root or {}, select, ns=ns).removesuffix("\n") for row in frame.iter_rows(named=True)]
    return tree_lines(frame, select, code=layout == "code", ns=ns).to_list()


def render_code(frame: pl.DataFrame, select: Sequence[str], *, head: str = "") -> str:
    """``head``, the legend, then one indented line per displayed call-stack node."""
    return tree_text(frame, select, code=True, prefix=head + multi_legend(select))


def render_code_bytes(frame: pl.DataFrame, select: Sequence[str], *, head: str = "", ns: bool = False) -> memoryview:
    """``render_code`` as UTF-8 bytes (``tfprof.views.columns.decode`` makes the text)."""
    return tree_bytes(frame, select, code=True, prefix=head + multi_legend(select), ns=ns)
