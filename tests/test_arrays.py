"""The polars-free array helpers and hash-table kernels the indexes are built with, against
plain Python statements of what they compute."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import tfprof
from tfprof.queries.arrays import rows_of, string_parts


def test_string_parts_of_a_slice():
    offsets, data = string_parts(pa.array(["xx", "ab", "", "cde"])[1:])
    assert [bytes(data[offsets[i]:offsets[i + 1]]) for i in range(3)] == [b"ab", b"", b"cde"]


@pytest.mark.parametrize("ids", [np.arange(5, 10), np.array([1, 4, 9, 10])], ids=["consecutive", "gaps"])
def test_rows_of(ids):
    want = np.array([9, 5, 4, 11, -1, 10])
    expected = [ids.tolist().index(w) if w in ids else -1 for w in want.tolist()]
    assert rows_of(ids, want).tolist() == expected


@pytest.mark.parametrize("shared", [False, True], ids=["random paths", "sorted paths"])
def test_trie_kernel_matches_a_dict_trie_through_table_growth(shared):
    """``_build_trie`` over 50k random paths (about 53k trie nodes: its arrays and hash table
    grow several times) against a dict keyed by (parent, code); sorted, consecutive paths share
    prefixes (the kernel's shortcut)."""
    from tfprof.queries.indexes.code_trie import _build_trie

    rng = np.random.default_rng(0)
    n, depth = 50_000, 3
    codes = rng.integers(0, 60, n * depth).astype(np.int32)
    if shared:
        paths = codes.reshape(n, depth)
        codes = paths[np.lexsort(paths.T[::-1])].ravel()
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
    assert len(want_parent) > (1 << 15 if not shared else 1 << 12)  # past the first table's half
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


def test_forward_names():
    """The forward op name of a gradient node: after the first ``gradients/``, up to the first
    ``_grad/`` (the rest of the name when ``_grad/`` comes first); none without both, or when
    the name between them is empty."""
    from tfprof.queries.indexes.code_trie import forward_names

    def rule(name: str) -> str | None:
        g, s = name.find("gradients/"), name.find("_grad/")
        if g < 0 or s < 0:
            return None
        rest = name[g + len("gradients/"):]
        if s < g:
            return rest
        head = rest.split("_grad/", 1)[0]
        return head or None

    names = ["gradients/dense/MatMul_grad/MatMul", "dense/MatMul", "a/gradients/b/c_grad/d_grad/e",
             "x_grad/gradients/y", "x_grad/gradients/", "gradients/_grad/z", "gradients/only",
             "only_grad/z", "", "grä/gradients/naïve_grad/x", "gradients/gradients/a_grad/b"]
    assert forward_names(pa.array(names)).to_pylist() == [rule(n) for n in names]
    assert forward_names(pa.chunked_array([names[:3], names[3:]])).to_pylist() == [rule(n) for n in names]


def test_gradient_groups_without_a_forward_node_are_counted():
    """The code trie counts the gradient groups whose forward op has no traced node (the code
    view's "N gradient nodes not accounted"): renaming three forward nodes of the cnn fixture
    loses their groups, counted as a Python statement of the rule counts them."""
    from conftest import raw_inputs

    from tfprof import Profile
    from tfprof.queries.indexes.code_trie import forward_names, static_trie

    tables = tfprof.load(**raw_inputs("cnn")).tables()
    nodes = tables["nodes"]
    ids = nodes.column("node_id").to_pylist()
    traced = set(tables["code_frames"].column("node_id").to_pylist())

    def lost_groups(names: list[str]) -> set[str]:
        forward = forward_names(pa.array(names)).to_pylist()
        kept = {n for n, f, i in zip(names, forward, ids) if f is None and i in traced}
        return {f for f, i in zip(forward, ids) if f is not None and i in traced and f not in kept}

    names = nodes.column("name").to_pylist()
    assert not lost_groups(names) and static_trie(Profile(tables))["unmatched"].column(0).to_pylist() == [0]
    forward = forward_names(pa.array(names)).to_pylist()
    gone = sorted({f for f, i in zip(forward, ids) if f is not None and i in traced} & set(names))[:3]
    renamed = [n + "_renamed" if n in gone else n for n in names]
    tables["nodes"] = nodes.set_column(nodes.schema.get_field_index("name"), nodes.schema.field("name"),
                                       pa.array(renamed, nodes.schema.field("name").type))
    assert len(lost_groups(renamed)) == 3
    assert static_trie(Profile(tables))["unmatched"].column(0).to_pylist() == [3]
