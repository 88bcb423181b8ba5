"""``write_op_log`` (tf.profiler.write_op_log): the op log file tfprof's command line reads.

>>> import tempfile, tfprof
>>> folder = tempfile.mkdtemp()
>>> tfprof.write_op_log(None, folder, op_log=tfprof.OpLogProto(log_entries=[{"name": "w", "types": ["x"]}]))
>>> sorted(p.name for p in __import__("pathlib").Path(folder).iterdir())
['tfprof_log']
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tfprof.errors import OutputError
from tfprof.ingest import raw
from tfprof.ingest.op_log import default_op_log, merge_op_logs
from tfprof.output import input_paths, write_file
from tfprof.schema.proto import run_metadata_pb2
from tfprof.tf_api.inputs import StaticGraph, graph_input, no_step_stats


def write_op_log(
    graph: Any, log_dir: str | os.PathLike, op_log: Any = None, run_meta: Any = None, add_trace: bool = True
) -> None:
    """Write ``<log_dir>/tfprof_log``: ``op_log`` merged with what tfprof adds on its own.

    From a ``tf.Graph`` (or ``None``, the default graph, in a TF1-style program) this is the file
    TensorFlow's ``write_op_log`` writes: every op's float operations from its static shapes
    (completed from ``run_meta``'s, which changes the graph as TensorFlow does; our FLOPs
    rules), its Python traceback when ``add_trace``, and the `_trainable_variables` type of
    the trainable variables. A GraphDef (message, bytes or path) says none of that, so with one
    only ``op_log`` is written, and no TensorFlow is needed.
    """
    source = graph_input(graph)
    if isinstance(source, StaticGraph) and source.graph_def() is not None:
        raw.read_graph(source.graph_def())  # a bad graph is an error here, not when the log is read
    rm = None
    if run_meta is not None:
        rm = run_metadata_pb2.RunMetadata() if no_step_stats(run_meta) else raw.read_run_meta(run_meta)
    folder = Path(log_dir)
    if not folder.is_dir():
        raise OutputError(f"`{folder}` is not a directory; create it first or choose another log_dir")
    default = default_op_log() if source is None else source.op_log(rm, add_trace=add_trace)
    merged = merge_op_logs(default, op_log)
    # replaced if it exists, as TensorFlow's write_op_log does; never a file given as an input
    inputs = input_paths(graph_path=graph, op_log_path=op_log, run_meta_path=[run_meta])
    write_file(folder / "tfprof_log", merged.SerializeToString(deterministic=True), force=True, inputs=inputs,
               what="log_dir")
