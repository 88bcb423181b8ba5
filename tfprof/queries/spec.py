"""What a view means, as data: ``TreeSpec``, built once from a view's layout and its options.

A view answers four questions, and a spec states each answer once:

* **layout** — how the graph's nodes form the rows: by name scope (``scope``), under the nodes
  that consume them (``graph``), by the Python call stacks that created them (``code``), or as
  one row per value of a node column, ordered and cut as a list (``groups``: the op view groups
  by ``op``; any other column works the same way).
* **accounting** — which nodes count (``account``: any of a node's op types fully matches any
  regex; ``None`` counts every node), and whether totals count the shown rows only
  (``displayed_only``).
* **trimming and showing** — where display starts (``start``), where it stops (``trim``,
  ``max_depth``), which rows print (``show``, ``hide``, ``thresholds``).
* **order** — the columns siblings sort by (``order``), ties kept in layout order.

A registered view may carry its own options (``defaults``, by tfprof's option names: a view of
trainable variables accounts ``_trainable_variables`` and sorts by ``params``); the user's
options go over them, and each option the user did not give keeps the view's value
(``Options.under``).

Executors read a spec and nothing else of the options: the numba engine
(``tfprof.queries.scope``/``graph``/``code``/``op``, over ``tfprof.queries.forest``) and the
reference backend (``tfprof.queries.reference``, polars and DuckDB SQL), which tests hold
equal. Regexes are kept as tfprof's lists; ``None`` stands for tfprof's match-everything
short cut, the list ``[".*"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from tfprof.errors import OptionError
from tfprof.queries.options import Options, full_match_any
from tfprof.schema.metrics import METRIC_LIST, derived

LAYOUTS = ("scope", "graph", "code", "groups")

# order_by -> the total column sorted on (descending), in the tree views; other values sort
# by name (docs/TFPROF_BEHAVIOUR.md, 'Sorting'). From the metrics' records (schema.metrics).
TREE_ORDER = derived(lambda: {m.order_by: "total_" + m.column for m in METRIC_LIST if m.order_by})
# order_by -> the self column sorted on (descending) in a list of groups: there, at sort time
# a row's totals are its own values.
GROUP_ORDER = derived(lambda: {
    **{k: v.removeprefix("total_") for k, v in TREE_ORDER.items()},
    "occurrence": "definitions",
})
# min_* option -> the column it compares, in the single-node trees (scope, graph): totals,
# except params, float_ops and occurrence on the node's own values.
SINGLE_THRESHOLDS = derived(lambda: {
    **{m.threshold: ("" if m.threshold_on_self else "total_") + m.column for m in METRIC_LIST if m.threshold},
    "min_occurrence": "run_count",
})
# ... in the multi-node views (groups, code): totals throughout; occurrence is a group's
# member count, and the code view has no occurrence threshold.
MULTI_THRESHOLDS = derived(lambda: {m.threshold: "total_" + m.column for m in METRIC_LIST if m.threshold})
# a list's ratio is compared on the row's own (its cumulative quotient mixes the rows below it)
GROUP_THRESHOLDS = derived(lambda: {**MULTI_THRESHOLDS, "min_occurrence": "definitions",
                                    **{m.threshold: m.column for m in METRIC_LIST if m.threshold and m.kind == "ratio"}})

ROOT = "_TFProfRoot"  # the name of every tree's root
SCOPE_PARENT = "_kTFScopeParent"  # op type of synthetic scope parents (and of the scope root)


@dataclass(frozen=True, kw_only=True)
class TreeSpec:
    """One view's meaning (module docstring). Build one with ``tree_spec``; ``with_options``
    gives the same view under other options."""

    name: str  # the view's name (scope, graph, op, code, or a registered one)
    layout: str  # one of LAYOUTS
    group_key: str | None = None  # the node column a `groups` layout groups by
    root_op_type: str | None = None  # the op type printed for the root (scope and graph trees)
    doc: str | None = None  # what the rows are, for the report's doc block (a view tfprof lacks)
    help: str | None = None  # one line on what the view shows (command help, the UI's tab)
    # the view's own options, by tfprof's names ({"account_type_regexes": [...], "order_by":
    # "params"}): what it shows where the user does not say otherwise; kept as (name, value) pairs
    defaults: Mapping[str, Any] | tuple[tuple[str, Any], ...] = ()
    # what the options make of the view (``tree_spec``; a registered view sets its own in
    # ``defaults``, not here)
    step: int = -1
    account: tuple[str, ...] | None = None
    start: tuple[str, ...] | None = None  # () starts nowhere in a tree, at the top in a list
    trim: tuple[str, ...] = ()
    max_depth: int = 10_000
    show: tuple[str, ...] | None = None
    hide: tuple[str, ...] = ()
    thresholds: tuple[tuple[str, int], ...] = ()  # (column, minimum) pairs, each must hold
    order: tuple[str, ...] = ()  # a column sorted descending, or ("name",); () keeps layout order
    displayed_only: bool = False
    root_visits: bool = True  # display goes below the root (trees): max_depth >= 1, root not trimmed
    options: Options | None = None  # what the spec was built from (select, output: for renderers)
    # (column, step) pairs: per-step self values the executor sums like the metrics, into columns
    # `sample_name(column, step)` and their totals (a diff's noise band, from one pass)
    samples: tuple[tuple[str, int], ...] = ()
    # ticks per µs of the time columns the thresholds compare (``tfprof.queries.ticks``): 1 (µs)
    # as built; an engine scales the spec to its profile's unit
    time_scale: int = 1

    def __post_init__(self) -> None:
        pairs = self.defaults.items() if isinstance(self.defaults, Mapping) else self.defaults
        object.__setattr__(self, "defaults", tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in pairs))

    def with_options(self, opts: Options) -> TreeSpec:
        return tree_spec(self, opts)


# the fields ``tree_spec`` sets from the options
_FROM_OPTIONS = ("step", "account", "start", "trim", "max_depth", "show", "hide", "thresholds", "order",
                 "displayed_only")


def view_options(view: TreeSpec, opts: Options) -> Options:
    """``opts`` over ``view``'s own options (``defaults``): what the view runs with."""
    if view.options is None:  # a registered view, not yet under options: its own are its defaults
        blank = {f.name: f.default for f in fields(TreeSpec)}
        own = [n for n in _FROM_OPTIONS if getattr(view, n) != blank[n]]
        if own:  # the options would replace them
            raise OptionError(f"view `{view.name}`: its own options go in `defaults` by tfprof's names "
                              f"(e.g. account_type_regexes, order_by), not in `{own[0]}`")
    if not view.defaults:
        return opts
    names = dict(view.defaults)
    for bad in ("output", "dump_to_file"):
        if bad in names:
            raise OptionError(f"view `{view.name}`: `{bad}` is no default of a view (where it goes is the user's)")
    try:
        return opts.under(names)
    except OptionError as exc:
        raise OptionError(f"view `{view.name}`'s defaults: {exc}") from None


def _matches(name: str, regexes: tuple[str, ...]) -> bool:
    import polars as pl  # lazy: the command line's help reads the views without polars (tfprof/cli/__init__.py)

    rx = full_match_any(regexes)
    return rx is not None and bool(pl.Series([name]).str.contains(rx)[0])


def sample_name(column: str, step: int) -> str:
    """The column of a spec's sample: ``column``'s self value in step ``step``."""
    return f"{column}@{step}"


def sample_names(spec: TreeSpec) -> tuple[str, ...]:
    return tuple(sample_name(c, s) for c, s in spec.samples)


def is_sample(column: str) -> bool:
    return "@" in column  # no other column name holds one


def _regexes(values: tuple[str, ...]) -> tuple[str, ...] | None:
    return None if tuple(values) == (".*",) else tuple(values)


def tree_spec(view: TreeSpec, opts: Options) -> TreeSpec:
    """``view`` (a registered spec, read for its name, layout, key, root type and own options)
    under ``opts`` (over the view's own: ``view_options``; the spec's ``options``)."""
    opts = view_options(view, opts)
    layout = view.layout
    if layout == "groups":
        limits, order_of = GROUP_THRESHOLDS, GROUP_ORDER
    elif layout == "code":
        limits, order_of = MULTI_THRESHOLDS, {**TREE_ORDER, "occurrence": "definitions"}
    else:
        limits, order_of = SINGLE_THRESHOLDS, TREE_ORDER
    thresholds = tuple((column, getattr(opts, option)) for option, column in limits.items() if getattr(opts, option))
    if opts.order_by == "":
        order: tuple[str, ...] = ()
    elif opts.order_by in order_of:
        order = (order_of[opts.order_by],)
    else:  # name, depth, and what the view does not implement: name order
        order = ("name",)
    return replace(
        view,
        step=opts.step,
        account=_regexes(opts.account_type_regexes),
        start=_regexes(opts.start_name_regexes),
        trim=tuple(opts.trim_name_regexes),
        max_depth=opts.max_depth,
        show=_regexes(opts.show_name_regexes),
        hide=tuple(opts.hide_name_regexes),
        thresholds=thresholds,
        order=order,
        displayed_only=opts.account_displayed_op_only and layout != "code",
        root_visits=layout == "code" or (opts.max_depth >= 1 and not _matches(ROOT, opts.trim_name_regexes)),
        options=opts,
    )


# The four views of tfprof, by name.
BUILTIN = {
    "scope": TreeSpec(name="scope", layout="scope", root_op_type=SCOPE_PARENT,
                      help="Nodes organised by name scope, with self/total statistics."),
    "graph": TreeSpec(name="graph", layout="graph", root_op_type="_TFGraphParent",
                      help="Nodes below the nodes that consume them (graph inputs)."),
    "op": TreeSpec(name="op", layout="groups", group_key="op",
                   help="Statistics aggregated per op type, with cumulative and self percentages."),
    "code": TreeSpec(name="code", layout="code",
                     help="Nodes organised by the Python call stacks that created them (needs an op log with traces)."),
}
# The views every shell offers, by name: the four of tfprof, and any a user registers
# (``VIEWS["device"] = TreeSpec(name="device", layout="groups", group_key="canonical_device")``)
# before a shell starts. Nothing outside a spec branches on a view's name; what differs between
# views is their layout.
VIEWS: dict[str, TreeSpec] = dict(BUILTIN)


def view_help(spec: TreeSpec) -> str:
    """The one line a shell shows for a view: its ``help``, or what its layout does; then the
    view's own options, where it has some."""
    if spec.help:
        text = spec.help
    elif spec.layout == "groups":
        text = f"Statistics aggregated per value of the node column `{spec.group_key}`."
    else:
        text = f"Nodes as the {spec.layout} view organises them."
    if not spec.defaults:
        return text
    own = ", ".join(f"{k} {','.join(v) if isinstance(v, tuple) else v}" for k, v in spec.defaults)
    return f"{text} Its own options: {own}."


def as_spec(name: str, spec: TreeSpec | Options, prof=None) -> TreeSpec:
    """``spec`` itself, or the built-in view ``name`` under options ``spec``; with ``prof``, its
    time thresholds in the unit of ``prof``'s time metrics (``tfprof.queries.ticks``)."""
    spec = spec if isinstance(spec, TreeSpec) else tree_spec(BUILTIN[name], spec)
    if prof is None:
        return spec
    from tfprof.queries.ticks import scaled_spec, time_scale

    return scaled_spec(spec, time_scale(prof))
