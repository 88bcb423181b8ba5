"""Where a view's result goes: the ``SINKS`` registry, one ``Sink`` record per ``-output`` kind.

``stdout`` and ``none`` print or drop the report; ``file``, ``timeline`` and ``pprof`` write
tfprof's files, and ``trace``, ``folded``, ``pprof_tree`` and ``html`` ours for every view
(``tfprof.api.view_files``), each atomically and never over an input (``tfprof.output``).
``check_output`` refuses a sink the view cannot feed before any work is done.

A sink is one record: its grammar (``OutputKind``: name, keys, whether it writes a file, help),
its writer, the check it makes before any work and the files it will write. ``register`` adds
one; the option's parser, ``check_output``, ``write_output`` and the help of every shell then
know it. A sink that writes one file of bytes is ``file_sink(kind, make, what, how)``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfprof.api import view_files
from tfprof.api.run import VIEWS, ViewResult, options_for
from tfprof.errors import OptionError, OutputError
from tfprof.output import Inputs, check_target, write_files
from tfprof.profile import Profile
from tfprof.queries.options import OUTPUT_KINDS, Options, OutputKind


@dataclass
class Written:
    """What ``write_output`` did: the files written, what tfprof prints on stdout about them,
    and its stderr notes."""

    paths: list[Path] = field(default_factory=list)
    stdout: str = ""
    notes: list[str] = field(default_factory=list)


def output_paths(cmd: str, opts: Options, prof: Profile | None = None) -> list[Path]:
    """The files ``-output`` will write: ``outfile``, or for a timeline ``<outfile>_<step>``
    per step (the graph view with no step writes every step of ``prof``: without ``prof`` the
    list is empty then). A scope or code timeline with no step (the mean over steps) is
    ``outfile`` itself, where tfprof writes ``<outfile>_-1`` (docs/COMPATIBILITY.md)."""
    sink = SINKS[opts.output.kind]
    if sink.paths is not None:
        return sink.paths(cmd, opts, prof)
    return [Path(opts.output.outfile)] if sink.kind.writes_file else []


def _timeline_paths(cmd: str, opts: Options, prof: Profile | None) -> list[Path]:
    outfile = opts.output.outfile
    if _layout(cmd) == "graph" and opts.step < 0:
        return [Path(f"{outfile}_{s}") for s in prof.frame("steps")["step"].to_list()] if prof is not None else []
    return [Path(outfile if opts.step < 0 else f"{outfile}_{opts.step}")]


def check_output(
    cmd: str, opts: Options, prof: Profile | None = None, *, force: bool = False, inputs: Inputs | None = None
) -> None:
    """Reject, before any work, an -output that the view cannot write (tfprof prints these
    messages and writes nothing; we raise them), and a target that may not be written: in a
    missing directory, existing (without ``force``), or an input (``inputs``, and ``prof``'s
    own; never, whatever ``force`` says). ``opts`` go over the view's own, as the view runs."""
    if cmd in VIEWS:
        opts = options_for(cmd, opts)
    sink = SINKS[opts.output.kind]
    if sink.check is not None:
        sink.check(cmd, opts)
    if sink.kind.writes_file:
        protect = _protected(prof, inputs)
        for path in output_paths(cmd, opts, prof):
            check_target(path, force=force, inputs=protect, what="outfile")
        parent = Path(opts.output.outfile).absolute().parent  # when the steps are not known yet
        if not parent.is_dir():
            raise OutputError(f"`{parent}` does not exist; create it first or choose another outfile")


def _layout(cmd: str) -> str:
    """The layout of view ``cmd`` (tfprof's output rules are its views', by layout)."""
    return VIEWS[cmd].layout if cmd in VIEWS else cmd


def _protected(prof: Profile | None, inputs: Inputs | None) -> Inputs:
    return (prof.inputs if prof is not None else Inputs()) + inputs


def write_output(prof: Profile, result: ViewResult, *, force: bool = False, inputs: Inputs | None = None) -> Written:
    """Write ``result`` where its ``-output`` option says (``file``, ``timeline``, ``pprof``;
    ``stdout`` returns the report as ``stdout``; ``none`` does nothing). An existing file is
    replaced only with ``force``; ``inputs`` and the files ``prof`` was read from are never
    written over. Files are written atomically: on failure no file of this call is left behind."""
    check_output(result.cmd, result.options, prof, force=force, inputs=inputs)
    return SINKS[result.options.output.kind].write(prof, result, force, _protected(prof, inputs))


def emit_output(
    prof: Profile,
    result: ViewResult,
    *,
    stdout: str | None = None,
    echo: Callable[[str], object] | None = None,
    force: bool = False,
    inputs: Inputs | None = None,
) -> Written:
    """Carry out ``result``'s ``-output`` for the CLI and the Python API: write its files
    (``write_output``, with ``force`` and ``inputs``), print tfprof's notes on stderr and its
    stdout text through ``echo`` (default ``sys.stdout.write``). ``stdout``, when given,
    replaces the report that ``-output stdout`` prints (the Python API wraps it in banners)."""
    written = write_output(prof, result, force=force, inputs=inputs)
    for note in written.notes:
        print(note, file=sys.stderr)
    text = stdout if stdout is not None and result.options.output.kind == "stdout" else written.stdout
    if text:
        (echo or sys.stdout.write)(text)
    return written


def _write_files(files: dict[Path, Any], force: bool, inputs: Inputs) -> list[Path]:
    """Write every file or none (``tfprof.output.write_files``): all targets are checked first."""
    return write_files(files, force=force, inputs=inputs, what="outfile")


def _write_timeline(prof: Profile, result: ViewResult, force: bool, inputs: Inputs) -> Written:
    """Chrome trace JSON, one file ``<outfile>_<step>`` (docs/TFPROF_BEHAVIOUR.md, 'Timeline file'); the graph view
    with no step writes one per step, as tfprof (tfprof_stats.cc ShowGraphNode), of a foreign
    trace each step's own events (``tfprof.queries.raw_trace``). Each step's trace is made when
    the previous one is on disk (in its temporary file), so only one is in memory."""
    from tfprof.queries.raw_trace import has_events, raw_trace
    from tfprof.queries.timeline import graph_events, tree_events
    from tfprof.views.timeline import LARGE_TRACE_BYTES, LARGE_TRACE_WARNING, peak_lines, render_trace, written_message

    opts = result.options
    paths = output_paths(result.cmd, opts, prof)
    messages: list[str] = []
    notes: list[str] = []

    def trace(step: int, path: Path) -> Callable[[], bytes]:
        def make() -> bytes:
            if result.layout == "graph" and has_events(prof):  # a foreign trace: its own events
                data = raw_trace(prof, step)
                messages.append(f"the trace's own events of step {step}.\n" + written_message(path))
            elif result.layout == "graph":
                timeline = graph_events(prof, opts.with_(step=step))
                data = render_trace(timeline.events)
                messages.append("generating trace file.\n" + peak_lines(timeline.peaks) + written_message(path))
            else:
                data = render_trace(tree_events(result.frame))
                messages.append(written_message(path))
            if len(data) > LARGE_TRACE_BYTES:
                notes.append(LARGE_TRACE_WARNING)
            return data

        return make

    if result.layout == "graph":
        steps = [opts.step] if opts.step >= 0 else prof.frame("steps")["step"].to_list()
        if not steps:
            raise OptionError("The graph view's timeline needs run metadata: this profile has no steps")
    else:
        steps = [opts.step]
    written = _write_files({path: trace(step, path) for step, path in zip(steps, paths)}, force, inputs)
    return Written(paths=written, stdout="".join(messages), notes=notes)


def _write_pprof(prof: Profile, result: ViewResult, force: bool, inputs: Inputs) -> Written:
    """The code view as a gzipped pprof profile at ``outfile`` (docs/TFPROF_BEHAVIOUR.md, 'pprof output')."""
    from tfprof.queries.pprof import pprof_data
    from tfprof.views.pprof import render_pprof, written_message

    path = Path(result.options.output.outfile)
    data = lambda: render_pprof(pprof_data(prof, result.options, result.frame))  # noqa: E731 - made once checked
    return Written(paths=_write_files({path: data}, force, inputs), stdout=written_message(path))


def _write_file(prof: Profile, result: ViewResult, force: bool, inputs: Inputs) -> Written:
    path = Path(result.options.output.outfile)
    return Written(paths=_write_files({path: result.text.encode()}, force, inputs))


Writer = Callable[[Profile, ViewResult, bool, Inputs], Written]  # (profile, result, force, protected inputs)


@dataclass(frozen=True)
class Sink:
    """One ``-output`` kind (module docstring). ``write`` carries it out; ``check(cmd, options)``
    refuses, before any work, what the view or options cannot feed; ``paths(cmd, options,
    profile)`` lists the files it will write, where that is not ``outfile`` alone."""

    kind: OutputKind
    write: Writer
    check: Callable[[str, Options], None] | None = None
    paths: Callable[[str, Options, Profile | None], list[Path]] | None = None


def file_sink(kind: OutputKind, make: Callable[[Profile, ViewResult], bytes], what: str, how: str,
              check: Callable[[str, Options], None] | None = None) -> Sink:
    """A sink writing the bytes ``make(profile, result)`` to ``outfile``: nothing on stdout, one
    line on stderr naming the file (``what`` it is), its size and ``how`` to open it (``{path}``)."""

    def write(prof: Profile, result: ViewResult, force: bool, inputs: Inputs) -> Written:
        from tfprof.views.units import fmt_memory

        path = Path(result.options.output.outfile)
        paths = _write_files({path: lambda: make(prof, result)}, force, inputs)  # made once checked
        size = fmt_memory(path.stat().st_size)
        return Written(paths=paths, notes=[f"Wrote {what} to {path} ({size}); {how.format(path=path)}"])

    return Sink(kind, write, check)


# -output kind -> its Sink
SINKS: dict[str, Sink] = {}


def register(sink: Sink) -> None:
    """Add (or replace) the ``-output`` kind ``sink.kind.name``: its grammar goes to the option's
    parser (``tfprof.queries.options.OUTPUT_KINDS``), its writer here."""
    OUTPUT_KINDS[sink.kind.name] = sink.kind
    SINKS[sink.kind.name] = sink


def _no_timeline_of_a_list(cmd: str, opts: Options) -> None:
    if _layout(cmd) == "groups":
        raise OptionError(f"{cmd} view doesn't support timeline yet. Consider graph/scope/code view.")


def _pprof_of_code(cmd: str, opts: Options) -> None:
    from tfprof.queries.pprof import check_pprof

    check_pprof(_layout(cmd), opts)


def _stack_metric(cmd: str, opts: Options) -> None:
    view_files.check_stack_metric(opts)


for _sink in (
    Sink(OUTPUT_KINDS["file"], _write_file),
    Sink(OUTPUT_KINDS["none"], lambda prof, result, force, inputs: Written()),
    Sink(OUTPUT_KINDS["pprof"], _write_pprof, _pprof_of_code),
    Sink(OUTPUT_KINDS["stdout"], lambda prof, result, force, inputs: Written(stdout=result.text)),
    Sink(OUTPUT_KINDS["timeline"], _write_timeline, _no_timeline_of_a_list, _timeline_paths),
    file_sink(OUTPUT_KINDS["trace"], view_files.trace, "a Chrome trace of the displayed rows",
              "open it in https://ui.perfetto.dev or chrome://tracing"),
    file_sink(OUTPUT_KINDS["folded"], view_files.folded, "folded stacks",
              "draw them with `flamegraph.pl {path} > flame.svg` or https://www.speedscope.app", _stack_metric),
    file_sink(OUTPUT_KINDS["pprof_tree"], view_files.pprof_tree, "a pprof profile of the displayed names",
              "open it with `pprof -http=: {path}`", _stack_metric),
    file_sink(OUTPUT_KINDS["html"], view_files.html, "an offline report page", "open it in a browser", _stack_metric),
):
    register(_sink)


