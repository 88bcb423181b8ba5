"""One damaged or odd run of a catalog in object storage never stops the others, as in a local
catalog (tests/test_catalog_trust.py): a bad row of the run list (a path outside its
partitions or another run's object, a rank beyond the limits, a damaged entry, a name listed
twice) or a partition object missing, resized or failing its checksum. Listings, catalog SQL,
``--runs`` aggregation and reads of the other runs work, with one ``Warning:`` line naming the
skipped run; a command that names it is one ``Error:`` line; writers keep a bad row as it is and
never delete an object another row lists. Against moto's S3 server (tests/test_catalog_s3.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_catalog_s3 import cat, s3  # noqa: F401 - the moto server and a fresh catalog
from test_catalog_trust import entry, one_error, one_warning, run

import tfprof
from tfprof.catalog import add_run, match_runs, runs, sql
from tfprof.catalog.layout import RUNS, RUNS_SCHEMA
from tfprof.catalog.remote import runs as run_list
from tfprof.catalog.storage import ObjectStore
from tfprof.errors import CatalogWarning, ProfileFormatError

SAMPLE = tfprof.sample_path("cnn")


def edit_runs(uri: str, edit) -> None:
    """Rewrite the run list with ``edit(rows)`` applied: what someone who can write the bucket can do."""
    rows = run_list(uri).to_pylist()
    edit(rows)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, RUNS_SCHEMA), sink)
    ObjectStore(uri).put(RUNS, sink.getvalue().to_pybytes())


def _rank_beyond(rows: list[dict]) -> None:
    e = entry(rows, "r1", "nodes")
    e["path"] = "/".join("rank=2147483648" if p.startswith("rank=") else p for p in e["path"].split("/"))


def _damage_object(how: str):
    def damage(uri: str) -> None:
        store = ObjectStore(uri)
        rel = entry(run_list(uri).to_pylist(), "r1", "nodes")["path"]
        data = store.get(rel)[0]
        if how == "missing":
            store.delete(rel)
        elif how == "resized":
            store.put(rel, data + b"\0" * 4096)
        else:  # another byte, same size: only the CRC-32 tells
            store.put(rel, data[:100] + bytes([data[100] ^ 1]) + data[101:])
    return damage


# each: how run r1 is damaged, and what its one Error (and the Warning) says
ROWS = {
    "outside": (lambda rows: entry(rows, "r1", "nodes").update(path="../outside/victim.parquet"),
                "run `r1` lists `../outside/victim.parquet`"),
    "others_object": (lambda rows: entry(rows, "r1", "nodes").update(path=entry(rows, "r2", "nodes")["path"]),
                      "which is not one of its partition files"),
    "rank_beyond": (_rank_beyond, "which is not one of its partition files"),
    "damaged_entry": (lambda rows: entry(rows, "r1", "nodes").update(crc32="not-hex"), "damaged entry"),
    "twice": (lambda rows: rows.append(dict(next(r for r in rows if r["run"] == "r1"))), "lists run `r1` twice"),
}
OBJECTS = {
    "missing": (_damage_object("missing"), "is missing from the catalog"),
    "resized": (_damage_object("resized"), "bytes where the catalog wrote"),
    "checksum": (_damage_object("checksum"), "its checksum differs"),
}


@pytest.fixture
def two(cat) -> str:  # noqa: F811
    for name in ("r1", "r2"):
        add_run(cat, name, profile_path=SAMPLE)
    return cat


def nodes_rows(uri: str, name: str) -> int:
    return entry(run_list(uri).to_pylist(), name, "nodes")["rows"]


def _sql(capsys, uri: str) -> tuple[int, str, str]:
    return run(capsys, "sql", "select run, count(*) n from nodes group by run order by run", "--catalog", uri,
               "--format", "csv")


@pytest.mark.parametrize("how", list(ROWS) + list(OBJECTS))
def test_one_damaged_run_in_s3_leaves_the_others_readable(two, capsys, how):
    """Every reader of several runs skips r1 with one Warning naming it; r2 reads as before; a
    command naming r1 is one Error line."""
    uri = two
    n = nodes_rows(uri, "r2")
    rc, want_r2, err = run(capsys, "scope", "--catalog", uri, "--runs", "r2", "--max_depth", "1")
    assert (rc, err) == (0, ""), err
    damage, problem = ROWS.get(how) or OBJECTS[how]
    if how in ROWS:
        edit_runs(uri, damage)
    else:
        damage(uri)
    rc, out, err = _sql(capsys, uri)
    one_warning(rc, err, f"the catalog `{uri}` skips", "`r1`", problem)
    assert out == f"run,n\nr2,{n}\n"
    rc, out, err = run(capsys, "scope", "--catalog", uri, "--runs", "r*", "--max_depth", "1")
    one_warning(rc, err, "`r1`", problem)
    assert out == want_r2  # the aggregate of r2 alone
    assert run(capsys, "scope", "--catalog", uri, "--run", "r2", "--max_depth", "1")[::2] == (0, "")
    rc, out, err = run(capsys, "runs", uri)
    if how in ROWS:  # a listing reads the run list only: an object's damage shows where it is read
        one_warning(rc, err, "`r1`", problem)
        assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["r2"]
    else:
        assert (rc, err) == (0, "") and [line.split()[0] for line in out.splitlines()[1:-1]] == ["r1", "r2"]
    one_error(*run(capsys, "scope", "--catalog", uri, "--run", "r1", "--max_depth", "1")[::2], problem)
    if how in ROWS:  # (a sound row: r1 is no job, whatever its objects hold)
        one_error(*run(capsys, "scope", "--catalog", uri, "--run", "r1", "--aggregate", "sum")[::2], problem)


@pytest.mark.parametrize("how", list(ROWS) + list(OBJECTS))
def test_writers_keep_a_damaged_run_and_never_delete_what_another_row_lists(two, capsys, how):
    """An add beside a damaged run keeps its row as it is and deletes no object (not even one no
    row lists: the damaged row may have lost it); removing the damaged run deletes only its own
    partitions, never one another row lists."""
    uri = two
    store = ObjectStore(uri)
    damage, problem = ROWS.get(how) or OBJECTS[how]
    if how in ROWS:
        edit_runs(uri, damage)
    else:
        damage(uri)
    before = set(store.list())
    r1_rows = [r for r in run_list(uri).to_pylist() if r["run"] == "r1"]
    rc, _, err = run(capsys, "ingest", "--catalog", uri, "--run", "r3", SAMPLE)
    if how in ROWS:
        one_warning(rc, err, "keeps a run it cannot read as it is: `r1`" if how != "twice" else
                    "keeps 2 runs it cannot read as they are: `r1`", problem)
    else:
        assert (rc, err) == (0, ""), err
    assert before <= set(store.list())  # nothing deleted
    assert [r for r in run_list(uri).to_pylist() if r["run"] == "r1"] == r1_rows
    rc, _, err = run(capsys, "runs", uri, "--remove", "r1")
    assert (rc, err) == (0, ""), err
    left = run_list(uri).to_pylist()
    assert [r["run"] for r in left] == ["r2", "r3"]
    keys = set(store.list())
    assert {f["path"] for r in left for f in r["files"]} <= keys  # every object another row lists is there
    others = {f["path"] for r in left for f in r["files"]}
    own = {f["path"] for r in r1_rows for f in r["files"] if "/run=r1/" in f["path"]} - others
    assert not own & keys  # r1's own partitions went with it
    n = nodes_rows(uri, "r2")
    assert _sql(capsys, uri) == (0, f"run,n\nr2,{n}\nr3,{n}\n", "")
    assert run(capsys, "check", uri)[0] == 0


def test_replacing_a_damaged_run_keeps_what_another_row_lists(two, capsys):
    """``--force`` over a run whose row lists another run's object: the new run is in, that object
    stays, and the other run reads as before."""
    uri = two
    edit_runs(uri, ROWS["others_object"][0])
    rc, _, err = run(capsys, "ingest", "--catalog", uri, "--run", "r1", "--force", SAMPLE)
    one_warning(rc, err, "keeps a run it cannot read as it is: `r1`")
    n = nodes_rows(uri, "r2")
    assert _sql(capsys, uri) == (0, f"run,n\nr1,{n}\nr2,{n}\n", "")
    assert run(capsys, "check", uri)[0] == 0


def test_the_python_api_skips_and_names_a_damaged_run_in_s3(two):
    uri = two
    OBJECTS["checksum"][0](uri)
    edit_runs(uri, lambda rows: rows.append({**next(r for r in rows if r["run"] == "r2"), "run": "r\n3"}))
    with pytest.warns(CatalogWarning, match=r"a run named `r\\n3`"):
        assert runs(uri).column("run").to_pylist() == ["r1", "r2"]
    with pytest.warns(CatalogWarning, match=r"skips 2 runs it cannot read: .*`r1` .*checksum differs"):
        assert sql(uri, "select distinct run from nodes").to_pylist() == [{"run": "r2"}]
    with pytest.warns(CatalogWarning):
        assert match_runs(uri, "r*") == ["r1", "r2"]
    with pytest.raises(ProfileFormatError, match="checksum differs"):
        tfprof.catalog.run_profile(uri, "r1")
    assert tfprof.catalog.run_profile(uri, "r2").row_counts()["nodes"] > 0
