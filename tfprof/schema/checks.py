"""The checks behind the ``validation`` table: each one's stable code, severity and meaning.

The codes are part of the data contract (scripts filter on them; ``tfprof check --format json``
prints them); ``tfprof.ingest.validate`` runs the checks, ``tfprof.views.validation`` prints
what they found.
"""

from __future__ import annotations

from dataclasses import dataclass

INFO, WARNING, ERROR = "info", "warning", "error"
SEVERITIES = (ERROR, WARNING, INFO)
"""Most serious first: the order of the validation table and of the report."""


@dataclass(frozen=True)
class Check:
    """One check: its code, severity, and what its findings are (a plural noun phrase)."""

    code: str
    severity: str
    what: str


CHECKS: dict[str, Check] = {c.code: c for c in (
    Check("negative_duration", ERROR, "exec records lasting less than 0 us (counted as 0 us)"),
    Check("end_before_start", ERROR, "node steps ending before they start (the end moved to the start)"),
    Check("negative_timestamp", ERROR, "times before 1970 (kept as read: no total uses them)"),
    Check("negative_bytes", ERROR, "memory values below 0 (counted as 0)"),
    Check("negative_count", ERROR, "negative run counts (counted as 0)"),
    Check("params_overflow", ERROR, "shapes with more elements than int64 holds (0 parameters)"),
    Check("sum_overflow", ERROR, "columns whose total over the profile is more than int64 holds"),
    Check("duplicate_name", ERROR, "names given to more than one node"),
    Check("negative_memory_level", ERROR, "allocator steps whose recorded level goes below 0, or is below 0 before an "
          "event (its level less the event's bytes: a free of more than the allocator held); `tfprof memory` marks "
          "them `!`"),
    Check("memory_level_beyond", ERROR, "allocator steps whose levels, or sums of allocation bytes, lie beyond 1 PiB "
          "or beyond int64 (they would wrap); `tfprof memory` marks them `!` and shows `?` for those numbers"),
    Check("absurd_duration", WARNING, "exec records lasting more than a day (counted as 0 us)"),
    Check("absurd_timestamp", WARNING, "times after 2100 (kept as read: no total uses them)"),
    Check("absurd_bytes", WARNING, "memory values above 1 PiB (counted as 0)"),
    Check("time_beyond_capture", WARNING, "nodes whose records on one device add up to more than the capture lasts "
          "(its earliest start to its latest end): times in the wrong unit? The totals are kept as read"),
    Check("bad_step_marker", WARNING, "step markers whose number is not a step number (a whole number from 0 to "
          "int64's largest): read as annotations, not steps"),
    Check("empty_step", WARNING, "steps without statistics"),
    Check("device_without_stream", WARNING, "GPU devices without a stream:all device (their kernel time is missing)"),
    Check("stream_overlap", WARNING, "records overlapping others on one GPU stream"),
    Check("dangling_input", WARNING, "inputs naming a node the graph lacks (kept as names)"),
    Check("unlinked_gpu_event", WARNING, "GPU events (kernels, memcpys, memsets) linked to no op that launched them "
          "(kept as nodes under the scope their launch call sits in, else under `[unlinked GPU events]`; their "
          "time is in no op's accelerator time)"),
    Check("non_finite_counter", WARNING, "counter samples that are not finite numbers (NaN, ±inf: left out of the "
          "counters table)"),
    Check("graph_mismatch", WARNING, "profiles where most nodes that ran are missing from the graph"),
    Check("negative_float_ops", INFO, "negative float-op counts, kept as read (TensorFlow's op-log builder "
          "gives -1 for some ops on empty tensors); the views count them as 0"),
    Check("relative_memory_level", INFO, "allocators whose running sum of allocation bytes goes below 0 (the trace "
          "records no levels, and memory allocated before the capture was freed in it): their levels are relative to "
          "the capture's start"),
    Check("runtime_node", INFO, "nodes of the RunMetadata missing from the graph (added as nodes, as tfprof does)"),
)}
