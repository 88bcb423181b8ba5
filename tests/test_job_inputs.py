"""A distributed job's traces given as several files (a shell glob) or a glob pattern, wherever a
directory of them works (``tfprof ingest --catalog``, ``tfprof ranks``, ``tfprof ui``): the same
ranks as the directory gives, and one ``Error:`` line (exit 2, nothing written) for a missing
file among them or a mix that cannot be one job."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from conftest import FIXTURES

import tfprof
from tfprof.catalog import add_run, run_ranks, runs, sql
from tfprof.cli.main import main as cli_main

GLOO = FIXTURES / "ranks" / "gloo4"
TRACES = [GLOO / f"rank-{r}.pt.trace.json.gz" for r in range(4)]
NCCL = FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz"  # rank 0 of a job of 2


def _cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def _per_rank(root: Path, run: str) -> list[tuple]:
    """(rank, node count, host time in ns) of each rank of ``run``."""
    return sql(root, f"select rank, count(distinct node_id) n, sum(duration_ns) t from execs where run = '{run}' "
                     "group by rank order by rank::int").to_pylist()


def _unranked(src: Path, dest: Path) -> Path:
    """``src`` without the rank it records: its file name then numbers it."""
    data = json.loads(gzip.decompress(src.read_bytes()))
    data.pop("distributedInfo")
    dest.write_text(json.dumps(data))
    return dest


def test_ingest_takes_a_jobs_files_or_a_glob_as_it_takes_their_directory(tmp_path, capsys):
    """The measured failure: `tfprof ingest --catalog c --run job traces/rank-*.json.gz` (the
    shell's expansion: four arguments) stopped at "Got unexpected extra argument(s)"; a quoted
    glob pattern was "does not exist"."""
    root = tmp_path / "cat"
    shuffled = random.Random(3).sample(TRACES, len(TRACES))  # the ranks do not follow the order given
    for run, given in (("dir", [GLOO]), ("files", shuffled), ("glob", [GLOO / "rank-*.pt.trace.json.gz"])):
        rc, out, err = _cli(capsys, "ingest", "--catalog", root, "--run", run, *given)
        assert (rc, err) == (0, "") and out.startswith(f"added job {run} to {root}: 4 ranks"), err
    rows = {row["run"]: row for row in runs(root).to_pylist()}
    assert {run: run_ranks(row) for run, row in rows.items()} == {"dir": [0, 1, 2, 3], "files": [0, 1, 2, 3],
                                                                  "glob": [0, 1, 2, 3]}
    # each rank is the trace recording it (its distributedInfo, read here with json alone)
    recorded = {json.loads(gzip.decompress(t.read_bytes()))["distributedInfo"]["rank"]: t for t in TRACES}
    expected = [{"rank": str(r), "n": tfprof.load(t).row_counts()["nodes"],
                 "t": int(tfprof.load(t).frame("execs")["duration_ns"].sum())} for r, t in sorted(recorded.items())]
    assert _per_rank(root, "dir") == _per_rank(root, "files") == _per_rank(root, "glob") == expected


def test_files_without_recorded_ranks_are_numbered_by_their_names_as_in_a_directory(tmp_path, capsys):
    job = tmp_path / "job"
    job.mkdir()
    files = [_unranked(TRACES[r], job / f"trace_rank{r}.json") for r in (2, 0, 3, 1)]
    root = tmp_path / "cat"
    assert _cli(capsys, "ingest", "--catalog", root, "--run", "dir", job)[0] == 0
    assert _cli(capsys, "ingest", "--catalog", root, "--run", "files", *files)[0] == 0
    expected = [{"rank": str(r), "n": tfprof.load(job / f"trace_rank{r}.json").row_counts()["nodes"],
                 "t": int(tfprof.load(job / f"trace_rank{r}.json").frame("execs")["duration_ns"].sum())}
                for r in range(4)]
    assert _per_rank(root, "dir") == _per_rank(root, "files") == expected


def test_ranks_takes_a_jobs_files_as_its_directory(capsys):
    rc, by_dir, _ = _cli(capsys, "ranks", GLOO)
    assert rc == 0 and by_dir.startswith("Job: 4 ranks")
    assert _cli(capsys, "ranks", *reversed(TRACES))[:2] == (0, by_dir)
    assert _cli(capsys, "ranks", GLOO / "rank-*.pt.trace.json.gz")[:2] == (0, by_dir)


def _bad_inputs(tmp_path: Path) -> list[tuple[list, str]]:
    """(the traces given, what the one error line says) for inputs that are no job."""
    store = tmp_path / "store"
    tfprof.save(tfprof.load(TRACES[0]), store)  # one profile, ingested
    return [
        ([TRACES[0], tmp_path / "rank-1.pt.trace.json.gz"], f"`{tmp_path / 'rank-1.pt.trace.json.gz'}` does not exist"),
        ([TRACES[1], NCCL], "records a job of "),
        ([TRACES[0], FIXTURES / "foreign" / "torch_cnn.pt.trace.json"], "records its rank and `"),
        ([TRACES[1], store], f"`{store}` is a store (one profile, ingested), not a job's traces"),
        ([tmp_path / "rank-*.json"], f"`{tmp_path / 'rank-*.json'}` holds no trace file"),
    ]


def test_a_missing_file_or_a_mix_that_is_no_job_is_one_error_and_writes_nothing(tmp_path, capsys):
    root = tmp_path / "cat"
    add_run(root, "single", profile_path=tfprof.sample_path())
    before = sorted(root.rglob("*"))
    for given, said in _bad_inputs(tmp_path):
        for argv in (["ingest", "--catalog", root, "--run", "j", *given], ["ranks", *given]):
            rc, out, err = _cli(capsys, *argv)
            assert rc == 2 and out == "" and err.count("\n") == 1 and err.startswith("Error: ") and said in err, (
                argv, err)
            if "records" in said:  # the error names both files
                assert all(f"`{path}`" in err for path in given), err
        assert sorted(root.rglob("*")) == before


@pytest.mark.parametrize("extra,said", [
    (["--out", "out.tfprof"], "are a distributed job's traces (a rank each): they go into a catalog"),
    (["--profile_path", str(TRACES[2])], "are a job's traces: give them without --profile_path"),
])
def test_a_jobs_traces_go_alone_into_a_catalog(tmp_path, capsys, monkeypatch, extra, said):
    monkeypatch.chdir(tmp_path)
    rc, _, err = _cli(capsys, "ingest", *extra, *TRACES[:2])
    assert rc == 2 and err.count("\n") == 1 and err.startswith("Error: ") and said in err, err
    assert list(tmp_path.iterdir()) == []


def test_one_trace_or_a_store_still_ingests_as_one_profile(tmp_path, capsys):
    """One path that is no glob pattern is one profile, as before: a store or a trace file."""
    root = tmp_path / "cat"
    assert _cli(capsys, "ingest", "--catalog", root, "--run", "one", TRACES[1])[0] == 0
    assert _cli(capsys, "ingest", "--out", tmp_path / "store", TRACES[1])[0] == 0
    assert _cli(capsys, "ingest", "--catalog", root, "--run", "store", tmp_path / "store")[0] == 0
    assert [run_ranks(row) for row in runs(root).to_pylist()] == [[], []]
