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
    means = step_samples(prof, COLUMNS, [-1])  # every record: the means, as step_numbers' default
    for c in COLUMNS:
        np.testing.assert_array_equal(means[c, -1], step_numbers(prof).column("params" if c == "parameters" else c)
                                      .to_numpy(), err_msg=f"{source}: {c} over the steps")
    with pytest.raises(ValueError, match="beside other steps"):
        step_samples(prof, COLUMNS, [-1, *steps])


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


def _random_tree(rng, n: int) -> tuple[pl.Series, np.ndarray]:
    """A pre-order tree of ``n`` rows under a root (depth 0), with repeated names."""
    depth = [0]
    for _ in range(n - 1):
        depth.append(int(rng.integers(1, depth[-1] + 2)))
    names = ["_TFProfRoot", *(f"f{int(rng.integers(0, 6))}.py:{int(rng.integers(1, 4))}:fn" for _ in range(n - 1))]
    return pl.Series("name", names), np.array(depth)


def test_code_paths_and_keys_follow_the_tree():
    from tfprof.queries.paths import code_paths, path_keys, path_parents

    rng = np.random.default_rng(3)
    names, depth = _random_tree(rng, 3000)
    want, stack, rows, parent_row = [], [], [], []
    for i, (name, d) in enumerate(zip(names.to_list(), depth)):
        stack[d:] = [name]
        rows[d:] = [i]
        parent_row.append(rows[d - 1] if d else -1)
        want.append(name if d == 0 else "/".join(stack[1:d + 1]))
    parent = path_parents(parent_row)
    got = code_paths(names, parent)
    assert got.to_list() == want
    keys = path_keys(names, parent, depth)
    # equal paths have equal keys, and (here) different paths different ones
    assert pl.DataFrame({"p": got, "k": keys}).group_by("p").agg(pl.col("k").n_unique())["k"].max() == 1
    assert len(set(keys.tolist())) == got.n_unique()


@pytest.mark.parametrize("cmd", ["scope", "graph", "code"])
def test_colliding_keys_fall_back_to_exact_paths(cmd, monkeypatch):
    from tfprof.queries import diff as rules_module

    prof = tfprof.load(tfprof.sample_path("torch"))
    opts = {"max_depth": 1000, "step": 2}
    honest = run_diff(prof, prof, cmd, opts, against=3)
    real = rules_module.with_paths

    def colliding(table, layout, parent_row=None, *, keys=False):  # every row gets the same key
        out = real(table, layout, parent_row, keys=keys)
        return out.with_columns(pl.lit(7, pl.UInt64).alias("_key")) if keys else out

    monkeypatch.setattr(rules_module, "with_paths", colliding)
    forced = run_diff(prof, prof, cmd, opts, against=3)
    assert forced.frame.height == honest.frame.height > 3
    assert forced.frame.equals(honest.frame)


@pytest.mark.parametrize("scale", [1, 1 << 50], ids=["one_key", "two_keys"])
def test_delta_order_is_by_size_then_tree_order(scale):
    from tfprof.queries.diff import diff_tables, with_paths

    rng = np.random.default_rng(5)
    n = 2000
    names = [f"n{i}" for i in range(n)]
    va, vb = rng.integers(0, 4, n) * scale, rng.integers(0, 4, n) * scale
    a = with_paths(pl.DataFrame({"name": names[:-100], "depth": [1] * (n - 100), "v": va[:-100]}), "scope", keys=True)
    b = with_paths(pl.DataFrame({"name": names[100:], "depth": [1] * (n - 100), "v": vb[100:]}), "scope", keys=True)
    d = diff_tables(a, b, ["v"], order="delta")
    rows = d.select("path", "pos_a", "pos_b", pl.col("v_delta").abs().alias("size")).iter_rows()
    want = sorted(rows, key=lambda r: (-r[3], r[2] is None, r[2] if r[2] is not None else 0, r[1] or 0))
    assert d["path"].to_list() == [r[0] for r in want]
    assert d.height == n and d["v_delta"].abs().max() >= 3 * scale
