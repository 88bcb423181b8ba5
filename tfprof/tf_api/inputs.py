"""What the ``tf.profiler`` functions accept as a graph, and the option dicts they take.

A graph is a ``tf.Graph`` (when the caller has TensorFlow), a GraphDef message (ours or
TensorFlow's), serialized GraphDef bytes, or the path of a GraphDef file (text or binary).
TensorFlow itself is never imported here: a ``tf.Graph`` is recognised by its methods, and the
default graph is looked up only if the caller has already imported TensorFlow.

Either kind of graph is a *graph source* with the same three methods: ``graph_def()`` (what
tfprof is sent), ``op_log(run_meta, add_trace)`` (the op log TensorFlow adds on its own) and
``state()`` (changes when either of those would).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from tfprof.errors import OptionError
from tfprof.ingest.op_log import default_op_log
from tfprof.queries.options import Options
from tfprof.tf_api.option_builder import ProfileOptionBuilder
from tfprof.tf_api.tf_graph import LiveGraph, is_tf_graph

# Keys missing from a Python option dict take ProfileOptionBuilder()'s values (TensorFlow's
# _build_options would leave them empty, which shows only the root and hides the mistake;
# docs/COMPATIBILITY.md row 12).
_BUILDER_DEFAULTS = Options.from_tfprof(ProfileOptionBuilder().build())


def python_options(options: Mapping[str, Any] | Options) -> Options:
    """``Options`` from a ``tf.profiler`` option dict (missing keys: the builder's defaults)."""
    if isinstance(options, Options):
        return options
    if not isinstance(options, Mapping):
        raise OptionError(
            f"options must be a dict of tfprof options (see ProfileOptionBuilder), not a `{type(options).__name__}`"
        )
    return Options.from_tfprof(options, base=_BUILDER_DEFAULTS)


def no_step_stats(run_meta: Any) -> bool:
    """True for a RunMetadata message (ours or TensorFlow's) that has no step stats."""
    return hasattr(run_meta, "HasField") and hasattr(run_meta, "step_stats") and not run_meta.HasField("step_stats")


class StaticGraph:
    """A GraphDef (message, bytes or path), and the trainable variables' op names when known.

    Nothing else can be read from a GraphDef: its op log holds only the `_trainable_variables`
    types, and it never changes.
    """

    def __init__(self, graph_def: Any, trainable: list[str]) -> None:
        self._graph_def = graph_def
        self.trainable = trainable

    def graph_def(self) -> Any:
        return self._graph_def

    def state(self) -> tuple[int, int]:
        return (0, 0)

    def fill_shapes(self, run_meta: Any) -> int:
        return 0

    def op_log(self, run_meta: Any = None, add_trace: bool = True, add_trainable_var: bool = True) -> Any:
        return default_op_log(self.trainable if add_trainable_var else ())


def graph_input(graph: Any) -> StaticGraph | LiveGraph | None:
    """The graph source of a ``graph`` argument, or None for no graph.

    ``None`` means the default graph when TensorFlow is imported and runs graphs (TF1 style),
    as in ``tf.profiler``; otherwise no graph. A ``tf.Graph`` is sent as TensorFlow sends it,
    ``as_graph_def(add_shapes=True)``, with TensorFlow's op log (FLOPs, code traces, trainable
    variables; ``LiveGraph``). An object with only ``as_graph_def`` and ``get_collection`` is
    sent the same way, its TRAINABLE_VARIABLES collection naming the `_trainable_variables`;
    a GraphDef alone does not say which variables are trainable.
    """
    if graph is None:
        tf = sys.modules.get("tensorflow")
        if tf is None or tf.executing_eagerly():
            return None
        graph = tf.compat.v1.get_default_graph()
    if is_tf_graph(graph):
        return LiveGraph(graph)
    if hasattr(graph, "as_graph_def") and hasattr(graph, "get_collection"):
        trainable = [v.op.name for v in graph.get_collection("trainable_variables")]
        graph_def = graph.as_graph_def(add_shapes=True)
        return StaticGraph(graph_def if len(graph_def.node) else None, trainable)
    return StaticGraph(graph, [])
