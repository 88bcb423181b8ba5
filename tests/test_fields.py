"""The select-field registry (views/fields.py) is the one source of every legend, doc line and cell.

Each field selected alone shows its legend and its cell and nothing else; a field added to the
registry (monkeypatched) shows up in the legend, the doc block, the polars lines, the byte
writer's lines, the code lines and the op lines, at the place its rank gives it.
"""

from __future__ import annotations

import polars as pl
import pytest

from tfprof.queries.options import SELECT_FIELDS
from tfprof.views import fields
from tfprof.views.columns import tree_lines, tree_lines_polars
from tfprof.views.fields import FIELDS, Field, Row
from tfprof.views.text import doc_block, multi_legend, op_line, tree_legend

COLUMNS = [f.column for f in fields.METRICS.values()] + ["run_count", "definition_count"]


def _frame(extra: dict | None = None) -> pl.DataFrame:
    """Two rows, every column a scope/graph/code line reads; each metric's values are distinct."""
    cols = {}
    for k, c in enumerate(COLUMNS):
        cols[c] = [k + 1, 0]
        cols["total_" + c] = [1000 * (k + 1), 7]
    return pl.DataFrame(
        {"name": ["root", "a/b"], "level": [0, 1], "accounted": [True, False], **cols, **(extra or {}),
         "shape": [[3, 4], []], "device": ["/gpu:0", None], "devices": [["/gpu:0", "/cpu:0"], []],
         "op_types": [["MatMul"], None],
         "input_shapes": [[{"input_idx": 0, "dims": [2, 2]}], []]},
    )  # fmt: skip


def _items(line: str) -> str:
    return line[line.index("(") + 1 : -1]


def _op_row(extra: dict | None = None) -> tuple[dict, dict]:
    row = {"name": "MatMul", "devices": ["/gpu:0"], "op_types": ["MatMul"], "runs": 3, "definitions": 2}
    root = {}
    for k, c in enumerate(COLUMNS):
        row[c], row["total_" + c], root["total_" + c] = k + 1, 10 * (k + 1), 100 * (k + 1)
    row.update(extra or {})
    return row, {**root, **{"total_" + c: 1000 for c in extra or {}}}


def test_the_registry_holds_every_select_field_tfprof_knows():
    assert set(FIELDS) == set(SELECT_FIELDS)
    assert all(f.doc for f in FIELDS.values())
    assert len({f.rank[0] for f in FIELDS.values() if f.legend}) == len([f for f in FIELDS.values() if f.legend])


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_a_field_alone_shows_its_legend_and_its_cell(name):
    field = FIELDS[name]
    frame = _frame()
    assert all(line in doc_block("scope", [name]) for line in field.doc)
    if field.legend is None:  # tensor_value: a note under the line, nothing in it
        assert multi_legend([name]) == tree_legend([name]) == "node name | \n"
        assert tree_lines(frame, [name]).to_list() == ["root ()", "  a/b ()"]
        return
    shown = [f.name for f in FIELDS.values() if f.shown([name])]  # micros shows the other two times
    want_tree = " | ".join(FIELDS[s].legend for s in sorted(shown, key=lambda s: FIELDS[s].rank[0]))
    assert tree_legend([name]) == f"node name | {want_tree}\n"
    assert field.legend_for(True) in multi_legend([name])
    for code in (False, True):
        got = tree_lines(frame, [name], code=code)
        assert got.equals(tree_lines_polars(frame, [name], code=code))
        assert _items(got[0]), f"{name} wrote no cell"  # the first row has a value for every cell
        if field.column:  # the own and total values of this metric, nothing else
            root = _items(got[0])
            assert root.count("/") == len(shown)
            assert field.fmt(frame["total_" + field.column][0]) in root
            assert field.fmt(frame[field.column][0]) in root
    if field.op:
        row, root = _op_row()
        assert op_line(row, root, [name]).strip() != "MatMul"


def test_a_field_added_to_the_registry_appears_everywhere(monkeypatch):
    """The registry is the single source: a new entry needs no other change to be printed."""
    answer = Field(
        "answer", ("answer: a field added by this test.",), "the answer", "answers given", "answers", "number",
        tree=((("own", "answers", "number"), ("lit", "/"), ("val", "total_answers", "number"), ("lit", " ans")),),
        code=((("lit", "code:"), ("val", "total_answers", "number")),),
        op=("pct", "total", "answers"),
        rank=(0.5, 3.5),  # scope/graph: after params; op/code: after the byte fields, before time
    )  # fmt: skip
    monkeypatch.setitem(FIELDS, "answer", answer)
    select = ["answer", "params", "bytes", "micros", "occurrence"]
    legend = tree_legend(select)
    assert legend.startswith("node name | # parameters | the answer | requested bytes |")
    assert "| output bytes" not in legend
    assert multi_legend(select).startswith("node name | requested bytes | answers given | total execution time |")
    assert "answer: a field added by this test." in doc_block("scope", select)

    frame = _frame({"answers": [42_000, 5], "total_answers": [1_234_567, 9]})
    for lines in (tree_lines(frame, select), tree_lines_polars(frame, select)):
        assert lines[0].startswith("root (3x4, 1/1.00k params, 42.00k/1.23m ans, ")
        assert lines[1].startswith("  a/b (--/7 params, --/9 ans, ")
    for lines in (tree_lines(frame, select, code=True), tree_lines_polars(frame, select, code=True)):
        assert lines[0].startswith("root (3B/3.00KB, code:1.23m, 7us/7.00ms, ")
    row, root = _op_row({"answers": 42, "total_answers": 500})
    assert "42 answers (50.00%, 4.20%)" in op_line(row, root, select)

    monkeypatch.delitem(FIELDS, "answer")
    assert "the answer" not in tree_legend(select) and "ans" not in tree_lines(frame, select)[0]


def test_a_row_item_without_its_column():
    """A ``Row`` item whose column the frame lacks is left out, or replaced by its ``missing``."""
    frame = _frame().drop("device", "input_shapes")
    items = fields.cells(["device", "input_shapes"], "tree", frame.columns)
    assert items == [((("lit", ""),), None)]
    assert isinstance(FIELDS["device"].tree[0], Row)
    assert tree_lines(frame, ["device", "input_shapes"]).to_list() == ["root ()", "  a/b ()"]


def test_time_fields_follow_the_registry():
    assert fields.time_fields(["micros"]) == ["micros", "accelerator_micros", "cpu_micros"]
    assert fields.time_fields(["cpu_micros", "bytes"]) == ["cpu_micros"]
