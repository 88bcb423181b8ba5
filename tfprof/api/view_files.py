"""Our file outputs for every view: a Chrome trace, folded stacks, a name-stack pprof and an HTML report.

tfprof's own ``-output`` kinds keep its rules (``timeline`` refuses the op view, ``pprof`` every
view but code; docs/COMPATIBILITY.md). These kinds are ours and take any view:

* ``trace:outfile=F`` — the displayed rows as nested bars in Chrome trace JSON, as the scope
  and code timelines draw them (the op view: its op types side by side under the root);
* ``folded:outfile=F`` — folded stacks of the first selected metric (flamegraph.pl, speedscope);
* ``pprof_tree:outfile=F`` — a gzipped pprof profile of the displayed names, one sample type per
  selected metric;
* ``html:outfile=F`` — one offline page: the report, a flame graph and the advisor's findings.

Each is a function ``(profile, result) -> bytes``; ``api.sinks`` registers a sink for each.
"""

from __future__ import annotations

from tfprof.api.run import ViewResult
from tfprof.errors import TfprofError
from tfprof.profile import Profile
from tfprof.queries.options import Options
from tfprof.queries.stacks import as_tree, stack_metrics, view_stacks


def check_stack_metric(opts: Options) -> None:
    """Refuse, before any work, a stack file the options cannot fill (no metric selected)."""
    stack_metrics(opts, opts.output.kind)


def trace(prof: Profile, result: ViewResult) -> bytes:
    from tfprof.queries.timeline import tree_events
    from tfprof.views.timeline import render_trace

    return render_trace(tree_events(as_tree(result.layout, result.frame)))


def folded(prof: Profile, result: ViewResult) -> bytes:
    from tfprof.views.stacks import render_folded

    select = stack_metrics(result.options, "folded")
    return render_folded(view_stacks(result.layout, result.frame, select[:1]), select[0])


def pprof_tree(prof: Profile, result: ViewResult) -> bytes:
    from tfprof.views.stacks import render_pprof_stacks

    select = stack_metrics(result.options, "pprof_tree")
    comment = f"tfprof {result.cmd} view: the displayed rows as stacks of names"
    return render_pprof_stacks(view_stacks(result.layout, result.frame, select), select, comment)


def html(prof: Profile, result: ViewResult) -> bytes:
    from tfprof.api.advice import advise
    from tfprof.views.html_report import render_html

    opts = result.options
    select = stack_metrics(opts, "html")
    try:
        advice = advise(prof).text.strip("\n") or "No findings."
    except TfprofError as e:  # a profile the advisor cannot read: the page says why
        advice = f"The advisor could not run on this profile: {e}"
    subtitle = (
        f"{result.cmd} view · select {','.join(opts.select)} · order_by {opts.order_by} · "
        f"max_depth {opts.max_depth} · step {opts.step}"
    )
    return render_html(
        title=f"tfprof {result.cmd} view", subtitle=subtitle, report=result.text,
        stacks=(stacks := view_stacks(result.layout, result.frame, select[:1])), metric=select[0],
        unit=stacks.unit(select[0]),
        advice=advice,
    )
