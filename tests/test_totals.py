"""Table totals equal the real tfprof's root totals (tests/fixtures/*/golden/totals.json).

The golden numbers are the `_TFProfRoot` fields the real tool returned for a scope view that
accounts every node (`.*`) or only `_trainable_variables`, once per step and for step -1.
"""

from __future__ import annotations

from conftest import FIXTURES, golden_totals, raw_inputs

import tfprof
from tfprof.queries.totals import totals

ROOT_FIELDS = {
    "total_run_count": "run_count",
    "total_exec_micros": "exec_micros",
    "total_accelerator_exec_micros": "accelerator_exec_micros",
    "total_cpu_exec_micros": "cpu_exec_micros",
    "total_requested_bytes": "requested_bytes",
    "total_peak_bytes": "peak_bytes",
    "total_residual_bytes": "residual_bytes",
    "total_output_bytes": "output_bytes",
    "total_parameters": "params",
    "total_float_ops": "float_ops",
}


def _profiles(name: str):
    yield "raw binary", tfprof.load(**raw_inputs(name))
    yield "raw text", tfprof.load(**raw_inputs(name, graph="graph.pbtxt"))
    if (FIXTURES / name / "profile.pb").is_file():
        yield "profile", tfprof.load(profile_path=FIXTURES / name / "profile.pb")


def _scope_parents(names: list[str]) -> int:
    """Synthetic scope parents: proper prefixes (cut at the last '/') that are not nodes."""
    known, parents = set(names), set()
    for n in names:
        while "/" in n:
            n = n.rsplit("/", 1)[0]
            if n not in known:
                parents.add(n)
    return len(parents)


def test_totals_match_real_tool(fixture_name):
    gold = golden_totals(fixture_name)
    for source, prof in _profiles(fixture_name):
        assert prof.row_counts()["nodes"] == gold["num_nodes"], source
        assert prof.frame("steps")["step"].to_list() == gold["steps"], source
        for step, expected in gold["all"].items():
            got = totals(prof, int(step))
            mine = {field: got[col] for field, col in ROOT_FIELDS.items()}
            want = {field: expected[field] for field in ROOT_FIELDS}
            assert mine == want, f"{fixture_name} {source} step {step}"
            # scope view's definition count: every node plus one per synthetic scope parent.
            names = prof.frame("nodes")["name"].to_list()
            assert got["nodes"] + _scope_parents(names) == expected["total_definition_count"]


def test_trainable_params_match_real_tool(fixture_name):
    gold = golden_totals(fixture_name)["trainable"]
    for source, prof in _profiles(fixture_name):
        got = totals(prof, -1, op_type="_trainable_variables")
        assert got["params"] == gold["total_parameters"], source
        assert got["float_ops"] == gold["total_float_ops"], source
        assert got["exec_micros"] == gold["total_exec_micros"], source
        assert got["requested_bytes"] == gold["total_requested_bytes"], source


def test_flags_match_real_tool(fixture_name):
    gold = golden_totals(fixture_name)
    for source, prof in _profiles(fixture_name):
        info = prof.frame("info").row(0, named=True)
        assert info["has_trace"] == gold["has_trace"], source
        assert info["miss_accelerator_stream"] == gold["miss_accelerator_stream"], source
