"""The polars-free array helpers the indexes are built with (``tfprof.queries.arrays``),
against plain Python statements of what they compute."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from tfprof.queries.arrays import lookup, rows_of, string_parts


def _lookup_reference(values: list[str | None], queries: list[str | None]) -> list[int]:
    first: dict[str, int] = {}
    for i, v in enumerate(values):
        first.setdefault(v or "", i)
    return [first.get(q or "", -1) for q in queries]


CASES = {
    "plain": (["a", "b", "c"], ["c", "x", "a", "b"]),
    "duplicates keep the first": (["a", "b", "a", "b"], ["b", "a"]),
    "empty and null are the empty string": (["", "q", None], [None, "", "q"]),
    "prefixes are different strings": (["ab", "a", "abc"], ["a", "ab", "abc", "abcd", "b"]),
    "utf-8": (["é/ü", "日本", "e"], ["日本", "é/ü", "é"]),
    "no values": ([], ["a", ""]),
    "no queries": (["a"], []),
}


@pytest.mark.parametrize("string_type", [pa.string(), pa.large_string()])
@pytest.mark.parametrize(("values", "queries"), CASES.values(), ids=CASES.keys())
def test_lookup_matches_a_dict(values, queries, string_type):
    got = lookup(pa.array(values, string_type), pa.array(queries, string_type))
    assert got.tolist() == _lookup_reference(values, queries)


def test_lookup_of_many_random_names_in_chunks_and_slices():
    rng = random.Random(3)
    names = ["/".join(rng.choice(["a", "b", "ab", "grad", "é", ""]) for _ in range(rng.randint(1, 5)))
             for _ in range(5000)]
    values = pa.chunked_array([names[:2000], names[2000:4000]])
    queries = pa.array(names)[1500:]  # a slice: its offsets do not start at 0
    assert lookup(values, queries).tolist() == _lookup_reference(names[:4000], names[1500:])


def test_string_parts_of_a_slice():
    offsets, data = string_parts(pa.array(["xx", "ab", "", "cde"])[1:])
    assert [bytes(data[offsets[i]:offsets[i + 1]]) for i in range(3)] == [b"ab", b"", b"cde"]


@pytest.mark.parametrize("ids", [np.arange(5, 10), np.array([1, 4, 9, 10])], ids=["consecutive", "gaps"])
def test_rows_of(ids):
    want = np.array([9, 5, 4, 11, -1, 10])
    expected = [ids.tolist().index(w) if w in ids else -1 for w in want.tolist()]
    assert rows_of(ids, want).tolist() == expected
