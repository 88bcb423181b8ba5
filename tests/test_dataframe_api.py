"""``Profile.view`` (a view's displayed rows as a polars frame) and the notebook HTML.

The frames are checked against the real tool's reports in tests/golden: one row per printed
line, in the printed order and indentation, and the printed numbers are the frame's numbers
formatted as tfprof formats them.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_series_equal

import tfprof
from tfprof import OptionError, Profile
from tfprof.api import run_view
from tfprof.queries.options import Options
from tfprof.views.columns import tree_lines
from tfprof.views.fields import FIELDS
from tfprof.views.table import COLUMNS, view_table
from tfprof.views.units import fmt_number

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"

# Cases whose reports show every number column (select all), the command-line defaults, the
# accelerator columns (gpu_tiny), account_displayed_op_only, and a params preset.
CASES = [
    *((f, f"{v}_select_all") for f in ("cnn", "multistep", "rnn") for v in ("scope", "graph", "op", "code")),
    *((f, f"{v}_default_cli") for f in ("cnn", "multistep") for v in ("scope", "graph", "op", "code")),
    *(("multistep", f"{v}_preset_params") for v in ("scope", "graph", "op", "code")),
    *(("gpu_tiny", f"{v}_gpu_fields") for v in ("scope", "graph", "op")),
    *(("multistep", f"{v}_show_displayed_true") for v in ("scope", "graph", "op", "code")),
    ("multistep", "op_step_1"),
]
_PROFILES: dict[str, Profile] = {}


def _profile(fixture: str) -> Profile:
    if fixture not in _PROFILES:
        _PROFILES[fixture] = tfprof.load(FIXTURES / fixture / "profile.pb")
    return _PROFILES[fixture]


def _case(fixture: str, case_id: str) -> dict:
    cases = json.loads((GOLDEN / fixture / "cases.json").read_text())
    return next(c for c in cases if c["id"] == case_id)


def _golden_lines(fixture: str, case_id: str, cmd: str) -> list[str]:
    """The report's node lines (after the legend); for the op view without input-shape blocks."""
    text = (GOLDEN / fixture / f"{case_id}.txt").read_text()
    body = text[text.index("node name |") :].splitlines()[1:]
    return [ln for ln in body if ln and not (cmd == "op" and ln.startswith("input_type:"))]


def _public(field: str) -> str:
    col = FIELDS[field].column
    return {"parameters": "params"}.get(col, col)


_UNIT = {"params": " params", "float_ops": " flops"}


def _tree_items(row: dict, select: list[str], cmd: str) -> list[str]:
    """What a scope/graph/code line prints for ``row``'s numbers (docs/TFPROF_BEHAVIOUR.md, 'Tree lines')."""
    items = []
    for f in ("bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros", "accelerator_micros",
              "cpu_micros", "params", "float_ops"):
        if f in select:
            col, fmt = _public(f), FIELDS[f].fmt
            own = fmt(row[col]) if row["accounted"] else "--"
            items.append(f"{own}/{fmt(row['total_' + col])}{_UNIT.get(f, '')}")
    if "occurrence" in select and cmd != "code":
        run, defined = (fmt_number(row["run_count"]), "1") if row["accounted"] else ("--", "--")
        items.append(
            f"{run}/{fmt_number(row['total_run_count'])}|{defined}/{fmt_number(row['total_definition_count'])}"
        )
    return items


def _op_items(row: dict, root: dict, select: list[str]) -> list[str]:
    """What an op-view line prints for ``row``'s numbers: ``self (cum%, self%)`` (docs/TFPROF_BEHAVIOUR.md, 'Op view rows')."""
    items = []
    for f in ("bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros", "accelerator_micros",
              "cpu_micros", "params", "float_ops"):
        if f not in select:
            continue
        col = _public(f)
        own, total, grand = row[col], row["total_" + col], root["total_" + FIELDS[f].column]
        text = f"{fmt_number(own)} {f}" if f in ("params", "float_ops") else FIELDS[f].fmt(own)
        guard = own if f.endswith("bytes") else total
        pct = f"{100 * total / grand:.2f}%, {100 * own / grand:.2f}%" if guard > 0 else "0.00%, 0.00%"
        items.append(f"{text} ({pct})")
    if "occurrence" in select:
        items.append(f"{row['run_count']}|{row['definition_count']}")
    return items


@pytest.mark.parametrize("fixture,case_id", CASES, ids=[f"{f}-{c}" for f, c in CASES])
def test_view_rows_are_the_printed_lines(fixture, case_id):
    case = _case(fixture, case_id)
    cmd = case["cmd"]
    options = {k: v for k, v in case["options"].items() if k != "output"}
    prof = _profile(fixture)
    if case_id.endswith("default_cli"):  # nothing given: the command line's defaults apply
        assert Options.from_tfprof(options) == Options()
        table = tfprof.view(prof, cmd)
    else:
        table = tfprof.view(prof, cmd, **options)
    lines = _golden_lines(fixture, case_id, cmd)
    assert table.height == len(lines) > 0
    root = run_view(prof, cmd, options).root
    for row, line in zip(table.iter_rows(named=True), lines):
        if cmd == "op":
            assert line.startswith("%-25s" % row["name"]), (row["name"], line)
            items = _op_items(row, root, case["options"]["select"])
        else:
            assert line.startswith(" " * (2 * row["depth"]) + row["name"] + " ("), (row["name"], row["depth"], line)
            items = _tree_items(row, case["options"]["select"], cmd)
        for item in items:
            assert item in line, f"{row['name']}: `{item}` not in {line!r}"


@pytest.mark.parametrize("cmd", ["scope", "graph", "op", "code"])
def test_view_keeps_every_value_of_run_view(cmd):
    prof = _profile("multistep")
    options = {"max_depth": 6, "select": ["micros", "params", "float_ops", "occurrence"], "order_by": "micros",
               "account_type_regexes": ["Mat.*|.*Variable.*|Relu"]}
    frame = run_view(prof, cmd, options).frame
    table = tfprof.view(prof, cmd, **options)
    assert table.height == frame.height
    assert table.columns[:2] == ["name", "depth"] and set(table.columns) <= set(COLUMNS)
    assert_series_equal(table["name"], frame["name"])
    renamed = {"params": "parameters", "total_params": "total_parameters", "definition_count": "definitions",
               "run_count": "runs" if cmd == "op" else "run_count"}
    metrics = [c for c in table.columns if c not in ("name", "depth", "node_id", "accounted")]
    assert {"exec_micros", "total_exec_micros", "params", "total_params", "float_ops", "run_count"} <= set(metrics)
    assert "requested_bytes" not in metrics  # not selected
    for col in metrics:
        assert table[col].dtype == pl.Int64 and table[col].null_count() == 0, col
        source = frame[renamed.get(col, col)].cast(pl.Int64)
        assert_series_equal(table[col], source.fill_null(0), check_names=False)
    if cmd in ("scope", "graph"):
        assert_series_equal(table["node_id"], frame["node_id"])


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_select_field_keeps_the_columns_its_line_prints(field):
    """With one select field, the table keeps exactly the metric columns whose values the scope
    lines print: a column is kept if and only if changing its values changes the lines."""
    frame = run_view(_profile("cnn"), "scope", {"max_depth": 4, "select": [field]}).frame
    kept = set(view_table("scope", frame, (field,)).columns) - {"name", "depth", "node_id", "accounted"}
    public = {"parameters": "params", "total_parameters": "total_params"}
    printed = set()
    for col in frame.columns:
        if public.get(col, col) in COLUMNS and col not in ("name", "depth", "node_id", "accounted"):
            changed = frame.with_columns(pl.col(col) + 1_000_000_007)  # prints differently in every unit
            if not tree_lines(changed, [field]).equals(tree_lines(frame, [field])):
                printed.add(public.get(col, col))
    assert kept == printed


def test_view_takes_tfprof_option_names_and_rejects_unknown_ones():
    prof = _profile("cnn")
    by_order = tfprof.view(prof, "op", order_by="micros", select="micros", max_depth=3)
    assert by_order.height == 4  # max_depth 3 shows rows 0..3
    assert by_order["exec_micros"].is_sorted(descending=True)
    with pytest.raises(OptionError, match="max_dept"):
        tfprof.view(prof, "scope", max_dept=3)
    with pytest.raises(OptionError, match="output"):
        tfprof.view(prof, "scope", output="file:outfile=x.txt")
    with pytest.raises(OptionError, match="view"):
        tfprof.view(prof, "timeline")


def test_trainable_params_by_scope_match_the_real_tool():
    """The params preset's root total is the trainable-parameter count tfprof reports."""
    prof = _profile("multistep")
    totals = json.loads((FIXTURES / "multistep" / "golden" / "totals.json").read_text())
    table = tfprof.view(prof, "scope", account_type_regexes=["_trainable_variables"], select=["params"], max_depth=10000)
    assert table["total_params"][0] == totals["trainable"]["total_parameters"] > 0


# ----------------------------------------------------------------------------- HTML


def test_view_result_html_escapes_the_report_and_lists_the_rows():
    result = run_view(_profile("cnn"), "code", {"max_depth": 3, "select": ["micros"]})
    page = result._repr_html_()
    assert "<module>" in result.text and "<module>" not in page
    assert "<pre style=" in page and html.escape(result.text) in page
    table = view_table("code", result.frame)
    for name in table["name"]:
        assert html.escape(name, quote=True) in page
    assert f"{table.height} rows" in page


def test_summary_html_summarises_the_profile(tmp_path):
    prof = _profile("multistep")
    store = tmp_path / "run <1> & co"  # a path that needs escaping
    tfprof.save(prof, store)
    page = tfprof.summarize(Profile.open(store))._repr_html_()
    assert html.escape(str(store)) in page and str(store) not in page
    counts = prof.row_counts()
    for name, n in counts.items():
        assert f"<th style=\"text-align:left\">{name}</th><td style=\"text-align:right\">{n:,}</td>" in page
    steps = prof.frame("steps")["step"].to_list()
    assert len(steps) == 3
    exec_us = prof.sql("select sum(duration_micros) as us from execs group by step order by step", output="polars")
    for us in exec_us["us"]:
        assert f">{int(us):,}<" in page  # each step's total time
    trainable = json.loads((FIXTURES / "multistep" / "golden" / "totals.json").read_text())["trainable"]
    assert f">{trainable['total_parameters']:,}<" in page


def test_sql_results_render_in_notebooks():
    """``Profile.sql`` returns Arrow by default (the interchange type); ``output="polars"``
    gives a frame that Jupyter shows as an HTML table, with the values escaped."""
    prof = _profile("cnn")
    q = "select name from nodes where name like '%<%' or name like 'resnet/logits/%' order by name limit 3"
    frame = prof.sql(q, output="polars")
    page = frame._repr_html_()
    assert frame.height > 0
    for name in frame["name"]:
        assert html.escape(name) in page


def test_an_unknown_table_is_named_in_a_tfprof_error():
    from tfprof.errors import TfprofError, UnknownTableError

    prof = tfprof.load(tfprof.sample_path())
    for call in (prof.table, prof.frame, prof.lazy):
        with pytest.raises(UnknownTableError, match="unknown table `nodez`; tables: nodes, ") as caught:
            call("nodez")
        assert isinstance(caught.value, TfprofError) and isinstance(caught.value, KeyError)
        assert str(caught.value).startswith("unknown table")  # not quoted as a KeyError's key


def test_a_summary_prints_as_text():
    summary = tfprof.summarize(tfprof.load(tfprof.sample_path()))
    text = str(summary)
    assert text == summary.text() and "Summary(" not in repr(summary)
    assert text.splitlines()[0].split()[:2] == ["nodes", "467"] and "tables:" in text
    assert repr(summary).startswith("tfprof summary (profile, in memory)\n")
