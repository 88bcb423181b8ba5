"""Text rendering of ``tfprof.queries.summary``."""

from __future__ import annotations

import polars as pl


def render_facts(facts: dict[str, int]) -> str:
    """``name  value`` lines with thousands separators."""
    width = max(len(k) for k in facts)
    return "\n".join(f"{k:<{width}}  {v:>14,}" for k, v in facts.items())


def _cell(value) -> str:
    """A number with thousands separators; an exact time (a foreign profile's µs, a float) to
    the ns, without trailing zeros."""
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else str(value)


def render_frame(frame: pl.DataFrame) -> str:
    """A plain aligned table of a small frame: a header line, then one line per row."""
    cols = frame.columns
    cells = [[_cell(v) for v in row] for row in frame.iter_rows()]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def render_counts(counts: dict[str, int]) -> str:
    """The `tables` listing: one line per table with its row count."""
    width = max(len(n) for n in counts)
    lines = [f"{'table':<{width}}  {'rows':>12}"]
    lines += [f"{name:<{width}}  {n:>12,}" for name, n in counts.items()]
    return "\n".join(lines)

