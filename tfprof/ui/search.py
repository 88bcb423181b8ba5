"""The views' search (``GET /api/search``): rows whose name contains the text, and in a trace
with GPU work, rows whose node launched a kernel (or memcpy, memset) whose name contains it.

A kernel's name (``void at::native::vectorized_elementwise_kernel<...>``) is no row of the scope
or graph view: the row is the op that launched it. A search for part of a kernel's name finds
that op's row, with the kernel's name beside it (``kernel``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tfprof.profile import Profile


def launchers(prof: Profile, text: str) -> pl.DataFrame:
    """Per node that launched GPU work whose name contains ``text`` (case-insensitive, literal):
    ``node_id`` and ``kernel``, the name of the matching work it spent the most time in."""
    if not prof.row_counts().get("kernels", 0):
        return pl.DataFrame(schema={"node_id": pl.Int64, "kernel": pl.String})
    work = prof.lazy("kernels").filter(pl.col("node_id").is_not_null()).select(
        "node_id", pl.col("name").cast(pl.String).alias("kernel"), "duration_ns")
    hits = work.filter(pl.col("kernel").str.to_lowercase().str.contains(text.lower(), literal=True))
    per = hits.group_by("node_id", "kernel").agg(pl.col("duration_ns").sum())
    return (per.sort(["node_id", "duration_ns", "kernel"], descending=[False, True, False])
            .group_by("node_id", maintain_order=True).first().select("node_id", "kernel").collect())


def search(prof: Profile, tree, text: str, limit: int) -> dict[str, Any]:
    """The rows of ``tree`` (``tfprof.api.browse.Tree``) that ``text`` finds, in display order:
    by name, or by a kernel their node launched (those rows carry ``kernel``); the first
    ``limit`` with their ancestors (``hits``), and how many there are (``total``)."""
    by_name = tree.table["name"].str.to_lowercase().str.contains(text.lower(), literal=True).to_numpy()
    kernel_of: dict[int, str] = {}
    if "node_id" in tree.table.columns and tree.layout != "groups":
        found = launchers(prof, text)
        if found.height:
            node = tree.table["node_id"].fill_null(-1).to_numpy()
            by_node = dict(zip(found["node_id"].to_list(), found["kernel"].to_list()))
            for i in np.flatnonzero(np.isin(node, found["node_id"].to_numpy()) & ~by_name).tolist():
                kernel_of[i] = by_node[int(node[i])]
    hits = np.flatnonzero(by_name | np.isin(np.arange(len(by_name)), list(kernel_of)))
    shown = hits[:limit].tolist()
    rows = tree.rows(shown)
    for i, row in zip(shown, rows):
        if i in kernel_of:
            row["kernel"] = kernel_of[i]
    return {"q": text, "total": len(hits), "hits": [{"i": i, "path": tree.ancestors(i)} for i in shown], "rows": rows}
