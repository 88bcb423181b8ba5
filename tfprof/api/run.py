"""One core for every shell: run a view (query + renderer) and get its frame and text.

The CLI, the Python API and notebooks all call ``run_view``; nothing else decides what a
view shows or how it prints.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tfprof import kernels
from tfprof.errors import OptionError, TfprofError
from tfprof.ingest.foreign import no_source as foreign_no_source
from tfprof.profile import Profile
from tfprof.queries.engine import displayed, on_kernels, on_sql_backend
from tfprof.queries.flops import macs_gaps
from tfprof.queries.indexes.code_trie import NoCodeTraces
from tfprof.queries.indexes.means import capture_steps
from tfprof.queries.launched import launched
from tfprof.queries.metrics import attach
from tfprof.queries.options import Options
from tfprof.queries.spec import BUILTIN, VIEWS, TreeSpec, tree_spec, view_options
from tfprof.queries.tensor_values import tensor_values
from tfprof.queries.ticks import dict_in_micros, in_micros, time_scale, whole_micros
from tfprof.views.columns import decode
from tfprof.views.launched_text import join_after, launched_texts
from tfprof.views.proto import code_tree_proto, graph_node_tree, op_chain
from tfprof.views.tensor_text import tensor_notes, tensor_texts
from tfprof.views.text import render_code_bytes, render_op, render_tree, report_head, row_lines

# The views by name (``tfprof.queries.spec.VIEWS``): a view added there runs on the engine of its
# layout and prints as the views of that layout do.
_KERNELS_NOTE = "select kernels: the scope and graph views list GPU kernels under the op that launched them"
_PREDATES_KERNELS = ("select kernels: this store was written before tfprof kept a `kernels` table; ingest the trace "
                     "again (tfprof ingest TRACE --out STORE --force) to list them")
# The built-in view whose report each layout prints like.
_PRINTS_LIKE = {"scope": "scope", "graph": "graph", "groups": "op", "code": "code"}


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
    layout: str = "scope"  # the view's layout (``tfprof.queries.spec.LAYOUTS``): the rows' shape
    root: dict[str, Any] = field(default_factory=dict)
    build_proto: Callable[[], Any] | None = field(default=None, repr=False)
    build_frame: Callable[[], pl.DataFrame] | None = field(default=None, repr=False)
    build_lines: Callable[[], list[str]] | None = field(default=None, repr=False)

    @functools.cached_property
    def frame(self) -> pl.DataFrame:
        """The displayed rows with every metric column (built on first access where the report
        was printed from a narrower frame)."""
        return self.build_frame() if self.build_frame else pl.DataFrame()

    @functools.cached_property
    def lines(self) -> list[str]:
        """Each row of ``frame``'s line of the report, as printed (without what prints under it)."""
        return self.build_lines() if self.build_lines else []

    @functools.cached_property
    def proto(self) -> Any:
        return self.build_proto() if self.build_proto else None

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        """Jupyter: the report in a ``<pre>``, then the rows (``tfprof.view``'s table)."""
        from tfprof.views.notebook import view_html
        from tfprof.views.table import view_table

        return view_html(self.cmd, self.text, view_table(self.layout, self.frame), self.notes)


def view(prof: Profile, cmd: str, **options: object) -> pl.DataFrame:
    """The rows view ``cmd`` (scope, graph, op, code) shows, one per printed line, in order.

    Options take tfprof's names (``max_depth=3``, ``select=["params"]``, ``order_by="micros"``);
    the rest keep the command line's defaults. Columns: ``name``, ``depth``, then each
    selected metric beside its ``total_`` (``select`` as the report's: ``micros`` by
    default; documented in ``tfprof.views.table.COLUMNS``). For the report text as well,
    call ``run_view``.

    >>> import tfprof
    >>> tfprof.view(tfprof.load(tfprof.sample_path()), "scope", max_depth=0)["name"].to_list()
    ['_TFProfRoot']
    """
    from tfprof.views.table import view_table

    if "output" in options or "dump_to_file" in options:
        raise OptionError("view returns rows, not output: drop `output` (run_view(...).text is the report)")
    result = run_view(prof, cmd, options, full_rows=True)
    return view_table(result.layout, result.frame, result.options.select)


def options_for(cmd: str, options: Options | dict | None) -> Options:
    """The options view ``cmd`` runs with: ``options`` (``Options`` or a tfprof option dict) over
    the view's own (``TreeSpec.defaults``; none for tfprof's four)."""
    if cmd not in VIEWS:
        raise OptionError(f"Unknown view `{cmd}`; valid: {', '.join(VIEWS)}")
    opts = options if isinstance(options, Options) else Options.from_tfprof(options or {})
    return view_options(VIEWS[cmd], opts)


def check_step(prof: Profile, step: int) -> None:
    """tfprof's step check (docs/TFPROF_BEHAVIOUR.md, 'Steps and averaging'): a step >= 0 must be one of the profile's
    steps."""
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
    the columns the report shows and builds the full rows only if asked for later.

    A small profile runs on the reference paths while numba's kernels are not compiled yet
    (``tfprof.kernels``); the code view always runs on its kernels."""
    if cmd not in VIEWS:
        raise OptionError(f"Unknown view `{cmd}`; valid: {', '.join(VIEWS)}")
    with kernels.using(on_kernels(prof, VIEWS[cmd].layout)):
        return _run_view(prof, cmd, options, full_rows=full_rows)


def _run_view(prof: Profile, cmd: str, options: Options | dict | None, *, full_rows: bool) -> ViewResult:
    opts = options_for(cmd, options)
    spec = tree_spec(VIEWS[cmd], opts)  # each engine scales its time thresholds to the profile's unit
    scale = time_scale(prof)  # times in ns for a foreign profile, whole µs for tfprof's own
    ns = scale != 1
    check_step(prof, spec.step)
    notes: list[str] = _unknown_select_notes(opts)
    root: dict[str, Any] = {}
    # tfprof does not restore the flag from a ProfileProto (docs/TFPROF_BEHAVIOUR.md, 'ProfileProto')
    miss = (
        prof.source == "run_metadata"
        and prof.row_counts()["info"] > 0
        and bool(prof.frame("info")["miss_accelerator_stream"][0])
    )
    # the tree views write the report's head into the same buffer as their lines (no second copy)
    layout = spec.layout
    head = report_head(cmd if cmd in BUILTIN else _PRINTS_LIKE[layout], opts.select, miss_accelerator_stream=miss,
                       view_doc=spec.doc, no_source=foreign_no_source(prof), steps_note=_steps_note(prof, spec),
                       macs_gaps=macs_gaps(prof) if "macs" in opts.select else None)
    if layout in ("scope", "graph"):
        frame = displayed(prof, spec).rows
        # docs/TFPROF_BEHAVIOUR.md, 'Tensor values': with a checkpoint, every displayed node but the root is looked up
        # by name.
        tensors = tensor_values(prof, frame) if "tensor_value" in opts.select else None
        work = launched_texts(frame, launched(prof, frame, spec.step)) if "kernels" in opts.select else None
        if work is not None and "kernels" in prof.predates:
            notes.append(_PREDATES_KERNELS)
        text = render_tree(frame, opts.select, join_after(tensor_texts(tensors) if tensors is not None else None, work),
                           head=head, ns=ns)
        notes += tensor_notes(tensors) if tensors is not None else []
        proto = lambda f=frame, t=tensors: graph_node_tree(  # noqa: E731
            attach(prof, whole_micros(f, scale), ("input_shapes",)), t)
    elif layout == "groups":
        if "kernels" in opts.select:
            notes.append(_KERNELS_NOTE)
        view = displayed(prof, spec)
        frame, root = view.rows, view.root
        text = head + render_op(view.rows, view.root, view.members, opts.select, ns=ns)
        proto = lambda: op_chain(whole_micros(view.rows, scale), dict_in_micros(view.root, scale, whole=True),  # noqa: E731
                                 attach(prof, whole_micros(view.members, scale), ("input_shapes",)))
    else:
        if opts.account_displayed_op_only:
            notes.append("Note: code view ignores account_displayed_op_only")
        full_rows = full_rows or on_sql_backend() or opts.output.kind == "pprof"  # the pprof writer reads the rows
        try:
            # the report from the columns it prints, sorts and filters on; the full rows on request
            shown = displayed(prof, spec, None if full_rows else report_metrics(spec))
        except NoCodeTraces:
            raise OptionError(
                f"the code view needs code traces: this {prof.source} profile has no Python stacks (PyTorch records "
                "them with `with_stack=True`)" if foreign_no_source(prof) else
                "the code view needs code traces: pass an op log written with traces (--op_log_path)"
            ) from None
        lean, members = shown.rows, shown.members
        if shown.unaccounted:
            notes.append(f"{shown.unaccounted} gradient nodes not accounted")
        if "tensor_value" in opts.select:
            notes += ["code view has no tensor value to show"] * max(lean.height - 1, 0)
        if "kernels" in opts.select:
            notes.append(_KERNELS_NOTE)
        data = render_code_bytes(lean, opts.select, head=head, ns=ns)
        if full_rows:
            kept = (lean, members)
            rows_and_members = lambda: kept  # noqa: E731
        else:
            del lean, members, shown  # the report's only: the rows, the bytes and the text never all at once

            @functools.cache
            def rows_and_members() -> tuple[pl.DataFrame, pl.DataFrame]:
                again = displayed(prof, spec)
                return again.rows, again.members

        text = decode(data)
        del data
        proto = lambda: code_tree_proto(whole_micros(rows_and_members()[0], scale),  # noqa: E731
                                        attach(prof, whole_micros(rows_and_members()[1], scale), ("input_shapes",)))
        return ViewResult(
            cmd=cmd, options=opts, text=text, notes=notes, layout=layout, root=dict_in_micros(root, scale),
            build_proto=proto, build_frame=lambda: in_micros(rows_and_members()[0], scale),
            build_lines=lambda: row_lines(layout, rows_and_members()[0], opts.select, ns=ns),
        )
    return ViewResult(
        cmd=cmd, options=opts, text=text, notes=notes, layout=layout, root=dict_in_micros(root, scale),
        build_proto=proto, build_frame=lambda: in_micros(frame, scale),
        build_lines=lambda: row_lines(layout, frame, opts.select, root, ns=ns),
    )


def _steps_note(prof: Profile, spec: TreeSpec) -> str | None:
    """The report head's line on what a foreign profile's step -1 times are, where they are not
    tfprof's per-node mean (``tfprof.queries.indexes.means.capture_steps``)."""
    steps = capture_steps(prof) if spec.step < 0 else 0
    if not steps:
        return None
    return (f"Times are per step of the capture: each node's total over its {steps} steps divided by {steps}, "
            "the steps it did not run in included (tfprof's own profiles divide by the steps a node ran in); "
            "-step N shows one step.")


def _unknown_select_notes(opts: Options) -> list[str]:
    """The stderr warnings for select names tfprof does not know (the report goes on without them)."""
    from tfprof.queries.options import SELECT_FIELDS, unknown_value

    return [f"Warning: {unknown_value('select field', s, SELECT_FIELDS)}; ignored" for s in opts.unknown_select]


def report_metrics(spec: TreeSpec) -> tuple[str, ...]:
    """The self columns a code report prints (``select``); the engine adds what the report sorts
    and filters on (``tfprof.queries.scope.counted_columns``)."""
    from tfprof.views.fields import METRICS, time_fields

    select = spec.options.select
    return tuple(sorted({METRICS[f].column for f in (*select, *time_fields(select)) if f in METRICS}))


def print_notes(result: ViewResult) -> None:
    """tfprof's stderr diagnostics of a view, one per line."""
    for note in result.notes:
        print(note, file=sys.stderr)
