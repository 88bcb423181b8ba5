"""Column formatting equals tfprof's per-value formatting (printf %.2f semantics)."""

from __future__ import annotations

import random

import polars as pl
import pytest

from tfprof.views.columns import format_column
from tfprof.views.units import fmt_memory, fmt_number, fmt_time

SCALAR = {"number": fmt_number, "time": fmt_time, "memory": fmt_memory}


def _values() -> list[int]:
    rng = random.Random(7)
    edges = [0, 1, 5, 999, 1000, 1005, 1015, 1125, 999_994, 999_995, 999_999, 1_000_000, 1_005_000,
             123_456_789, 999_999_999, 1_000_000_000, 17_630_000_000, 930_580, 1280, 3_610_000, -5, -1234]
    randoms = [int(10 ** rng.uniform(0, 15)) for _ in range(20000)]
    ties = [k * 5 for k in range(199, 100000, 7)]  # many x.xx5 ties around the k/ms/KB ranges
    return edges + randoms + ties + [2**41 + 5, 2**50 + 12345, 2**62 + 7, 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("kind", sorted(SCALAR))
def test_column_format_matches_scalar(kind):
    values = _values()
    got = format_column(pl.Series(values), kind).to_list()
    want = [SCALAR[kind](v) for v in values]
    bad = [(v, g, w) for v, g, w in zip(values, got, want) if g != w]
    assert not bad, bad[:5]


def test_scalar_examples_from_the_spec():
    assert fmt_number(930580) == "930.58k" and fmt_number(17630000000) == "17.63b"
    assert fmt_memory(1280) == "1.28KB" and fmt_memory(120356380000) == "120356.38MB"
    assert fmt_time(999) == "999us" and fmt_time(1000) == "1.00ms" and fmt_time(3610000) == "3.61sec"
