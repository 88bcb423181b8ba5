"""The diff's text is built column by column (``tfprof.views.diff_text.render_text``); here it is
held equal to the same report written one row at a time with the per-value formatters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import tfprof
from tfprof.api.diff import run_diff
from tfprof.views import diff_text
from tfprof.views.fields import METRICS

PAIRS = Path(__file__).parent / "fixtures" / "diff"


def _row_by_row(result) -> str:
    """The report, one row at a time (the plain statement of ``render_text``)."""

    def signed(fmt, v):
        return "0" if v == 0 else ("+" if v > 0 else "-") + fmt(abs(v))

    def pct(v, d):
        return ("new" if d else "0%") if v is None else "0%" if v == 0 else f"{v:+.1f}%"

    header = ["", "node name"] + [h for f in result.fields for h in (f"{f} A", f"{f} B", "Δ", "Δ%")]
    rows = [header]
    for r in result.frame.iter_rows(named=True):
        mark = {"added": "+", "removed": "-"}.get(r["status"], "*" if r["significant"] else "")
        line = [mark, ("  " * (r["depth"] or 0) + r["name"]) if result.order == "tree" else r["path"]]
        for f, col in zip(result.fields, result.value_columns):
            fmt = METRICS[f].fmt
            a, b, d = r[f"{col}_a"], r[f"{col}_b"], r[f"{col}_delta"]
            line += ["" if a is None else fmt(a), "" if b is None else fmt(b), signed(fmt, d), pct(r[f"{col}_delta_pct"], d)]
        rows.append(line)
    widths = [1] + [max(len(row[i]) for row in rows) for i in range(1, len(header))]
    out = diff_text.head(result) + [""]
    for row in rows:
        out.append(" ".join([row[0].ljust(1), row[1].ljust(widths[1]), *(c.rjust(w) for c, w in zip(row[2:], widths[2:]))]).rstrip())
    out.append(f"({result.frame.height:,} row{'s' if result.frame.height != 1 else ''})")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def profiles() -> dict:
    return {name: tfprof.load(PAIRS / name / "profile.pb") for name in ("base", "again", "wide")}


@pytest.mark.parametrize("cmd", ["scope", "graph", "op"])
@pytest.mark.parametrize("order", ["delta", "delta_pct", "name", "tree", "delta_pct:bytes"])
@pytest.mark.parametrize("pair", [("base", "wide"), ("wide", "base"), ("base", "again")])
def test_text_equals_the_row_by_row_report(profiles, cmd, order, pair):
    d = run_diff(profiles[pair[0]], profiles[pair[1]], cmd,
                 {"max_depth": 1000, "select": ["micros", "bytes", "params", "float_ops"]}, order_by=order)
    assert d.text == _row_by_row(d)


@pytest.mark.parametrize("cmd", ["scope", "code", "op"])
def test_text_of_step_against_step_equals_the_row_by_row_report(cmd):
    prof = tfprof.load(tfprof.sample_path("torch"))
    d = run_diff(prof, prof, cmd, {"max_depth": 1000, "step": 2}, against=3, order_by="tree")
    assert d.frame.height > 3 and d.text == _row_by_row(d)


@pytest.mark.parametrize("block", [1, 7])
def test_text_built_in_blocks_is_the_same_report(profiles, monkeypatch, block):
    d = run_diff(profiles["base"], profiles["wide"], "scope", {"max_depth": 1000}, order_by="tree")
    whole = d.text
    monkeypatch.setattr(diff_text, "_LINES_PER_BLOCK", block)
    assert d.frame.height > 2 * block and diff_text.render_text(d) == whole == _row_by_row(d)


def test_percentages_print_as_python_prints_them():
    rng = np.random.default_rng(7)
    values = np.concatenate([
        rng.normal(0, 50, 20_000), rng.normal(0, 1e6, 2_000),
        np.arange(-200, 200) / 20 + 0.05,  # ties at the second decimal: x.x5
        np.arange(-100, 100) / 4, [0.05, 0.15, 0.25, -0.05, -0.15, 0.04999999, 1e15, -3e16, 1e-300, -1e-300],
    ])
    delta = pl.Series(np.where(values == 0, 0, 1))
    got = diff_text._pct(pl.Series(values), delta).to_list()
    assert got == [("0%" if v == 0 else f"{v:+.1f}%") for v in values]
    assert diff_text._pct(pl.Series([None, None, 0.0], dtype=pl.Float64), pl.Series([0, 5, 0])).to_list() == ["0%", "new", "0%"]
