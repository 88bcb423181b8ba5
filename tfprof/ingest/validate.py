"""The checks every load runs over a profile's tables, and the clamp rule that keeps bad values
out of the totals; what they find becomes the ``validation`` table.

``Validator.batch`` checks (and clamps) one batch of tables as an ingest produces them, in
whole-column numpy operations; ``Validator.finish`` adds the whole-profile checks (and those of
``tfprof.ingest.whole_checks``) and returns the ``validation`` table; ``validated`` does both for a
dict of whole tables. A batch's ``node_flops`` is derived here, from its clamped ``nodes``. Each
check (``tfprof.schema.checks.CHECKS``) keeps its first ``ROWS_PER_CODE`` findings, each naming a
node and step, and counts the rest in one more row, so the table stays small for any profile.

Clamp rule (the real tool adds up whatever it reads, so a negative duration prints as negative
time and large values wrap around int64; docs/COMPATIBILITY.md): an exec record lasting less
than 0 µs or more than a day counts as 0 µs (its run still counts); a memory value (the bytes of
``memory``) below 0 or above 1 PiB counts as 0 bytes; a negative run count counts as 0, and so
does a negative float-op count in the views (the table keeps it: TensorFlow's op-log builder
writes -1 for some ops on empty tensors); a shape with more elements than int64 holds gives 0
parameters (the real tool wraps); a node's step that ends before it starts ends at its start.
Timestamps before 1970 or after 2100 are kept as read: they enter no total. Every value a rule changed is
counted in the table, the first ones with the value as read. What is left can still add up past int64 only
over 10^8 records of a day each, or 8,192 of a pebibyte; the ``sum_overflow`` check reports that case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tfprof.ingest.names import name_set
from tfprof.ingest.whole_checks import WholeChecks
from tfprof.schema import node_flops_table
from tfprof.schema.checks import CHECKS, SEVERITIES
from tfprof.schema.conform import conform

ROWS_PER_CODE = 5

INT64_MAX = 2**63 - 1
MAX_MICROS = 4_102_444_800_000_000  # 2100-01-01T00:00:00Z, in µs since the epoch
MAX_DURATION_MICROS = 86_400_000_000  # one day
MAX_BYTES = 1 << 50  # a pebibyte: more than any device has held for one op
STREAM_SLACK_MICROS = 1  # times are whole µs: records that touch may seem to overlap by 1
MEMORY_BYTES = (
    "requested_bytes", "peak_bytes", "residual_bytes", "output_bytes", "host_temp_bytes",
    "host_persistent_bytes", "accelerator_temp_bytes", "accelerator_persistent_bytes",
    "allocator_bytes_in_use",
)
SUMMED = {  # the columns the views add up (tfprof.queries.indexes.means), by the name they print
    "execs.duration_micros": "micros", "memory.requested_bytes": "bytes", "memory.peak_bytes": "peak_bytes",
    "memory.residual_bytes": "residual_bytes", "memory.output_bytes": "output_bytes",
    "nodes.params": "params", "nodes.float_ops * run_count": "float_ops",
}
_ORDER = {c.code: (SEVERITIES.index(c.severity), i) for i, c in enumerate(CHECKS.values())}

Row = tuple  # (node name or None, step or None, detail)


class Findings:
    """What the checks found so far: per check, how many findings and the first few rows."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.rows: dict[str, list[Row]] = {}

    def room(self, code: str) -> int:
        """How many more rows ``code`` keeps."""
        return ROWS_PER_CODE - len(self.rows.get(code, ()))

    def add(self, code: str, count: int, rows: Iterable[Row] = ()) -> None:
        """Count ``count`` findings of ``code``, described (the first of them) by ``rows``."""
        if count <= 0:
            return
        self.counts[code] = self.counts.get(code, 0) + count
        kept = self.rows.setdefault(code, [])
        kept.extend(list(rows)[: ROWS_PER_CODE - len(kept)])

    def merge(self, other: Findings) -> None:
        """Add what ``other`` found."""
        for code, n in other.counts.items():
            self.add(code, n, other.rows[code])

    def table(self) -> pa.Table:
        """The ``validation`` table: per check (errors first), its rows, then one counting the rest."""
        cols: dict[str, list] = {c: [] for c in ("severity", "code", "node", "step", "count", "detail")}

        def row(*values) -> None:
            for lst, v in zip(cols.values(), values, strict=True):
                lst.append(v)

        for code in sorted(self.counts, key=_ORDER.__getitem__):
            check, total, rows = CHECKS[code], self.counts[code], self.rows[code]
            for node, step, detail in rows:
                row(check.severity, code, node, step, 1, detail)
            if total > len(rows):
                rest = total - len(rows)
                row(check.severity, code, None, None, rest, f"{rest:,} more {check.what}; {total:,} in all")
        return conform("validation", cols)


def validated(tables: dict[str, pa.Table], findings: Findings | None = None, *, unique_names: bool = False,
              graph: bool = True) -> dict:
    """``tables`` (a whole profile) clamped, with their ``validation`` table; ``findings`` are
    what the ingest found itself (RunMetadata records the tables do not keep). ``graph=False``: the
    profile has no graph by nature (a foreign trace), so nodes missing from it are no finding."""
    v = Validator(findings, unique_names=unique_names, graph=graph)
    out = v.batch(tables)
    out["validation"] = v.finish(out)
    return out


class Validator:
    """Checks batches of tables as an ingest yields them, then the whole profile.

    ``unique_names``: the ingest already keeps one node per name (RunMetadata does), so the
    duplicate-name check is skipped.
    """

    def __init__(self, findings: Findings | None = None, *, unique_names: bool = False, graph: bool = True) -> None:
        self.found = Findings()
        if findings is not None:
            self.found.merge(findings)
        self._names = None if unique_names else name_set()
        self._runtime = Findings()  # reported only if the profile has graph nodes
        self._graph = graph
        self._graph_nodes = self._graph_ran = self._runtime_ran = 0
        self._steps: list[np.ndarray] = []
        self._sums = dict.fromkeys(SUMMED, 0.0)
        self._ids = np.zeros(0, np.int64)
        self._node_names: pa.ChunkedArray | None = None
        self._whole = WholeChecks()  # what the whole-profile checks need of each batch

    def all_names(self, names: pa.Array, ids: np.ndarray) -> None:
        """Check the names of every node (``ids``) at once, instead of batch by batch: a
        decoder that has them all (the compiled one's scan) saves the work on each batch."""
        if self._names is None:
            return
        again = self._names.add(names)
        self._names = None
        rows = [(names[i].as_py(), None, f"node id {ids[i]} has a name an earlier node has")
                for i in again[: self.found.room("duplicate_name")]]
        self.found.add("duplicate_name", len(again), rows)

    # ----------------------------------------------------------------------- per batch

    def batch(self, tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
        """``tables`` with bad values clamped (the same tables when there are none)."""
        out = dict(tables)
        if "nodes" in out:
            self._ids = out["nodes"].column("node_id").to_numpy()
            self._node_names = out["nodes"].column("name")
        if "node_steps" in out:
            out["node_steps"] = self._node_steps(out["node_steps"])
        if "execs" in out:
            out["execs"] = self._execs(out["execs"])
        if "memory" in out:
            out["memory"] = self._memory(out["memory"])
        if "node_inputs" in out:
            self._dangling(out["node_inputs"])
        if "nodes" in out:
            out["nodes"] = self._nodes(out["nodes"], out)
            out.setdefault("node_flops", node_flops_table(out["nodes"]))
        self._whole.batch(out, self._ids)
        return out

    def _name(self, node_id: int) -> str:
        at = int(np.searchsorted(self._ids, node_id)) if len(self._ids) else 0
        if self._node_names is not None and at < len(self._ids) and self._ids[at] == node_id:
            return self._node_names[at].as_py()
        return f"node id {node_id}"

    def _flag(self, code: str, mask: np.ndarray, ids: np.ndarray, steps: np.ndarray | None,
              describe: Callable[[int], str]) -> np.ndarray:
        """Count the records of ``mask`` under ``code``, the first few described; returns the mask."""
        bad = np.flatnonzero(mask)
        if len(bad):
            rows = [(self._name(ids[i]), None if steps is None else int(steps[i]), describe(i))
                    for i in bad[: self.found.room(code)]]
            self.found.add(code, len(bad), rows)
        return mask

    def _times(self, table: pa.Table, column: str) -> None:
        v = _ints(table, column)
        if _peak(v) <= MAX_MICROS:
            return
        ids, steps = _ints(table, "node_id"), _ints(table, "step")
        self._flag("negative_timestamp", v < 0, ids, steps, lambda i: f"{column} {v[i]:,} is before 1970")
        self._flag("absurd_timestamp", v > MAX_MICROS, ids, steps, lambda i: f"{column} {v[i]:,} is after 2100")

    def _node_steps(self, t: pa.Table) -> pa.Table:
        self._steps.append(pc.unique(t.column("step")).to_numpy())
        self._times(t, "all_start_micros")
        self._times(t, "latest_end_micros")
        ids, steps = _ints(t, "node_id"), _ints(t, "step")
        runs = _ints(t, "run_count")
        if len(runs) and runs.min() < 0:
            bad = self._flag("negative_count", runs < 0, ids, steps, lambda i: f"run_count {runs[i]:,}: counted as 0")
            t = _replace(t, "run_count", np.where(bad, 0, runs))
        start, end = _ints(t, "all_start_micros"), _ints(t, "latest_end_micros")
        early = end < start
        if early.any():
            self._flag("end_before_start", early, ids, steps,
                       lambda i: f"latest_end_micros {end[i]:,} is before all_start_micros {start[i]:,}: "
                                 "the end moved to the start")
            t = _replace(t, "latest_end_micros", np.where(early, start, end))
        return t

    def _execs(self, t: pa.Table) -> pa.Table:
        self._times(t, "start_micros")
        dur = _ints(t, "duration_micros")
        peak = _peak(dur)
        if peak > MAX_DURATION_MICROS:
            ids, steps, dev = _ints(t, "node_id"), _ints(t, "step"), t.column("device")
            neg = self._flag("negative_duration", dur < 0, ids, steps,
                             lambda i: f"duration {dur[i]:,} us on {dev[i].as_py()}: counted as 0 us")
            big = self._flag("absurd_duration", dur > MAX_DURATION_MICROS, ids, steps,
                             lambda i: f"duration {dur[i]:,} us ({dur[i] / 86_400e6:,.1f} days) on {dev[i].as_py()}: "
                                       "counted as 0 us")
            dur, peak = np.where(neg | big, 0, dur), MAX_DURATION_MICROS
            t = _replace(t, "duration_micros", dur)
        self._sums["execs.duration_micros"] += _sum(dur, peak)
        return t

    def _memory(self, t: pa.Table) -> pa.Table:
        # (memory_micros is a record's start plus its duration, both checked in execs)
        for column in MEMORY_BYTES:
            v = _ints(t, column)
            peak = _peak(v)
            if peak > MAX_BYTES:
                ids, steps = _ints(t, "node_id"), _ints(t, "step")
                neg = self._flag("negative_bytes", v < 0, ids, steps, lambda i: f"{column} {v[i]:,}: counted as 0")
                big = self._flag("absurd_bytes", v > MAX_BYTES, ids, steps,
                                 lambda i: f"{column} {v[i]:,} ({v[i] / 2**50:,.1f} PiB): counted as 0")
                v, peak = np.where(neg | big, 0, v), MAX_BYTES
                t = _replace(t, column, v)
            if f"memory.{column}" in self._sums:
                self._sums[f"memory.{column}"] += _sum(v, peak)
        return t

    def _dangling(self, t: pa.Table) -> None:
        if not t.column("input_id").null_count:
            return
        ids, idx = _ints(t, "node_id"), _ints(t, "input_idx")
        names = t.column("input_name")
        self._flag("dangling_input", t.column("input_id").is_null().to_numpy(zero_copy_only=False), ids, None,
                   lambda i: f"input {idx[i]} names `{names[i].as_py()}`, which is not a node of the graph: kept as a name")

    def _nodes(self, t: pa.Table, batch: dict[str, pa.Table]) -> pa.Table:
        ids = self._ids
        flops = _ints(t, "float_ops")
        if len(flops) and flops.min() < 0:  # kept: TensorFlow's own op logs have them
            bad = self._flag("negative_float_ops", flops < 0, ids, None,
                             lambda i: f"float_ops {flops[i]:,} (op {t.column('op')[i].as_py()}): the views count 0")
            flops = np.where(bad, 0, flops)
        params = _ints(t, "params")
        elements = _elements(t.column("shape"))
        if elements is not None and (elements > INT64_MAX).any():
            shape = t.column("shape")
            bad = self._flag("params_overflow", elements > INT64_MAX, ids, None,
                             lambda i: f"shape {shape[i].as_py()} has {elements[i]:.3g} elements, more than int64 holds: "
                                       f"0 parameters (the real tool wraps them to {params[i]:,})")
            params = np.where(bad, 0, params)
            t = _replace(t, "params", params)
        self._sums["nodes.params"] += _sum(params, _peak(params))
        steps = batch.get("node_steps")
        step_rows = _rows(ids, _ints(steps, "node_id")) if steps is not None else np.zeros(0, np.int64)
        if flops.any():
            runs = np.bincount(step_rows, _ints(steps, "run_count").astype(np.float64), len(ids)) if len(step_rows) else 0
            self._sums["nodes.float_ops * run_count"] += float((flops * np.maximum(runs, 1.0)).sum())
        self._runtime_nodes(t, batch, step_rows)
        if self._names is not None:
            again = self._names.add(t.column("name"))
            if len(again):
                mask = np.zeros(len(ids), np.bool_)
                mask[again] = True
                self._flag("duplicate_name", mask, ids, None, lambda i: f"node id {ids[i]} has a name an earlier node has")
        return t

    def _runtime_nodes(self, t: pa.Table, batch: dict[str, pa.Table], step_rows: np.ndarray) -> None:
        """Nodes as tfprof makes them for a RunMetadata record naming no graph node
        (docs/TFPROF_BEHAVIOUR.md, 'Nodes made from RunMetadata'):
        no attrs, no inputs, op equal to the name. Told apart from the tables alone, so a
        ProfileProto gives the same rows as the files it was made from."""
        ids, n = self._ids, t.num_rows
        runtime = np.ones(n, np.bool_)
        for name in ("node_attrs", "node_inputs"):
            if name in batch:
                runtime[_rows(ids, _ints(batch[name], "node_id"))] = False
        bare = np.flatnonzero(runtime)  # few: only these names are compared with their op
        if len(bare):
            same = pc.equal(t.column("name").take(bare), t.column("op").take(bare).cast(pa.string()))
            runtime[bare] = np.array(same, np.bool_)
        ran = np.zeros(n, np.bool_)
        ran[step_rows] = True
        self._graph_nodes += int(n - runtime.sum())
        self._graph_ran += int((ran & ~runtime).sum())
        self._runtime_ran += int((ran & runtime).sum())
        first = np.flatnonzero(runtime)
        if len(first):
            rows = [(self._name(ids[i]), None, "not in the graph: added as a node of op type "
                     "named after itself, as tfprof does") for i in first[: self._runtime.room("runtime_node")]]
            self._runtime.add("runtime_node", len(first), rows)

    # ----------------------------------------------------------------------- whole profile

    def finish(self, tables: dict[str, pa.Table]) -> pa.Table:
        """The ``validation`` table, once every batch went through ``batch``; ``tables`` holds
        the whole-profile tables (``steps``, ``devices``)."""
        if "steps" in tables:
            listed = np.unique(_ints(tables["steps"], "step"))
            seen = np.concatenate(self._steps) if self._steps else np.zeros(0, np.int64)
            empty = listed[~np.isin(listed, seen)]
            self.found.add("empty_step", len(empty),
                           [(None, int(s), "no node has statistics in this step") for s in empty[:ROWS_PER_CODE]])
        if "devices" in tables:
            self._streams(tables["devices"])
        if self._graph and self._graph_nodes:  # a graph was given: RunMetadata-only nodes are worth a word
            self.found.merge(self._runtime)
            if self._runtime_ran > self._graph_ran:
                self.found.add("graph_mismatch", 1, [(None, None, (
                    f"{self._runtime_ran:,} of the {self._runtime_ran + self._graph_ran:,} nodes that ran are not "
                    "in the graph; is the graph the one that ran?"))])
        self._whole.report(self.found, self._name)
        for column, total in self._sums.items():
            if total > INT64_MAX:
                self.found.add("sum_overflow", 1, [(None, None, (
                    f"{column} adds up to {total:.3g} over the profile, more than int64 holds ({INT64_MAX:.3g}): "
                    f"totals of {SUMMED[column]} in the views may be wrong"))])
        return self.found.table()

    def _streams(self, devices: pa.Table) -> None:
        names = devices.column("device").cast(pa.string()).to_pylist()  # a handful of devices
        gpu = pc.and_(devices.column("is_canonical"), devices.column("on_accelerator")).to_pylist()
        have = set(names)
        lost = [d for d, g in zip(names, gpu) if g and f"{d}/stream:all" not in have]
        self.found.add("device_without_stream", len(lost), [(None, None, (
            f"{d} has no {d}/stream:all device: tfprof counts only the launches there (as cpu time), "
            "not the kernels")) for d in lost])


def stream_overlaps(found: Findings, step: int, device: str, starts, ends, names: list[str]) -> None:
    """Count the records of one GPU stream (``device``, a ``/stream:N``) in ``step`` that start
    before an earlier one ends: a stream runs one kernel at a time, so the clocks or the records
    are wrong. CPU devices and ``stream:all`` run ops side by side and are not checked."""
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    if len(s) < 2:
        return
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    over = np.flatnonzero(s[1:] < reach[:-1] - STREAM_SLACK_MICROS) + 1
    rows = [(names[order[i]], step, f"starts at {s[i]:,} us on {device}, {reach[i - 1] - s[i]:,} us before "
             "an earlier record there ends") for i in over[: found.room("stream_overlap")]]
    found.add("stream_overlap", len(over), rows)


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return table.column(column).to_numpy()


def _replace(table: pa.Table, column: str, values: np.ndarray) -> pa.Table:
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _peak(values: np.ndarray) -> int:
    """The largest of ``values`` read as unsigned numbers (0 for none): above a limit when one
    of them is above it or below 0, found in one pass."""
    return int(values.view(np.uint64).max()) if len(values) else 0


def _sum(values: np.ndarray, peak: int) -> float:
    """The sum of ``values`` (none below 0, none above ``peak``) as a float: added in int64
    when that cannot wrap (four times faster than in float), else in float."""
    if peak * len(values) <= INT64_MAX:
        return float(values.sum())
    return float(values.sum(dtype=np.float64))


def _rows(ids: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Rows of ``want`` in the sorted ``ids`` (every one of them is there)."""
    if len(ids) and ids[-1] - ids[0] == len(ids) - 1:  # consecutive ids, as tfprof numbers nodes
        return want - ids[0]
    return np.searchsorted(ids, want)


def _elements(shapes: pa.ChunkedArray) -> np.ndarray | None:
    """Per shape, its element count as a float (0 with an unknown dim); None if no node has one."""
    shapes = shapes.combine_chunks()
    dims = shapes.flatten().to_numpy()
    if not len(dims):
        return None
    offsets = shapes.offsets.to_numpy()
    offsets = offsets - offsets[0]
    lengths = np.diff(offsets)
    out = np.zeros(len(shapes))
    some = np.flatnonzero(lengths > 0)
    out[some] = np.multiply.reduceat(dims.astype(np.float64), offsets[some])
    out[some[np.minimum.reduceat(dims, offsets[some]) < 0]] = 0.0
    return out
