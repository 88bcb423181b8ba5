"""The noise band's samples from one engine pass are the samples of one view run per step.

A sample is a row's value in each step (``tfprof.queries.noise``). ``run_diff`` gets them from
the same engine pass as the values: the engine sums each node's per-step values beside its
values (``TreeSpec.samples``, ``tfprof.queries.indexes.means.step_samples``). Its plain
statement, one view run per step (``tfprof.api.diff._with_sums``, what the reference backend
uses), must give the same numbers; so must the per-node values, step by step.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import tfprof
from tfprof.api import diff as api
from tfprof.api.diff import run_diff
from tfprof.queries import diff as rules
from tfprof.queries.indexes.means import step_numbers, step_samples
from tfprof.queries.options import Options

PAIRS = Path(__file__).parent / "fixtures" / "diff"
FIELDS = ["micros", "accelerator_micros", "cpu_micros", "bytes", "peak_bytes", "residual_bytes", "output_bytes",
          "params", "float_ops", "macs"]
COLUMNS = ("exec_micros", "accelerator_exec_micros", "cpu_exec_micros", "requested_bytes", "peak_bytes",
           "residual_bytes", "output_bytes", "parameters", "float_ops", "macs", "run_count")


@pytest.fixture(scope="module")
def profiles() -> dict:
    return {name: tfprof.load(PAIRS / name / "profile.pb") for name in ("base", "wide")}


@pytest.mark.parametrize("source", ["base", "sample", "torch"])
def test_step_samples_are_each_steps_numbers(profiles, source):
    prof = profiles["base"] if source == "base" else tfprof.load(tfprof.sample_path(*(() if source == "sample" else (source,))))
    steps = prof.frame("steps")["step"].to_list()
    got = step_samples(prof, COLUMNS, [*steps, 10**9])  # a step nobody ran: zeros but static values
    for s in [*steps, 10**9]:
        want = step_numbers(prof, s)
        for c in COLUMNS:
            np.testing.assert_array_equal(got[c, s], want.column("params" if c == "parameters" else c).to_numpy(),
                                          err_msg=f"{source}: {c} in step {s}")
    assert any(got["exec_micros", s].any() for s in steps)  # not a profile of zeros


def _sums_both_ways(prof, cmd: str, options: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    opts = Options.from_tfprof({"select": FIELDS, **options})
    steps = api._steps(prof)
    fields = api.diff_fields(opts.select)
    layout = api.VIEWS[cmd].layout
    values = [api._value_column(f, layout) for f in fields]
    one = api._rows(prof, cmd, opts, fields, steps, "a_")
    plain = rules.step_sums([api._rows(prof, cmd, replace(opts, step=s)) for s in steps], values, "a_")
    sums = [f"a_{c}_{s}" for c in values for s in ("sum", "sumsq")]
    joined = one.select(*rules.KEYS, *sums).join(plain, on=list(rules.KEYS), how="left", suffix="_plain")
    return joined.select(*rules.KEYS, *sums), joined.select(*rules.KEYS, *(pl.col(f"{c}_plain").alias(c) for c in sums))


@pytest.mark.parametrize(("source", "cmd"), [
    *(("wide", cmd) for cmd in ("scope", "graph", "op")),  # the diff fixtures have no code traces
    *(("torch", cmd) for cmd in ("scope", "graph", "op", "code")),
])
@pytest.mark.parametrize("options", [
    {"max_depth": 1000},
    {"max_depth": 3, "account_type_regexes": ["MatMul", "Add.*"]},
    {"max_depth": 1000, "account_type_regexes": ["MatMul"], "account_displayed_op_only": True,
     "hide_name_regexes": [".*fc1.*"]},
    {"max_depth": 1000, "start_name_regexes": [".*fc1.*", "MatMul", ".*linear.*", "aten::.*"], "order_by": "name"},
], ids=["all", "accounted", "displayed_only", "start"])
def test_one_pass_samples_equal_a_view_run_per_step(profiles, cmd, options, source):
    prof = profiles["wide"] if source == "wide" else tfprof.load(tfprof.sample_path("torch"))
    if source == "torch":
        options = {k: v for k, v in options.items() if k != "account_type_regexes"}
    one, plain = _sums_both_ways(prof, cmd, options)
    assert one.height > 0
    assert one.equals(plain), cmd
    assert one["a_" + api._value_column("micros", api.VIEWS[cmd].layout) + "_sumsq"].sum() > 0


def test_steps_beyond_one_pass_are_summed_in_chunks(profiles, monkeypatch):
    whole = run_diff(profiles["base"], profiles["wide"], "scope", {"max_depth": 1000, "select": FIELDS})
    monkeypatch.setattr(api, "_SAMPLES_PER_PASS", 3)  # ten fields: one step per pass, six passes
    chunked = run_diff(profiles["base"], profiles["wide"], "scope", {"max_depth": 1000, "select": FIELDS})
    assert chunked.frame.equals(whole.frame)
    assert whole.frame["significant"].any() and not whole.frame["significant"].all()


@pytest.mark.parametrize("cmd", ["scope", "graph"])
def test_the_reference_backend_bands_by_a_run_per_step(profiles, cmd, monkeypatch):
    fast = run_diff(profiles["base"], profiles["wide"], cmd, {"max_depth": 1000})
    calls = []
    monkeypatch.setenv("TFPROF_ENGINE", "reference")
    monkeypatch.setattr(api, "_with_sums", lambda *a: calls.append(1) or _with_sums(*a))
    slow = run_diff(profiles["base"], profiles["wide"], cmd, {"max_depth": 1000})
    assert calls == [1]
    assert slow.frame.equals(fast.frame)


_with_sums = api._with_sums


@pytest.mark.parametrize("cmd", ["scope", "graph", "op", "code"])
def test_a_view_order_on_an_unselected_field_is_read_too(cmd):
    prof = tfprof.load(tfprof.sample_path("torch"))
    d = run_diff(prof, prof, cmd, {"max_depth": 1000, "select": ["params"], "order_by": "bytes"})
    assert d.frame.height > 1 and d.frame["total_params_delta" if cmd != "op" else "params_delta"].abs().max() == 0
