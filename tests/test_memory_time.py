"""Memory over time (``tfprof memory``, ``tfprof.memory``, the UI's Memory page) against facts
read from the traces with ``json`` alone: the allocators and their event counts, the recorded
levels' peak (PyTorch's ``Total Allocated``), and, for a trace without levels, the peak of the
running sum of its ``Bytes`` per allocator (events of one µs taken together, as documented)."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict

import polars as pl
import pytest
from conftest import FIXTURES

import tfprof
from tfprof.api.memory import memory, memory_page, memory_report, peak_ops, pick
from tfprof.cli.main import main as cli_main
from tfprof.errors import OptionError

TORCH = str(tfprof.sample_path("torch"))
RESNET = str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")
KERAS = str(FIXTURES / "foreign" / "tf2_keras_memory.xplane.pb")


def _memory_events(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return [e for e in json.loads(f.read())["traceEvents"] if e.get("name") == "[memory]"]


def _allocator(args: dict) -> str:
    return "cpu" if args["Device Type"] == 0 else f"cuda:{args['Device Id']}"


@pytest.mark.parametrize("path", [TORCH, RESNET], ids=["torch_cpu", "resnet_gpu"])
def test_allocators_and_events_are_the_traces(path):
    events = _memory_events(path)
    rows = memory(tfprof.load(path))
    got = dict(rows.group_by("allocator").agg(pl.col("events").sum()).rows())
    # every [memory] instant is in a step here (the traces' steps cover them)
    assert got == dict(Counter(_allocator(e["args"]) for e in events))


def test_a_trace_with_levels_peaks_at_its_largest_total_allocated():
    events = _memory_events(TORCH)
    rows = memory(tfprof.load(TORCH))
    assert rows["exact"].all()
    assert rows["peak_bytes"].max() == max(e["args"]["Total Allocated"] for e in events)


def running_peak(deltas: dict[int, int]) -> int:
    """The highest level the changes ``{time: bytes}`` reach, summed in time order from 0."""
    level = peak = 0
    for t in sorted(deltas):
        level += deltas[t]
        peak = max(peak, level)
    return peak


def test_a_trace_without_levels_peaks_at_its_running_sums_largest():
    by_time: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for e in _memory_events(RESNET):
        us = round(round(e["ts"] * 1000) / 1000)  # whole µs, as tfprof keeps times
        by_time[_allocator(e["args"])][us] += e["args"]["Bytes"]
    want = {allocator: running_peak(deltas) for allocator, deltas in by_time.items()}
    rows = memory(tfprof.load(RESNET))
    assert not rows["exact"].any()
    assert dict(rows.select("allocator", "peak_bytes").rows()) == want


def test_the_ops_at_the_peak_add_up_to_the_climb():
    prof = tfprof.load(RESNET)
    row = pick(memory(prof), None, None)
    assert row["allocator"] == "cuda:0"
    ops = peak_ops(prof, row["step"], row["allocator"], top=1000)
    assert ops["bytes"].is_sorted(descending=True) and (ops["bytes"] > 0).all()
    # what the ops added (net, positive ones only) is at least the climb from the start to the peak
    assert ops["bytes"].sum() >= row["peak_bytes"] - row["start_bytes"]


def test_the_page_keeps_the_peak_when_it_thins_the_curve():
    prof = tfprof.load(RESNET)
    full = memory_page(prof, None, None)
    thin = memory_page(prof, None, None, points=200)
    assert len(full["curve"]) > 200 >= len(thin["curve"])
    assert max(v for _, v in thin["curve"]) == max(v for _, v in full["curve"]) == full["shown"]["peak_bytes"]


def test_command_line_text_formats_and_errors(capsys):
    assert cli_main(["memory", KERAS, "--top", "3"]) == 0
    text = capsys.readouterr().out
    prof = tfprof.load(KERAS)
    row = pick(memory(prof), None, None)
    assert text == memory_report(prof, top=3)
    assert f"at the peak of step {row['step']} on {row['allocator']}" in text
    assert cli_main(["memory", KERAS, "--format", "json"]) == 0
    assert [r["peak_bytes"] for r in json.loads(capsys.readouterr().out)] == memory(prof)["peak_bytes"].to_list()
    assert cli_main(["memory", KERAS, "--step", "9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: no allocation events in step 9; steps: 0, 1") and len(err.splitlines()) == 1
    with pytest.raises(OptionError, match="allocator `nosuch`"):
        pick(memory(prof), None, "nosuch")
    assert not memory_report(tfprof.load(tfprof.sample_path())).startswith("no memory data")
