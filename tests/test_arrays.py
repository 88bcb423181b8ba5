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


def test_trie_kernel_matches_a_dict_trie_through_table_growth():
    """``_build_trie`` over 50k random paths (about 53k trie nodes: its arrays and hash table
    grow several times) against a dict keyed by (parent, code)."""
    from tfprof.queries.indexes.code_trie import _build_trie

    rng = np.random.default_rng(0)
    n, depth = 50_000, 3
    codes = rng.integers(0, 60, n * depth).astype(np.int32)
    lo = np.arange(n, dtype=np.int64) * depth
    offset = np.where(np.arange(n) % 7 == 0, 100, 0).astype(np.int32)  # some gradient copies
    parent, code, leaf = _build_trie(lo, lo + depth, codes, offset)
    index: dict[tuple[int, int], int] = {}
    want_parent, want_code, want_leaf = [], [], []
    for i in range(n):
        p = -1
        for r in range(lo[i], lo[i] + depth):
            key = (p, int(codes[r]) + int(offset[i]))
            if key not in index:
                index[key] = len(want_parent)
                want_parent.append(p)
                want_code.append(key[1])
            p = index[key]
        want_leaf.append(p)
    assert len(want_parent) > 1 << 15  # past the first table's half
    assert parent.tolist() == want_parent and code.tolist() == want_code and leaf.tolist() == want_leaf


def test_interning_kernel_matches_a_dict_through_table_growth():
    from tfprof.queries.indexes.code_trie import _intern_triples

    rng = np.random.default_rng(1)
    f, line, g = (rng.integers(0, k, 20_000) for k in (9, 40, 7))
    number, first = _intern_triples(f.astype(np.int32), line, g.astype(np.int32))
    seen: dict[tuple[int, int, int], int] = {}
    for i, key in enumerate(zip(f.tolist(), line.tolist(), g.tolist())):
        seen.setdefault(key, i)
    rows = list(seen.values())
    assert len(rows) > 512  # past the first table's half
    assert first.tolist() == rows
    assert [rows[k] for k in number.tolist()] == [seen[key] for key in zip(f.tolist(), line.tolist(), g.tolist())]
