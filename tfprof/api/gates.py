"""``--fail-if`` on a view or a diff: which gates trip, and the lines that say so.

The grammar and the row test are ``tfprof.queries.gates``; here a gate's metric is resolved to
a column of the rows (a select name to the value the view prints and sorts on: its total in
the tree views, its own value in the op view), and each tripped gate becomes a report: the
gate, how many rows, and up to ``SHOWN`` of them.
"""

from __future__ import annotations

import polars as pl

from tfprof.api.diff import DiffResult, public_column
from tfprof.api.run import VIEWS, ViewResult
from tfprof.errors import OptionError
from tfprof.queries import diff as rules
from tfprof.queries.gates import Gate, parse, targeted, tripped
from tfprof.schema.metrics import METRIC_LIST, derived
from tfprof.views.fields import METRICS
from tfprof.views.table import view_table
from tfprof.views.units import FORMATS

SHOWN = 20
# public column (self name) -> number format kind
_KINDS = derived(lambda: {m.public_column: m.kind for m in METRIC_LIST} | {"run_count": "number", "definition_count": "number"})


def parse_gates(texts: list[str] | tuple[str, ...], *, diff: bool = False) -> list[Gate]:
    """The gates of ``--fail-if`` options (``OptionError`` naming the bad one); on a view
    (not ``diff``) a gate that needs a baseline is bad too."""
    gates = [parse(t, tuple(VIEWS)) for t in texts]
    for gate in gates:
        if not diff and (gate.coef or gate.significant):
            raise OptionError(f"Bad --fail-if `{gate.text}`: `base`, changes (+5%) and `significant` need a "
                              "baseline: use them with tfprof diff")
    return gates


def _resolve(gate: Gate, cmd: str, available: list[str]) -> tuple[str, str]:
    """A gate's metric as (column, kind) among the ``available`` columns."""
    if gate.view is not None and gate.view != cmd:
        raise OptionError(f"Bad --fail-if `{gate.text}`: its target is in the {gate.view} view, this is the {cmd} view")
    tree = VIEWS[cmd].layout != "groups"
    if gate.metric in METRICS:
        column = ("total_" if tree else "") + public_column(gate.metric)
    else:
        column = gate.metric
    if column not in available:
        names = [*(f for f in METRICS if (("total_" if tree else "") + public_column(f)) in available), *available]
        raise OptionError(f"Bad --fail-if `{gate.text}`: no metric `{gate.metric}` here; valid: {', '.join(names)}")
    return column, _KINDS[column.removeprefix("total_")]


def view_failures(cmd: str, result: ViewResult, gates: list[Gate]) -> list[str]:
    """The report lines of the gates that trip on a view's displayed rows (none: all passed)."""
    table = rules.with_paths(view_table(result.layout, result.frame, ours=True), result.layout,
                             result.frame["parent_row"] if "parent_row" in result.frame.columns else None)
    numeric = [c for c in table.columns if c.removeprefix("total_") in _KINDS]
    lines: list[str] = []
    for gate in gates:
        column, kind = _resolve(gate, cmd, numeric)
        _check_targeted(gate, table, f"the {cmd} view")
        rows = tripped(gate, table, column, kind, diff=False)
        if rows.height:
            lines += _report(gate, rows, [column], [FORMATS[kind]], diff=False)
    return lines


def diff_failures(result: DiffResult, gates: list[Gate]) -> list[str]:
    """The report lines of the gates that trip on a diff's rows (none: all passed)."""
    lines: list[str] = []
    for gate in gates:
        column, kind = _resolve(gate, result.cmd, list(result.columns))
        _check_targeted(gate, result.frame, f"the {result.cmd} diff")
        rows = tripped(gate, result.frame, column, kind, diff=True)
        if rows.height:
            lines += _report(gate, rows, [column], [FORMATS[kind]], diff=True)
    return lines


def _check_targeted(gate: Gate, rows: pl.DataFrame, where: str) -> None:
    """A gate that looks at no row could never trip: an error naming it, not a silent pass."""
    if targeted(gate, rows):
        return
    if gate.path is None:
        raise OptionError(f"Bad --fail-if `{gate.text}`: {where} has no rows, so the gate could never trip; "
                          "check the view options that filter rows")
    example = f" (its paths read like `{rows['path'][min(1, rows.height - 1)]}`)" if rows.height else ""
    raise OptionError(f"Bad --fail-if `{gate.text}`: no row of {where} has a path matching `{gate.path}`{example}, "
                      "so the gate could never trip; check the path, and the view options that hide rows "
                      "(max_depth, show/hide)")


def _report(gate: Gate, rows: pl.DataFrame, columns: list[str], fmts: list, *, diff: bool) -> list[str]:
    n = rows.height
    lines = [f"--fail-if `{gate.text}` tripped on {n} row{'s' if n != 1 else ''}:"]
    for r in rows.head(SHOWN).iter_rows(named=True):
        cells = []
        for c, fmt in zip(columns, fmts):
            if diff:
                a, b, pct = r[f"{c}_a"], r[f"{c}_b"], r[f"{c}_delta_pct"]
                show = lambda v: fmt(v) if v is not None else "-"  # noqa: E731
                change = "new" if pct is None else f"{pct:+.1f}%"
                cells.append(f"{c} {show(a)} -> {show(b)} ({change})")
            else:
                cells.append(f"{c} {fmt(r[c])}")
        lines.append(f"  {r['path']}: {'; '.join(cells)}")
    if n > SHOWN:
        lines.append(f"  ... and {n - SHOWN} more")
    return lines
