"""The CLI as a user runs it: subprocesses, real files."""

from __future__ import annotations

import subprocess
import sys

from conftest import FIXTURES, run_metas

from tfprof import api


def tfprof(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, timeout=120)


def _counts(stdout: str) -> dict[str, int]:
    rows = [line.split() for line in stdout.strip().splitlines()[1:]]
    return {name: int(n.replace(",", "")) for name, n in rows}


def test_tables_lists_every_table_with_its_rows():
    path = FIXTURES / "cnn" / "profile.pb"
    proc = tfprof("tables", "--profile_path", str(path))
    assert proc.returncode == 0, proc.stderr
    assert _counts(proc.stdout) == api.load(profile_path=path).row_counts()


def test_option_spellings_are_equivalent():
    d = FIXTURES / "multistep"
    rms = ",".join(run_metas("multistep"))
    a = tfprof("tables", f"--graph_path={d / 'graph.pbtxt'}", f"--run_meta_path={rms}", f"--op_log_path={d / 'op_log.pb'}")
    b = tfprof("tables", "--graph-path", str(d / "graph.pbtxt"), "--run-meta-path", rms, "--op-log-path", str(d / "op_log.pb"))
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout
    assert _counts(a.stdout)["steps"] == 3


def test_ingest_then_tables_on_store(tmp_path):
    d = FIXTURES / "rnn"
    out = tmp_path / "rnn.tfprof"
    proc = tfprof("ingest", "--profile_path", str(d / "profile.pb"), "--checkpoint_path", str(d / "model.ckpt"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and (out / "tfprof_store.json").is_file()
    on_store = tfprof("tables", str(out))
    on_file = tfprof("tables", "--profile_path", str(d / "profile.pb"), "--checkpoint_path", str(d / "model.ckpt"))
    assert on_store.stdout == on_file.stdout
    assert _counts(on_store.stdout)["checkpoint_tensors"] > 0
    refused = tfprof("ingest", str(d / "profile.pb"), "--out", str(out))  # an existing store needs --force
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert _counts(tfprof("tables", "--profile_path", str(out)).stdout)["checkpoint_tensors"] > 0
    again = tfprof("ingest", str(d / "profile.pb"), "--out", str(out), "--force")  # a store is replaced
    assert again.returncode == 0, again.stderr
    assert _counts(tfprof("tables", "--profile_path", str(out)).stdout)["checkpoint_tensors"] == 0


def test_demo_runs_on_the_bundled_sample():
    proc = tfprof("demo")
    assert proc.returncode == 0, proc.stderr
    assert "trainable parameters" in proc.stdout
    assert "nodes" in proc.stdout and "code_frames" in proc.stdout


def test_version_and_help():
    assert tfprof("--version").stdout.startswith("tfprof ")
    help_ = tfprof("ingest", "--help")
    assert help_.returncode == 0 and "--run_meta_path" in help_.stdout and "Examples" in help_.stdout


def test_view_option_spellings_are_equivalent():
    p = str(FIXTURES / "cnn" / "profile.pb")
    runs = [
        tfprof("scope", "--profile_path", p, "--max_depth", "3", "--select", "params,micros", "--account_displayed_op_only"),
        tfprof("scope", p, "--max_depth=3", "--select=params,micros", "--account_displayed_op_only=true"),
        tfprof("scope", p, "-max_depth", "3", "-select", "params,micros", "-account_displayed_op_only", "true"),
    ]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout
    assert "node name | # parameters | total execution time" in runs[0].stdout


def test_view_empty_list_and_file_output(tmp_path):
    p = str(FIXTURES / "multistep" / "profile.pb")
    out = tmp_path / "op.txt"
    proc = tfprof("op", p, "--show_name_regexes=", "--output", f"file:outfile={out}")
    assert proc.returncode == 0 and proc.stdout == ""
    body = out.read_text().split("Profile:\n", 1)[1]
    assert body.strip().splitlines() == ["node name | total execution time | accelerator execution time | cpu execution time"]


def test_view_bad_values_are_one_line_errors():
    p = str(FIXTURES / "cnn" / "profile.pb")
    for args, needle in [
        (("--order_by", "time"), "order_by"),
        (("--hide_name_regexes", "("), "Bad regex `(`"),
        (("--max_dpth", "3"), "max_dpth"),
        (("--step", "7"), "available steps: 0"),
        (("--max_depth", "x"), "integer"),
        (("--output", "file:outfile=/no/such/dir/x.txt"), "does not exist"),
    ]:
        proc = tfprof("scope", p, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], (args, proc.stderr)


def test_view_defaults_are_the_real_tools_command_line_defaults():
    """`tfprof <view> P` with no options prints what the real tool prints with its CLI defaults."""
    for fixture in ("cnn", "multistep"):
        for view in ("scope", "graph", "op", "code"):
            golden = (FIXTURES.parent / "golden" / fixture / f"{view}_default_cli.txt").read_text()
            proc = tfprof(view, str(FIXTURES / fixture / "profile.pb"))
            assert proc.returncode == 0, proc.stderr
            ours = proc.stdout[proc.stdout.index("node name |"):]
            assert ours == golden[golden.index("node name |"):], (fixture, view)
