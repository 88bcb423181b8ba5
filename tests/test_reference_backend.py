"""The fast engine held equal to the reference backend (``tfprof.queries.reference``: DuckDB SQL
and polars, no kernels): for every golden case of the four views, and for random profiles and
options, the same printed rows (names, order, depth, indent, self and total values) and the
same root totals.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_profiles import load, profiles

import tfprof
from tfprof.api import run_view
from tfprof.errors import OptionError, TfprofError
from tfprof.queries.code import code
from tfprof.queries.graph import graph
from tfprof.queries.op import op_view
from tfprof.queries.options import Options
from tfprof.queries.reference import run, sql_backend
from tfprof.queries.reference.sql import Sql
from tfprof.queries.scope import scope
from tfprof.queries.spec import BUILTIN, tree_spec

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"
VIEWS = ("scope", "graph", "op", "code")
# What a row prints about a node but neither backend computes (attached after display).
DETAILS = {"accounted", "node_id", "tid", "shape", "device", "devices", "op_types", "input_shapes"}


def engine(prof: tfprof.Profile, cmd: str, opts: Options) -> tuple[pl.DataFrame, dict[str, int]]:
    """Today's engine: the printed rows (without the root row: their parents one row up, -1 under
    it) and the root's totals."""
    if cmd == "op":
        view = op_view(prof, opts)
        return view.rows, dict(view.root)
    frame = {"scope": scope, "graph": graph, "code": lambda p, o: code(p, o)[0]}[cmd](prof, opts)
    root = {c: int(frame[c][0]) for c in frame.columns if c.startswith("total_")}
    return frame[1:].with_columns(pl.col("parent_row") - 1), root


def assert_same(prof: tfprof.Profile, cmd: str, opts: Options, what: str) -> int:
    """Run both backends; fail on any difference. Returns the number of rows compared."""
    try:
        want, want_root = engine(prof, cmd, opts)
    except Exception as error:  # e.g. a code view without code traces: the reference agrees
        with pytest.raises(type(error)):
            run(prof, tree_spec(BUILTIN[cmd], opts))
        return 0
    got = run(prof, tree_spec(BUILTIN[cmd], opts))
    columns = [c for c in want.columns if c not in DETAILS]
    missing = [c for c in columns if c not in got.rows.columns]
    assert not missing, (what, "reference lacks", missing)
    a = want.select(columns).with_columns(pl.col("name").cast(pl.String))
    b = got.rows.select(columns).cast(a.schema)
    if not a.equals(b):
        names = (a["name"].to_list(), b["name"].to_list())
        detail = "different rows" if names[0] != names[1] else "different values"
        pytest.fail(f"{what}: {detail}\nengine:\n{a}\nreference:\n{b}")
    assert {k: int(v) for k, v in want_root.items()} == {k: got.root.get(k) for k in want_root}, what
    return a.height


def _golden_cases():
    for case_file in sorted(GOLDEN.glob("*/cases.json")):
        for case in json.loads(case_file.read_text()):
            if case["cmd"] in VIEWS:
                yield pytest.param(case_file.parent.name, case, id=f"{case_file.parent.name}-{case['id']}")


_PROFILES: dict[str, tfprof.Profile] = {}


def _fixture(name: str) -> tfprof.Profile:
    if name not in _PROFILES:
        _PROFILES[name] = tfprof.load(profile_path=FIXTURES / name / "profile.pb")
    return _PROFILES[name]


@pytest.mark.parametrize("fixture,case", list(_golden_cases()))
def test_golden_case(fixture, case):
    options = {k: v for k, v in case["options"].items() if k != "output"}
    try:
        opts = Options.from_tfprof(options)
    except OptionError:  # options our API refuses (test_golden checks that): nothing to run
        return
    assert_same(_fixture(fixture), case["cmd"], opts, f"{fixture} {case['id']}")


REGEXES = st.sampled_from([
    [".*"], ["a.*"], [".*dense.*"], ["b", "a/b.*"], [".*grad.*"], [".*:.*"], ["conv|dense"], ["a/.*/b"],
])
OPTIONS = st.fixed_dictionaries({
    "max_depth": st.sampled_from([0, 1, 2, 3, 4, 100]),
    "step": st.sampled_from([-1, 0, 1]),
    "order_by": st.sampled_from(["", "name", "depth", "micros", "bytes", "peak_bytes", "params", "float_ops",
                                 "occurrence", "cpu_micros"]),
    "account_type_regexes": st.sampled_from([[".*"], ["MatMul|Conv2D"], ["VariableV2"], ["gpu"], ["cpu", "Add"],
                                             ["_kTFScopeParent"], ["nothing"]]),
    "start_name_regexes": st.one_of(st.just([".*"]), REGEXES, st.just([])),
    "trim_name_regexes": st.one_of(st.just([]), REGEXES),
    "show_name_regexes": st.one_of(st.just([".*"]), REGEXES),
    "hide_name_regexes": st.one_of(st.just([]), REGEXES),
    "min_micros": st.sampled_from([0, 0, 100, 3000]),
    "min_bytes": st.sampled_from([0, 0, 10**5]),
    "min_params": st.sampled_from([0, 0, 5]),
    "min_float_ops": st.sampled_from([0, 0, 200]),
    "min_occurrence": st.sampled_from([0, 0, 1, 2]),
    "account_displayed_op_only": st.booleans(),
    "select": st.just(["micros", "bytes", "params", "float_ops", "occurrence"]),
})
COMPARED = {"profiles": 0, "views": 0}


@given(spec=profiles(), options=OPTIONS, views=st.lists(st.sampled_from(VIEWS), min_size=1, max_size=4, unique=True))
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_random_profiles(spec, options, views):
    opts = Options.from_tfprof(options)
    with tempfile.TemporaryDirectory() as tmp:
        prof = load(spec, Path(tmp))
        for cmd in views:
            assert_same(prof, cmd, opts, f"{cmd} {options}")
            COMPARED["views"] += 1
    COMPARED["profiles"] += 1


@pytest.mark.parametrize("cmd", ["scope", "graph", "code"])
def test_layout_order(cmd):
    opts = Options.from_tfprof({"order_by": "", "max_depth": 4, "select": ["micros"]})
    assert assert_same(_fixture("cnn"), cmd, opts, f"{cmd} order_by ''") > 0


def _report(prof: tfprof.Profile, cmd: str, options: dict) -> tuple:
    try:
        view = run_view(prof, cmd, options)
    except TfprofError as error:
        return (type(error).__name__,)
    return view.text, view.notes


@pytest.mark.parametrize("fixture,case", [p for p in _golden_cases() if p.values[1]["cmd"] in ("op", "code")])
def test_op_and_code_reports_through_the_reference_backend(fixture, case):
    """Inside ``sql_backend`` (what --engine spark uses) the op and code views run on the
    reference backend, and print what their local engines print: the report and its notes."""
    options = {k: v for k, v in case["options"].items() if k != "output"}
    local = _report(_fixture(fixture), case["cmd"], options)
    calls = []

    class Counting(Sql):
        def run(self, name, params=None, **frames):
            calls.append(name)
            return super().run(name, params, **frames)

    with sql_backend(Counting):
        assert _report(_fixture(fixture), case["cmd"], options) == local
    assert calls or len(local) == 1  # the SQL did run (unless both refused the options)
