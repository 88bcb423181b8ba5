"""A view is a spec: what it means is data (``tfprof.queries.spec``), the engines only execute it."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import NODE_TIMES_SQL

import tfprof
from tfprof.api import run as api_run
from tfprof.queries.engine import displayed
from tfprof.queries.options import Options
from tfprof.queries.spec import BUILTIN, TreeSpec, tree_spec

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_toy_view_is_one_spec(monkeypatch):
    """Grouping by device: one TreeSpec in the registry, no engine change; its rows are the
    devices with the sums of their nodes' times, as SQL over the tables computes them."""
    doc = "device: The nodes are grouped by the device they ran on."
    monkeypatch.setitem(api_run.VIEWS, "device", TreeSpec(name="device", layout="groups", group_key="canonical_device",
                                                            doc=doc))
    prof = tfprof.load(FIXTURES / "gpu_tiny" / "profile.pb")
    result = api_run.run_view(prof, "device", {"select": ["micros", "occurrence"], "max_depth": 100, "order_by": "micros"})
    want = prof.sql(
        NODE_TIMES_SQL + """
        select canonical_device as device, sum(coalesce(acc + cpu, 0)) as micros, count(*) as nodes
        from nodes left join per_node using (node_id) where canonical_device is not null
        group by 1 order by micros desc, device
        """
    )
    got = result.frame
    assert got["name"].to_list() == want["device"].to_list()
    assert got["exec_micros"].to_list() == want["micros"].to_list()
    assert got["definitions"].to_list() == want["nodes"].to_list()
    assert len(want) == 2  # a CPU and a GPU: the grouping is not trivial
    for device in want["device"]:
        assert device in result.text
    assert "\nDoc:\n" + doc + "\n" in result.text and "op: The nodes are" not in result.text


def test_a_spec_states_each_option_once():
    opts = Options.from_tfprof({
        "max_depth": 4, "min_micros": 7, "min_occurrence": 2, "order_by": "occurrence",
        "account_type_regexes": ["MatMul"], "start_name_regexes": [".*"], "trim_name_regexes": ["_TFProfRoot"],
        "show_name_regexes": ["a.*"], "hide_name_regexes": ["b"], "account_displayed_op_only": True,
    })
    scope = tree_spec(BUILTIN["scope"], opts)
    op = tree_spec(BUILTIN["op"], opts)
    code = tree_spec(BUILTIN["code"], opts)
    assert (scope.max_depth, scope.account, scope.start, scope.show, scope.hide) == (4, ("MatMul",), None, ("a.*",), ("b",))
    assert scope.thresholds == (("total_exec_micros", 7), ("run_count", 2))
    assert op.thresholds == (("total_exec_micros", 7), ("definitions", 2))
    assert code.thresholds == (("total_exec_micros", 7),)  # the code view has no occurrence threshold
    assert scope.order == ("name",) and op.order == ("definitions",) and code.order == ("definitions",)
    assert scope.displayed_only and op.displayed_only and not code.displayed_only  # code ignores it
    assert not scope.root_visits and code.root_visits  # the root is trimmed, but a code tree always starts


@pytest.mark.parametrize("cmd", ["scope", "graph", "op", "code"])
def test_engines_read_the_spec_not_the_options(cmd):
    """A spec changed by hand changes the view: the engine takes nothing from the options it was built from."""
    prof = tfprof.load(tfprof.sample_path())
    opts = Options.from_tfprof({"max_depth": 100, "select": ["micros"]})
    spec = tree_spec(BUILTIN[cmd], opts)
    full = displayed(prof, spec)
    fewer = displayed(prof, TreeSpec(**{**spec.__dict__, "max_depth": 1}))
    assert fewer.rows.height < full.rows.height


@pytest.mark.parametrize("cmd", ["scope", "graph", "code"])
def test_the_engines_return_the_trees_shape_the_report_prints(cmd):
    """Each row's ``level`` and ``parent_row`` are the tree the report draws: read back here from
    the printed indentation with a stack walk, independently of the engines; ``lines`` are the
    report's row lines."""
    prof = tfprof.load(FIXTURES / "cnn" / "profile.pb")
    for options in ({"max_depth": 4}, {"max_depth": 100, "order_by": "micros", "min_micros": 3}):
        result = api_run.run_view(prof, cmd, options, full_rows=True)
        body = result.text.split("\n")
        rows = body[next(i for i, line in enumerate(body) if line.startswith("node name |")) + 1:]
        rows = [line for line in rows if line]
        assert rows == result.lines and len(rows) == result.frame.height > 1
        levels, parents, stack = [], [], []
        for i, line in enumerate(rows):
            level = (len(line) - len(line.lstrip(" "))) // 2
            stack = stack[:level]
            parents.append(stack[-1] if stack else -1)
            levels.append(level)
            stack.append(i)
        assert result.frame["level"].to_list() == levels
        assert result.frame["parent_row"].to_list() == parents
