"""The advisor and the pprof output on every foreign fixture: they run, the expensive-operation check
names the op type that an independent walk of the raw trace finds most expensive, the accelerator
check says nothing on CPU captures, validation does not call a foreign profile's ops "not in the
graph", and the code view's pprof holds the Python stacks (Kineto) or is refused in one line (XSpace).
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_foreign_ingest import torch_self_micros

import tfprof
from tfprof.schema.proto import pprof_pb2

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TORCH = ["torch_cnn.pt.trace.json", "torch_transformer.pt.trace.json.gz"]
XSPACES = ["jax_mlp.xplane.pb", "tf2_keras.xplane.pb"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], check=False, capture_output=True, text=True,
                          timeout=300)


def _sections(text: str) -> dict[str, list[str]]:
    out, current = {}, None
    for line in text.splitlines():
        if re.fullmatch(r"\w+Checker:", line):
            current = out.setdefault(line[:-1], [])
        elif current is not None and line.strip():
            current.append(line)
    return out


@pytest.mark.parametrize("name", TORCH + XSPACES)
def test_advise_runs_and_the_accelerator_check_is_silent_on_cpu(name):
    proc = cli("advise", "--profile_path", str(FOREIGN / name))
    assert proc.returncode == 0, proc.stderr
    sections = _sections(proc.stdout)
    assert sections["AcceleratorUtilizationChecker"] == []
    expensive = sections["ExpensiveOperationChecker"]
    tops = [re.match(r"top (\d+) operation type: (.+?), cpu: (\d+)us", x) for x in expensive]
    tops = [m for m in tops if m]
    assert tops and tops[0].group(1) == "1"
    assert [int(m.group(3)) for m in tops] == sorted((int(m.group(3)) for m in tops), reverse=True)
    if name in TORCH:  # the most expensive op type by an independent walk of the raw JSON; tfprof's time
        per_step = torch_self_micros(name)  # of a node over all steps is its mean per step
        total = Counter()
        for ops in per_step.values():
            total.update(ops)
        (op, us), = total.most_common(1)
        assert tops[0].group(2) == op
        assert abs(int(tops[0].group(3)) - us / len(per_step)) <= 1


@pytest.mark.parametrize("name", TORCH + XSPACES)
def test_validation_has_no_runtime_node_finding_for_foreign_profiles(name):
    codes = tfprof.load(FOREIGN / name).frame("validation")["code"].cast(str).to_list()
    assert "runtime_node" not in codes and "graph_mismatch" not in codes


@pytest.mark.parametrize("name", TORCH)
def test_pprof_of_the_code_view_holds_the_python_stacks(name, tmp_path):
    out = tmp_path / "code.pb.gz"
    proc = cli("code", "--profile_path", str(FOREIGN / name), "--select", "micros", "--output", f"pprof:outfile={out}")
    assert proc.returncode == 0, proc.stderr
    profile = pprof_pb2.Profile.FromString(gzip.decompress(out.read_bytes()))
    assert len(profile.sample) > 0 and len(profile.location) > 0
    assert any("train_step" in s for s in profile.string_table)
    assert sum(v for s in profile.sample for v in s.value[1:2]) > 0


@pytest.mark.parametrize("name", XSPACES)
def test_pprof_without_python_stacks_is_one_line(name, tmp_path):
    proc = cli("code", "--profile_path", str(FOREIGN / name), "--output", f"pprof:outfile={tmp_path / 'x.pb.gz'}")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Python stacks" in lines[0] and "xspace" in lines[0]


SKIP_LINE = "skipped: a check for TensorFlow profiles; this profile is from {}"
FRAMEWORKS = {"torch_cnn.pt.trace.json": "PyTorch", "torch_transformer.pt.trace.json.gz": "PyTorch",
              "jax_mlp.xplane.pb": "JAX", "tf2_keras.xplane.pb": None}


@pytest.mark.parametrize("name", TORCH + XSPACES)
def test_tensorflow_advice_only_for_tensorflow_and_gpu_checks_say_no_gpu_events(name):
    """OperationChecker runs on the TF2 XSpace and is left out elsewhere (asked for by name, it says
    it is skipped in one line); every GPU check says "no GPU events" in one line on these CPU
    captures (docs/ADVISOR.md)."""
    from tfprof.api import advise
    from tfprof.queries.advisor import TRACE_CHECKS

    # the framework from the raw file: a TF op event is `<path>:<type>` (XSpace), Kineto is PyTorch
    raw = (FOREIGN / name).read_bytes()
    if name in XSPACES:
        assert (b"StatefulPartitionedCall" in raw) == (FRAMEWORKS[name] is None)
    prof = tfprof.load(FOREIGN / name)
    sections = _sections(advise(prof).text)
    made_by = FRAMEWORKS[name]
    assert sections.get("OperationChecker") == (None if made_by else [])
    asked = _sections(advise(prof, ["OperationChecker"]).text)
    assert asked["OperationChecker"] == ([SKIP_LINE.format(made_by)] if made_by else [])
    for check in TRACE_CHECKS:
        assert sections[check.name] == ["no GPU events (kernels, copies, memsets): nothing to check on this capture"]
