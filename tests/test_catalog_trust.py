"""A catalog is never trusted (tfprof.catalog.trust): a run list naming a place outside the
catalog, or a link on the way, is one `Error:` line and nothing is touched; a flipped bit in a
partition is an error, never a wrong number; `tfprof check CATALOG` names every damaged
partition and entry; names and tags with control characters are refused, and what a crafted
run list holds is shown escaped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from damage import silent_flip, tree

import tfprof
from tfprof.catalog import add_run, run_profile, runs
from tfprof.catalog.layout import RUNS_SCHEMA, read_runs, write_runs
from tfprof.cli.main import main
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.schema import TABLES


def run(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(rc: int, err: str, *wanted: str) -> None:
    lines = err.strip("\n").split("\n")
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("Error: "), (rc, err)
    for text in wanted:
        assert text in lines[0], (text, lines[0])


def edit_runs(root: Path, edit) -> None:
    """Rewrite the runs table with ``edit(rows)`` applied: what someone who can write the catalog can do."""
    rows = read_runs(root).to_pylist()
    edit(rows)
    write_runs(root, pa.Table.from_pylist(rows, RUNS_SCHEMA))


def entry(rows: list[dict], run: str, table: str) -> dict:
    return next(f for r in rows if r["run"] == run for f in r["files"] if f["table"] == table)


@pytest.fixture
def cat(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for run_name in ("r1", "r2"):
        add_run("cat", run_name, profile_path=tfprof.sample_path())
    victim = tmp_path / "outside" / "deep" / "victim.txt"
    victim.parent.mkdir(parents=True)
    victim.write_text("not the catalog's")
    return Path("cat")


COMMANDS = {  # what reads or writes a catalog
    "remove": ["runs", "cat", "--remove", "r1"],
    "add": ["ingest", "--catalog", "cat", "--run", "r3", tfprof.sample_path()],
    "replace": ["ingest", "--catalog", "cat", "--run", "r1", "--force", tfprof.sample_path()],
    "view": ["scope", "--catalog", "cat", "--run", "r1", "--max_depth", "2"],
    "aggregate": ["scope", "--catalog", "cat", "--runs", "r*", "--max_depth", "2"],
    "sql": ["sql", "select run, count(*) from nodes group by run", "--catalog", "cat"],
}

PATHS = {  # a listed path of run r1's nodes table, and what the error names
    "relative": lambda tmp: "../outside/deep/victim.txt",
    "absolute": lambda tmp: str(tmp / "outside" / "deep" / "victim.txt"),
    "dot_dot_inside": lambda tmp: "nodes/run=r1/../../outside/deep/victim.txt",
    "another_runs_file": lambda tmp: None,  # r2's own nodes partition: removing r1 would take it
}


def one_warning(rc: int, err: str, *wanted: str) -> None:
    """Exit 0 and one `Warning:` line on stderr holding each of ``wanted``."""
    lines = err.strip("\n").split("\n")
    assert rc == 0 and len(lines) == 1 and lines[0].startswith("Warning: "), (rc, err)
    for text in wanted:
        assert text in lines[0], (text, lines[0])


def outside(tmp: Path, before: dict[str, str], after: dict[str, str], *keep: str) -> None:
    """Everything outside the catalog, and its files ``keep`` (paths in it), as it was."""
    kept = {f"cat/{k}" for k in keep}

    def part(t: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in t.items() if not k.startswith("cat/") or k in kept}

    assert part(after) == part(before)


@pytest.mark.parametrize("how", list(PATHS))
def test_a_listed_path_outside_its_partitions_touches_nothing(cat, tmp_path, capsys, how):
    """A crafted row names a file outside its partitions: that run is refused where named, skipped
    with one warning where runs are read together, kept untouched by writers, and removable; the
    file it names is never touched, and the other run reads as before."""
    bad = PATHS[how](tmp_path)
    rows = read_runs(cat).to_pylist()
    own = entry(rows, "r1", "nodes")["path"]  # the partition r1 listed before the edit

    def edit(rows):
        entry(rows, "r1", "nodes")["path"] = bad if bad is not None else entry(rows, "r2", "nodes")["path"]

    edit_runs(cat, edit)
    bad = bad if bad is not None else entry(read_runs(cat).to_pylist(), "r2", "nodes")["path"]
    problem = f"run `r1` lists `{bad}`"
    before = tree(tmp_path)
    one_error(*run(capsys, *COMMANDS["view"])[::2], f"run `r1` of the catalog `cat` cannot be read: {problem}",
              "--remove r1")
    assert tree(tmp_path) == before
    rc, out, err = run(capsys, "sql", "select run, count(*) n from nodes group by run", "--catalog", "cat",
                       "--format", "csv")
    one_warning(rc, err, "skips a run it cannot read: `r1`", problem)
    assert out == "run,n\nr2,467\n"
    rc, out, err = run(capsys, *COMMANDS["aggregate"])
    one_warning(rc, err, "`r1`", problem)
    assert "_TFProfRoot (" in out
    rc, out, err = run(capsys, "runs", "cat")
    one_warning(rc, err, "`r1`")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["r2", "1"]
    assert run(capsys, "scope", "--catalog", "cat", "--run", "r2", "--max_depth", "1")[::2] == (0, "")
    assert tree(tmp_path) == before
    rc, out, err = run(capsys, "check", "cat")
    assert rc == 2 and "run r1: damaged" in out and f"lists `{bad}`" in out and f"run r2: {len(TABLES)} files ok" in out, out
    one_error(rc, err, "the catalog `cat` is damaged (runs r1)")
    assert tree(tmp_path) == before
    # a writer keeps the row as it is and touches nothing it lists
    r1_row = next(r for r in read_runs(cat).to_pylist() if r["run"] == "r1")
    one_warning(*run(capsys, *COMMANDS["add"])[::2], "keeps a run it cannot read as it is: `r1`")
    after = tree(tmp_path)
    outside(tmp_path, before, after, own, bad)
    assert next(r for r in read_runs(cat).to_pylist() if r["run"] == "r1") == r1_row
    assert run(capsys, "scope", "--catalog", "cat", "--run", "r3", "--max_depth", "1")[0] == 0
    # removing it deletes its own partitions only: not what it names, nor the one it lost
    rc, _, err = run(capsys, *COMMANDS["remove"])
    assert rc == 0 and err == "", err
    outside(tmp_path, before, tree(tmp_path), own, bad)
    assert not [p for p in cat.rglob("part-*") if "run=r1" in str(p) and p.relative_to(cat).as_posix() != own]
    rc, out, _ = run(capsys, "sql", "select run, count(*) n from nodes group by run order by run", "--catalog", "cat",
                     "--format", "csv")
    assert (rc, out) == (0, "run,n\nr2,467\nr3,467\n")
    assert run(capsys, "check", "cat")[0] == 0


def test_replacing_a_damaged_run_with_force_deletes_only_its_own_files(cat, tmp_path, capsys):
    edit_runs(cat, lambda rows: entry(rows, "r1", "nodes").update(path="../outside/deep/victim.txt"))
    before = tree(tmp_path)
    one_warning(*run(capsys, *COMMANDS["replace"])[::2], "keeps a run it cannot read as it is: `r1`")
    outside(tmp_path, before, tree(tmp_path))
    assert run(capsys, "check", "cat")[0] == 0
    rc, out, err = run(capsys, "sql", "select run, count(*) n from nodes group by run order by run", "--catalog",
                       "cat", "--format", "csv")
    assert (rc, out, err) == (0, "run,n\nr1,467\nr2,467\n", "")


def test_a_run_only_layout_entry_outside_the_catalog_is_not_moved_in(cat, tmp_path, capsys):
    """The layout upgrade links each run=<name>/part-* file at its new place: not one outside,
    and not one a damaged row lists."""
    edit_runs(cat, lambda rows: entry(rows, "r1", "execs").update(path="../outside/deep/victim.txt"))
    before = tree(tmp_path)
    one_warning(*run(capsys, *COMMANDS["add"])[::2], "`../outside/deep/victim.txt`")
    outside(tmp_path, before, tree(tmp_path), *[k[4:] for k in before if "run=r1/" in k and "part-" in k])
    assert not list(cat.rglob("victim.txt"))


LINKS = {  # an entry of the catalog made a link: (the entry, where it leads, the commands that meet it)
    "staging": (".staging", "../proj", ["add"]),
    "table_folder": ("nodes", "../proj/moved", ["remove", "add", "view", "sql"]),
    "partition_dir": ("execs/run=ghost", "../../proj", ["add"]),
    "lock": (".lock", "../proj/lockfile", ["remove", "add", "view", "sql"]),
    "run_list": ("runs.parquet", "../proj/runs.parquet", ["remove", "add", "view", "sql"]),
}


@pytest.mark.parametrize("what", list(LINKS))
def test_a_link_in_the_catalog_is_refused_and_nothing_is_touched(cat, tmp_path, capsys, what):
    """`proj/` looks like what a writer cleans up (a stale writer's lock and ingest folder, a
    leftover partition): nothing of it may be deleted, created or read through the link."""
    proj = tmp_path / "proj"
    (proj / "data-a").mkdir(parents=True)
    (proj / "data-a" / "x.txt").write_text("x")
    (proj / "a.lock").write_text("")
    (proj / "host=h" / "worker=w").mkdir(parents=True)
    (proj / "host=h" / "worker=w" / "part-0.parquet").write_text("mine")
    name, target, commands = LINKS[what]
    link = cat / name
    if what in ("table_folder", "run_list"):  # the real one moved out, and reached through the link
        os.rename(link, proj / Path(target).name)
    elif what == "staging":
        link.rmdir()
    elif what == "lock":
        link.unlink()
    os.symlink(target, link)
    before = tree(tmp_path)
    for command in commands:
        rc, _, err = run(capsys, *COMMANDS[command])
        one_error(rc, err, f"`{link}` is a symbolic link")
        assert tree(tmp_path) == before, command
    rc, out, err = run(capsys, "check", "cat")
    assert rc == 2 and f"`{link}` is a symbolic link" in out + err
    assert tree(tmp_path) == before


def test_a_flipped_bit_in_a_partition_is_an_error_not_a_wrong_number(cat, capsys):
    """Where the damaged run is named, an error; where runs are read together, the run is left
    out with one warning naming the partition, never read as a number."""
    part = cat / entry(read_runs(cat).to_pylist(), "r1", "execs")["path"]
    want, got = silent_flip(part, "duration_micros")
    rc, out, err = run(capsys, "sql", "select run, sum(duration_micros) us from execs group by run", "--catalog", "cat",
                       "--format", "csv")
    one_warning(rc, err, "skips a run it cannot read: `r1`", f"`{part}` is damaged (its checksum differs", "--remove")
    assert str(got) not in out and out.startswith("run,us\nr2,")
    rc, out, err = run(capsys, *COMMANDS["aggregate"])
    one_warning(rc, err, "skips a run it cannot read: `r1`", f"`{part}` is damaged")
    one_error(*run(capsys, *COMMANDS["view"])[::2], f"`{part}` is damaged")
    with pytest.raises(ProfileFormatError, match="checksum"):
        run_profile(cat, "r1")
    # the other run, and tables that are not damaged, still read
    assert run(capsys, "scope", "--catalog", "cat", "--run", "r2", "--max_depth", "1")[0] == 0
    rc, out, _ = run(capsys, "sql", "select count(*) n from nodes", "--catalog", "cat", "--format", "csv")
    assert rc == 0 and out == "n\n934\n"
    rc, out, err = run(capsys, "check", "cat")
    assert rc == 2 and "run r1: damaged" in out and f"`{part}` is damaged" in out and f"run r2: {len(TABLES)} files ok" in out
    one_error(rc, err, "(runs r1)")
    rc, out, _ = run(capsys, "check", "cat", "--format", "json")
    report = json.loads(out)
    assert rc == 2 and [r["run"] for r in report["runs"] if r["problems"]] == ["r1"]
    # the fix the message gives works
    assert run(capsys, "runs", "cat", "--remove", "r1")[0] == 0
    assert run(capsys, "check", "cat")[0] == 0


def test_check_names_a_missing_or_resized_partition(cat, capsys):
    rows = read_runs(cat).to_pylist()
    (cat / entry(rows, "r1", "steps")["path"]).unlink()
    nodes = cat / entry(rows, "r2", "nodes")["path"]
    nodes.write_bytes(nodes.read_bytes() + b"\0")
    rc, out, err = run(capsys, "check", "cat")
    assert rc == 2 and "run r1: damaged" in out and "run r2: damaged" in out
    assert f"`{cat / entry(rows, 'r1', 'steps')['path']}` is missing" in out and f"`{nodes}` is damaged" in out
    one_error(rc, err, "(runs r1, r2)")


def test_check_of_a_sound_catalog(cat, capsys):
    rc, out, err = run(capsys, "check", "cat")
    assert rc == 0 and err == ""
    assert out.splitlines() == ["catalog cat: 2 runs", f"run r1: {len(TABLES)} files ok; its data: 0 errors, 0 warnings",
                                f"run r2: {len(TABLES)} files ok; its data: 0 errors, 0 warnings"]
    rc, out, _ = run(capsys, "check", "cat", "--format", "json")
    assert rc == 0 and json.loads(out)["problems"] == []


@pytest.mark.parametrize("argv,shown", [
    (["--run", "a\nb"], "a\\nb"),
    (["--run", "r\x1b[2J"], "r\\x1b[2J"),
    (["--run", "r", "--tag", "k=v\nr9"], "v\\nr9"),
    (["--run", "r", "--tag", "k\r=v"], "k\\r"),
    (["--run", "r", "--tag", "host=h\n"], "h\\n"),
])
def test_names_and_tags_with_control_characters_are_refused(cat, tmp_path, capsys, argv, shown):
    before = tree(tmp_path)
    rc, _, err = run(capsys, "ingest", "--catalog", "cat", *argv, tfprof.sample_path())
    one_error(rc, err, shown)
    assert tree(tmp_path) == before
    with pytest.raises(OptionError, match="control characters"):
        add_run(cat, "r", tags={"k": "v\u2028"}, profile_path=tfprof.sample_path())
    one_error(*run(capsys, "runs", "cat", "--remove", "a\nb")[::2], "a\\nb")


def test_a_crafted_run_list_is_listed_escaped_one_row_per_run(cat, capsys):
    """What a run list holds is shown escaped, one line per run; a row no command could have
    written (a tag or name with a control character) is left out of listings and SQL with one
    warning, escaped too, and the other run still reads."""
    forged = "v\nr9      profile  1  1  0  0  2024-01-01T00:00:00+00:00  -  /x"

    def edit(rows):
        rows[0]["tags"] = [("k", forged)]
        rows[1]["source_file"] = "/tmp/a\x1b[31mred"

    edit_runs(cat, edit)
    rc, out, err = run(capsys, "runs", "cat")
    lines = out.splitlines()
    one_warning(rc, err, "skips a run it cannot read: `r1`", "v\\nr9")
    assert len(lines) == 3 and lines[-1] == "1 runs" and lines[1].split()[0] == "r2"
    assert "\x1b" not in out + err and "a\\x1b[31mred" in lines[1]
    rc, out, err = run(capsys, "runs", "cat", "--format", "json")
    assert rc == 0 and "\x1b" not in out and [r["run"] for r in json.loads(out)] == ["r2"]
    assert json.loads(out)[0]["source_file"] == "/tmp/a\x1b[31mred"  # JSON escapes it as JSON does
    # the tag could not have been given: the run is refused where named
    one_error(*run(capsys, *COMMANDS["view"])[::2], "run `r1` has a --tag k", "v\\nr9")
    edit_runs(cat, lambda rows: rows[0].update(run="r1\nr9"))
    rc, out, err = run(capsys, "runs", "cat")
    one_warning(rc, err, "`r1\\nr9`")
    assert len(out.splitlines()) == 3 and "r1" not in out
    rc, out, err = run(capsys, "sql", "select run, count(*) n from nodes group by run", "--catalog", "cat",
                       "--format", "csv")
    one_warning(rc, err, "a run named `r1\\nr9`")
    assert out == "run,n\nr2,467\n"


def test_a_partition_named_by_a_damaged_entry_is_refused(cat, capsys):
    edit_runs(cat, lambda rows: entry(rows, "r1", "nodes").update(crc32="not-hex"))
    one_error(*run(capsys, *COMMANDS["view"])[::2], "damaged entry")
    with pytest.warns(tfprof.errors.CatalogWarning, match="damaged entry"):
        assert runs(cat).column("run").to_pylist() == ["r2"]
    assert read_runs(cat).num_rows == 2  # the row itself is kept


def test_two_rows_of_one_name_are_both_skipped(cat, capsys):
    edit_runs(cat, lambda rows: rows[1].update(run="r1"))
    rc, out, err = run(capsys, "runs", "cat")
    one_warning(rc, err, "2 runs it cannot read", "lists run `r1` twice")
    assert out.splitlines()[-1] == "0 runs"
    one_error(*run(capsys, *COMMANDS["view"])[::2], "lists run `r1` twice")
    assert run(capsys, *COMMANDS["remove"])[0] == 0  # both rows go, and the files of r1's own partitions
    left = {p.parts[2] for p in cat.rglob("part-*")}
    assert read_runs(cat).num_rows == 0 and left == {"run=r2"}  # what the renamed row listed is not r1's: kept
