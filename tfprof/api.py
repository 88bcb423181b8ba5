"""One core for every shell: run a view (query + renderer) and get its frame and text.

The CLI, the Python API and notebooks all call ``run_view``; nothing else decides what a
view shows or how it prints.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tfprof.errors import InputError, InputNotFoundError, OptionError, OutputError, TfprofError
from tfprof.output import Inputs, check_target, write_files
from tfprof.profile import Profile
from tfprof.schema import METRICS
from tfprof.queries.code import code
from tfprof.queries.indexes.code_trie import NoCodeTraces
from tfprof.queries.graph import graph
from tfprof.queries.metrics import attach
from tfprof.queries.op import op_view
from tfprof.queries.options import Options
from tfprof.queries.scope import scope
from tfprof.queries.tensor_values import tensor_values
from tfprof.views.proto import code_tree_proto, graph_node_tree, op_chain
from tfprof.views.tensor_text import tensor_notes, tensor_texts
from tfprof.views.columns import decode
from tfprof.views.text import render_code_bytes, render_op, render_tree, report_head

VIEWS = ("scope", "graph", "op", "code")


@dataclass
class ViewResult:
    """A view's displayed rows (``frame``), its report (``text``) and diagnostics (``notes``).

    ``proto`` (GraphNodeProto for scope/graph, MultiGraphNodeProto for op/code) is built on
    first access: most callers only print.
    """

    cmd: str
    options: Options
    text: str
    notes: list[str] = field(default_factory=list)
    root: dict[str, Any] = field(default_factory=dict)
    build_proto: Callable[[], Any] | None = field(default=None, repr=False)
    build_frame: Callable[[], pl.DataFrame] | None = field(default=None, repr=False)

    @functools.cached_property
    def frame(self) -> pl.DataFrame:
        """The displayed rows with every metric column (built on first access where the report
        was printed from a narrower frame)."""
        return self.build_frame() if self.build_frame else pl.DataFrame()

    @functools.cached_property
    def proto(self) -> Any:
        return self.build_proto() if self.build_proto else None

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        """Jupyter: the report in a ``<pre>``, then the rows (``Profile.view``'s table)."""
        from tfprof.views.notebook import view_html
        from tfprof.views.table import view_table

        return view_html(self.cmd, self.text, view_table(self.cmd, self.frame), self.notes)


def warm_up(*, ingest: bool = False) -> None:
    """Load the views' compiled kernels from numba's cache: numba's start in a process (about
    0.3 s, then a few milliseconds per kernel), paid here once instead of by the first view.
    With ``ingest``, also the decoder's and the indexes' kernels (``tfprof.store.warm_up``)."""
    from tfprof.queries import code, forest, graph
    from tfprof.views.columns import tree_text

    if ingest:
        from tfprof.store import warm_up as warm_up_ingest

        warm_up_ingest()
    forest.warm_up()
    graph.warm_up()
    code.warm_up()
    one = pl.DataFrame(
        {"name": ["x"], "indent": [0], "accounted": [True], **{c: [1] for m in METRICS for c in (m, "total_" + m)}}
    )
    tree_text(one, ["micros"], code=True)


def check_step(prof: Profile, step: int) -> None:
    """tfprof's step check (spec 2.3.5): a step >= 0 must be one of the profile's steps."""
    if step < 0:
        return
    steps = prof.frame("steps")["step"].to_list()
    if step not in steps:
        listed = " ".join(str(s) for s in steps) or "none"
        raise OptionError(f"Option `step` {step} not found in the profile; available steps: {listed}")


def _blame_damage(fn):
    """A view that fails with an error tfprof did not foresee, on a store: when a full check of
    the store finds a damaged file (``Profile.damage``), that file is the error; otherwise the
    failure is a bug and goes on as it is."""

    @functools.wraps(fn)
    def view(prof: Profile, *args, **kwargs):
        try:
            return fn(prof, *args, **kwargs)
        except TfprofError:
            raise
        except Exception:
            damage = prof.damage()
            if damage is None:
                raise
            raise damage from None

    return view


@_blame_damage
def run_view(prof: Profile, cmd: str, options: Options | dict | None = None, *, full_rows: bool = False) -> ViewResult:
    """Run view ``cmd`` (scope, graph, op, code) on ``prof`` with ``options``.

    ``full_rows``: the caller will use ``frame`` or ``proto`` (every column of the displayed
    rows), so the code view computes them once and prints from them; otherwise it prints from
    the columns the report shows and builds the full rows only if asked for later."""
    if cmd not in VIEWS:
        raise OptionError(f"Unknown view `{cmd}`; valid: {', '.join(VIEWS)}")
    opts = options if isinstance(options, Options) else Options.from_tfprof(options or {})
    check_step(prof, opts.step)
    notes: list[str] = _unknown_select_notes(opts)
    root: dict[str, Any] = {}
    miss = (
        prof.source == "run_metadata"  # tfprof does not restore the flag from a ProfileProto (spec 2.6)
        and prof.row_counts()["info"] > 0
        and bool(prof.frame("info")["miss_accelerator_stream"][0])
    )
    # the tree views write the report's head into the same buffer as their lines (no second copy)
    head = report_head(cmd, opts.select, miss_accelerator_stream=miss)
    if cmd in ("scope", "graph"):
        frame = scope(prof, opts) if cmd == "scope" else graph(prof, opts)
        # spec 7.5: with a checkpoint, every displayed node but the root is looked up by name.
        tensors = tensor_values(prof, frame) if "tensor_value" in opts.select else None
        text = render_tree(frame, opts.select, tensor_texts(tensors) if tensors is not None else None, head=head)
        notes += tensor_notes(tensors) if tensors is not None else []
        proto = lambda f=frame, t=tensors: graph_node_tree(attach(prof, f, ("input_shapes",)), t)  # noqa: E731
    elif cmd == "op":
        view = op_view(prof, opts)
        frame, root = view.rows, view.root
        text = head + render_op(view.rows, view.root, view.members, opts.select)
        proto = lambda: op_chain(view.rows, view.root, attach(prof, view.members, ("input_shapes",)))  # noqa: E731
    else:
        if opts.account_displayed_op_only:
            notes.append("Note: code view ignores account_displayed_op_only")
        full_rows = full_rows or opts.output.kind == "pprof"  # the pprof writer reads the rows
        try:
            # the report from the columns it prints, sorts and filters on; the full rows on request
            lean, unaccounted, members = code(prof, opts, None if full_rows else report_metrics(opts))
        except NoCodeTraces:
            raise OptionError(
                "the code view needs code traces: pass an op log written with traces (--op_log_path)"
            ) from None
        if unaccounted:
            notes.append(f"{unaccounted} gradient nodes not accounted")
        if "tensor_value" in opts.select:
            notes += ["code view has no tensor value to show"] * max(lean.height - 1, 0)
        data = render_code_bytes(lean, opts.select, head=head)
        if full_rows:
            kept = (lean, members)
            rows_and_members = lambda: kept  # noqa: E731
        else:
            del lean, members  # the report's only: the rows, the bytes and the text never all at once
            rows_and_members = functools.cache(lambda: code(prof, opts)[::2])
        text = decode(data)
        del data
        proto = lambda: code_tree_proto(rows_and_members()[0], attach(prof, rows_and_members()[1], ("input_shapes",)))  # noqa: E731
        return ViewResult(
            cmd=cmd, options=opts, text=text, notes=notes, root=root, build_proto=proto,
            build_frame=lambda: rows_and_members()[0],
        )
    return ViewResult(
        cmd=cmd, options=opts, text=text, notes=notes, root=root, build_proto=proto, build_frame=lambda: frame
    )


def _unknown_select_notes(opts: Options) -> list[str]:
    """The stderr warnings for select names tfprof does not know (the report goes on without them)."""
    from tfprof.queries.options import SELECT_FIELDS, _unknown

    return [f"Warning: {_unknown('select field', s, SELECT_FIELDS)}; ignored" for s in opts.unknown_select]


def report_metrics(opts: Options) -> tuple[str, ...]:
    """The self columns a code report prints (``select``), sorts on (``order_by``) and filters
    on (the ``min_*`` options in use)."""
    from tfprof.queries.tree import MULTI_MIN_FILTERS, ORDER_COLUMNS
    from tfprof.views.format import FIELDS, time_fields

    wanted = {FIELDS[f].column for f in (*opts.select, *time_fields(opts.select)) if f in FIELDS}
    order = ORDER_COLUMNS.get(opts.order_by)
    if order:
        wanted.add(order.removeprefix("total_"))
    for option, column in MULTI_MIN_FILTERS.items():
        if getattr(opts, option):
            wanted.add(column.removeprefix("total_"))
    return tuple(sorted(wanted))


def print_notes(result: ViewResult) -> None:
    """tfprof's stderr diagnostics of a view, one per line."""
    for note in result.notes:
        print(note, file=sys.stderr)


# --------------------------------------------------------------------------- outputs (spec 6.3, 8)


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
    kind, outfile = opts.output.kind, opts.output.outfile
    if kind in ("file", "pprof"):
        return [Path(outfile)]
    if kind != "timeline":
        return []
    if cmd == "graph" and opts.step < 0:
        return [Path(f"{outfile}_{s}") for s in prof.frame("steps")["step"].to_list()] if prof is not None else []
    return [Path(outfile if opts.step < 0 else f"{outfile}_{opts.step}")]


def check_output(
    cmd: str, opts: Options, prof: Profile | None = None, *, force: bool = False, inputs: Inputs | None = None
) -> None:
    """Reject, before any work, an -output that the view cannot write (tfprof prints these
    messages and writes nothing; we raise them), and a target that may not be written: in a
    missing directory, existing (without ``force``), or an input (``inputs``, and ``prof``'s
    own; never, whatever ``force`` says)."""
    from tfprof.queries.pprof import check_pprof

    kind = opts.output.kind
    if kind == "timeline" and cmd == "op":
        raise OptionError("op view doesn't support timeline yet. Consider graph/scope/code view.")
    if kind == "pprof":
        check_pprof(cmd, opts)
    if kind in ("timeline", "pprof", "file"):
        protect = _protected(prof, inputs)
        for path in output_paths(cmd, opts, prof):
            check_target(path, force=force, inputs=protect, what="outfile")
        parent = Path(opts.output.outfile).absolute().parent  # when the steps are not known yet
        if not parent.is_dir():
            raise OutputError(f"`{parent}` does not exist; create it first or choose another outfile")


def _protected(prof: Profile | None, inputs: Inputs | None) -> Inputs:
    return (prof.inputs if prof is not None else Inputs()) + inputs


def write_output(prof: Profile, result: ViewResult, *, force: bool = False, inputs: Inputs | None = None) -> Written:
    """Write ``result`` where its ``-output`` option says (``file``, ``timeline``, ``pprof``;
    ``stdout`` returns the report as ``stdout``; ``none`` does nothing). An existing file is
    replaced only with ``force``; ``inputs`` and the files ``prof`` was read from are never
    written over. Files are written atomically: on failure no file of this call is left behind."""
    check_output(result.cmd, result.options, prof, force=force, inputs=inputs)
    return _OUTPUTS[result.options.output.kind](prof, result, force, _protected(prof, inputs))


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
    """Chrome trace JSON, one file ``<outfile>_<step>`` (spec 8.1.1); the graph view with no
    step writes one per step, as tfprof (tfprof_stats.cc ShowGraphNode). Each step's trace is
    made when the previous one is on disk (in its temporary file), so only one is in memory."""
    from tfprof.queries.timeline import graph_events, tree_events
    from tfprof.views.timeline import LARGE_TRACE_BYTES, LARGE_TRACE_WARNING, peak_lines, render_trace, written_message

    opts = result.options
    paths = output_paths(result.cmd, opts, prof)
    messages: list[str] = []
    notes: list[str] = []

    def trace(step: int, path: Path) -> Callable[[], bytes]:
        def make() -> bytes:
            if result.cmd == "graph":
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

    if result.cmd == "graph":
        steps = [opts.step] if opts.step >= 0 else prof.frame("steps")["step"].to_list()
        if not steps:
            raise OptionError("The graph view's timeline needs run metadata: this profile has no steps")
    else:
        steps = [opts.step]
    written = _write_files({path: trace(step, path) for step, path in zip(steps, paths)}, force, inputs)
    return Written(paths=written, stdout="".join(messages), notes=notes)


def _write_pprof(prof: Profile, result: ViewResult, force: bool, inputs: Inputs) -> Written:
    """The code view as a gzipped pprof profile at ``outfile`` (spec 8.2)."""
    from tfprof.queries.pprof import pprof_data
    from tfprof.views.pprof import render_pprof, written_message

    path = Path(result.options.output.outfile)
    data = lambda: render_pprof(pprof_data(prof, result.options, result.frame))  # noqa: E731 - made once checked
    return Written(paths=_write_files({path: data}, force, inputs), stdout=written_message(path))


def _write_file(prof: Profile, result: ViewResult, force: bool, inputs: Inputs) -> Written:
    path = Path(result.options.output.outfile)
    return Written(paths=_write_files({path: result.text.encode()}, force, inputs))


_OUTPUTS: dict[str, Callable[[Profile, ViewResult, bool, Inputs], Written]] = {
    "stdout": lambda prof, result, force, inputs: Written(stdout=result.text),
    "file": _write_file,
    "timeline": _write_timeline,
    "pprof": _write_pprof,
    "none": lambda prof, result, force, inputs: Written(),
}


# --------------------------------------------------------------------------- advisor (spec 9)


@dataclass
class AdviceResult:
    """The advice: ``text`` (what tfprof prints), ``proto`` (the AdviceProto it returns),
    each checker's evidence rows, and tfprof's stderr notes (missing inputs)."""

    text: str
    proto: Any
    evidence: dict[str, pl.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text


def advise(prof: Profile, checkers: Any = None, *, checker_dir: str | Path | None = None) -> AdviceResult:
    """Run the advisor on ``prof``, as tfprof's ``advise`` (spec 9).

    ``checkers``: None for every built-in checker (tfprof's ALL_ADVICE), or a dict
    ``{checker: {option: value}}`` as tfprof's API takes (a list of names also works); a dict
    runs the checkers it names. A checker is a built-in name, the path of a ``.sql`` checker
    file, or the name (file stem) of a checker in ``checker_dir``, whose ``*.sql`` files all
    run. Built-in checkers run in tfprof's order, then SQL checkers (docs/ADVISOR.md).

    >>> import tfprof
    >>> advise(tfprof.load(tfprof.sample_path()), {"OperationChecker": {}}).text
    '\\nOperationChecker:\\n'
    """
    from tfprof.views.advice import advice_proto, missing_notes, render_text, reports

    advice: dict[str, list[str]] = {}
    evidence: dict[str, pl.DataFrame] = {}
    notes: list[str] = []
    for check, options in _advice_plan(checkers, checker_dir):
        found = check.run(prof, options)
        if found is None:  # JobChecker: no entry at all, as in open-source tfprof
            continue
        evidence[check.name] = found.rows
        notes += missing_notes(check.name, found.missing)
        advice[check.name] = reports(check.name, found.rows)
    return AdviceResult(text=render_text(advice), proto=advice_proto(advice), evidence=evidence, notes=notes)


def _advice_plan(checkers: Any, checker_dir: str | Path | None) -> list[tuple[Any, dict]]:
    """(check, options) pairs to run: built-in ones in tfprof's order, then SQL checkers."""
    from tfprof.queries.advisor import CHECKS, DEFAULT_CHECKERS, by_name

    in_dir: dict[str, Any] = {}
    if checker_dir is not None:
        folder = Path(checker_dir)
        if not folder.is_dir():
            raise InputNotFoundError(f"Checker directory `{folder}` not found")
        files = sorted(folder.glob("*.sql"))
        if not files:
            raise OptionError(f"No .sql checker files in `{folder}`")
        in_dir = {c.name: c for c in map(_sql_checker, files)}
    if checkers is None:
        checkers = DEFAULT_CHECKERS
    elif isinstance(checkers, (str, Path)):
        checkers = {checkers: {}}
    elif not isinstance(checkers, Mapping):
        checkers = {c: {} for c in checkers}
    builtin: dict[str, dict] = {}
    custom: dict[str, tuple[Any, dict]] = {name: (check, {}) for name, check in in_dir.items()}
    for key, options in checkers.items():
        options = {} if options is None else options
        if not isinstance(options, Mapping):
            raise OptionError(f"Options of checker `{key}` must be a dict of option -> value, not `{options!r}`")
        if isinstance(key, Path) or str(key).lower().endswith(".sql"):
            check = _sql_checker(Path(key))
            if check.name in custom or check.name in DEFAULT_CHECKERS:
                raise OptionError(f"Two checkers are named `{check.name}` ({check.source}); rename the .sql file")
            custom[check.name] = (check, dict(options))
        elif key in in_dir:
            custom[key] = (in_dir[key], dict(options))
        else:
            builtin[by_name(str(key)).name] = dict(options)
    clash = sorted(set(in_dir) & set(DEFAULT_CHECKERS))
    if clash:
        raise OptionError(f"Checker file `{in_dir[clash[0]].source}` takes the built-in name `{clash[0]}`; rename it")
    return [(c, builtin[c.name]) for c in CHECKS if c.name in builtin] + list(custom.values())


def _sql_checker(path: Path):
    """A user checker from a .sql file, named by the file's stem."""
    from tfprof.queries.advisor.custom import sql_check

    if not path.is_file():
        raise InputNotFoundError(f"Checker file `{path}` not found")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"Cannot read checker file `{path}`: {exc}") from None
    return sql_check(path.stem, text, source=str(path))
