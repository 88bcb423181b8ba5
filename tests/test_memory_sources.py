"""Memory over time from tfprof's own profiles and PyTorch's reserved bytes, against facts read
from the raw files with the protobuf runtime and ``json`` alone (never tfprof's readers):

* a device whose node records sample the GPU allocators' bytes in use peaks at their largest, the
  "peak memory" real tfprof's timeline prints (tests/golden/timeline);
* a CPU profile's levels are the per-node estimate (an execution holds its peak bytes from its
  start, its residual bytes from its end to the step's end), worked out here from the records;
* a Kineto trace's ``Total Reserved`` is each step's reserved bytes beside the allocated peak."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from conftest import FIXTURES
from foreign_expect import load_trace_events
from test_memory_time import running_peak

import tfprof
from tfprof.api.memory import memory, memory_page, memory_report
from tfprof.cli.main import main as cli_main
from tfprof.schema.proto import tfprof_log_pb2

GOLDEN = Path(__file__).parent / "golden" / "timeline" / "gpu_lanes"
CUDA_CNN = FIXTURES / "foreign" / "torch_cuda_cnn.pt.trace.json.gz"


def _proto(path: Path) -> tfprof_log_pb2.ProfileProto:
    proto = tfprof_log_pb2.ProfileProto()
    proto.ParseFromString(path.read_bytes())
    return proto


def _samples_peak(path: Path) -> dict[tuple[str, int], int]:
    """Per (GPU device, step): the largest ``allocator_bytes_in_use`` of its nodes' records."""
    peak: dict[tuple[str, int], int] = {}
    for node in _proto(path).nodes.values():
        if "cpu" in node.canonical_device:
            continue
        for step, execs in node.execs.items():
            for m in execs.memory_execs:
                if m.memory_micros > 0 and m.allocator_bytes_in_use > 0:
                    key = (node.canonical_device, step)
                    peak[key] = max(peak.get(key, 0), m.allocator_bytes_in_use)
    return peak


def test_recorded_allocator_samples_peak_where_real_tfprof_does():
    path = GOLDEN / "profile.pb"
    rows = memory(tfprof.load(path))
    want = _samples_peak(path)
    assert want and rows["exact"].all() and set(rows["source"]) == {"recorded"}
    assert {(r["allocator"], r["step"]): r["peak_bytes"] for r in rows.iter_rows(named=True)} == want
    # the real tool's timeline prints each GPU's peak, `%.2f MB` of bytes / 1e6
    printed = set(re.findall(r"^(\S+) peak memory: ([0-9.]+) MB$",
                             (GOLDEN / "graph_default_cli.stdout").read_text(), re.M))
    assert printed == {(device, f"{peak / 1e6:.2f}") for (device, _), peak in want.items()}


def _estimate(path: Path) -> dict[tuple[str, int], int]:
    """Per (device, step): the per-node estimate's peak, from the ProfileProto's records."""
    deltas: dict[tuple[str, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for node in _proto(path).nodes.values():
        for step, execs in node.execs.items():
            for seq, m in enumerate(execs.memory_execs):
                if m.memory_micros <= 0:
                    continue
                start = min(execs.all_start_micros, m.memory_micros) if seq == 0 else m.memory_micros
                deltas[(node.canonical_device, step)][start] += m.peak_bytes
                deltas[(node.canonical_device, step)][m.memory_micros] += m.residual_bytes - m.peak_bytes
    return {key: running_peak(by_time) for key, by_time in deltas.items() if any(by_time.values())}


def test_a_cpu_profile_peaks_at_its_per_node_estimate(capsys):
    path = Path(tfprof.sample_path("multistep"))
    prof = tfprof.load(path)
    rows = memory(prof)
    assert set(rows["source"]) == {"per-node"} and not rows["exact"].any()
    assert {(r["allocator"], r["step"]): r["peak_bytes"] for r in rows.iter_rows(named=True)} == _estimate(path)
    assert "~ no allocator level" in memory_report(prof)
    assert cli_main(["memory", str(tfprof.sample_path("cnn"))]) == 0
    out = capsys.readouterr().out
    assert "no memory data" not in out and "peak" in out
    assert memory_page(prof, None, None)["curve"]


def test_kineto_total_reserved_is_beside_the_allocated_peak(capsys):
    _, events = load_trace_events(CUDA_CNN)
    reserved: dict[str, int] = defaultdict(int)
    for e in events:
        if e.get("name") == "[memory]" and "Total Reserved" in e["args"]:
            a = e["args"]
            allocator = "cpu" if a["Device Type"] == 0 else f"cuda:{a['Device Id']}"
            reserved[allocator] = max(reserved[allocator], a["Total Reserved"])
    assert reserved["cuda:0"] > 0
    prof = tfprof.load(CUDA_CNN)
    rows = memory(prof)
    got = {a: max(r["reserved_bytes"] for r in rows.iter_rows(named=True) if r["allocator"] == a)
           for a in set(rows["allocator"])}
    assert got == dict(reserved)
    page = memory_page(prof, None, "cuda:0")
    assert max(v for _, v in page["reserved_curve"]) == page["shown"]["reserved_bytes"]
    assert cli_main(["memory", str(CUDA_CNN), "--format", "json"]) == 0
    assert {r["allocator"] for r in json.loads(capsys.readouterr().out) if r["reserved_bytes"]} == {"cuda:0"}
    assert "reserved" in memory_report(prof).splitlines()[1]
