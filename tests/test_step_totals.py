"""Every step's totals from one pass (``step_totals``) equal the per-step query they replace
(``totals(prof, step)``, step by step), on tfprof's own profiles and foreign traces alike."""

from __future__ import annotations

import pytest

import tfprof
from tests.conftest import FIXTURES
from tfprof.queries.indexes.step_totals import TOTALS, step_totals
from tfprof.queries.summary import summary
from tfprof.queries.totals import totals

PROFILES = [
    "multistep/profile.pb",
    "cnn/profile.pb",
    "rnn/profile.pb",
    "foreign/torch_cnn.pt.trace.json",
    "foreign/torch_cuda_cnn.pt.trace.json.gz",
    "foreign/kineto_resnet50_step6.pt.trace.json.gz",
    "foreign/tf2_keras.xplane.pb",
    "foreign/jax_mlp.xplane.pb",
]


@pytest.mark.parametrize("name", PROFILES)
def test_every_step_total_equals_the_query_of_that_step(name, tmp_path):
    for prof in (tfprof.load(FIXTURES / name), None):
        if prof is None:  # and the same over a store, whose tables are read column by column
            tfprof.save(tfprof.load(FIXTURES / name), tmp_path / "p.tfprof")
            prof = tfprof.load(tmp_path / "p.tfprof")
        steps = prof.frame("steps")["step"].to_list()
        order, per_step = step_totals(prof, steps)
        assert sorted(set(steps)) == order.tolist()
        for i, step in enumerate(order.tolist()):
            expected = totals(prof, step)
            got = {m: int(per_step[m][i]) for m in TOTALS}
            assert got == {m: expected[m] for m in TOTALS}, (name, step)


def test_the_summary_rows_are_the_steps_totals():
    prof = tfprof.load(FIXTURES / "multistep/profile.pb")
    frame = summary(prof)
    assert frame["step"].to_list() == [*map(str, prof.frame("steps")["step"].to_list()), "mean"]
    for row in frame.iter_rows(named=True):
        step = -1 if row["step"] == "mean" else int(row["step"])
        t = totals(prof, step)
        assert {k: row[k] for k in row if k != "step"} == {k: t[k] for k in row if k != "step"}


def test_a_profile_with_records_in_some_steps_only():
    """A crafted check that the cells are per (step, node): steps with no records total 0 and
    a node that never ran counts its static float ops in every step."""
    prof = tfprof.load(FIXTURES / "multistep/profile.pb")
    steps = prof.frame("steps")["step"].to_list()
    order, per_step = step_totals(prof, [*steps, max(steps) + 100])
    assert per_step["exec_micros"][-1] == 0 and per_step["run_count"][-1] == 0
    assert per_step["float_ops"][-1] == totals(prof, max(steps) + 100)["float_ops"]
