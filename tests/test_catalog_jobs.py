"""A distributed job in a catalog: its traces added as one run, each rank in its own partition
(``rank=N``), every view on one rank or on all of them aggregated, SQL with a ``rank`` column,
``tfprof ranks`` over the catalog, and catalogs of the older layouts upgraded by the next add."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES

import tfprof
from tfprof.api.run import run_view
from tfprof.catalog import add_job, add_run, aggregate_profile, remove_run, run_profile, run_ranks, runs, sql
from tfprof.catalog.layout import NO_VALUE, listed_files, write_runs
from tfprof.cli.main import main as cli_main
from tfprof.errors import OptionError

GLOO = FIXTURES / "ranks" / "gloo4"
TRACES = {r: GLOO / f"rank-{r}.pt.trace.json.gz" for r in range(4)}


@pytest.fixture(scope="module")
def cat(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("jobs") / "cat"
    add_job(root, "gloo", [GLOO], tags=["host=h1"])
    add_run(root, "single", profile_path=tfprof.sample_path())
    return root


def _text(prof, **opts) -> str:
    return run_view(prof, "scope", {"max_depth": 3, **opts}).text


def test_each_rank_is_its_trace(cat):
    row = next(r for r in runs(cat).to_pylist() if r["run"] == "gloo")
    assert run_ranks(row) == [0, 1, 2, 3] and len(row["files"]) == 4 * len({f["table"] for f in row["files"]})
    assert all(f"/run=gloo/host=h1/worker={NO_VALUE}/rank=" in f["path"] for f in row["files"])
    for rank, trace in TRACES.items():
        assert _text(run_profile(cat, "gloo", rank)) == _text(tfprof.load(trace))
    assert row["nodes"] == sum(tfprof.load(t).row_counts()["nodes"] for t in TRACES.values())


def test_a_job_needs_a_rank_or_an_aggregate(cat):
    with pytest.raises(OptionError, match=r"run `gloo` is a job of 4 ranks \(0-3\): give --rank R"):
        run_profile(cat, "gloo")
    with pytest.raises(OptionError, match="has no rank 7; its ranks: 0, 1, 2, 3"):
        run_profile(cat, "gloo", 7)
    with pytest.raises(OptionError, match="it is no job"):
        run_profile(cat, "single", 0)
    total = tfprof.view(aggregate_profile(cat, ["gloo"], "sum"), "scope", max_depth=0)["total_exec_micros"][0]
    each = [tfprof.view(run_profile(cat, "gloo", r), "scope", max_depth=0)["total_exec_micros"][0] for r in TRACES]
    assert total == pytest.approx(sum(each), abs=1e-3)


def test_sql_has_a_rank_column(cat):
    rows = sql(cat, "select run, rank, count(*) n from nodes group by all order by run, rank").to_pylist()
    want = [{"run": "gloo", "rank": str(r), "n": tfprof.load(t).row_counts()["nodes"]} for r, t in TRACES.items()]
    assert rows == want + [{"run": "single", "rank": None, "n": 467}]
    assert sql(cat, "select * from execs limit 1").column_names[-4:] == ["run", "host", "worker", "rank"]


def test_the_command_line(cat, capsys, tmp_path):
    assert cli_main(["scope", "--catalog", str(cat), "--run", "gloo", "--rank", "2", "--max_depth", "3"]) == 0
    assert capsys.readouterr().out.endswith(_text(tfprof.load(TRACES[2])))
    assert cli_main(["scope", "--catalog", str(cat), "--run", "gloo", "--max_depth", "1"]) == 2
    assert "give --rank R for one of them, or --aggregate sum|mean|max" in capsys.readouterr().err
    assert cli_main(["op", "--catalog", str(cat), "--run", "gloo", "--aggregate", "mean", "--max_depth", "2"]) == 0
    assert "\nProfile:\nnode name | total execution time" in capsys.readouterr().out
    assert cli_main(["scope", "--catalog", str(cat), "--run", "single", "--aggregate", "max"]) == 2
    assert "run `single` is no job; --runs PATTERN aggregates runs" in capsys.readouterr().err
    assert cli_main(["ranks", "--catalog", str(cat), "--run", "gloo"]) == 0
    out = capsys.readouterr().out
    assert "  straggler: rank 2 joins the collectives" in out
    assert out.split("\n", 1)[1] == str(tfprof.ranks(GLOO)).split("\n", 1)[1]  # all but the line saying how ranks were found
    assert cli_main(["runs", str(cat)]) == 0
    assert [line.split()[:3] for line in capsys.readouterr().out.splitlines()[1:3]] == [["gloo", "kineto", "4"],
                                                                                      ["single", "profile", "-"]]
    copy = tmp_path / "c2"
    assert cli_main(["ingest", "--catalog", str(copy), "--run", "j", str(GLOO)]) == 0
    assert capsys.readouterr().out.startswith(f"added job j to {copy}: 4 ranks")


def test_replacing_and_removing_a_job(tmp_path):
    root = tmp_path / "cat"
    add_job(root, "j", [GLOO])
    with pytest.raises(tfprof.OutputError, match="already in the catalog"):
        add_job(root, "j", [GLOO])
    add_job(root, "j", [TRACES[0], TRACES[1]], force=True)  # now a job of two ranks
    assert run_ranks(runs(root).to_pylist()[0]) == [0, 1]
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("part-*.parquet")}
    assert on_disk == listed_files(runs(root))  # the replaced ranks' files went
    remove_run(root, "j")
    assert not list(root.rglob("part-*.parquet"))


def test_two_traces_claiming_one_rank_add_nothing(tmp_path):
    twin = tmp_path / "traces"
    twin.mkdir()
    shutil.copy(TRACES[0], twin / "a.pt.trace.json.gz")
    shutil.copy(TRACES[0], twin / "b.pt.trace.json.gz")
    root = tmp_path / "cat"
    with pytest.raises(OptionError, match="are both rank 0"):
        add_job(root, "j", [twin])
    assert not (root / "runs.parquet").exists() and not list(root.rglob("part-*.parquet"))
    assert not [p for p in (root / ".staging").iterdir() if p.is_dir()]
    with pytest.raises(OptionError, match="--tag rank"):
        add_run(root, "x", tags=["rank=3"], profile_path=tfprof.sample_path())


def test_a_catalog_of_the_three_level_layout_is_upgraded_by_the_next_add(tmp_path):
    root = tmp_path / "cat"
    add_run(root, "a", tags=["worker=2"], profile_path=tfprof.sample_path())
    table = runs(root).to_pylist()
    for row in table:  # as the previous tfprof wrote it: run=/host=/worker=/part-*.parquet
        for f in row["files"]:
            old = f"{Path(f['path']).parent.parent.as_posix()}/{Path(f['path']).name}"
            os.replace(root / f["path"], root / old)
            f["path"] = old
    write_runs(root, pa.Table.from_pylist(table, runs(root).schema))
    assert _text(run_profile(root, "a")) == _text(tfprof.load(tfprof.sample_path()))
    add_job(root, "j", [TRACES[0], TRACES[3]])
    assert all("/rank=" in p for p in listed_files(runs(root)))
    assert sql(root, "select run, worker, rank, count(*) n from nodes group by all order by all").to_pylist() == [
        {"run": "a", "worker": "2", "rank": None, "n": 467},
        {"run": "j", "worker": None, "rank": "0", "n": tfprof.load(TRACES[0]).row_counts()["nodes"]},
        {"run": "j", "worker": None, "rank": "3", "n": tfprof.load(TRACES[3]).row_counts()["nodes"]}]


# ------------------------------------------------------------------ ranks that cannot be, and runs that cannot read


def _unranked(dest: Path, rank: int = 0) -> Path:
    """Rank ``rank``'s trace of the gloo job without its recorded rank: its file name then numbers it."""
    import gzip
    import json

    data = json.loads(gzip.decompress(TRACES[rank].read_bytes()))
    data.pop("distributedInfo")
    dest.write_text(json.dumps(data))
    return dest


def _cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("name,shown", [
    ("rank-99999999999999999999999.json", "is rank 99999999999999999999…"),  # beyond int64: was an internal error
    ("rank-2147483648.json", "is rank 2147483648 (file name); a rank is 0 to 2,147,483,647"),
])
def test_a_rank_no_job_can_have_is_refused_before_anything_is_written(tmp_path, capsys, name, shown):
    job = tmp_path / "job"
    job.mkdir()
    _unranked(job / "rank-0.json")
    _unranked(job / name, 1)
    for argv in (["ranks", job], ["ingest", "--catalog", tmp_path / "cat", "--run", "j", job]):
        rc, _, err = _cli(capsys, *argv)
        assert rc == 2 and err.count("\n") == 1 and err.startswith(f"Error: `{job / name}` {shown}"), err
    assert not (tmp_path / "cat" / "runs.parquet").exists() and not list(tmp_path.rglob("part-*"))


def test_a_recorded_rank_or_world_size_out_of_range_is_refused(tmp_path):
    from tfprof.errors import ProfileFormatError
    from tfprof.ingest.job import MAX_WORLD, assign_ranks

    with pytest.raises(ProfileFormatError, match=r"`a.json` is rank -1 \(recorded\)"):
        assign_ranks([(Path("a.json"), -1, 4, None), (Path("b.json"), 0, 4, None)])
    with pytest.raises(ProfileFormatError, match="records a world size of 2147483649"):
        assign_ranks([(Path("a.json"), 0, MAX_WORLD + 1, None), (Path("b.json"), 1, MAX_WORLD + 1, None)])
    ranked = assign_ranks([(Path("a.json"), MAX_WORLD - 1, MAX_WORLD, None), (Path("b.json"), 0, None, None)])
    assert [s.rank for s in ranked] == [0, MAX_WORLD - 1]


def test_a_job_with_rank_1000000000_is_added_and_every_run_still_reads(tmp_path, capsys):
    """The measured failure: such a job was added (exit 0), then every run of the catalog was
    refused, its partition `rank=1000000000` taken for a path outside the catalog."""
    job = tmp_path / "job"
    job.mkdir()
    _unranked(job / "rank-0.json")
    _unranked(job / "rank-1000000000.json", 1)
    root = tmp_path / "cat"
    add_run(root, "single", profile_path=tfprof.sample_path())
    assert _cli(capsys, "ingest", "--catalog", root, "--run", "job", job)[0] == 0
    assert run_ranks(runs(root).to_pylist()[0]) == [0, 1_000_000_000]
    rc, out, err = _cli(capsys, "sql", "select run, rank, count(*) n from nodes group by all order by all", "--catalog",
                        root, "--format", "csv")
    assert (rc, err) == (0, "") and out.splitlines()[1:] == ["job,0,84", "job,1000000000,84", "single,,467"]
    assert _cli(capsys, "scope", "--catalog", root, "--run", "single", "--max_depth", "1")[::2] == (0, "")
    rc, out, _ = _cli(capsys, "scope", "--catalog", root, "--run", "job", "--rank", "1000000000", "--max_depth", "3")
    assert rc == 0 and out.endswith(_text(tfprof.load(job / "rank-1000000000.json")))
    assert _cli(capsys, "check", root)[0] == 0


def test_trace_names_that_are_not_utf8_are_one_error(tmp_path, capsys):
    job = os.fsencode(tmp_path / "job")
    os.mkdir(job)
    _unranked(Path(os.fsdecode(job + b"/rank-0.json")))
    _unranked(Path(os.fsdecode(job + b"/rank-1\xff.json")), 1)
    root = tmp_path / "cat"
    add_run(root, "single", profile_path=tfprof.sample_path())
    before = sorted(p for p in root.rglob("*"))
    for argv in (["ranks", os.fsdecode(job)], ["ingest", "--catalog", root, "--run", "j", os.fsdecode(job)]):
        rc, _, err = _cli(capsys, *argv)
        assert rc == 2 and err.count("\n") == 1 and "rank-1\\xff.json`: the file's name is not UTF-8" in err, err
    assert sorted(p for p in root.rglob("*")) == before


def test_a_failed_commit_leaves_the_catalog_as_it_was(tmp_path, monkeypatch):
    """Placed partitions are removed when the run list cannot be written: the catalog reads as
    before (a new one was left with partitions and no run list: not a catalog any more)."""
    import tfprof.catalog.write as write

    root = tmp_path / "cat"
    add_run(root, "a", profile_path=tfprof.sample_path())
    before = sorted(p.relative_to(root) for p in root.rglob("part-*"))

    def broken(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write, "write_runs", broken)
    with pytest.raises(OSError):
        add_job(root, "j", [TRACES[0], TRACES[1]])
    assert sorted(p.relative_to(root) for p in root.rglob("part-*")) == before
    assert runs(root).column("run").to_pylist() == ["a"]
