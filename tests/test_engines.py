"""The two engines of a command (``tfprof.kernels``): numba's kernels, and the reference paths a
fresh install uses while the kernels compile in the background. Same bytes either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tfprof
from tfprof import kernels
from tfprof.api import run_view

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CASES = [
    {},
    {"max_depth": 4, "select": ["micros", "bytes", "params", "float_ops", "occurrence"], "order_by": "micros"},
    {"account_type_regexes": ["_trainable_variables"], "select": ["params"], "max_depth": 100},
    {"max_depth": 100, "min_micros": 10, "hide_name_regexes": [".*Grad.*"], "account_displayed_op_only": True,
     "select": ["device", "op_types", "input_shapes", "micros"]},
]


def _texts(monkeypatch, engine: str, name: str) -> dict:
    monkeypatch.setenv("TFPROF_ENGINE", engine)
    prof = tfprof.load(FIXTURES / name / "profile.pb")
    out = {"tables": {t: prof.table(t) for t in prof.table_names}}
    for cmd in ("scope", "graph", "op"):
        for i, options in enumerate(CASES):
            result = run_view(prof, cmd, options)
            out[cmd, i] = (result.text, result.notes)
    return out


@pytest.mark.parametrize("name", ["cnn", "multistep", "gpu_tiny", "rnn"])
def test_reference_paths_print_what_the_kernels_print(monkeypatch, name):
    ref, fast = _texts(monkeypatch, "reference", name), _texts(monkeypatch, "kernels", name)
    for table, data in fast.pop("tables").items():
        assert ref["tables"][table].equals(data), table  # the protobuf decoder and the compiled one
    ref.pop("tables")
    assert ref.keys() == fast.keys()
    for key in fast:
        assert ref[key] == fast[key], key


def test_the_reference_paths_compile_no_kernel(tmp_path):
    """With numba's cache empty, a demo on the reference paths compiles nothing and prints the
    kernels' bytes."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    ref = subprocess.run([sys.executable, "-m", "tfprof", "demo"], capture_output=True, text=True, cwd=tmp_path,
                         env={**env, "TFPROF_ENGINE": "reference"}, timeout=120)
    assert ref.returncode == 0, ref.stderr
    assert not list((tmp_path / "cache").rglob("*.nbi"))  # (rglob of a missing folder: nothing)
    fast = subprocess.run([sys.executable, "-m", "tfprof", "demo"], capture_output=True, text=True, cwd=tmp_path,
                          env={**env, "TFPROF_ENGINE": "kernels", "NUMBA_CACHE_DIR": ""}, timeout=600)
    assert fast.returncode == 0, fast.stderr
    assert ref.stdout == fast.stdout


class _Started:
    def __init__(self):
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append((args, kwargs))


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """``auto`` with numba's cache not known to be complete; background jobs recorded, not run."""
    monkeypatch.setenv("TFPROF_ENGINE", "auto")
    monkeypatch.setattr(kernels, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(kernels, "_READY", False)
    started = _Started()
    monkeypatch.setattr(kernels.subprocess, "Popen", started)
    return started


def test_a_cold_cache_runs_small_profiles_on_the_reference_and_compiles_once_in_the_background(cold, tmp_path):
    prof = tfprof.load(tfprof.sample_path())
    seen = []
    original = kernels.using

    def spy(flag):
        seen.append(flag)
        return original(flag)

    kernels.using = spy
    try:
        run_view(prof, "scope", {"max_depth": 2})
        run_view(prof, "op", {})
    finally:
        kernels.using = original
    assert False in seen and True not in seen
    assert len(cold.calls) == 1  # one background compilation, not one per command
    args, kwargs = cold.calls[0]
    assert args[1:] == ["-m", "tfprof.api.warm"] and kwargs["start_new_session"]
    assert kwargs["env"]["TFPROF_ENGINE"] == "kernels"
    assert kwargs["stdout"].name == str(tmp_path / "tfprof-kernels.log")  # a failure is kept, not lost
    assert (tmp_path / "tfprof-kernels.warming").exists()


def test_large_profiles_and_a_complete_cache_run_on_the_kernels(cold, monkeypatch, tmp_path):
    assert not kernels.use_kernels(nodes=10)
    monkeypatch.setattr(kernels, "SMALL_NODES", 5)
    assert kernels.use_kernels(nodes=10)
    monkeypatch.setattr(kernels, "SMALL_NODES", 20_000)
    kernels.marker().write_text("done")
    assert kernels.use_kernels(nodes=10)
    assert len(cold.calls) == 1  # only the first, cold call started one


def test_the_marker_names_the_sources(cold, monkeypatch, tmp_path):
    """A changed source file (size or time) makes numba recompile: the marker changes with it."""
    before = kernels.marker()
    source = tmp_path / "pkg"
    source.mkdir()
    (source / "m.py").write_text("x = 1\n")
    monkeypatch.setattr(kernels, "_PACKAGE", source)
    first = kernels.marker()
    (source / "m.py").write_text("x = 22\n")
    assert kernels.marker() != first != before


def test_an_unknown_engine_is_an_option_error(monkeypatch):
    monkeypatch.setenv("TFPROF_ENGINE", "gpu")
    with pytest.raises(tfprof.OptionError, match="TFPROF_ENGINE=`gpu`.*auto, kernels, reference"):
        kernels.use_kernels(nodes=1)


def test_the_warm_job_compiles_and_marks(monkeypatch, tmp_path):
    """``python -m tfprof.api.warm``'s work, in this process (the kernels mostly cached by now)."""
    from tfprof.api import warm

    monkeypatch.setattr(kernels, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(kernels, "_READY", False)
    monkeypatch.delenv("TFPROF_WARM_LOCK", raising=False)
    assert not kernels.kernels_ready()
    assert warm.main() == 0
    assert kernels.marker().exists() and kernels.kernels_ready()
    assert [p.name for p in tmp_path.iterdir()] == [kernels.marker().name]  # no temporary left


def test_the_exact_name_set_finds_what_the_hash_set_finds():
    """Validation's duplicate-name check on the reference paths (polars) and on the kernel."""
    import random

    import pyarrow as pa

    from tfprof.ingest.name_set import NameSet
    from tfprof.ingest.names import ExactNames

    rng = random.Random(7)
    for _ in range(100):
        exact, hashed = ExactNames(), NameSet()
        for _ in range(3):  # batches: a name is seen again within a batch or from an earlier one
            names = pa.array([rng.choice("abcdefgh") * rng.randint(1, 3) for _ in range(rng.randint(0, 30))])
            assert exact.add(names).tolist() == hashed.add(names).tolist()


def test_a_reference_backend_another_thread_is_importing_is_not_active(monkeypatch):
    """Two threads (the two sides of a diff) may import the reference backend at once; the one
    that finds it half-imported runs its local engine instead of failing on what is not there yet."""
    import sys
    import types

    from tfprof.queries.engine import on_sql_backend

    monkeypatch.setitem(sys.modules, "tfprof.queries.reference", types.ModuleType("tfprof.queries.reference"))
    assert on_sql_backend() is False
