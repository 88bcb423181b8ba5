"""``Profiler``, ``profile`` and ``advise``: ``tf.profiler``'s Python API
(docs/TFPROF_BEHAVIOUR.md, 'Python API') without TensorFlow.

They build a profile from a graph, RunMetadata steps and an op log (each a path, bytes or a
protobuf message; a graph may also be a ``tf.Graph``), run the same ``tfprof.api.run_view`` as
the command line, print as ``options['output']`` says (stdout with tfprof's banners, a file,
or nothing) and return the proto tfprof returns.

>>> import tfprof
>>> from tfprof.schema.proto.graph_pb2 import GraphDef
>>> graph = GraphDef()
>>> _ = graph.node.add(name="w", op="VariableV2"), graph.node.add(name="r", op="Identity", input=["w"])
>>> prof = tfprof.Profiler(graph)
>>> root = prof.profile_operations(tfprof.ProfileOptionBuilder().with_empty_output().build())
>>> [row.name for row in (root.children[0], root.children[0].children[0])]
['Identity', 'VariableV2']
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Mapping
from typing import Any

from tfprof.api import VIEWS, emit_output, print_notes, run_view
from tfprof.errors import OptionError
from tfprof.ingest.builder import ProfileBuilder
from tfprof.ingest.op_log import default_op_log, merge_op_logs
from tfprof.ingest.raw import read_run_meta
from tfprof.output import input_paths, write_file
from tfprof.profile import Profile
from tfprof.queries.options import LIST_OPTIONS, Options
from tfprof.schema.proto import run_metadata_pb2 as run_meta_pb2
from tfprof.tf_api.inputs import graph_input, no_step_stats, python_options
from tfprof.tf_api.option_builder import ProfileOptionBuilder
from tfprof.views.profile_proto import TABLES_WRITTEN, encode_profile

# tf.profiler.advise's ALL_ADVICE: every checker, no options.
ALL_ADVICE = {
    "ExpensiveOperationChecker": {},
    "AcceleratorUtilizationChecker": {},
    "JobChecker": {},
    "OperationChecker": {},
}


class Profiler:
    """tfprof's multi-step profiler (tf.profiler.Profiler): a graph, then one RunMetadata per step.

    ``graph`` and ``op_log`` may be None; ``add_step`` may add nodes the graph lacks, as tfprof
    does. Any number of profilers can exist at once (tfprof allows one per process).
    """

    def __init__(self, graph: Any = None, op_log: Any = None) -> None:
        self._graph = graph_input(graph)
        self._builder = ProfileBuilder()
        self._inputs = input_paths(graph_path=graph, op_log_path=op_log)  # files never written over
        self._profile: Profile | None = None
        self._coverage = 0.0
        self._added: tuple | None = None  # the graph source's state when last added
        default = default_op_log() if self._graph is None else self._graph.op_log()
        self._add_graph()
        self._builder.add_op_log(merge_op_logs(default, op_log))

    def _add_graph(self) -> bool:
        """Add the graph's nodes unless nothing changed since they were last added."""
        if self._graph is None or self._graph.state() == self._added:
            return False
        self._added = self._graph.state()
        graph_def = self._graph.graph_def()
        if graph_def is not None:
            self._builder.add_graph(graph_def)
        return True

    def add_step(self, step: int, run_meta: Any) -> None:
        """Add the RunMetadata of one run as step ``step`` (a step added twice merges).

        With a ``tf.Graph``, the run's shapes first complete the graph's static shapes (which
        changes the caller's graph, as TensorFlow does) and so its FLOPs.
        """
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise OptionError(f"step must be an integer, not `{step!r}`")
        self._inputs += input_paths(run_meta_path=[run_meta])
        run_meta = read_run_meta(run_meta)
        # tfprof adds the graph again (new nodes only), the step, then the default op log. Both
        # are what was added before unless ops were created or shapes filled since: adding
        # them again would change nothing, so they are only rebuilt then.
        default = None
        if self._graph is not None:
            self._graph.fill_shapes(run_meta)
            if self._add_graph():
                default = self._graph.op_log(run_meta)
        self._coverage = self._builder.add_run_meta(step, run_meta)
        if default is not None:
            self._builder.add_op_log(default)
        self._profile = None

    def _use_graph(self, graph: Any) -> None:
        """Take the nodes of ``graph`` (a tf.Graph) from the next step on, as TensorFlow's
        ProfileContext does with the graph of each session it traces."""
        if getattr(self._graph, "graph", None) is not graph:
            self._graph = graph_input(graph)

    def to_profile(self) -> Profile:
        """The profile so far as a ``tfprof.Profile`` (tables for SQL and polars)."""
        if self._profile is None:
            self._profile = Profile(self._builder.tables(), source="run_metadata")
            self._profile.inputs = self._inputs
        return self._profile

    def profile_name_scope(self, options: Mapping[str, Any]) -> Any:
        """The scope view: nodes by name scope. Returns a GraphNodeProto."""
        return _show(self.to_profile(), "scope", options)

    def profile_graph(self, options: Mapping[str, Any]) -> Any:
        """The graph view: nodes below their consumers. Returns a GraphNodeProto."""
        return _show(self.to_profile(), "graph", options)

    def profile_operations(self, options: Mapping[str, Any]) -> Any:
        """The op view: statistics per op type. Returns a MultiGraphNodeProto."""
        return _show(self.to_profile(), "op", options)

    def profile_python(self, options: Mapping[str, Any]) -> Any:
        """The code view: nodes by the Python call stacks that made them. Returns a MultiGraphNodeProto."""
        return _show(self.to_profile(), "code", options)

    def advise(self, options: Mapping[str, Any] | None = None) -> Any:
        """Run the advisor's checkers (``{checker: {option: value}}``; None: all) and return
        the AdviceProto; the advice is printed as tfprof prints it."""
        return _advise(self.to_profile(), options)

    def serialize_to_string(self) -> bytes:
        """The profile as ProfileProto bytes (loadable by tfprof and by ``tfprof.load``)."""
        return encode_profile(_written_tables(self.to_profile())).tobytes()

    def _write_profile(self, filename: str) -> None:
        """Write the ProfileProto to ``filename`` (replacing it, as TensorFlow does; never an input)."""
        write_file(filename, lambda: encode_profile(_written_tables(self.to_profile())), force=True,
                   inputs=self._inputs, what="profile file")


def profile(
    graph: Any = None, run_meta: Any = None, op_log: Any = None, cmd: str = "scope", options: Any = None
) -> Any:
    """Profile a model once (tf.profiler.profile): ``cmd`` is scope, graph, op or code.

    Returns a GraphNodeProto (scope, graph) or a MultiGraphNodeProto (op, code). Without
    ``options``, the trainable variables' parameters are shown.
    """
    if cmd not in VIEWS:
        raise OptionError(f"unknown cmd `{cmd}`; valid: {', '.join(VIEWS)}")
    if options is None:
        options = ProfileOptionBuilder.trainable_variables_parameter()
    # TensorFlow's logger adds code traces for the code view only.
    return _show(_one_shot(graph, run_meta, op_log, add_trace=cmd == "code"), cmd, options)


def advise(graph: Any = None, run_meta: Any = None, options: Any = None) -> Any:
    """Profile a model once and run the advisor (tf.profiler.advise); returns an AdviceProto.

    ``options``: ``{checker: {option: value}}``; by default every checker (ALL_ADVICE).
    """
    return _advise(_one_shot(graph, run_meta, None), options)


def _one_shot(graph: Any, run_meta: Any, op_log: Any, add_trace: bool = True) -> Profile:
    # tfprof's one-shot order (TFStats constructor): graph, run metadata as step 0, op log.
    source = graph_input(graph)
    if source is None and run_meta is None:
        raise OptionError("nothing to profile: pass a graph (tf.Graph, GraphDef, bytes or path) and/or run_meta")
    # A RunMetadata message without step stats (`tf.RunMetadata()` in a FLOPs recipe) is not a
    # step for tfprof (TFStats adds run_meta only if it has step_stats); it still counts as
    # given for TensorFlow's logger, which then stays silent about incomplete shapes.
    rm = None
    if run_meta is not None:
        rm = run_meta_pb2.RunMetadata() if no_step_stats(run_meta) else read_run_meta(run_meta)
    # TensorFlow's logger runs first: shapes filled from the run are in the graph sent.
    default = default_op_log() if source is None else source.op_log(rm, add_trace=add_trace)
    builder = ProfileBuilder()
    graph_def = None if source is None else source.graph_def()
    if graph_def is not None:
        builder.add_graph(graph_def)
    if rm is not None and rm.HasField("step_stats"):
        builder.add_run_meta(0, rm)
    builder.add_op_log(merge_op_logs(default, op_log))
    prof = Profile(builder.tables(), source="run_metadata")
    prof.inputs = input_paths(graph_path=graph, run_meta_path=[run_meta], op_log_path=op_log)  # never written over
    return prof


def _show(prof: Profile, cmd: str, options: Any) -> Any:
    opts = python_options(options)
    result = run_view(prof, cmd, opts, full_rows=True)  # it returns the proto
    print_notes(result)
    # tfprof's Python API prints its options between banners around a stdout report. Its file,
    # timeline and pprof outputs replace an existing file, as TensorFlow's do (force=True; the
    # CLI and tfprof's own API refuse without --force / force=True); the profile's inputs
    # (prof.inputs) are still never written over.
    emit_output(prof, result, stdout=_BANNERS[0] + options_text(opts) + _BANNERS[1] + result.text + _BANNERS[2],
                force=True)
    return result.proto


def _advise(prof: Profile, options: Any) -> Any:
    from tfprof.api import advise as run_advice

    result = run_advice(prof, None if options is None else dict(options))
    print_notes(result)
    sys.stdout.write(result.text)
    return result.proto


def _written_tables(prof: Profile) -> dict:
    return {name: prof.table(name) for name in TABLES_WRITTEN}


# ------------------------------------------------------------------------------- output

_BANNERS = (
    "\n=========================Options=============================\n",
    "\n==================Model Analysis Report======================\n",
    "\n======================End of Report==========================\n",
)


def options_text(opts: Options) -> str:
    """tfprof's Options.ToString
    (docs/TFPROF_BEHAVIOUR.md, 'Options listing'): one `%-28s` name and its value per line."""
    lines = []
    for name, value in opts.to_tfprof().items():
        if name in LIST_OPTIONS or name == "select":
            value = ",".join(value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif name == "output":
            value = str(opts.output)
        lines.append(f"{'-' + name:<28}{value}\n")
    return "".join(lines)


