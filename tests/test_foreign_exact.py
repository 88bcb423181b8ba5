"""Foreign profiles keep their own time resolution through every sum (tfprof.queries.ticks): each total a view
prints equals, to the printed digit, the sum of the raw file's exact durations, computed here by an independent walk
(``json``/``gzip`` and the protobuf runtime, no tfprof reader); only the printed value is rounded.

Rounding each execution to whole µs before summing — what the readers did before — is shown to move these totals,
so the tests can tell the two apart.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import polars as pl
import pytest
from foreign_expect import hlo_op_names, load_xspace, subtract_children
from test_foreign_ingest import FOREIGN, TORCH, cli, load, torch_self_ns

from tfprof.api import run_view
from tfprof.views.columns import format_column
from tfprof.views.units import fmt_time

XSPACES = ["jax_mlp.xplane.pb", "tf2_keras.xplane.pb"]


def printed(ns: int) -> str:
    """How tfprof prints a time of ``ns`` nanoseconds, rounding only the printed digits (written out here on
    purpose, apart from tfprof.views.units)."""
    us = round(ns / 1000)
    if us < 1000:
        return f"{us}us"
    return f"{ns / 1e6:.2f}ms" if us < 1_000_000 else f"{ns / 1e9:.2f}sec"


def xspace_self_ns(name: str) -> dict[int, Counter]:
    """step -> op type -> sum of self ns over the op events of an XSpace: an op event's span less the spans of the
    op events directly inside it on its line. JAX: events with an ``hlo_op`` stat, typed by the instruction's
    opcode in the program's HLO; TensorFlow 2: events named ``<path>:<type>`` whose display name is the type.
    Steps: JAX's ``step_num`` stats; else each ``tf_function_call`` starts the next step."""
    space = load_xspace(FOREIGN / name)
    opcodes: dict[str, str] = {}
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for meta in plane.event_metadata.values():
            for s in meta.stats:
                if names.get(s.metadata_id) == "Hlo Proto":
                    for comp in hlo_op_names(s.bytes_value).values():
                        opcodes.update({op: code for op, (code, _) in comp.items()})
    ops, marks, calls = [], [], []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events:
                meta = plane.event_metadata[e.metadata_id]
                stats = {names.get(s.metadata_id): s for s in (*meta.stats, *e.stats)}
                start = line.timestamp_ns + e.offset_ps // 1000
                span = [start, start + e.duration_ps // 1000, None, e.duration_ps // 1000, (plane.name, line.id)]
                if "hlo_op" in stats:
                    hlo = stats["hlo_op"]
                    op = hlo.str_value or plane.stat_metadata[hlo.ref_value].name
                    span[2] = opcodes[op]
                elif meta.display_name and meta.name.endswith(":" + meta.display_name):
                    span[2] = meta.display_name
                if span[2] is not None:
                    ops.append(span)
                if "step_num" in stats:
                    marks.append((start, stats["step_num"].int64_value or stats["step_num"].uint64_value))
                elif "tf_function_call" in stats:
                    calls.append(start)
    if not marks:
        marks = [(s, i) for i, s in enumerate(sorted(calls))]
    firsts = sorted({n: s for s, n in sorted(marks, reverse=True)}.items(), key=lambda kv: kv[1])
    by_line = defaultdict(list)
    for span in ops:
        by_line[span[4]].append(span)
    out: dict[int, Counter] = defaultdict(Counter)
    for spans in by_line.values():
        for start, _, op, self_ns, _ in subtract_children(spans):
            step = next((n for n, s in reversed(firsts) if s <= start), firsts[0][0] if firsts else 0)
            out[step][op] += max(self_ns, 0)
    return out


def self_ns(name: str) -> dict[int, Counter]:
    return torch_self_ns(name) if name in TORCH else xspace_self_ns(name)


def op_view_times(text: str) -> dict[str, str]:
    """op type -> the printed self time of each op-view line (``select micros``: the first item)."""
    rows = text.split("Profile:\n", 1)[1].splitlines()[1:]  # after the legend
    out = {}
    for line in rows:
        match = re.match(r"(.+?)\s+(\S+) \(", line)
        if match:
            out[match.group(1)] = match.group(2)
    return out


ALL = TORCH + XSPACES


@pytest.mark.parametrize("name", ALL)
def test_each_step_of_the_op_view_prints_the_exact_sum_per_op_type(name):
    want = self_ns(name)
    prof = load(name)
    assert sorted(want) == prof.frame("steps")["step"].to_list()
    for step, per_op in want.items():
        text = run_view(prof, "op", {"step": step, "select": ["micros"], "max_depth": 10_000,
                                     "order_by": "micros"}).text
        got = {op: t for op, t in op_view_times(text).items() if op in per_op or t != "0us"}  # (memory-only nodes)
        assert got == {op: printed(ns) for op, ns in per_op.items()}, step
        # and in that order: by exact time, most first
        exact = sorted(per_op.items(), key=lambda kv: -kv[1])
        assert [n for n, _ in exact if per_op[n]] == [n for n in got if per_op[n]]


@pytest.mark.parametrize("name", ALL)
def test_scope_root_of_each_step_is_the_exact_sum(name):
    want = self_ns(name)
    prof = load(name)
    for step, per_op in want.items():
        result = run_view(prof, "scope", {"step": step, "max_depth": 0, "select": ["micros"]})
        line = result.text.split("Profile:\n", 1)[1].splitlines()[1]
        assert line.startswith(f"_TFProfRoot (--/{printed(sum(per_op.values()))}, "), line
        assert result.frame["total_exec_micros"][0] * 1000 == pytest.approx(sum(per_op.values()), abs=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_step_minus_one_is_time_per_step_of_the_capture(name):
    """-step -1 of a foreign profile: each node's total over the capture divided by its number of steps, so the
    root is the capture's total per step (to the ns each node's division drops) and the header says so."""
    want = self_ns(name)
    prof = load(name)
    steps = len(want)
    total = sum(sum(c.values()) for c in want.values())
    nodes = prof.row_counts()["nodes"]
    result = run_view(prof, "scope", {"max_depth": 0, "select": ["micros"]})
    got_ns = result.frame["total_exec_micros"][0] * 1000
    assert total / steps - nodes <= got_ns <= total / steps + 1e-6
    assert f"Times are per step of the capture: each node's total over its {steps} steps divided by {steps}" in \
        result.text
    own = run_view(load_own(), "scope", {"max_depth": 0})
    assert "Times are per step" not in own.text


def load_own():
    import tfprof

    return tfprof.load(tfprof.sample_path())


def test_rounding_each_execution_first_moves_the_totals():
    """The tests above can fail: summing executions rounded to whole µs, as before, prints other numbers."""
    moved = 0
    for name in ALL:
        for step, per_op in self_ns(name).items():
            prof = load(name)
            rounded = prof.sql(f"SELECT sum(duration_micros) AS us FROM execs WHERE step = {step}")["us"][0]
            moved += printed(sum(per_op.values())) != printed(int(rounded) * 1000)
    assert moved > 0


@pytest.mark.parametrize("name", ALL)
def test_time_thresholds_compare_exact_times_in_microseconds(name):
    """``-min_micros L`` keeps a row of L µs or more, exactly: one of (L-1) µs and a fraction goes, though it
    prints as L µs where its fraction rounds up."""
    options = {"max_depth": 4, "select": ["micros"]}
    every = run_view(load(name), "scope", options).frame
    totals = every["total_exec_micros"].to_list()
    below = sorted(v for v in totals[1:] if v != int(v))[len(totals) // 2]
    limit = int(below) + 1  # the whole µs just above an exact time
    kept = run_view(load(name), "scope", {**options, "min_micros": limit}).frame
    assert kept["name"].to_list()[1:] == [n for n, v in zip(every["name"], totals) if v >= limit][1:]
    assert below not in kept["total_exec_micros"].to_list()[1:]


def test_the_cli_prints_the_same_exact_numbers():
    name = TORCH[0]
    step, per_op = max(self_ns(name).items())
    proc = cli("op", "--profile_path", str(FOREIGN / name), "--step", str(step), "--select", "micros",
               "--max_depth", "10000", "--order_by", "micros")
    assert proc.returncode == 0, proc.stderr
    got = {op: t for op, t in op_view_times(proc.stdout).items() if op in per_op or t != "0us"}
    assert got == {op: printed(ns) for op, ns in per_op.items()}


@pytest.mark.parametrize("ns", [0, 499, 500, 1500, 2500, 999_499, 999_500, 999_999, 1_234_567, 999_999_499,
                                999_999_500, 3_610_000_000, 12_345_678_901])
def test_times_in_ns_print_with_tfprofs_units(ns):
    assert fmt_time(ns / 1000) == printed(ns)
    assert format_column(pl.Series([ns / 1000]), "time")[0] == printed(ns)
    assert format_column(pl.Series([ns]), "time_ns")[0] == printed(ns)


def test_whole_microseconds_print_as_before():
    values = [0, 1, 999, 1000, 1234, 999_999, 1_000_000, 3_610_000]
    assert [fmt_time(v) for v in values] == ["0us", "1us", "999us", "1.00ms", "1.23ms", "1000.00ms", "1.00sec",
                                             "3.61sec"]


@pytest.mark.parametrize("name", [TORCH[0], XSPACES[0]])
def test_tables_and_protos_carry_the_exact_and_the_whole_microseconds(name):
    want = self_ns(name)
    step = max(want)
    result = run_view(load(name), "scope", {"step": step, "max_depth": 0, "select": ["micros"]}, full_rows=True)
    total = sum(want[step].values())
    assert result.frame["total_exec_micros"][0] == pytest.approx(total / 1000, abs=1e-9)
    assert result.proto.total_exec_micros == round(total / 1000)  # GraphNodeProto's fields are whole µs


def test_a_catalog_sums_foreign_and_own_runs_in_ns(tmp_path):
    """Runs of both units aggregate in the finer one: the sum's root is the runs' roots added, to the ns."""
    import tfprof
    from tfprof.catalog import add_run
    from tfprof.catalog.aggregate import aggregate_profile

    cat = tmp_path / "cat"
    add_run(cat, "foreign", profile_path=FOREIGN / TORCH[0])
    add_run(cat, "own", profile_path=tfprof.sample_path())
    roots = [tfprof.view(p, "scope", max_depth=0)["total_exec_micros"][0] for p in (load(TORCH[0]), load_own())]
    both = tfprof.view(aggregate_profile(cat, ["foreign", "own"], "sum"), "scope", max_depth=0)
    assert round(both["total_exec_micros"][0] * 1000) == round(roots[0] * 1000) + roots[1] * 1000
    alone = tfprof.view(aggregate_profile(cat, ["own"], "sum"), "scope", max_depth=0)["total_exec_micros"]
    assert alone.dtype == pl.Int64 and alone[0] == roots[1]  # tfprof's own runs stay whole µs
