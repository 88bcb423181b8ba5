"""A catalog of runs (tfprof.catalog): add, list and remove with the output trust rules, concurrent
adds from several processes, every golden case through a catalog's run, aggregates over runs
against per-run views, and SQL across runs through the sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES, GOLDEN, GOLDEN_FIXTURES, golden_case_on, golden_cases

import tfprof
from tfprof.api import run_view
from tfprof.catalog import add_run, aggregate_profile, match_runs, remove_run, run_profile, runs, sql
from tfprof.catalog.layout import NO_VALUE, RUNS, STAGING, listed_files
from tfprof.errors import OptionError, OutputError, ProfileFormatError, QueryError
from tfprof.schema import TABLES


@pytest.fixture(scope="module")
def golden_catalog(tmp_path_factory) -> Path:
    """One run per golden fixture, tagged with its name."""
    root = tmp_path_factory.mktemp("golden") / "cat"
    for name in GOLDEN_FIXTURES:
        add_run(root, name, tags={"fixture": name}, profile_path=FIXTURES / name / "profile.pb")
    return root


def _body(text: str) -> str:
    return text[text.find("node name |"):]


_RUNS: dict[str, tfprof.Profile] = {}


@pytest.mark.parametrize("fixture,case", list(golden_cases()))
def test_every_golden_case_through_a_run_of_the_catalog(golden_catalog, fixture, case):
    """The run's report equals the profile's own, byte for byte (header included)."""
    if fixture not in _RUNS:
        _RUNS[fixture] = run_profile(golden_catalog, fixture)
    got = golden_case_on(_RUNS[fixture], fixture, case)
    # the golden file too, but for the divergences from the real tool decided in test_golden
    if got is not None and case["id"] not in ("op_account_double", "code_account_double"):
        assert _body(got) == _body((GOLDEN / fixture / f"{case['id']}.txt").read_text())


def test_runs_table_lists_what_was_added(golden_catalog):
    table = runs(golden_catalog)
    assert table.column("run").to_pylist() == GOLDEN_FIXTURES
    for row in table.to_pylist():
        prof = tfprof.load(FIXTURES / row["run"] / "profile.pb")
        assert dict(row["tags"]) == {"fixture": row["run"]}
        assert row["format"] == "profile" and row["source_file"] == str((FIXTURES / row["run"] / "profile.pb"))
        assert row["nodes"] == prof.row_counts()["nodes"] and row["steps"] == prof.row_counts()["steps"]
        assert {f["table"] for f in row["files"]} == set(TABLES)
        for f in row["files"]:
            assert (golden_catalog / f["path"]).stat().st_size == f["bytes"]
            assert f["path"].startswith(f"{f['table']}/run={row['run']}/host={NO_VALUE}/worker={NO_VALUE}/rank={NO_VALUE}/part-")
            assert pq.ParquetFile(golden_catalog / f["path"]).metadata.num_rows == f["rows"]


def test_sql_across_runs_has_a_run_column(golden_catalog):
    counts = sql(golden_catalog, "select run, count(*) n from nodes group by run order by run").to_pylist()
    assert counts == [{"run": n, "n": tfprof.load(FIXTURES / n / "profile.pb").row_counts()["nodes"]}
                      for n in GOLDEN_FIXTURES]
    joined = sql(golden_catalog, "select r.run, r.tags['fixture'] f from runs r order by 1").to_pylist()
    assert [row["f"] for row in joined] == GOLDEN_FIXTURES
    for bad in ("select * from read_parquet('/etc/passwd')", "copy nodes to '/tmp/x.csv'", "drop view nodes"):
        with pytest.raises(QueryError):
            sql(golden_catalog, bad)


def _add(root: Path, run: str, **kw) -> dict:
    return add_run(root, run, profile_path=tfprof.sample_path(), **kw)


def test_host_and_worker_tags_are_partition_levels(tmp_path):
    """Host and worker tags become hive levels (``run=/host=/worker=``) that SQL reads as
    columns, NULL for a run without them; a value that cannot name a directory is refused."""
    root = tmp_path / "cat"
    _add(root, "w0", tags=["host=h1", "worker=0"])
    _add(root, "w1", tags=["host=h2", "worker=1", "k=v"])
    _add(root, "solo")
    paths = {r["run"]: {f["path"] for f in r["files"]} for r in runs(root).to_pylist()}
    assert "nodes/run=w1/host=h2/worker=1/" in "".join(paths["w1"])
    assert all(f"/run=solo/host={NO_VALUE}/worker={NO_VALUE}/rank={NO_VALUE}/part-" in p for p in paths["solo"])
    rows = sql(root, "select run, host, worker, count(*) n from nodes group by all order by run").to_pylist()
    assert [(r["run"], r["host"], r["worker"]) for r in rows] == [("solo", None, None), ("w0", "h1", "0"),
                                                                   ("w1", "h2", "1")]
    assert sql(root, "select count(*) n from execs where host = 'h2'").to_pylist() == \
        sql(root, "select count(*) n from execs where run = 'w1'").to_pylist()
    columns = sql(root, "select * from nodes limit 1").column_names
    assert columns[-4:] == ["run", "host", "worker", "rank"] and columns[:-4] == TABLES["nodes"].schema.names
    for bad in (["host=a/b"], ["worker=../x"], ["host="]):
        with pytest.raises(OptionError, match="bad --tag"):
            _add(root, "x", tags=bad)
    remove_run(root, "w1")
    assert not any(root.glob("*/run=w1"))  # its host and worker directories went with it
    assert run_view(run_profile(root, "w0"), "scope", {"max_depth": 2}).text == \
        run_view(tfprof.load(tfprof.sample_path()), "scope", {"max_depth": 2}).text


def test_a_catalog_of_the_run_only_layout_is_upgraded_by_the_next_add(tmp_path):
    root = tmp_path / "cat"
    _add(root, "a", tags=["worker=2"])
    table = runs(root).to_pylist()
    for row in table:  # as an earlier tfprof wrote it: run=<name>/part-*.parquet
        for f in row["files"]:
            flat = f"{f['table']}/run=a/{Path(f['path']).name}"
            os.replace(root / f["path"], root / flat)
            f["path"] = flat
    import pyarrow as pa

    from tfprof.catalog.layout import write_runs
    write_runs(root, pa.Table.from_pylist(table, runs(root).schema))
    assert run_profile(root, "a").row_counts()["nodes"] == 467
    _add(root, "b")
    assert all("/rank=" in p for p in listed_files(runs(root)))
    assert not any(root.glob("*/run=a/part-*"))  # moved, not copied
    assert sql(root, "select run, worker, count(*) n from nodes group by all order by run").to_pylist() == [
        {"run": "a", "worker": "2", "n": 467}, {"run": "b", "worker": None, "n": 467}]


def _to_run_only_layout(root: Path, keep_new: bool = False) -> None:
    """Rewrite the catalog as an earlier tfprof wrote it (run=<name>/part-*.parquet); with
    ``keep_new`` each file stays at its new place too, as an upgrade cut short leaves it."""
    import pyarrow as pa

    from tfprof.catalog.layout import write_runs

    table = runs(root).to_pylist()
    for row in table:
        for f in row["files"]:
            flat = f"{f['table']}/run={row['run']}/{Path(f['path']).name}"
            (os.link if keep_new else os.replace)(root / f["path"], root / flat)
            f["path"] = flat
    write_runs(root, pa.Table.from_pylist(table, runs(root).schema))


@pytest.mark.parametrize("cut_short", [False, True])
def test_replacing_a_run_of_the_run_only_layout_leaves_no_file_behind(tmp_path, cut_short):
    """The upgrade moves the replaced run's files before they are deleted: the new places are
    what goes, and a target an earlier upgrade left is used, not deleted as unlisted."""
    root = tmp_path / "cat"
    _add(root, "a")
    _add(root, "b")
    _to_run_only_layout(root, keep_new=cut_short)
    _add(root, "a", force=True)
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.parquet") if p.name != RUNS}
    assert on_disk == listed_files(runs(root)) and all("/rank=" in p for p in on_disk)
    assert run_view(run_profile(root, "b"), "scope", {"max_depth": 2}).text == \
        run_view(tfprof.load(tfprof.sample_path()), "scope", {"max_depth": 2}).text


def test_add_refuses_an_existing_run_and_force_replaces_it(tmp_path):
    root = tmp_path / "cat"
    _add(root, "a")
    before = listed_files(runs(root))
    with pytest.raises(OutputError, match="already in the catalog"):
        _add(root, "a")
    assert listed_files(runs(root)) == before
    _add(root, "a", force=True, tags=["k=v"])
    after = listed_files(runs(root))
    assert len(after) == len(before) and not (after & before)  # new files, the old ones gone
    assert all(not (root / rel).exists() for rel in before)
    assert dict(runs(root).to_pylist()[0]["tags"]) == {"k": "v"}


def test_remove_takes_only_that_runs_partitions(tmp_path):
    root = tmp_path / "cat"
    _add(root, "a")
    _add(root, "b")
    keep = listed_files(runs(root).filter(runs(root).column("run").to_numpy(zero_copy_only=False) == "a"))
    remove_run(root, "b")
    assert runs(root).column("run").to_pylist() == ["a"]
    assert listed_files(runs(root)) == keep and all((root / rel).exists() for rel in keep)
    assert not any(root.glob("*/run=b"))
    with pytest.raises(OptionError, match="no run `b`"):
        remove_run(root, "b")


def test_trust_rules(tmp_path):
    with pytest.raises(OptionError, match="bad run name"):
        _add(tmp_path / "cat", "../x")
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    with pytest.raises(OutputError, match="not a tfprof catalog"):
        _add(other, "a")
    assert [p.name for p in other.iterdir()] == ["mine.txt"]
    with pytest.raises(OutputError, match="catalog"):  # never into the input
        add_run(tfprof.sample_path().parent, "a", profile_path=tfprof.sample_path())
    with pytest.raises(ProfileFormatError, match="not a tfprof catalog"):
        runs(other)


def test_damaged_partition_is_named(tmp_path):
    root = tmp_path / "cat"
    _add(root, "a")
    nodes = root / next(f["path"] for f in runs(root).to_pylist()[0]["files"] if f["table"] == "nodes")
    nodes.write_bytes(nodes.read_bytes()[:-10])
    with pytest.raises(ProfileFormatError, match="damaged"):
        run_profile(root, "a")


def test_leftovers_of_a_dead_writer_are_invisible_and_cleaned(tmp_path):
    root = tmp_path / "cat"
    _add(root, "a")
    orphan = root / "nodes" / "run=ghost" / "host=h" / f"worker={NO_VALUE}" / "rank=3" / "part-dead.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"half")
    stale = root / STAGING / "ghost-abc123"
    stale.mkdir(parents=True)
    (root / STAGING / "abc123.lock").write_bytes(b"")
    assert runs(root).column("run").to_pylist() == ["a"]
    assert sql(root, "select count(distinct run) n from nodes").to_pylist() == [{"n": 1}]
    _add(root, "b")
    assert not orphan.exists() and not stale.exists() and not (root / STAGING / "abc123.lock").exists()
    assert not (root / "nodes" / "run=ghost").exists()  # its emptied directories too


_ADDER = """
import sys, tfprof
from tfprof.catalog import add_run
add_run(sys.argv[1], sys.argv[2], profile_path=tfprof.sample_path(sys.argv[3]))
"""


def test_concurrent_adds_from_two_processes(tmp_path):
    """Two processes add different runs at the same moment, five times over: every run is
    listed, each reads back whole, and no file is left that the runs table does not list."""
    root = tmp_path / "cat"
    env = {**os.environ, "TFPROF_SERVER": "0"}
    for round_ in range(5):
        procs = [subprocess.Popen([sys.executable, "-c", _ADDER, str(root), f"r{round_}-{i}", kind], env=env,
                                  stderr=subprocess.PIPE) for i, kind in enumerate(("cnn", "multistep"))]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
    names = runs(root).column("run").to_pylist()
    assert names == sorted(f"r{r}-{i}" for r in range(5) for i in range(2))
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*.parquet") if p.name != RUNS}
    assert on_disk == listed_files(runs(root))
    assert not [p for p in (root / STAGING).iterdir()]
    for name in names:
        kind = "cnn" if name.endswith("-0") else "multistep"
        want = run_view(tfprof.load(tfprof.sample_path(kind)), "scope", {"max_depth": 3}).text
        assert run_view(run_profile(root, name), "scope", {"max_depth": 3}).text == want


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mixed") / "cat"
    for run, kind in (("n-1", "cnn"), ("n-2", "multistep"), ("n-3", "cnn"), ("other", "cnn")):
        add_run(root, run, profile_path=tfprof.sample_path(kind))
    return root


def _per_node(prof, cmd: str) -> dict[str, dict]:
    frame = tfprof.view(prof, cmd, select=["micros", "bytes", "params"], max_depth=100)
    return {row["name"]: row for row in frame.iter_rows(named=True)}


@pytest.mark.parametrize("cmd,how", [("scope", "sum"), ("scope", "mean"), ("scope", "max"), ("op", "sum")])
def test_aggregate_is_the_per_node_aggregate_of_the_runs(mixed, how, cmd):
    names = match_runs(mixed, "n-*")
    assert names == ["n-1", "n-2", "n-3"]
    each = [_per_node(run_profile(mixed, n), cmd) for n in names]
    got = _per_node(aggregate_profile(mixed, names, how), cmd)
    assert set(got) == set().union(*each)
    # a node's own numbers are aggregated; totals (and an op type's sums over its nodes) are sums
    # of those, so they equal the aggregate of the runs' totals for `sum` only
    # (the op view's total_ columns are cumulative over the ops shown above: not per row)
    cols = ("exec_micros", "requested_bytes", "params") if cmd == "scope" or how == "sum" else ()
    if how == "sum" and cmd == "scope":
        cols += ("total_exec_micros", "total_requested_bytes", "total_params")
    agg = {"sum": sum, "max": max, "mean": lambda v: sum(v) // len(v)}[how]
    for name, row in got.items():
        for col in cols:
            assert row[col] == agg([e[name][col] if name in e else 0 for e in each]), (name, col)


def test_aggregate_of_one_run_is_the_run(mixed):
    for cmd in ("scope", "graph", "op", "code"):
        for how in ("sum", "mean", "max"):
            opts = {"max_depth": 6, "select": ["micros", "bytes", "params", "occurrence"]}
            alone = run_view(run_profile(mixed, "n-2"), cmd, opts).text
            assert run_view(aggregate_profile(mixed, ["n-2"], how), cmd, opts).text == alone


def test_diff_between_two_runs_is_the_diff_of_their_profiles(mixed):
    """tfprof.diff over two runs of a catalog (run_profile) is the diff of the profiles they came from."""
    a, b = run_profile(mixed, "n-1"), run_profile(mixed, "n-2")
    got = tfprof.diff(a, b, "op", select=["micros"])
    want = tfprof.diff(tfprof.load(tfprof.sample_path("cnn")), tfprof.load(tfprof.sample_path("multistep")), "op",
                       select=["micros"])
    assert got.equals(want) and got.height > 0
