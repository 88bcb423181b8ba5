"""The scope tree's layout (``tfprof.queries.indexes.scope_tree.layout``) against a plain polars statement of
tfprof's rule: a name's parent is the text before its last ``/``, missing prefixes become
synthetic parents, siblings go in byte order of their names, the tree is laid out in pre-order.
"""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from tfprof import Profile
from tfprof.queries.indexes.scope_tree import layout


def _parent_name(name: pl.Expr) -> pl.Expr:
    return pl.when(name.str.contains("/", literal=True)).then(name.str.replace(r"/[^/]*$", ""))


def _reference(names: list[str]) -> pl.DataFrame:
    """Level by level: add each missing parent, then sort by (parent, name) and walk."""
    nodes = pl.DataFrame({"node_id": list(range(len(names))), "name": names}, schema={"node_id": pl.Int64, "name": pl.String})
    tree = nodes.with_columns(_parent_name(pl.col("name")).alias("parent_name"))
    known = set(names)
    frontier = set(tree["parent_name"].drop_nulls()) - known
    parts = [tree]
    while frontier:
        part = pl.DataFrame({"name": sorted(frontier)}, schema={"name": pl.String})
        part = part.with_columns(_parent_name(pl.col("name")).alias("parent_name"))
        parts.append(part)
        known |= frontier
        frontier = set(part["parent_name"].drop_nulls()) - known
    tree = pl.concat(parts, how="diagonal")
    children: dict[str | None, list[str]] = {}
    ids = dict(zip(tree["name"].to_list(), tree["node_id"].to_list()))
    for name, parent in zip(tree["name"].to_list(), tree["parent_name"].to_list()):
        children.setdefault(parent, []).append(name)
    key = lambda s: s.encode()  # noqa: E731 - byte order, as tfprof compares std::string
    rows, pos = [], {}
    stack = [(n, -1) for n in sorted(children.get(None, []), key=key, reverse=True)]
    while stack:
        name, parent = stack.pop()
        pos[name] = len(rows)
        rows.append((len(rows), parent, name, ids[name]))
        stack += [(c, pos[name]) for c in sorted(children.get(name, []), key=key, reverse=True)]
    rank = {n: i + 1 for i, n in enumerate(sorted(ids, key=key))}
    return pl.DataFrame(
        [(*r, rank[r[2]]) for r in rows], orient="row",
        schema={"pos": pl.Int64, "parent": pl.Int64, "name": pl.String, "node_id": pl.Int64, "name_rank": pl.Int64},
    )


def _profile(names: list[str]) -> Profile:
    return Profile({"nodes": pa.table({"node_id": pa.array(range(len(names)), pa.int64()), "name": pa.array(names)})})


CASES = {
    "empty": [],
    "flat": ["b", "a", "c"],
    "missing prefixes": ["a/b/c/d", "a/x"],
    "prefix that is a node": ["a/b", "a", "a/b/c"],
    "separator order": ["a/b", "a-c", "a.d/e", "a", "a0"],  # '-' and '.' sort before '/', '0' after
    "empty components": ["a//b", "/x", "y/", "/", "a/"],
    "empty name": ["", "/q"],
    "utf-8": ["é/ü", "e/u", "é", "日本/語/x"],
    # 35 missing prefixes of one name: the kernel's arrays and hash table grow, and later names
    # still find the parents entered before that (n0..n19, a/b)
    "deep chain": [*(f"n{i}" for i in range(20)), "/".join("abcdefghijklmnopqrstuvwxyz0123456789"),
                   *(f"n{i}/x" for i in range(20)), "a/b/z"],
}


@pytest.mark.parametrize("names", CASES.values(), ids=CASES.keys())
def test_layout_matches_the_rule(names):
    assert pl.from_arrow(layout(_profile(names))).equals(_reference(names))


def test_layout_of_random_scopes():
    rng = random.Random(7)
    parts = ["a", "b", "ab", "a-b", "x_1", "", "Z", "é"]
    names = sorted({"/".join(rng.choice(parts) for _ in range(rng.randint(1, 6))) for _ in range(3000)})
    rng.shuffle(names)
    got = pl.from_arrow(layout(_profile(names)))
    assert got.equals(_reference(names))
    assert np.all(got["parent"].to_numpy() < got["pos"].to_numpy())  # parents precede their children

