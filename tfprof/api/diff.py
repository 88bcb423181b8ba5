"""One core for ``tfprof diff``: a view of profile B against the same view of profile A.

``run_diff(a, b, cmd, options)`` runs the view's spec on both profiles (thresholds lifted: the
diff applies them to either side, ``tfprof.queries.diff``), matches the rows by path, and when
both profiles have several steps runs the spec once per step to give each row its noise band
(``tfprof.queries.noise``). With ``against`` it compares two steps of one profile (or step
``options.step`` of A with step ``against`` of B). The CLI, ``tfprof.diff`` and notebooks call it.

>>> import tfprof
>>> prof = tfprof.load(tfprof.sample_path())
>>> d = run_diff(prof, prof, "scope", {"max_depth": 1})
>>> d.frame["total_exec_micros_delta"].abs().sum()
0
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from tfprof import kernels
from tfprof.api.run import VIEWS, check_step, options_for, run_view
from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries import diff as rules
from tfprof.queries import noise
from tfprof.queries.engine import displayed, on_kernels
from tfprof.queries.indexes.code_trie import NoCodeTraces
from tfprof.queries.options import MORE_THRESHOLDS, Options
from tfprof.queries.spec import sample_name, tree_spec
from tfprof.queries.ticks import in_micros, time_scale
from tfprof.schema import PUBLIC_NAMES
from tfprof.schema.metrics import METRIC_LIST, derived
from tfprof.views.fields import METRICS
from tfprof.views.table import view_table

ORDERS = rules.ORDERS  # the orders of the rows: delta, delta_pct, name, tree (the merged tree)
_THRESHOLDS = derived(lambda: (*(m.threshold for m in METRIC_LIST if m.threshold), "min_occurrence"))


@dataclass
class DiffResult:
    """A diff's rows (``frame``, ordered) and what they came from. ``fields``: the select names
    diffed; ``columns``: their diffed columns (each gives ``_a``, ``_b``, ``_delta``,
    ``_delta_pct``); ``value_columns``: the column of each field the view prints and sorts on
    (its total in the tree views, its own value in the op view), which the noise band and the
    text use; ``steps``: the sample sizes of the noise band, or None without one."""

    cmd: str
    options: Options
    frame: pl.DataFrame
    fields: tuple[str, ...]
    columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    labels: tuple[str, str]
    order: str
    order_field: str
    steps: tuple[int, int] | None = None
    compared_steps: tuple[int, int] = (-1, -1)
    notes: list[str] = field(default_factory=list)
    layout: str = "scope"  # the view's layout (a list, ``groups``, compares own values)

    @functools.cached_property
    def text(self) -> str:
        from tfprof.views.diff_text import render_text

        return render_text(self)

    def text_blocks(self) -> Iterator[str]:
        """``text`` in pieces (the head, then blocks of rows), for a writer that need not hold a
        report of millions of lines whole."""
        from tfprof.views.diff_text import text_blocks

        return text_blocks(self)

    def __str__(self) -> str:
        return self.text

    def document(self) -> dict[str, Any]:
        """The diff as the JSON document ``--format json`` prints (docs/schemas/diff.schema.json)."""
        from tfprof.views.diff_text import document

        return document(self)

    def sql(self, query: str) -> pl.DataFrame:
        """Run one read-only DuckDB query over the rows as table ``diff`` (``sql`` below)."""
        return sql(self.frame, query)


def sql(frame: pl.DataFrame, query: str) -> pl.DataFrame:
    """A DuckDB query over a diff's rows, seen as the table ``diff``, in the SQL sandbox
    (``tfprof.sqlbox``: one read-only query, no files)."""
    from tfprof import sqlbox

    con = sqlbox.connect({"diff": frame.to_arrow()})
    rows = sqlbox.query(con, query)
    return pl.from_arrow(rows) if rows is not None else pl.DataFrame()


def diff_fields(select: tuple[str, ...]) -> tuple[str, ...]:
    """The select names a diff compares: those with a metric column, in the select's order."""
    chosen = tuple(s for s in select if s in METRICS)
    if not chosen:
        raise OptionError(
            f"diff compares numbers: select at least one of {', '.join(METRICS)} (select is `{','.join(select)}`)"
        )
    return chosen


def public_column(select_name: str) -> str:
    """The public table's self column of a select field (``micros`` -> ``exec_micros``)."""
    column = METRICS[select_name].column
    return PUBLIC_NAMES.get(column, column)


def run_diff(
    a: Profile,
    b: Profile | None,
    cmd: str = "scope",
    options: Options | dict | None = None,
    *,
    against: int | None = None,
    order_by: str = "delta",
    labels: tuple[str, str] = ("A", "B"),
    noise_band: bool = True,
) -> DiffResult:
    """View ``cmd`` of ``b`` against ``a`` (module docstring). ``order_by``: one of
    ``tfprof.queries.diff.ORDERS``, optionally ``:FIELD`` (``delta_pct:bytes``); the field
    defaults to ``micros`` when selected, else the first selected."""
    opts = options_for(cmd, options)  # over the view's own
    if opts.output.kind != "stdout":
        raise OptionError("diff prints its own report: drop `output` (use --format for csv, json or parquet)")
    fields_ = diff_fields(opts.select)
    order, order_field = parse_order(order_by, fields_)
    layout = VIEWS[cmd].layout
    tree = layout != "groups"
    value_columns = tuple(("total_" if tree else "") + public_column(f) for f in fields_)
    columns = tuple(c for f in fields_ for c in (("total_" + public_column(f), public_column(f)) if tree
                                                   else (public_column(f),)))
    if b is None and against is None:
        raise OptionError("diff needs two profiles, or one profile with --step S --against T")
    if against is not None and opts.step < 0:
        raise OptionError("`against` compares two steps: give the first with --step S")
    b = a if b is None else b
    steps = (opts.step, against if against is not None else opts.step)
    check_step(a, steps[0])
    check_step(b, steps[1])
    # the views' shape without value thresholds (applied to either side below); the op view's
    # list cut after the diff's order
    run_opts = replace(opts, **{t: 0 for t in _THRESHOLDS if t not in MORE_THRESHOLDS}, more_thresholds=(),
                       select=fields_, max_depth=1_000_000 if not tree else opts.max_depth)
    steps_a = steps_b = []
    if noise_band and against is None and opts.step < 0:
        steps_a, steps_b = _steps(a), _steps(b)
    banded = len(steps_a) >= 2 and len(steps_b) >= 2
    # the band's samples from the same engine pass as the values, where the engine takes them
    one_pass = banded and _takes_samples(a, cmd) and _takes_samples(b, cmd)
    sampled = fields_ if one_pass else ()
    side_a, side_b = _both(
        lambda: _rows(a, cmd, replace(run_opts, step=steps[0]), sampled, steps_a, "a_"),
        lambda: _rows(b, cmd, replace(run_opts, step=steps[1]), sampled, steps_b, "b_"),
        parallel=a is not b,  # a profile's memos are filled by one thread at a time
    )
    spec = tree_spec(VIEWS[cmd], opts)
    carry = [f"{p}{c}_{s}" for p in ("a_", "b_") for c in value_columns for s in ("sum", "sumsq")] if one_pass else []
    frame = rules.diff_tables(
        side_a, side_b, columns, thresholds=spec.thresholds, order=order,
        order_column=value_columns[fields_.index(order_field)],
        limit=opts.max_depth + 1 if not tree else None,  # the op view prints rows 0..max_depth
        carry=carry, names_are_paths=layout != "code",
    )
    sizes = None
    if banded:
        if not one_pass:
            frame = _with_sums(frame, a, b, cmd, run_opts, steps_a, steps_b, value_columns)
        for c in value_columns:
            frame = noise.band(frame, f"a_{c}_", f"b_{c}_", len(steps_a), len(steps_b), c)
        sizes = (len(steps_a), len(steps_b))
    else:
        frame = frame.with_columns(
            *(pl.lit(None, pl.Float64).alias(f"{c}_noise") for c in value_columns),
            *(pl.lit(None, pl.Boolean).alias(f"{c}_significant") for c in value_columns),
        )
    frame = frame.with_columns(
        pl.any_horizontal(pl.col(f"{c}_significant") for c in value_columns).alias("significant")
    ).drop("pos_a", "pos_b")
    return DiffResult(
        cmd=cmd, options=opts, frame=frame, fields=fields_, columns=columns, value_columns=value_columns,
        labels=labels, order=order, order_field=order_field, steps=sizes, compared_steps=steps, layout=layout,
    )


def _both(first, second, *, parallel: bool):
    """``(first(), second())``, the second in a thread of its own when ``parallel``: the sides of
    a diff are independent, and their engines (numpy, polars, numba without the GIL) use a core
    each."""
    if not parallel:
        return first(), second()
    with ThreadPoolExecutor(1, thread_name_prefix="tfprof-diff") as pool:
        later = pool.submit(contextvars.copy_context().run, second)
        return first(), later.result()


def parse_order(order_by: str, fields_: tuple[str, ...]) -> tuple[str, str]:
    """``delta``, ``delta_pct:bytes``, ... as (order, field)."""
    order, _, name = order_by.partition(":")
    if order not in rules.ORDERS:
        raise OptionError(f"Unknown diff order_by `{order_by}`; valid: {', '.join(rules.ORDERS)} (each also as ORDER:FIELD)")
    if name and name not in fields_:
        raise OptionError(f"diff order_by field `{name}` is not selected; selected: {', '.join(fields_)}")
    return order, name or ("micros" if "micros" in fields_ else fields_[0])


def _rows(prof: Profile, cmd: str, opts: Options, sampled: tuple[str, ...] = (), steps: list[int] = (),
          prefix: str = "") -> pl.DataFrame:
    """The view's displayed rows as a public table with paths: the engine of the view's layout,
    as ``run_view`` picks it, without the report (the code view through ``run_view`` when it
    has no traces, for its error). With ``sampled`` (select fields), also each row's sample sums
    over ``steps`` of each field's value column (``tfprof.queries.noise.sample_columns``, named
    ``<prefix><column>_sum``...), from the same engine pass: the engine sums each node's
    per-step values (``TreeSpec.samples``) beside its values, a few steps at a time."""
    spec = tree_spec(VIEWS[cmd], opts)
    per_pass = max(1, _SAMPLES_PER_PASS // max(len(sampled), 1))  # steps a pass carries
    chunks = [list(steps[i:i + per_pass]) for i in range(0, len(steps), per_pass)] if sampled else [[]]
    table, sums = None, []
    for chunk in chunks:
        frame = in_micros(_engine_rows(prof, cmd, opts, replace(spec, samples=tuple(
            (METRICS[f].column, s) for f in sampled for s in chunk))), time_scale(prof))  # exact µs: floats
        if table is None:
            table = view_table(spec.layout, frame, opts.select)
        elif frame.height != table.height:  # pragma: no cover - the rows depend on the main values only
            raise RuntimeError("diff: a sample pass gave other rows than the first")
        sums.append(_sample_sums(frame, spec.layout, sampled, chunk))
    table = rules.with_paths(table, spec.layout, frame["parent_row"] if spec.layout == "code" else None, keys=True)
    if sampled:
        total = pl.DataFrame({n: sum(part[n] for part in sums) for n in sums[0].columns})
        value_of = {f: _value_column(f, spec.layout) for f in sampled}
        table = table.hstack(total.rename({f"{f}_{s}": f"{prefix}{value_of[f]}_{s}" for f in sampled
                                           for s in ("sum", "sumsq")}))
    return table


_SAMPLES_PER_PASS = 48  # sample columns a view pass carries (each as wide as the view's rows)


def _value_column(select_name: str, layout: str) -> str:
    """The public column of a field that the diff prints and bands: its total in the trees."""
    return ("total_" if layout != "groups" else "") + public_column(select_name)


def _sample_sums(frame: pl.DataFrame, layout: str, sampled: tuple[str, ...], steps: list[int]) -> pl.DataFrame:
    """Per row of an engine frame with samples: per field, the sum and the sum of squares over
    ``steps`` of its value (its total in the trees), as ``<field>_sum``, ``<field>_sumsq``."""
    prefix = "total_" if layout != "groups" else ""
    out = []
    for f in sampled:
        values = [pl.col(prefix + sample_name(METRICS[f].column, s)).fill_null(0).cast(pl.Float64) for s in steps]
        out += [pl.sum_horizontal(values).alias(f"{f}_sum"), pl.sum_horizontal(v * v for v in values).alias(f"{f}_sumsq")]
    return frame.select(out)


def _engine_rows(prof: Profile, cmd: str, opts: Options, spec) -> pl.DataFrame:
    """The view's displayed rows from the engine ``run_view`` picks for ``prof``
    (``tfprof.queries.engine``)."""
    # the diffed fields' columns (the engines add those the view's order reads)
    metrics = tuple(METRICS[f].column for f in opts.select if f in METRICS)
    with kernels.using(on_kernels(prof, spec.layout)):
        try:
            return displayed(prof, spec, metrics).rows.with_columns(pl.col("name").cast(pl.String))
        except NoCodeTraces:
            return run_view(prof, cmd, opts, full_rows=True).frame  # raises the view's error


def _takes_samples(prof: Profile, cmd: str) -> bool:
    """Whether the engine of ``cmd`` on ``prof`` sums per-step samples (the reference backend's
    trees do not: there the band runs the view once per step, its plain statement)."""
    return VIEWS[cmd].layout in ("groups", "code") or on_kernels(prof, VIEWS[cmd].layout)


def _steps(prof: Profile) -> list[int]:
    return prof.frame("steps")["step"].to_list()


def _with_sums(frame, a, b, cmd, opts, steps_a, steps_b, value_columns) -> pl.DataFrame:
    """``frame`` with the sample sums of each value column (``tfprof.queries.noise``) from one
    view run per step and side: what a sample is, stated plainly; the engines' one-pass samples
    (``_rows``) are held equal to it by tests."""
    sums_a = rules.step_sums([_rows(a, cmd, replace(opts, step=s)) for s in steps_a], value_columns, "a_")
    sums_b = rules.step_sums([_rows(b, cmd, replace(opts, step=s)) for s in steps_b], value_columns, "b_")
    return frame.join(sums_a, on=list(rules.KEYS), how="left").join(sums_b, on=list(rules.KEYS), how="left")
