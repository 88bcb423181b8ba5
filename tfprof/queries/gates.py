"""CI gates: ``--fail-if`` expressions, parsed by hand (never evaluated as Python), checked on a view's or a diff's rows.

Grammar (docs/DIFF.md, 'Gates'; whitespace between tokens is optional)::

    gate       := [target] metric (compare | change) ["significant"]
    target     := VIEW ":" PATH          rows whose path fully matches the regex PATH
                                         (one leading "/" is dropped; no spaces: use \\s)
    metric     := a select name (micros, bytes, params, ...) or a column (exec_micros, ...)
    compare    := (">" | ">=" | "<" | "<=" | "==" | "!=") sum
    sum        := term (("+" | "-") term)*
    term       := factor ("*" factor)*
    factor     := NUMBER [UNIT] | "base"
    change     := ("+" | "-") NUMBER ("%" | UNIT)         diff only
    UNIT       := us ms s (times, in µs) | B KB MB GB (bytes, decimal as tfprof prints them)
                | k m b (counts: thousand, million, billion)

On a view, ``metric`` is a row's value. On a diff it is the B side, ``base`` the A side (a side
without the row counts as 0), and ``change`` is shorthand: ``micros +5%`` is ``micros > base *
1.05``, ``micros -5%`` is ``micros < base * 0.95``, ``micros +2ms`` is ``micros > base + 2ms``.
``significant`` keeps only rows outside the noise band (every row where there is no band). A
gate trips when any row it looks at satisfies it.

A gate is kept as a linear form ``metric OP c0 + c1 × base``; ``base × base`` is refused, and so
is a gate that could never trip: a number that is not finite or a bound beyond any value a
profile holds (``LIMIT``), or, on the rows, a target that matches none (``targeted``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import polars as pl

from tfprof.errors import OptionError
from tfprof.queries.spec import VIEWS

OPERATORS = (">=", "<=", "==", "!=", ">", "<")
LIMIT = 2.0 ** 63  # every value a profile holds is an int64: a bound beyond it is the same for every row
UNITS = {
    "time": {"us": 1, "ms": 1_000, "s": 1_000_000},
    "memory": {"B": 1, "KB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000},
    "number": {"k": 1_000, "m": 1_000_000, "b": 1_000_000_000},
}
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)(?:\s*(?!base\b|significant\b)(?P<unit>[A-Za-z%]+))?"
                    r"|(?P<op>>=|<=|==|!=|>|<|\+|-|\*)|(?P<word>[A-Za-z_][A-Za-z0-9_]*))")


@dataclass(frozen=True)
class Gate:
    """One parsed ``--fail-if``: on rows whose path matches ``path`` (None: all rows of any
    view; ``view`` is then None too), ``metric OP const + coef × base``."""

    text: str
    view: str | None
    path: str | None
    metric: str
    op: str
    const: float
    coef: float
    significant: bool
    unit: str | None  # the unit written, for the check against the metric's kind
    unit_kind: str | None


def _fail(text: str, why: str) -> OptionError:
    return OptionError(f"Bad --fail-if `{text}`: {why}")


def _unit_kind(text: str, unit: str) -> tuple[str, int]:
    for kind, units in UNITS.items():
        if unit in units:
            return kind, units[unit]
    valid = ", ".join(u for units in UNITS.values() for u in units)
    raise _fail(text, f"unknown unit `{unit}`; valid: {valid}")


def parse(text: str, views: tuple[str, ...] | None = None) -> Gate:
    """A ``Gate`` from its text (module docstring); ``OptionError`` naming ``--fail-if`` if bad.
    ``views``: the view names a target may start with (default: ``tfprof.queries.spec.VIEWS``)."""
    views = tuple(VIEWS) if views is None else views
    rest = text.strip()
    view = path = None
    first, _, after = rest.partition(" ")
    head, colon, pattern = first.partition(":")
    if colon and head in views:
        view, path, rest = head, pattern.removeprefix("/"), after
        if not path:
            raise _fail(text, f"the target `{first}` names no path (e.g. {head}:model/dense)")
        try:
            pl.Series([""]).str.contains(f"^(?:{path})$")
        except Exception:
            raise _fail(text, f"the path `{path}` is not a valid regex") from None
    elif colon:
        raise _fail(text, f"unknown view `{head}` in the target; valid: {', '.join(views)}")
    tokens, pos = [], 0
    rest = rest.rstrip()
    while pos < len(rest):
        m = _TOKEN.match(rest, pos)
        if not m or m.end() == pos:
            raise _fail(text, f"unexpected `{rest[pos:].strip()}`")
        tokens.append(m)
        pos = m.end()
    significant = bool(tokens) and tokens[-1]["word"] == "significant"
    tokens = tokens[:-1] if significant else tokens
    if not tokens or not tokens[0]["word"] or tokens[0]["word"] == "base":
        raise _fail(text, "it must start with a metric (e.g. `micros > 2ms`, `total_exec_micros > 1.1 * base`)")
    metric = tokens[0]["word"]
    if len(tokens) < 2:
        raise _fail(text, "a comparison (> >= < <= == !=) or a change (+5%, -2ms) must follow the metric")
    second = tokens[1]
    if second["op"] in ("+", "-") and len(tokens) == 3 and tokens[2]["num"]:
        return _change(text, view, path, metric, second["op"], tokens[2], significant)
    if second["op"] not in OPERATORS:
        raise _fail(text, f"expected a comparison after `{metric}`, got `{second.group().strip()}`")
    const, coef, unit, kind = _sum(text, tokens[2:])
    return _bounded(Gate(text, view, path, metric, second["op"], const, coef, significant, unit, kind))


def _bounded(gate: Gate) -> Gate:
    """``gate``, unless its numbers make it trip on every row or on none whatever the profile."""
    if not (math.isfinite(gate.const) and math.isfinite(gate.coef)):
        raise _fail(gate.text, "a number in it is too large to compare with (it overflows to infinity), so the "
                               "gate could never trip")
    if abs(gate.const) >= LIMIT:
        raise _fail(gate.text, f"its bound {gate.const:g} is beyond any value a profile holds (int64, "
                               "±9.2e18), so the gate would trip on every row or on none")
    return gate


def _change(text, view, path, metric, sign, token, significant) -> Gate:
    amount, unit = float(token["num"]), token["unit"]
    if unit is None:
        raise _fail(text, f"a change needs % or a unit (`{sign}{token['num']}%`)")
    up = sign == "+"
    if unit == "%":
        return _bounded(Gate(text, view, path, metric, ">" if up else "<", 0.0,
                             1 + amount / 100 if up else 1 - amount / 100, significant, None, None))
    kind, scale = _unit_kind(text, unit)
    return _bounded(Gate(text, view, path, metric, ">" if up else "<", amount * scale * (1 if up else -1), 1.0,
                         significant, unit, kind))


def _sum(text: str, tokens: list) -> tuple[float, float, str | None, str | None]:
    """``sum`` as (const, coef of base, a unit written, its kind)."""
    const = coef = 0.0
    sign, i, unit, kind = 1.0, 0, None, None
    if not tokens:
        raise _fail(text, "nothing after the comparison")
    if tokens[0]["op"] in ("+", "-"):  # a leading sign
        sign, i = (1.0 if tokens[0]["op"] == "+" else -1.0), 1
    while True:
        c, b, i, u, k = _term(text, tokens, i)
        unit, kind = (u, k) if u else (unit, kind)
        const, coef = const + sign * c, coef + sign * b
        if i == len(tokens):
            return const, coef, unit, kind
        if tokens[i]["op"] not in ("+", "-"):
            raise _fail(text, f"expected + or - before `{tokens[i].group().strip()}`")
        sign = 1.0 if tokens[i]["op"] == "+" else -1.0
        i += 1
        if i == len(tokens):
            raise _fail(text, "the expression ends with an operator")


def _term(text: str, tokens: list, i: int):
    value, has_base, unit, kind = 1.0, False, None, None
    while True:
        if i >= len(tokens):
            raise _fail(text, "the expression ends with an operator")
        t = tokens[i]
        if t["word"] == "base":
            if has_base:
                raise _fail(text, "`base` times `base` is not allowed (a gate is linear in base)")
            has_base = True
        elif t["num"]:
            n = float(t["num"])
            if t["unit"]:
                if t["unit"] == "%":
                    raise _fail(text, "% belongs to a change (`micros +5%`); in a comparison write `1.05 * base`")
                kind, scale = _unit_kind(text, t["unit"])
                unit, n = t["unit"], n * scale
            value *= n
        else:
            raise _fail(text, f"expected a number or `base`, got `{t.group().strip()}`")
        i += 1
        if i < len(tokens) and tokens[i]["op"] == "*":
            i += 1
            continue
        return (0.0, value, i, unit, kind) if has_base else (value, 0.0, i, unit, kind)


def _compare(left: pl.Expr, op: str, right: pl.Expr) -> pl.Expr:
    return {">": left > right, ">=": left >= right, "<": left < right, "<=": left <= right,
            "==": left == right, "!=": left != right}[op]


def _on_target(gate: Gate) -> pl.Expr:
    return pl.col("path").str.contains(f"^(?:{gate.path})$") if gate.path is not None else pl.lit(True)


def targeted(gate: Gate, frame: pl.DataFrame) -> int:
    """How many rows of ``frame`` (with a ``path`` column) ``gate`` looks at: 0 means it can never trip."""
    return frame.filter(_on_target(gate)).height


def tripped(gate: Gate, frame: pl.DataFrame, column: str, kind: str, *, diff: bool) -> pl.DataFrame:
    """The rows of ``frame`` on which ``gate`` trips. ``column``: the metric's column (a view's,
    or a diff's base name with ``_a``/``_b``); ``kind``: its number format (time, memory, number)."""
    if gate.unit_kind is not None and gate.unit_kind != kind:
        raise _fail(gate.text, f"the unit `{gate.unit}` is for {gate.unit_kind} values, `{gate.metric}` holds {kind} values")
    if diff:
        value, base = pl.col(f"{column}_b").fill_null(0), pl.col(f"{column}_a").fill_null(0)
    else:
        if gate.coef or gate.significant:
            raise _fail(gate.text, "`base`, changes (+5%) and `significant` need a baseline: use them with tfprof diff")
        value, base = pl.col(column), pl.lit(0)
    condition = _compare(value.cast(pl.Float64), gate.op, pl.lit(gate.const) + gate.coef * base.cast(pl.Float64))
    condition = condition & _on_target(gate)
    if gate.significant and diff:
        condition = condition & pl.col(f"{column}_significant").fill_null(True)
    return frame.filter(condition)
