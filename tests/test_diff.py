"""``tfprof diff`` on real profile pairs (tests/fixtures/diff, made by tools/make_diff_fixtures.py):
the known change ranks first, the noise band leaves unchanged nodes alone, identical inputs give
an all-zero diff; the matching rule on hand-made tables; the Python, SQL and JSON surfaces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

import tfprof
from tfprof.api.diff import run_diff
from tfprof.queries import noise
from tfprof.queries.diff import diff_tables, with_paths
from tfprof.queries.paths import code_paths, path_parents

PAIRS = Path(__file__).parent / "fixtures" / "diff"
SCHEMAS = Path(__file__).parent.parent / "docs" / "schemas"
VIEWS = ("scope", "graph", "op", "code")


@pytest.fixture(scope="module")
def profiles() -> dict:
    return {name: tfprof.load(PAIRS / name / "profile.pb") for name in ("base", "again", "wide")}


def _changed(path: str) -> bool:
    """The rows the widened layer changes: in mlp/fc2 or the layer after it (forward, backward,
    update), and the scopes holding them."""
    return "fc2" in path or "mlp/out" in path


@pytest.mark.parametrize("cmd", ["scope", "graph", "op"])
def test_identical_inputs_give_an_all_zero_diff(profiles, cmd):
    d = run_diff(profiles["base"], profiles["base"], cmd, {"max_depth": 1000, "select": ["micros", "bytes", "params"]})
    assert d.frame.height > 3
    deltas = [c for c in d.frame.columns if c.endswith("_delta")]
    assert deltas and all(d.frame[c].abs().max() == 0 for c in deltas)
    assert set(d.frame["status"]) == {"both"}
    assert d.steps == (6, 6) and not d.frame["significant"].any()


def test_the_widened_layer_ranks_first(profiles):
    d = run_diff(profiles["base"], profiles["wide"], "scope", {"max_depth": 1000})
    leaves = d.frame.filter(pl.col("exec_micros_b") == pl.col("total_exec_micros_b"))  # nodes with no children
    top = leaves["path"].head(3).to_list()
    assert all(_changed(p) for p in top), top
    # the largest own change of all is in the changed layer, not in fc1
    by_self = d.frame.sort(pl.col("exec_micros_delta").abs(), descending=True)
    assert _changed(by_self["path"][0])
    op = run_diff(profiles["base"], profiles["wide"], "op", {})
    assert op.frame["path"][0] == "MatMul" and op.frame["exec_micros_delta"][0] > 0
    assert op.frame.filter(pl.col("path") == "MatMul")["significant"][0]


def test_widened_parameters_are_exact(profiles):
    d = run_diff(profiles["base"], profiles["wide"], "scope", {"max_depth": 1000, "select": ["params"]})
    row = d.frame.filter(pl.col("path") == "mlp/fc2/weights")
    assert row["params_a"][0] == 256 * 256 and row["params_b"][0] == 256 * 1024
    assert row["significant"][0]  # no variance across steps: any change counts
    fc1 = d.frame.filter(pl.col("path") == "mlp/fc1/weights")
    assert fc1["params_delta"][0] == 0 and not fc1["significant"][0]


def test_noise_band_leaves_an_unchanged_rerun_alone(profiles):
    for cmd in ("scope", "op"):
        d = run_diff(profiles["base"], profiles["again"], cmd, {"max_depth": 1000})
        assert d.steps == (6, 6)
        assert d.frame["total_exec_micros_delta" if cmd == "scope" else "exec_micros_delta"].abs().max() > 0  # noise
        assert not d.frame["significant"].any(), d.frame.filter("significant")["path"].to_list()


def test_step_against_step(profiles):
    d = run_diff(profiles["base"], None, "scope", {"step": 0, "max_depth": 1000}, against=5)
    assert d.compared_steps == (0, 5) and d.steps is None
    assert d.frame["significant"].null_count() == d.frame.height
    a = tfprof.view(profiles["base"], "scope", step=0, max_depth=1000).filter(pl.col("name") == "train")
    b = tfprof.view(profiles["base"], "scope", step=5, max_depth=1000).filter(pl.col("name") == "train")
    row = d.frame.filter(pl.col("path") == "train")
    assert row["total_exec_micros_a"][0] == a["total_exec_micros"][0]
    assert row["total_exec_micros_b"][0] == b["total_exec_micros"][0]
    with pytest.raises(tfprof.OptionError, match="--step"):
        run_diff(profiles["base"], None, "scope", {}, against=5)


def test_thresholds_keep_a_row_passing_in_either_side(profiles):
    base, wide = profiles["base"], profiles["wide"]
    d = run_diff(base, wide, "scope", {"max_depth": 1000, "min_micros": 100})
    for r in d.frame.iter_rows(named=True):
        assert max(r["total_exec_micros_a"] or 0, r["total_exec_micros_b"] or 0) >= 100
    full = run_diff(base, wide, "scope", {"max_depth": 1000})
    expect = full.frame.filter(pl.max_horizontal(pl.col("total_exec_micros_a").fill_null(0),
                                                 pl.col("total_exec_micros_b").fill_null(0)) >= 100)
    assert sorted(d.frame["path"]) == sorted(expect["path"])


def test_matching_rule_on_hand_made_tables():
    a = with_paths(pl.DataFrame({"name": ["x", "y", "z"], "depth": [0, 1, 1], "v": [10, 0, 5]}), "scope", keys=True)
    b = with_paths(pl.DataFrame({"name": ["x", "y", "w"], "depth": [0, 1, 1], "v": [15, 4, 7]}), "scope", keys=True)
    d = diff_tables(a, b, ["v"], order="name")
    rows = {r["path"]: r for r in d.iter_rows(named=True)}
    assert {p: r["status"] for p, r in rows.items()} == {"w": "added", "x": "both", "y": "both", "z": "removed"}
    assert rows["x"]["v_delta"] == 5 and rows["x"]["v_delta_pct"] == 50.0
    assert rows["y"]["v_delta_pct"] is None  # from 0: no relative change
    assert rows["z"]["v_b"] is None and rows["z"]["v_delta"] == -5 and rows["z"]["v_delta_pct"] == -100.0
    assert rows["w"]["v_a"] is None and rows["w"]["v_delta"] == 7
    assert diff_tables(a, b, ["v"], order="delta")["path"].to_list() == ["w", "x", "z", "y"]
    # both new in B (no Δ%): first, and between them tree order (B's display order)
    assert diff_tables(a, b, ["v"], order="delta_pct")["path"].to_list()[:2] == ["y", "w"]


def test_code_paths_follow_the_displayed_tree():
    names = pl.Series(["_TFProfRoot", "a", "b", "c", "b", "d"])
    parent_row = [-1, 0, 1, 2, 0, 4]  # as the engines return it
    assert code_paths(names, path_parents(parent_row)).to_list() == ["_TFProfRoot", "a", "a/b", "a/b/c", "b", "b/d"]
    table = pl.DataFrame({"name": names, "depth": [0, 1, 2, 3, 1, 2]})
    assert with_paths(table, "code", pl.Series(parent_row))["path"].to_list()[-1] == "b/d"
    with pytest.raises(ValueError, match="parent_row"):
        with_paths(table, "code")
    dup = with_paths(pl.DataFrame({"name": ["n", "n"], "depth": [1, 1]}), "graph")
    assert dup["occurrence"].to_list() == [0, 1]


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) of Student's t by integrating its density (trapezoids on a fine grid)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    x = np.linspace(0.0, t, 400_001)
    y = c * (1 + x * x / df) ** (-(df + 1) / 2)
    return 0.5 + float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2)


@pytest.mark.parametrize("df", [2, 3, 5, 8, 10, 20, 30, 60])
def test_t_table_is_the_9995_quantile(df):
    assert _t_cdf(float(noise.t_critical(np.array([df]))[0]), df) == pytest.approx(1 - noise.ALPHA / 2, abs=2e-6)


def test_welch_band():
    def sig(a, b):
        f = pl.DataFrame({"a_sum": [float(sum(a))], "a_sumsq": [float(sum(x * x for x in a))],
                          "b_sum": [float(sum(b))], "b_sumsq": [float(sum(x * x for x in b))]})
        return noise.band(f, "a_", "b_", len(a), len(b), "v")["v_significant"][0]

    assert not sig([5, 5, 5], [5, 5, 5])
    assert sig([5, 5, 5], [6, 6, 6])  # no variance: any change is outside a zero-width band
    assert not sig([10, 14, 9, 12], [11, 15, 10, 13])  # shifted by one, far inside the noise
    assert sig([10, 11, 10, 11, 10, 11], [30, 31, 30, 31, 30, 31])


def test_python_api_and_sql(profiles):
    frame = tfprof.diff(profiles["base"], profiles["wide"], "op", max_depth=100)
    assert frame["path"][0] == "MatMul"
    d = run_diff(profiles["base"], profiles["wide"], "op", {"max_depth": 100})
    got = d.sql("select path, exec_micros_delta from diff where status = 'both' order by exec_micros_delta desc limit 1")
    assert got.row(0) == ("MatMul", d.frame["exec_micros_delta"][0])
    with pytest.raises(tfprof.QueryError):
        d.sql("copy diff to 'x.csv'")


@pytest.mark.parametrize("cmd", VIEWS)
def test_json_document_follows_its_schema(profiles, cmd):
    schema = json.loads((SCHEMAS / "diff.schema.json").read_text())
    opts = {"max_depth": 6, "select": ["micros", "params"]}
    if cmd == "code":  # the pairs have no code traces: the sample profile compares with itself
        prof = tfprof.load(tfprof.sample_path())
        doc = run_diff(prof, prof, cmd, opts).document()
    else:
        doc = run_diff(profiles["base"], profiles["wide"], cmd, opts).document()
    jsonschema.validate(json.loads(json.dumps(doc)), schema)
    assert doc["rows"] and doc["view"] == cmd
    broken = {**doc, "rows": [{**doc["rows"][0], "status": "renamed"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)
