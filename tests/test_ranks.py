"""A distributed job across its ranks (``tfprof.api.ranks``, ``tfprof ranks``): checked on a real
4-rank gloo capture (tools/capture_ranks.py; rank 2 does extra work each step) against the trace
files read with ``json`` alone, on a GPU rank of a real NCCL job, and on a synthetic job of
1,024 ranks."""

from __future__ import annotations

import gzip
import json
import re
import statistics
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES

import tfprof
from tfprof.cli.main import main as cli_main
from tfprof.errors import OptionError
from tfprof.ingest.job import assign_ranks, job_files, rank_in_name
from tfprof.queries.ranks import (
    IMBALANCE_FLOOR_NS,
    RankFacts,
    job_findings,
    job_frames,
    op_spread,
    per_rank_step,
    rank_summary,
)

GLOO = FIXTURES / "ranks" / "gloo4"
NCCL = FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz"
COLLECTIVE = re.compile(r"gloo:|c10d::|nccl", re.IGNORECASE)  # the names this capture's collectives have


def _doc(path: Path) -> dict:
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())


def _ns(us) -> int:
    return int(Decimal(str(us)) * 1000)


def _union(spans: list[tuple[int, int]], lo: int, hi: int) -> int:
    """The length of the union of ``spans`` cut to [lo, hi)."""
    total, reach = 0, lo
    for a, b in sorted((max(a, lo), min(b, hi)) for a, b in spans):
        if b <= max(a, reach):  # outside the window, or inside what is counted
            continue
        total += b - max(a, reach)
        reach = b
    return total


def _expected(path: Path) -> dict[int, tuple[int, int]]:
    """Per step of a CPU rank's trace: (the step's window, the time a collective ran in it), from
    the ``ProfilerStep#N`` markers (each to the next; the last to its own end) and every slice
    named as a collective, on any thread."""
    events = _doc(path)["traceEvents"]
    base = _ns(0)
    marks = sorted((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), int(e["name"].split("#")[1])) for e in events
                   if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    spans = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
             if e.get("ph") == "X" and COLLECTIVE.search(e.get("name", ""))]
    out = {}
    for k, (start, end, step) in enumerate(marks):
        hi = marks[k + 1][0] if k + 1 < len(marks) else end
        out[step] = (hi - start - base, _union(spans, start, hi))
    return out


@pytest.fixture(scope="module")
def gloo():
    return tfprof.ranks(GLOO)


def test_each_rank_and_step_as_the_traces_hold_them(gloo):
    got = {(r["rank"], r["step"]): (r["window_ns"], r["collective_ns"]) for r in gloo.steps.iter_rows(named=True)}
    want = {}
    for path in sorted(GLOO.glob("rank-*.pt.trace.json.gz")):
        rank = _doc(path)["distributedInfo"]["rank"]
        want.update({(rank, step): facts for step, facts in _expected(path).items()})
    assert got == want and len(want) == 12
    assert [(s.rank, s.how) for s in gloo.sources] == [(r, "recorded") for r in range(4)]


def test_the_slowed_rank_is_the_straggler_by_the_wait_it_causes(gloo):
    per = {}
    for (rank, step), (_, coll) in {(r["rank"], r["step"]): (0, r["collective_ns"]) for r in gloo.steps.iter_rows(named=True)}.items():
        per.setdefault(step, {})[rank] = coll
    late = {r: statistics.median(statistics.median(s.values()) - s[r] for s in per.values()) for r in range(4)}
    assert max(late, key=late.get) == 2
    rows = {r["rank"]: r for r in gloo.ranks.iter_rows(named=True)}
    assert all(abs(rows[r]["late_ns"] - late[r]) <= 1 for r in range(4))
    assert gloo.ranks.filter("straggler")["rank"].to_list() == [2] and gloo.ranks["rank"][0] == 2
    lines = gloo.finding_lines()
    assert lines[0].startswith("straggler: rank 2 joins the collectives") and "the other ranks wait for it" in lines[0]
    assert any(line.startswith("imbalance: extra_work/") and "on rank 2 against 0us" in line for line in lines)


def test_ops_across_ranks_count_a_missing_op_as_zero(gloo):
    extra = gloo.ops.filter(pl.col("name").str.starts_with("extra_work") & (pl.col("metric") == "cpu"))
    assert extra.height > 0 and (extra["present"] == 1).all() and (extra["max_rank"] == 2).all()
    assert (extra["min_ns"] == 0).all() and (extra["spread_ns"] == extra["max_ns"]).all()
    # gloo's all-reduce runs on its own threads, outside the ops: its time per rank, from the files
    per_rank = {}
    for path in GLOO.glob("rank-*.pt.trace.json.gz"):
        doc = _doc(path)
        per_rank[doc["distributedInfo"]["rank"]] = sum(_ns(e["dur"]) for e in doc["traceEvents"]
                                                       if e.get("ph") == "X" and e.get("name") == "gloo:all_reduce")
    row = gloo.ops.filter(pl.col("name") == "gloo:all_reduce").row(0, named=True)
    assert (row["min_ns"], row["max_ns"], row["total_ns"]) == (min(per_rank.values()), max(per_rank.values()),
                                                               sum(per_rank.values()))
    assert row["collective"] and row["min_rank"] == 2


def test_a_gpu_rank_splits_its_steps_and_counts_nccl_kernels():
    job = tfprof.ranks({0: tfprof.load(NCCL), 1: tfprof.load(NCCL)})
    row = job.steps.filter(pl.col("rank") == 0).row(0, named=True)
    events = _doc(NCCL)["traceEvents"]
    mark = next(e for e in events if e.get("ph") == "X" and e.get("name") == "ProfilerStep#5")
    lo = _ns(mark["ts"])
    nccl = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events
            if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e["name"].lower()]
    assert row["collective_ns"] == _union(nccl, lo, lo + row["window_ns"]) > 0
    assert row["compute_ns"] + row["communication_ns"] + row["memcpy_ns"] + row["idle_ns"] == row["window_ns"]
    assert job.ranks["straggler"].to_list() == [False, False]  # the same trace twice: nobody waits
    assert "compute" in str(job).splitlines()[2]


def test_a_synthetic_job_of_1024_ranks():
    """Every rank runs 20 steps of 10 ms; a collective takes what is left after its compute, so
    rank 777, which computes 2 ms more, waits 2 ms less; an op runs on every fourth rank only."""
    ranks, steps = 1024, 20
    facts = {}
    for r in range(ranks):
        compute = 6_000_000 + (2_000_000 if r == 777 else 0) + (r % 7) * 1000
        coll = 10_000_000 - compute
        facts[r] = RankFacts(
            pl.DataFrame({"step": list(range(steps)), "device": ["0"] * steps, "window_ns": [10_000_000] * steps,
                          "compute_ns": [compute] * steps, "communication_ns": [coll] * steps,
                          "memcpy_ns": [0] * steps, "idle_ns": [0] * steps, "utilization": [1.0] * steps,
                          "collective_ns": [coll] * steps}),
            pl.DataFrame({"name": ["matmul", "rare"], "cpu_ns": [5_000 * steps, 1_000_000 if r % 4 == 0 else 0],
                          "accelerator_ns": [compute * steps, 0]}))
    step_rows, ops = job_frames(facts)
    assert step_rows.height == ranks * steps
    per = per_rank_step(step_rows)
    summary = rank_summary(per)
    assert summary.filter("straggler")["rank"].to_list() == [777]
    median_coll = statistics.median(10_000_000 - 6_000_000 - (r % 7) * 1000 - (2_000_000 if r == 777 else 0)
                                    for r in range(ranks))
    assert summary.row(0, named=True)["late_ns"] == median_coll - (10_000_000 - 8_000_000 - (777 % 7) * 1000)
    spread = op_spread(ops, list(range(ranks)))
    rare = spread.filter(pl.col("name") == "rare").row(0, named=True)
    assert (rare["present"], rare["min_ns"], rare["min_rank"], rare["max_rank"]) == (256, 0, 1, 0)
    found = job_findings(per, summary, spread)
    assert found.filter(pl.col("check") == "straggler")["rank"].to_list() == [777]


def test_a_job_read_from_files_on_threads(tmp_path):
    """A synthetic job of 12 CPU ranks (``benchmarks/synth_kineto.write_job``: rank 5 computes
    2 ms longer each step) read one trace at a time and on two threads gives the same frames,
    and rank 5's lateness is how much longer it computes than the median rank."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from synth_kineto import write_job

    write_job(tmp_path, 12, straggler=5)
    one, two = tfprof.ranks(tmp_path, workers=1), tfprof.ranks(tmp_path, workers=2)
    for name in ("steps", "ranks", "ops", "findings"):
        assert getattr(one, name).equals(getattr(two, name)), name
    compute = [4000 + r % 5 + (2000 if r == 5 else 0) for r in range(12)]  # µs, as write_job makes them
    row = one.ranks.row(0, named=True)
    assert (row["rank"], row["straggler"]) == (5, True)
    assert row["late_ns"] == round((compute[5] - statistics.median(compute)) * 1000)
    assert one.ranks["straggler"].sum() == 1


def test_a_synthetic_gpu_job_splits_each_ranks_steps(tmp_path):
    """Eight GPU ranks (``benchmarks/synth_kineto.write_gpu_job``: a compute kernel, then an NCCL
    all-reduce that runs until every rank has computed; rank 3 computes 3 ms longer): each
    rank's compute and exposed communication are its kernels' times, rank 3 is the straggler by
    exactly its extra compute over the median rank's, and its GPU time is charged to the op that
    launched it."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from synth_kineto import write_gpu_job

    write_gpu_job(tmp_path, 8, straggler=3)
    job = tfprof.ranks(tmp_path, workers=1)
    compute = [6000 + r % 3 + (3000 if r == 3 else 0) for r in range(8)]  # µs, as write_gpu_job makes them
    for r in job.steps.iter_rows(named=True):
        nccl = (max(compute) - compute[r["rank"]] + 200) * 1000
        assert (r["compute_ns"], r["communication_ns"], r["collective_ns"]) == (compute[r["rank"]] * 1000, nccl, nccl)
        assert r["compute_ns"] + r["communication_ns"] + r["memcpy_ns"] + r["idle_ns"] == r["window_ns"]
        assert r["window_ns"] == (20_000_000 if r["step"] < 2 else 19_999_000)  # the last: to its marker's end
    assert job.ranks.filter("straggler")["rank"].to_list() == [3]
    assert job.ranks.row(0, named=True)["late_ns"] == round((compute[3] - statistics.median(compute)) * 1000)
    mm = job.ops.filter((pl.col("name") == "aten::mm") & (pl.col("metric") == "accelerator")).row(0, named=True)
    assert (mm["max_rank"], mm["max_ns"], mm["min_ns"]) == (3, 3 * compute[3] * 1000, 3 * min(compute) * 1000)


def test_ranks_from_file_names_hosts_or_order(tmp_path):
    def source(rank=None, world=None, host=None, name="t.json"):
        return (tmp_path / name, rank, world, host)

    assert rank_in_name(Path("trace_rank03.pt.trace.json")) == 3 and rank_in_name(Path("a.json")) is None
    named = assign_ranks([source(name="job-rank-1.json"), source(name="job-rank-0.json")])
    assert [(s.rank, s.how, s.path.name) for s in named] == [(0, "file name", "job-rank-0.json"),
                                                             (1, "file name", "job-rank-1.json")]
    hosts = assign_ranks([source(host="b", name="x.xplane.pb"), source(host="a", name="y.xplane.pb")])
    assert [(s.rank, s.how, s.host) for s in hosts] == [(0, "host order", "a"), (1, "host order", "b")]
    assert [s.how for s in assign_ranks([source(name="a.json"), source(name="b.json")])] == ["file order"] * 2
    with pytest.raises(OptionError, match="are both rank 0"):
        assign_ranks([source(0, name="a.json"), source(0, name="b.json")])
    with pytest.raises(OptionError, match="rank 5 of a job of 4 ranks"):
        assign_ranks([source(5, 4, name="a.json"), source(0, 4, name="b.json")])


def test_job_files_from_a_directory_a_glob_and_files(tmp_path):
    for name in ("rank-0.pt.trace.json.gz", "rank-1.pt.trace.json.gz", "notes.txt"):
        (tmp_path / "run" / "sub").mkdir(parents=True, exist_ok=True)
        (tmp_path / "run" / "sub" / name).write_bytes(b"x")
    found = [p.name for p in job_files([tmp_path / "run"])]
    assert found == ["rank-0.pt.trace.json.gz", "rank-1.pt.trace.json.gz"]
    assert job_files([str(tmp_path / "run" / "*" / "rank-1*")]) == [tmp_path / "run" / "sub" / "rank-1.pt.trace.json.gz"]
    with pytest.raises(tfprof.InputNotFoundError, match="holds no trace file"):
        job_files([str(tmp_path / "run" / "nothing-*")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(tfprof.InputNotFoundError, match="holds no trace file"):
        job_files([tmp_path / "empty"])


def test_the_command_line(capsysbinary, tmp_path):
    assert cli_main(["ranks", str(GLOO)]) == 0
    out = capsysbinary.readouterr().out.decode()
    assert out.startswith("Job: 4 ranks (numbered as each trace records it), 3 steps")
    assert "  straggler: rank 2 joins the collectives" in out and "\nOps that differ most across ranks" in out
    # a backward op's long path keeps its forward op's first levels and its own last ones, `…` between
    ops = out.split("\nOps that differ most across ranks")[1].splitlines()[2:]
    assert max(line.index(" cpu ") for line in ops if " cpu " in line) <= 82
    assert any(re.match(r"gradients/DistributedDataParallel\.forward/.*…/.*AddmmBackward0/aten::mm ", line) for line in ops)
    assert cli_main(["ranks", str(GLOO / "rank-*.pt.trace.json.gz"), "--table", "findings", "--format", "json"]) == 0
    rows = json.loads(capsysbinary.readouterr().out)
    assert rows[0]["check"] == "straggler" and rows[0]["rank"] == 2
    assert cli_main(["ranks", str(GLOO / "rank-0.pt.trace.json.gz")]) == 2
    assert "two ranks or more; 1 given" in capsysbinary.readouterr().err.decode()
    assert cli_main(["ranks", str(GLOO), "--format", "csv", "--out", str(GLOO / "x.csv")]) == 2
    assert "inside the input directory" in capsysbinary.readouterr().err.decode()
    assert cli_main(["ranks", str(GLOO), "--table", "nodes", "--format", "csv"]) == 2
    assert "--table nodes: give one of ranks, steps, ops, findings" in capsysbinary.readouterr().err.decode()


def _two_ranks(ops: dict[str, tuple[tuple[int, int], tuple[int, int]]], step_ns: int = 200_000, steps: int = 1):
    """A job of two ranks with ``steps`` steps of ``step_ns`` and ``ops`` {name: ((cpu ns of rank 0,
    of rank 1), (accelerator ns of rank 0, of rank 1))}: its per-step rows, summary and op spread."""
    facts = {r: RankFacts(
        pl.DataFrame({"step": list(range(steps)), "device": ["0"] * steps, "window_ns": [step_ns] * steps,
                      "compute_ns": [step_ns] * steps, "communication_ns": [0] * steps, "memcpy_ns": [0] * steps,
                      "idle_ns": [0] * steps, "utilization": [1.0] * steps, "collective_ns": [0] * steps}),
        pl.DataFrame({"name": list(ops), "cpu_ns": [cpu[r] for cpu, _ in ops.values()],
                      "accelerator_ns": [acc[r] for _, acc in ops.values()]})) for r in (0, 1)}
    steps_rows, op_rows = job_frames(facts)
    per = per_rank_step(steps_rows)
    return per, rank_summary(per), op_spread(op_rows, [0, 1])


def test_an_imbalance_stands_above_a_stated_noise_floor():
    """The measured false finding: an op of 18 µs on one rank and 13 µs on the other (and 5 µs of
    GPU work on one rank only) was an imbalance, its short steps making 1% of them 2 µs. An
    imbalance now needs 100 µs of spread per profiled step as well; a large difference still is one."""
    assert IMBALANCE_FLOOR_NS == 100_000
    small = {"small": ((18_000, 13_000), (5_000, 0))}
    large = {"large": ((300_000, 100_000), (0, 0))}  # cv 0.5, 200 µs apart
    per, summary, spread = _two_ranks({**small, **large})
    found = job_findings(per, summary, spread)
    assert found.filter(pl.col("check") == "imbalance").select("name", "metric", "rank", "value_ns").rows() == [
        ("large", "cpu", 0, 200_000)]
    for cv in (0.0, 0.25):  # not the coefficient of variation: the floor alone leaves the small one out
        assert "small" not in job_findings(per, summary, spread, imbalance=cv)["name"].to_list()
    # the floor is per profiled step: just above it a finding, at it none
    for steps in (1, 3):
        for spread_ns, flagged in ((steps * IMBALANCE_FLOOR_NS + 1, True), (steps * IMBALANCE_FLOOR_NS, False)):
            per, summary, spread = _two_ranks({"op": ((spread_ns, 0), (0, 0))}, steps=steps)
            assert ("op" in job_findings(per, summary, spread)["name"].to_list()) is flagged, (steps, spread_ns)


def test_an_imbalance_line_quotes_the_time_that_differs():
    """An op with both a CPU and an accelerator row: the sentence quoted the row of the smaller
    spread (the last one read) whichever had been found."""
    from tfprof.views.ranks_text import finding_lines

    per, summary, spread = _two_ranks({"op": ((418_000, 13_000), (18_000, 13_000))})
    found = job_findings(per, summary, spread)
    assert found.filter(pl.col("check") == "imbalance")["metric"].to_list() == ["cpu"]
    lines = finding_lines(found, summary, spread, 200_000, "window_ns")
    assert [line for line in lines if line.startswith("imbalance")] == [
        f"imbalance: op (cpu time) runs 418us on rank 0 against 13us on rank 1 (cv {202_500 / 215_500:.2f})"]
