"""Incremental ingest: tfprof's native profiler fed one input at a time.

The Python API's ``Profiler`` gives a graph and an op log when it is created, then one
RunMetadata per ``add_step``; ``profile()`` gives graph, run metadata and op log at once, in
that order (tfprof's TFStats constructor: AddGraph, AddRunMeta(0), AddOpLogProto). Each input
is a path, bytes, or a protobuf message (ours or TensorFlow's).
"""

from __future__ import annotations

import pyarrow as pa

from tfprof.ingest import raw, validate
from tfprof.schema.proto import tfprof_log_pb2


class ProfileBuilder:
    """tfprof's node table, grown input by input; ``tables()`` flattens its current state."""

    def __init__(self) -> None:
        self._raw = raw.RawProfile()
        self._covered: set[int] = set()
        self._tables: dict[str, pa.Table] | None = None

    def add_graph(self, graph) -> None:
        """Add a GraphDef's nodes; nodes already known keep what they have
        (docs/TFPROF_BEHAVIOUR.md, 'Ingesting a GraphDef')."""
        self._raw.add_graph(raw.read_graph(graph))
        self._tables = None

    def add_op_log(self, op_log) -> None:
        """Add an OpLogProto's op types, float ops and code traces (docs/TFPROF_BEHAVIOUR.md, 'Ingesting an op log')."""
        log = op_log if isinstance(op_log, tfprof_log_pb2.OpLogProto) else raw.read_op_log(op_log)
        self._raw.add_op_log(log)
        self._tables = None

    def add_run_meta(self, step: int, run_meta) -> float:
        """Add a RunMetadata under ``step`` (a step added twice merges:
        docs/TFPROF_BEHAVIOUR.md, 'Ingesting RunMetadata') and return
        tfprof's run coverage: the share of known nodes seen in any step so far."""
        rm = raw.read_run_meta(run_meta)
        before = set(self._raw.nodes)
        self._raw.add_run_meta(int(step), rm)
        # tfprof counts a node as covered when a record finds it already known: a graph node,
        # or a node this RunMetadata created from an earlier record (docs/TFPROF_BEHAVIOUR.md, 'Ingesting RunMetadata').
        seen: set[str] = set()
        for d in rm.step_stats.dev_stats:
            for ns in d.node_stats:
                name = ns.node_name.split(":", 1)[0]
                node = self._raw.nodes.get(name)
                if node is not None and (name in before or name in seen):
                    self._covered.add(node.id)
                seen.add(name)
        self._tables = None
        return len(self._covered) / (len(self._raw.nodes) + 1e-10)

    @property
    def num_nodes(self) -> int:
        return len(self._raw.nodes)

    def tables(self) -> dict[str, pa.Table]:
        """The tables of everything added so far (computed once per change)."""
        if self._tables is None:
            self._tables = validate.validated(self._raw.tables(), self._raw.findings, unique_names=True)
        return self._tables
