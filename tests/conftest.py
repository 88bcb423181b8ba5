"""Shared test helpers: the fixture profiles made by tools/make_fixtures.py with real TensorFlow."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PROFILE_FIXTURES = sorted(
    p.name for p in FIXTURES.iterdir() if (p / "graph.pb").is_file() and (p / "golden" / "totals.json").is_file()
)


# The tests run on the compiled kernels (tfprof.kernels): the reference paths have their own
# tests, and no test run should start a background compilation. Child processes inherit it.
os.environ.setdefault("TFPROF_ENGINE", "kernels")
# Commands run in their own processes, not through a resident server (tests/test_server.py
# turns it on for its own tests).
os.environ["TFPROF_SERVER"] = "0"


def run_metas(name: str) -> list[str]:
    """The fixture's RunMetadata files in step order."""
    files = sorted((FIXTURES / name).glob("run_meta_*.pb"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    return [str(p) for p in files]


def raw_inputs(name: str, graph: str = "graph.pb") -> dict:
    """The raw tfprof inputs of fixture ``name`` (graph, every step, op log)."""
    d = FIXTURES / name
    return {"graph_path": str(d / graph), "run_meta_path": run_metas(name), "op_log_path": str(d / "op_log.pb")}


def golden_totals(name: str) -> dict:
    return json.loads((FIXTURES / name / "golden" / "totals.json").read_text())


def plain(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns decoded, so tables compare by value."""
    cols = []
    for col in table.columns:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def assert_tables_equal(a: pa.Table, b: pa.Table, name: str = "") -> None:
    """Equal schemas and equal values row by row; on failure, show the first differing row."""
    assert a.schema.equals(b.schema), f"{name}: schemas differ\n{a.schema}\n---\n{b.schema}"
    pa_, pb = plain(a), plain(b)
    if pa_.equals(pb):
        return
    assert pa_.num_rows == pb.num_rows, f"{name}: {pa_.num_rows} rows vs {pb.num_rows}"
    ra, rb = pa_.to_pylist(), pb.to_pylist()
    first = next(i for i, (x, y) in enumerate(zip(ra, rb)) if x != y)
    raise AssertionError(f"{name}: row {first} differs:\n{ra[first]}\n{rb[first]}")


@pytest.fixture(params=PROFILE_FIXTURES)
def fixture_name(request) -> str:
    return request.param


# Each node's time at step -1, as SQL over a profile's tables: per step the accelerator and cpu
# records summed, then each divided (integer) by the number of steps the node ran in. Columns
# node_id, acc, cpu; a query goes on after it (`NODE_TIMES_SQL + "select ... from per_node"`).
NODE_TIMES_SQL = """
with per_step as (
  select node_id, step,
         sum(case when kind = 'accelerator' then duration_micros else 0 end) as acc,
         sum(case when kind = 'cpu' then duration_micros else 0 end) as cpu
  from execs group by node_id, step),
runs as (select node_id, count(*) as n from node_steps group by node_id),
per_node as (
  select node_id, sum(acc) // any_value(n) as acc, sum(cpu) // any_value(n) as cpu
  from per_step join runs using (node_id) group by node_id)
"""

