"""The web UI's request parameters, checked: a view's options as the CLI spells them, row
numbers, step numbers, short texts. Anything wrong raises ``BadRequest`` with a one-line
message that names the parameter and the value; the app answers it with status 400.

View options keep the command line's names and list spelling (``select=micros,bytes``,
``hide_name_regexes=a.*,b.*``); a regex is checked by ``Options`` as the CLI checks it.
"""

from __future__ import annotations

from collections.abc import Mapping

from tfprof.api.options import (
    INT_OPTIONS,
    LIST_OPTIONS,
    ORDER_BY,
    SELECT_FIELDS,
    Options,
    unknown_value,
)
from tfprof.errors import OptionError
from tfprof.schema.metrics import KINDS, METRIC_LIST, derived

# Bounds a person would never need to pass; beyond them a value is a mistake or a probe.
MAX_DEPTH = 100_000
MAX_THRESHOLD = 2**62
MAX_TEXT = 4_000
VIEW_OPTIONS = derived(lambda: (*INT_OPTIONS, *LIST_OPTIONS, "order_by", "select", "account_displayed_op_only"))
# Parameters that are not view options and may come with any view request.
OTHER = ("node", "offset", "limit", "q", "metric", "open", "inverted", "reverse", "order", "against", "sandwich")


def panel_options() -> dict[str, list]:
    """What the page's option panel offers, from the registries (a registered metric included):
    the select fields (metrics times first, then memory, counts and ratios; then the other
    fields), the order_by values and the thresholds."""
    metrics = sorted(METRIC_LIST, key=lambda m: KINDS.index(m.kind))
    others = [s for s in SELECT_FIELDS if s not in {m.select for m in metrics}]
    thresholds = [m.threshold for m in metrics if m.threshold]
    return {"select": [m.select for m in metrics] + others, "order_by": list(ORDER_BY),
            "thresholds": [*thresholds, "min_occurrence"]}


class BadRequest(OptionError):
    """A request parameter the UI cannot take (status 400)."""


def integer(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """Parameter ``name`` as an integer in ``[low, high]`` (``default`` when absent)."""
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"`{name}` takes an integer, not `{_short(raw)}`") from None
    if not low <= value <= high:
        raise BadRequest(f"`{name}` takes {low} to {high}, not `{_short(raw)}`")
    return value


def text(params: Mapping[str, str], name: str, default: str = "") -> str:
    """Parameter ``name`` as a string of at most ``MAX_TEXT`` characters."""
    value = params.get(name, default)
    if len(value) > MAX_TEXT:
        raise BadRequest(f"`{name}` is longer than {MAX_TEXT} characters")
    return value


def choice(params: Mapping[str, str], name: str, valid: tuple[str, ...] | list[str], default: str) -> str:
    value = params.get(name, default)
    if value not in valid:
        raise BadRequest(unknown_value(name, _short(value), tuple(valid)))
    return value


def view_options(params: Mapping[str, str]) -> Options:
    """The view options among ``params`` (the rest must be ``OTHER``), on the CLI's defaults."""
    values: dict[str, object] = {}
    for name, raw in params.items():
        if name in OTHER:
            continue
        if name not in VIEW_OPTIONS:
            raise BadRequest(unknown_value("parameter", _short(name), (*VIEW_OPTIONS, *OTHER)))
        if len(raw) > MAX_TEXT:
            raise BadRequest(f"`{name}` is longer than {MAX_TEXT} characters")
        if name in INT_OPTIONS:
            high = MAX_DEPTH if name == "max_depth" else MAX_THRESHOLD
            values[name] = integer(params, name, 0, -1 if name == "step" else 0, high)
        elif name == "account_displayed_op_only":
            if raw not in ("true", "false"):
                raise BadRequest(f"`{name}` takes true or false, not `{_short(raw)}`")
            values[name] = raw == "true"
        elif name == "select":
            picked = tuple(p for p in raw.split(",") if p)
            for field in picked:
                if field not in SELECT_FIELDS:
                    raise BadRequest(unknown_value("select field", _short(field), SELECT_FIELDS))
            values[name] = picked
        elif name == "order_by":
            if raw not in ORDER_BY:
                raise BadRequest(unknown_value("order_by value", _short(raw), ORDER_BY))
            values[name] = raw
        else:
            values[name] = raw
    try:
        return Options.from_tfprof(values)
    except OptionError as exc:
        raise BadRequest(str(exc)) from None


def option_values(options: Options) -> dict[str, object]:
    """``options`` as the page's side panel shows them (lists joined by commas, no output)."""
    out = {}
    for name, value in options.to_tfprof().items():
        if name in VIEW_OPTIONS:
            out[name] = ",".join(value) if isinstance(value, list) else value
    return out


def _short(value: str) -> str:
    """A value quoted in a message: at most 80 characters, one line."""
    value = value.replace("\n", " ")
    return value if len(value) <= 80 else value[:77] + "..."
