"""No output replaces an existing file without --force, none ever writes over an input of its
command (not even with --force), and a failed write leaves nothing behind (tfprof.output).

Every case runs in a working directory holding the cnn fixture's inputs and a store, and
checks afterwards that every file there is byte for byte what it was, except the outputs the
case named with --force, and that no temporary (`.<name>.*`) is left.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

import tfprof
from tfprof.cli.main import main
from tfprof.errors import OutputError

CNN = FIXTURES / "cnn"


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (hidden ones included); a directory as 'dir'."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = "dir" if p.is_dir() and not p.is_symlink() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> set[str]:
    """Paths added, removed or modified."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


def no_debris(folder: Path) -> None:
    left = [str(p) for p in folder.rglob(".*")]
    assert not left, f"temporaries left behind: {left}"


@pytest.fixture(scope="module")
def store_template(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tmpl") / "s.tfprof"
    assert main(["ingest", str(CNN / "profile.pb"), "--out", str(out)]) == 0
    return out


@pytest.fixture
def work(tmp_path, monkeypatch, store_template) -> Path:
    """The cnn fixture's inputs and a store ``s.tfprof``, in the current directory."""
    d = tmp_path / "w"
    shutil.copytree(CNN, d, ignore=shutil.ignore_patterns("golden"))
    shutil.copytree(store_template, d / "s.tfprof")
    monkeypatch.chdir(d)
    return d


def run(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


# ------------------------------------------------------------------ existing outputs need --force

# (argv, the file it writes, a test that the file is that output)
WRITERS = {
    "file": (["scope", "profile.pb", "--max_depth", "2", "--output", "file:outfile=out.txt"], "out.txt",
             lambda b: b"node name" in b),
    "timeline": (["scope", "profile.pb", "--step", "0", "--output", "timeline:outfile=trace"], "trace_0",
                 lambda b: b"traceEvents" in b),
    "pprof": (["code", "--profile_path", "profile.pb", "--select", "micros", "--output", "pprof:outfile=code.pb.gz"],
              "code.pb.gz", lambda b: b[:2] == b"\x1f\x8b"),
    "view_format": (["op", "profile.pb", "--format", "csv", "--output", "file:outfile=ops.csv"], "ops.csv",
                    lambda b: b.startswith(b"name,")),
    "sql_out": (["sql", "select 1 as one", "profile.pb", "--format", "csv", "--out", "one.csv"], "one.csv",
                lambda b: b == b"one\n1\n"),
    "graph_view_on_store": (["graph", "s.tfprof", "--max_depth", "1", "--output", "file:outfile=g.txt"], "g.txt",
                            lambda b: b"node name" in b),
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_existing_output_is_replaced_only_with_force(work, capsys, writer):
    argv, target, is_output = WRITERS[writer]
    (work / target).write_bytes(b"precious")
    before = snapshot(work)
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    one_error(err, f"`{target}` already exists", "--force")
    assert snapshot(work) == before
    rc, out, err = run(capsys, *argv, "--force")
    assert rc == 0, err
    assert changed(before, snapshot(work)) == {target}
    assert is_output((work / target).read_bytes())
    no_debris(work)


def test_force_can_be_spelt_as_tfprof_spells_options(work, capsys):
    (work / "out.txt").write_bytes(b"precious")
    before = snapshot(work)
    rc, _, err = run(capsys, "scope", "profile.pb", "-max_depth", "1", "-output", "file:outfile=out.txt", "-force")
    assert rc == 0, err
    assert changed(before, snapshot(work)) == {"out.txt"}


def test_graph_timeline_checks_every_step_before_writing_any(tmp_path, monkeypatch, capsys):
    shutil.copy(FIXTURES / "multistep" / "profile.pb", tmp_path / "p.pb")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t_2").write_bytes(b"precious")  # the last of three steps
    before = snapshot(tmp_path)
    rc, _, err = run(capsys, "graph", "p.pb", "--output", "timeline:outfile=t")
    assert rc == 2
    one_error(err, "`t_2` already exists", "--force")
    assert snapshot(tmp_path) == before  # no t_0 or t_1 either
    rc, out, err = run(capsys, "graph", "p.pb", "--output", "timeline:outfile=t", "--force")
    assert rc == 0, err
    assert changed(before, snapshot(tmp_path)) == {"t_0", "t_1", "t_2"}
    for step in range(3):
        assert json.loads((tmp_path / f"t_{step}").read_text())["traceEvents"]
    no_debris(tmp_path)


def test_a_timeline_of_several_steps_goes_to_disk_one_step_at_a_time(tmp_path, monkeypatch):
    """Each step's trace is made once the previous one is in its temporary file: the made
    data is handed to the writer as functions, called one after the other."""
    import tfprof.output.files as output
    from tfprof.api import run_view, write_output

    seen: list[list[str]] = []
    fill = output._fill

    def spy(tmp, data):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        fill(tmp, data)

    monkeypatch.setattr(output, "_fill", spy)
    prof = tfprof.load(profile_path=FIXTURES / "multistep" / "profile.pb")
    result = run_view(prof, "graph", {"output": f"timeline:outfile={tmp_path}/t"})
    written = write_output(prof, result)
    assert [p.name for p in written.paths] == ["t_0", "t_1", "t_2"]
    assert [len([n for n in names if n.startswith(".t_")]) for names in seen] == [1, 2, 3]


# ------------------------------------------------------------------ never over an input


def _inputs_cases(work: Path) -> dict[str, tuple[list[str], str]]:
    os.symlink("profile.pb", work / "link.pb")
    os.link(work / "profile.pb", work / "hard.pb")
    shutil.copy(work / "profile.pb", work / "t_0")
    shutil.copy(work / "run_meta_0.pb", work / "run_meta_1.pb")
    raw = ["--graph_path", "graph.pb", "--run_meta_path", "run_meta_0.pb,run_meta_1.pb", "--op_log_path", "op_log.pb"]
    ckpt = ["--profile_path", "profile.pb", "--checkpoint_path", "model.ckpt"]
    file_out = "--output"
    return {
        "profile_path": (["scope", "--profile_path", "profile.pb", file_out, "file:outfile=profile.pb"], "profile.pb"),
        "graph_path": (["scope", *raw, file_out, "file:outfile=graph.pb"], "graph.pb"),
        "run_meta_path": (["scope", *raw, file_out, "file:outfile=run_meta_1.pb"], "run_meta_1.pb"),
        "op_log_path": (["op", *raw, file_out, "file:outfile=./op_log.pb"], "op_log.pb"),
        "checkpoint_index": (["scope", *ckpt, file_out, "file:outfile=model.ckpt.index"], "model.ckpt.index"),
        "checkpoint_shard": (["scope", *ckpt, file_out, "file:outfile=model.ckpt.data-00000-of-00001"],
                             "model.ckpt.data-00000-of-00001"),
        "checkpoint_prefix": (["scope", *ckpt, file_out, "file:outfile=model.ckpt"], "model.ckpt"),
        "file_in_input_store": (["scope", "s.tfprof", file_out, "file:outfile=s.tfprof/nodes.parquet"],
                                "s.tfprof/nodes.parquet"),
        "new_file_in_input_store": (["scope", "s.tfprof", file_out, "file:outfile=s.tfprof/report.txt"],
                                    "s.tfprof/report.txt"),
        "symlink_to_input": (["scope", "profile.pb", file_out, "file:outfile=link.pb"], "link.pb"),
        "hard_link_to_input": (["scope", "profile.pb", file_out, "file:outfile=hard.pb"], "hard.pb"),
        "input_by_absolute_path": (["scope", str(work / "profile.pb"), file_out, "file:outfile=profile.pb"],
                                   "profile.pb"),
        "timeline_step_file": (["scope", "t_0", "--step", "0", file_out, "timeline:outfile=t"], "t_0"),
        "pprof": (["code", "profile.pb", "--select", "micros", file_out, "pprof:outfile=profile.pb"], "profile.pb"),
        "view_format": (["op", "profile.pb", "--format", "csv", file_out, "file:outfile=profile.pb"], "profile.pb"),
        "sql_out": (["sql", "select 1", "profile.pb", "--out", "profile.pb"], "profile.pb"),
        "sql_out_into_store": (["sql", "select 1", "s.tfprof", "--out", "s.tfprof/nodes.parquet"],
                               "s.tfprof/nodes.parquet"),
        "ingest_onto_its_store": (["ingest", "--profile_path", "s.tfprof", "--out", "s.tfprof"], "s.tfprof"),
        "ingest_onto_a_dir_holding_an_input": (["ingest", "--profile_path", "s.tfprof/../profile.pb", "--out", "."],
                                               "."),
    }


INPUT_CASES = [
    "profile_path", "graph_path", "run_meta_path", "op_log_path", "checkpoint_index", "checkpoint_shard",
    "checkpoint_prefix", "file_in_input_store", "new_file_in_input_store", "symlink_to_input", "hard_link_to_input",
    "input_by_absolute_path", "timeline_step_file", "pprof", "view_format", "sql_out", "sql_out_into_store",
    "ingest_onto_its_store", "ingest_onto_a_dir_holding_an_input",
]


@pytest.mark.parametrize("case", INPUT_CASES)
def test_an_input_is_never_written_over_even_with_force(work, capsys, case):
    argv, target = _inputs_cases(work)[case]
    before = snapshot(work)
    for extra in ([], ["--force"]):
        rc, out, err = run(capsys, *argv, *extra)
        assert rc == 2, err
        one_error(err, f"`{target}`", "input")
        assert snapshot(work) == before
    no_debris(work)


def test_the_cases_cover_every_input_option(work):
    from tfprof.cli.app import INPUT_OPTIONS

    cases = _inputs_cases(work)
    assert set(cases) == set(INPUT_CASES)
    for option in INPUT_OPTIONS:
        assert any(f"--{option}" in argv for argv, _ in cases.values()), option


# ------------------------------------------------------------------ failed writes leave nothing


def test_a_failed_write_leaves_no_temporary_and_the_old_file(work, capsys, monkeypatch):
    import tfprof.output.files as output

    (work / "out.txt").write_bytes(b"precious")
    before = snapshot(work)

    def full_disk(tmp, data):
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output, "_fill", full_disk)
    rc, _, err = run(capsys, "scope", "profile.pb", "--output", "file:outfile=out.txt", "--force")
    assert rc == 2
    one_error(err, "`out.txt`", "No space left on device")
    assert snapshot(work) == before


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError, SystemExit])
def test_an_interrupted_write_leaves_nothing(tmp_path, exc):
    from tfprof.output import write_file, write_files

    (tmp_path / "old").write_bytes(b"precious")

    def boom():
        raise exc()

    before = snapshot(tmp_path)
    with pytest.raises(exc):
        write_file(tmp_path / "old", boom, force=True)
    with pytest.raises(exc):  # the first file is complete in its temporary when the second fails
        write_files({tmp_path / "a": b"one", tmp_path / "b": boom})
    assert snapshot(tmp_path) == before


def test_pieces_are_written_in_turn_and_a_failure_between_them_leaves_nothing(tmp_path):
    from tfprof.output import write_file

    write_file(tmp_path / "x", iter(["Δ one\n", b"two\n", "three\n"]))
    assert (tmp_path / "x").read_text() == "Δ one\ntwo\nthree\n"
    (tmp_path / "old").write_bytes(b"precious")

    def pieces():
        yield "half of a report\n"
        raise KeyboardInterrupt

    before = snapshot(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        write_file(tmp_path / "old", pieces(), force=True)
    assert snapshot(tmp_path) == before


def test_files_get_the_mode_open_would_give(tmp_path):
    from tfprof.output import write_file

    mask = os.umask(0o027)
    try:
        write_file(tmp_path / "x", b"1")
    finally:
        os.umask(mask)
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o640


def test_a_file_that_appears_meanwhile_is_not_replaced(tmp_path):
    """Without force the file is made with a hard link, which fails if the name was taken
    after the check (a rename would replace it)."""
    from tfprof.output import write_file

    def late():
        (tmp_path / "x").write_bytes(b"someone else's")
        return b"ours"

    with pytest.raises(OutputError, match="already exists"):
        write_file(tmp_path / "x", late)
    assert (tmp_path / "x").read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]


# ------------------------------------------------------------------ ingest: store ownership


def test_ingest_replaces_a_store_only_with_force(work, capsys):
    before = snapshot(work)
    rc, _, err = run(capsys, "ingest", "profile.pb", "--out", "s.tfprof")
    assert rc == 2
    one_error(err, "`s.tfprof` already exists", "--force")
    assert snapshot(work) == before
    shutil.copy(FIXTURES / "rnn" / "profile.pb", work / "rnn.pb")
    before = snapshot(work)
    rc, out, err = run(capsys, "ingest", "rnn.pb", "--out", "s.tfprof", "--force")
    assert rc == 0, err
    assert {p.split(os.sep)[0] for p in changed(before, snapshot(work))} == {"s.tfprof"}
    manifest = json.loads((work / "s.tfprof" / "tfprof_store.json").read_text())

    assert manifest["tables"]["nodes"] == tfprof.load(profile_path=work / "rnn.pb").row_counts()["nodes"]
    no_debris(work)


@pytest.mark.parametrize("foreign", ["notes.txt", "indexes/mine.txt", "indexes/code_trie/extra.arrow", "empty_dir/"])
def test_ingest_never_deletes_what_is_not_part_of_the_store(work, capsys, foreign):
    path = work / "s.tfprof" / foreign
    if foreign.endswith("/"):
        path.mkdir()
    else:
        path.write_text("the user's")
    before = snapshot(work)
    rc, _, err = run(capsys, "ingest", "profile.pb", "--out", "s.tfprof", "--force")
    assert rc == 2
    one_error(err, str(Path("s.tfprof") / foreign.rstrip("/")), "not part of the tfprof store")
    assert snapshot(work) == before
    no_debris(work)


def test_ingest_refuses_a_directory_that_is_not_a_store(work, capsys):
    (work / "mine").mkdir()
    (work / "mine" / "thesis.tex").write_text("do not delete")
    (work / "afile").write_text("do not delete")
    before = snapshot(work)
    for out, needle in (("mine", "not a tfprof store"), ("afile", "is not a directory")):
        for extra in ([], ["--force"]):
            rc, _, err = run(capsys, "ingest", "profile.pb", "--out", out, *extra)
            assert rc == 2
            one_error(err, f"`{out}`", needle)
            assert snapshot(work) == before


def test_ingest_into_an_existing_empty_directory_needs_force(work, capsys):
    (work / "empty").mkdir()
    before = snapshot(work)
    rc, _, err = run(capsys, "ingest", "profile.pb", "--out", "empty")
    assert rc == 2 and "--force" in err
    rc, _, err = run(capsys, "ingest", "profile.pb", "--out", "empty", "--force")
    assert rc == 0, err
    assert {p.split(os.sep)[0] for p in changed(before, snapshot(work))} == {"empty"}
    assert (work / "empty" / "tfprof_store.json").is_file()


def test_a_store_of_the_previous_layout_is_replaced_file_by_file(work, capsys):
    """A store written before the manifest listed its files: its tables and index parts are
    known from the manifest, and anything else in it is still refused."""
    mf = work / "s.tfprof" / "tfprof_store.json"
    manifest = json.loads(mf.read_text())
    del manifest["files"]
    mf.write_text(json.dumps(manifest))
    (work / "s.tfprof" / "notes.txt").write_text("the user's")
    before = snapshot(work)
    rc, _, err = run(capsys, "ingest", "profile.pb", "--out", "s.tfprof", "--force")
    assert rc == 2
    one_error(err, "notes.txt")
    assert snapshot(work) == before
    (work / "s.tfprof" / "notes.txt").unlink()
    rc, _, err = run(capsys, "ingest", "profile.pb", "--out", "s.tfprof", "--force")
    assert rc == 0, err
    assert "files" in json.loads(mf.read_text())


# ------------------------------------------------------------------ Python APIs


def test_save_needs_force_and_never_writes_its_own_store(work):
    from tfprof import Profile

    prof = tfprof.load(profile_path="profile.pb")
    before = snapshot(work)
    with pytest.raises(OutputError, match="already exists"):
        tfprof.save(prof, "s.tfprof")
    assert snapshot(work) == before
    tfprof.save(prof, "s.tfprof", force=True)
    assert Profile.open("s.tfprof").row_counts() == prof.row_counts()
    stored = Profile.open("s.tfprof")
    before = snapshot(work)
    with pytest.raises(OutputError, match="input"):
        tfprof.save(stored, "s.tfprof", force=True)
    with pytest.raises(OutputError, match="input"):  # the profile's own file
        tfprof.save(prof, "profile.pb", force=True)
    assert snapshot(work) == before
    no_debris(work)


def test_emit_output_takes_force_and_protects_the_profiles_inputs(work):
    from tfprof.api import emit_output, run_view

    (work / "out.txt").write_bytes(b"precious")
    prof = tfprof.load(profile_path="profile.pb")
    result = run_view(prof, "scope", {"max_depth": 1, "output": "file:outfile=out.txt"})
    before = snapshot(work)
    with pytest.raises(OutputError, match="--force"):
        emit_output(prof, result)
    assert snapshot(work) == before
    emit_output(prof, result, force=True)
    assert (work / "out.txt").read_text() == result.text
    mine = run_view(prof, "scope", {"max_depth": 1, "output": "file:outfile=profile.pb"})
    with pytest.raises(OutputError, match="input"):
        emit_output(prof, mine, force=True)
    assert changed(before, snapshot(work)) == {"out.txt"}


def test_tf_profiler_api_overwrites_as_tensorflow_but_never_an_input(work, capsys):
    """tf.profiler's API replaces an existing output file, as TensorFlow does,
    but not a file it was given as an input."""
    import tfprof

    (work / "report.txt").write_bytes(b"old report")
    before = snapshot(work)
    opts = tfprof.ProfileOptionBuilder.trainable_variables_parameter()
    tfprof.profile(graph="graph.pb", op_log="op_log.pb", options={**opts, "output": "file:outfile=report.txt"})
    assert changed(before, snapshot(work)) == {"report.txt"}
    assert b"param" in (work / "report.txt").read_bytes()
    before = snapshot(work)
    with pytest.raises(OutputError, match="input"):
        tfprof.profile(graph="graph.pb", op_log="op_log.pb", options={**opts, "output": "file:outfile=graph.pb"})
    profiler = tfprof.Profiler(graph="graph.pb")
    profiler.add_step(0, "run_meta_0.pb")
    with pytest.raises(OutputError, match="input"):
        profiler.profile_name_scope({**opts, "output": "file:outfile=run_meta_0.pb"})
    with pytest.raises(OutputError, match="input"):
        profiler._write_profile("graph.pb")
    assert snapshot(work) == before
    (work / "logs").mkdir()
    shutil.copy(work / "op_log.pb", work / "logs" / "tfprof_log")
    before = snapshot(work)
    with pytest.raises(OutputError, match="input"):  # its op_log argument is the file it would write
        tfprof.write_op_log("graph.pb", "logs", op_log="logs/tfprof_log")
    assert snapshot(work) == before
    (work / "logs" / "tfprof_log").write_bytes(b"an old log")
    before = snapshot(work)
    tfprof.write_op_log("graph.pb", "logs", op_log="op_log.pb")  # an existing log is replaced
    assert changed(before, snapshot(work)) == {str(Path("logs") / "tfprof_log")}
    no_debris(work)


# ------------------------------------------------------------------ the interactive shell


def test_shell_views_take_force(work, capsys, monkeypatch):
    (work / "out.txt").write_bytes(b"precious")
    before = snapshot(work)
    lines = [
        "scope -max_depth 1 -output file:outfile=out.txt",
        "scope -max_depth 2 -output file:outfile=profile.pb -force",
        "scope -max_depth 1 -output file:outfile=out.txt -force",
        "graph -max_depth 1 -output file:outfile=out.txt",
    ]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    rc, out, err = run(capsys, "profile.pb")
    assert rc == 0
    errors = err.strip().splitlines()
    assert len(errors) == 3, err
    assert "already exists" in errors[0] and "--force" in errors[0]
    assert "`profile.pb`" in errors[1] and "input" in errors[1]
    assert "already exists" in errors[2]  # -force is for the one command only
    assert changed(before, snapshot(work)) == {"out.txt"}
    assert (work / "out.txt").read_text().count("\n") > 1
    no_debris(work)


# ------------------------------------------------------------------ every writing command, through links

GLOO = FIXTURES / "ranks" / "gloo4"

# Every command that writes a file or directory: its argv ({out}: the output), the suffix the
# written name adds to {out} (a timeline's step), and an input of that command (relative to the
# working directory) that a link given as the output leads to.
WRITING = {
    "view_file": (["scope", "profile.pb", "--max_depth", "1", "--output", "file:outfile={out}"], "", "profile.pb"),
    "view_timeline": (["scope", "profile.pb", "--step", "0", "--output", "timeline:outfile={out}"], "_0", "profile.pb"),
    "view_pprof": (["code", "profile.pb", "--select", "micros", "--output", "pprof:outfile={out}"], "", "profile.pb"),
    "view_trace": (["op", "profile.pb", "--select", "micros", "--output", "trace:outfile={out}"], "", "profile.pb"),
    "view_folded": (["scope", "profile.pb", "--select", "micros", "--output", "folded:outfile={out}"], "",
                    "profile.pb"),
    "view_pprof_tree": (["graph", "profile.pb", "--select", "micros", "--max_depth", "2", "--output",
                         "pprof_tree:outfile={out}"], "", "profile.pb"),
    "view_html": (["scope", "profile.pb", "--select", "micros", "--output", "html:outfile={out}"], "", "profile.pb"),
    "view_format": (["op", "profile.pb", "--format", "csv", "--output", "file:outfile={out}"], "", "profile.pb"),
    "view_of_a_store": (["scope", "s.tfprof", "--max_depth", "1", "--output", "file:outfile={out}"], "",
                        "s.tfprof/nodes.parquet"),
    "view_of_a_catalog_run": (["scope", "--catalog", "cat", "--run", "r", "--max_depth", "1", "--output",
                               "file:outfile={out}"], "", "cat/runs.parquet"),
    "sql": (["sql", "select 1 as one", "profile.pb", "--format", "csv", "--out", "{out}"], "", "profile.pb"),
    "sql_catalog": (["sql", "select 1 as one", "--catalog", "cat", "--format", "csv", "--out", "{out}"], "",
                    "cat/runs.parquet"),
    "diff": (["diff", "profile.pb", "s.tfprof", "--out", "{out}"], "", "s.tfprof/nodes.parquet"),
    "diff_catalog": (["diff", "--catalog", "cat", "r", "r", "--out", "{out}"], "", "cat/runs.parquet"),
    "memory": (["memory", "job/rank-0.pt.trace.json.gz", "--format", "csv", "--out", "{out}"], "",
               "job/rank-0.pt.trace.json.gz"),
    "steps": (["steps", "job/rank-0.pt.trace.json.gz", "--format", "csv", "--out", "{out}"], "",
              "job/rank-0.pt.trace.json.gz"),
    "ranks": (["ranks", "job", "--format", "csv", "--out", "{out}"], "", "elsewhere/rank-1.pt.trace.json.gz"),
    "ranks_catalog": (["ranks", "--catalog", "cat", "--run", "j", "--format", "csv", "--out", "{out}"], "",
                      "cat/runs.parquet"),
    "ingest_store": (["ingest", "profile.pb", "--out", "{out}"], "", "profile.pb"),
    "ingest_catalog": (["ingest", "--catalog", "{out}", "--run", "x", "profile.pb"], "", "profile.pb"),
    "ingest_job_catalog": (["ingest", "--catalog", "{out}", "--run", "x", "job"], "", "job"),
}


@pytest.fixture(scope="module")
def catalog_template(tmp_path_factory) -> Path:
    from tfprof.catalog import add_job, add_run

    root = tmp_path_factory.mktemp("walk") / "cat"
    add_run(root, "r", profile_path=str(CNN / "profile.pb"))
    add_job(root, "j", [GLOO / "rank-0.pt.trace.json.gz", GLOO / "rank-1.pt.trace.json.gz"])
    return root


@pytest.fixture
def walk(work, catalog_template) -> Path:
    """``work`` with a job folder whose rank 1 is a link to a trace elsewhere, and a catalog."""
    (work / "job").mkdir()
    (work / "elsewhere").mkdir()
    shutil.copy(GLOO / "rank-0.pt.trace.json.gz", work / "job")
    shutil.copy(GLOO / "rank-1.pt.trace.json.gz", work / "elsewhere")
    os.symlink("../elsewhere/rank-1.pt.trace.json.gz", work / "job" / "rank-1.pt.trace.json.gz")
    shutil.copytree(catalog_template, work / "cat")
    return work


def test_the_walk_covers_every_writing_command_and_output_kind():
    import typer

    from tfprof.cli.app import app
    from tfprof.queries.options import OUTPUT_KINDS

    commands = typer.main.get_command(app).commands
    writers = {name for name, c in commands.items() if {"out", "force"} & {p.name for p in c.params}}
    assert writers == {argv[0] for argv, _, _ in WRITING.values()}
    kinds = {arg.split(":")[0] for argv, _, _ in WRITING.values() for arg in argv if ":outfile=" in arg}
    assert kinds == {k for k, kind in OUTPUT_KINDS.items() if kind.writes_file}


@pytest.mark.parametrize("case", list(WRITING))
def test_every_writing_command_refuses_a_link_to_its_input_and_an_existing_file(walk, capsys, case):
    """Given as the output, a link to one of the command's inputs is refused even with --force
    (nothing changes, the link included); an existing file is refused without --force."""
    from damage import tree

    argv, suffix, source = WRITING[case]
    assert (walk / source).exists(), source
    os.symlink(os.path.relpath(walk / source, walk), walk / f"link{suffix}")
    before = tree(walk)
    rc, _, err = run(capsys, *[a.format(out="link") for a in argv], "--force")
    assert rc == 2, err
    one_error(err, "input")
    assert tree(walk) == before
    (walk / f"kept{suffix}").write_bytes(b"precious")
    before = tree(walk)
    rc, _, err = run(capsys, *[a.format(out="kept") for a in argv])
    assert rc == 2, err
    one_error(err, "`kept")
    assert tree(walk) == before
    assert not [q for q in walk.rglob(".*") if "cat" not in q.relative_to(walk).parts]  # the catalog's own .lock


def test_ranks_never_replaces_a_trace_link_in_its_job_folder(walk, capsys):
    """The measured failure: `ranks job/ --out job/rank-1.json --force`, that file a link to a
    trace, replaced the link with the report."""
    from damage import tree

    before = tree(walk)
    for out in ("job/rank-1.pt.trace.json.gz", "elsewhere/rank-1.pt.trace.json.gz", "job/new.csv"):
        rc, _, err = run(capsys, "ranks", "job", "--format", "csv", "--out", out, "--force")
        assert rc == 2, err
        one_error(err, f"`{out}`", "input")
    os.symlink("job", walk / "jl")  # the job folder by another name
    before = tree(walk)
    rc, _, err = run(capsys, "ranks", "job", "--format", "csv", "--out", "jl/new.csv")
    assert rc == 2 and "inside the input directory `job`" in err, err
    assert tree(walk) == before
