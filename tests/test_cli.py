"""The CLI as a user runs it: subprocesses, real files."""

from __future__ import annotations

import subprocess
import sys

from conftest import FIXTURES, run_metas
from tfprof import Profile


def tfprof(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, timeout=120)


def _counts(stdout: str) -> dict[str, int]:
    rows = [line.split() for line in stdout.strip().splitlines()[1:]]
    return {name: int(n.replace(",", "")) for name, n in rows}


def test_tables_lists_every_table_with_its_rows():
    path = FIXTURES / "cnn" / "profile.pb"
    proc = tfprof("tables", "--profile_path", str(path))
    assert proc.returncode == 0, proc.stderr
    assert _counts(proc.stdout) == Profile.from_inputs(profile_path=path).row_counts()


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
    again = tfprof("ingest", str(d / "profile.pb"), "--out", str(out))  # a store is replaced
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
