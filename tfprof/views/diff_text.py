"""A diff's rows as a report: an aligned text table, or the JSON document of docs/schemas/diff.schema.json.

The text has a head (what was compared, the rule for Δ and Δ%, the statistic behind ``*``), then
one line per row: a mark (``*`` significant, ``+`` added, ``-`` removed), the row (indented
by depth in tree order, its path otherwise), then per diffed field A, B, Δ and Δ%, each number
in the field's tfprof format (``1.20ms``, ``3.41KB``, ``930.58k``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

from tfprof.queries.noise import ALPHA
from tfprof.views.columns import format_column
from tfprof.views.fields import METRICS

SCHEMA = "tfprof-diff/1"
_LINES_PER_BLOCK = 250_000  # report lines padded and joined at a time


def _signed(values: pl.Series, kind: str) -> pl.Series:
    """Each Δ in its field's format with its sign; ``0`` for no change."""
    text = format_column(values.abs(), kind)
    sign = pl.when(values > 0).then(pl.lit("+")).otherwise(pl.lit("-"))
    return pl.select(pl.when(values == 0).then(pl.lit("0")).otherwise(pl.concat_str(sign, text))).to_series()


def _pct(values: pl.Series, delta: pl.Series) -> pl.Series:
    """Each Δ% as Python's ``%+.1f%%`` prints it; ``0%`` for none, ``new`` where A is 0 and
    Δ is not. The tenths come from ``rint(10·v)``; where that could differ from the decimal
    rounding of v (near a half, or a value too large for exact tenths) Python formats it."""
    v = values.fill_null(0.0).to_numpy()
    tenths = np.rint(np.abs(v) * 10.0)
    near = np.abs(np.abs(v) * 10.0 - np.trunc(np.abs(v) * 10.0) - 0.5) < 1e-6
    python = (near | (np.abs(v) >= 1e15)) & ~values.is_null().to_numpy()
    tenths = np.where(python, 0, tenths).astype(np.int64)
    text = pl.select(pl.concat_str(
        pl.when(pl.Series(v) < 0).then(pl.lit("-")).otherwise(pl.lit("+")),
        pl.Series(tenths // 10).cast(pl.String), pl.lit("."), pl.Series(tenths % 10).cast(pl.String), pl.lit("%"),
    )).to_series()
    idx = np.flatnonzero(python)
    if len(idx):
        text = text.scatter(idx, [f"{x:+.1f}%" for x in v[idx]])
    return pl.select(
        pl.when(values.is_null()).then(pl.when(delta != 0).then(pl.lit("new")).otherwise(pl.lit("0%")))
        .when(values == 0).then(pl.lit("0%"))
        .otherwise(text)
    ).to_series()


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
    which = "total" if result.layout != "groups" else "own"
    lines.append(f"values: each row's {which} value; ordered by {result.order} of {result.order_field}")
    return lines


def render_text(result) -> str:
    """The diff report (module docstring), built column by column."""
    return "".join(text_blocks(result))


def text_blocks(result) -> Iterator[str]:
    """The diff report in pieces, each ending with a newline: the head, then the rows a block
    at a time, padded to the widest name. A writer that takes them one by one holds one block,
    not the report: 4 GB of text for the 7.9M rows of a 705k-node code diff."""
    frame = result.frame
    status = frame["status"].cast(pl.String)
    mark = pl.select(
        pl.when(status == "added").then(pl.lit("+")).when(status == "removed").then(pl.lit("-"))
        .when(frame["significant"].fill_null(False)).then(pl.lit("*")).otherwise(pl.lit(""))
    ).to_series()
    if result.order == "tree":
        names = frame["name"].cast(pl.String)
        name = pl.select(names.str.pad_start(names.str.len_chars() + 2 * frame["depth"].fill_null(0))).to_series()
    else:
        name = frame["path"]
    header = ["", "node name"]
    cells = [mark, name]
    for f, col in zip(result.fields, result.value_columns):
        kind = METRICS[f].kind
        header += [f"{f} A", f"{f} B", "Δ", "Δ%"]
        for side in (frame[f"{col}_a"], frame[f"{col}_b"]):
            cells.append(pl.select(pl.when(side.is_null()).then(pl.lit("")).otherwise(format_column(side, kind))).to_series())
        cells += [_signed(frame[f"{col}_delta"], kind), _pct(frame[f"{col}_delta_pct"], frame[f"{col}_delta"])]
    widths = [max(len(h), int(c.str.len_chars().max() or 0)) for h, c in zip(header, cells)]
    widths[0] = 1  # the mark column, present when no row has a mark
    top = [header[0].ljust(1), header[1].ljust(widths[1]), *(h.rjust(w) for h, w in zip(header[2:], widths[2:]))]
    yield "\n".join([*head(result), "", " ".join(top).rstrip(), ""])
    for start in range(0, frame.height, _LINES_PER_BLOCK):
        part = [c.slice(start, _LINES_PER_BLOCK) for c in cells]
        padded = [part[0].str.pad_end(1), part[1].str.pad_end(widths[1]),
                  *(c.str.pad_start(w) for c, w in zip(part[2:], widths[2:]))]
        yield pl.select(pl.concat_str(padded, separator=" ").str.strip_chars_end().str.join("\n")).item() + "\n"
    yield f"({frame.height:,} row{'s' if frame.height != 1 else ''})\n"


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
