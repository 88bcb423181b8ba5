"""A diff's rows as a report: an aligned text table, or the JSON document of docs/schemas/diff.schema.json.

The text has a head (what was compared, the rule for Δ and Δ%, the statistic behind ``*``), then
one line per row: a mark (``*`` significant, ``+`` added, ``-`` removed), the row (indented
by depth in tree order, its path otherwise), then per diffed field A, B, Δ and Δ%, each number
in the field's tfprof format (``1.20ms``, ``3.41KB``, ``930.58k``).
"""

from __future__ import annotations

from typing import Any

from tfprof.queries.noise import ALPHA
from tfprof.views.fields import METRICS

SCHEMA = "tfprof-diff/1"
MARKS = {"added": "+", "removed": "-"}


def _signed(fmt, value: int) -> str:
    if value == 0:
        return "0"
    return ("+" if value > 0 else "-") + fmt(abs(value))


def _pct(value: float | None, delta: int) -> str:
    if value is None:
        return "new" if delta else "0%"
    return "0%" if value == 0 else f"{value:+.1f}%"


def _side(label: str, step: int, steps: int | None) -> str:
    if step >= 0:
        return f"{label} step {step}"
    return f"{label} (mean over steps{f', {steps} steps' if steps else ''})"


def head(result) -> list[str]:
    """The report's head lines."""
    (la, lb), (sa, sb) = result.labels, result.compared_steps
    na, nb = result.steps or (None, None)
    lines = [
        f"tfprof diff, {result.cmd} view: B = {_side(lb, sb, nb)} against A = {_side(la, sa, na)}",
        "Δ = B - A (a side without the row counts as 0); Δ% = 100 × Δ / A",
    ]
    if result.steps:
        lines.append(f"* = significant: the change of the per-step means lies outside the noise band "
                     f"(Welch's t-test, two-sided, α = {ALPHA}; {na} and {nb} steps)")
    else:
        lines.append("no noise band: it needs several steps in both profiles (step against step has none)")
    lines.append("+ = only in B, - = only in A (rows are matched by path; see docs/DIFF.md)")
    which = "total" if result.cmd != "op" else "own"
    lines.append(f"values: each row's {which} value; ordered by {result.order} of {result.order_field}")
    return lines


def render_text(result) -> str:
    """The diff report (module docstring)."""
    frame = result.frame
    tree = result.order == "tree"
    header = ["", "node name"]
    for f in result.fields:
        header += [f"{f} A", f"{f} B", "Δ", "Δ%"]
    rows = [header]
    for r in frame.iter_rows(named=True):
        mark = MARKS.get(r["status"], "*" if r["significant"] else "")
        name = ("  " * (r["depth"] or 0) + r["name"]) if tree else r["path"]
        line = [mark, name]
        for f, col in zip(result.fields, result.value_columns):
            fmt = METRICS[f].fmt
            a, b, d = r[f"{col}_a"], r[f"{col}_b"], r[f"{col}_delta"]
            line += [fmt(a) if a is not None else "", fmt(b) if b is not None else "", _signed(fmt, d),
                     _pct(r[f"{col}_delta_pct"], d)]
        rows.append(line)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    widths[0] = 1  # the mark column, present when no row has a mark
    out = head(result) + [""]
    for row in rows:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [c.rjust(w) for c, w in zip(row[2:], widths[2:])]
        out.append(" ".join(cells).rstrip())
    out.append(f"({frame.height:,} row{'s' if frame.height != 1 else ''})")
    return "\n".join(out) + "\n"


def document(result) -> dict[str, Any]:
    """The diff as one JSON-ready object (docs/schemas/diff.schema.json)."""
    (la, lb), (sa, sb) = result.labels, result.compared_steps
    na, nb = result.steps or (None, None)
    rows = []
    for r in result.frame.iter_rows(named=True):
        values = {c: {"a": r[f"{c}_a"], "b": r[f"{c}_b"], "delta": r[f"{c}_delta"], "delta_pct": r[f"{c}_delta_pct"]}
                  for c in result.columns}
        for c in result.value_columns:
            values[c]["noise"] = r[f"{c}_noise"]
            values[c]["significant"] = r[f"{c}_significant"]
        rows.append({"path": r["path"], "occurrence": r["occurrence"], "name": r["name"], "depth": r["depth"],
                     "status": r["status"], "significant": r["significant"], "values": values})
    return {
        "schema": SCHEMA,
        "view": result.cmd,
        "a": {"label": la, "step": sa, "steps": na},
        "b": {"label": lb, "step": sb, "steps": nb},
        "fields": list(result.fields),
        "columns": list(result.columns),
        "value_columns": list(result.value_columns),
        "order": {"by": result.order, "field": result.order_field},
        "noise": {"statistic": "welch_t", "alpha": ALPHA, "sides": "two"} if result.steps else None,
        "rows": rows,
    }
