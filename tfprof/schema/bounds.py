"""The range of every integer option, in one place: a value beyond it is one ``Error:`` line
naming the option and its range (exit code 2), never an overflow deep inside a query.

The command line's own integer options (``--top``, ``--step``, ``--port`` ...) are bounded by
``bound_command`` (the command tree, walked once per run); tfprof's view options (``--max_depth``,
``--min_*``, ``--step``) by ``tfprof.queries.options.Options``, which the Python API, the shell and
the UI share (the UI's own parameters have tighter ranges: ``tfprof.ui.params``). Light to import.
"""

from __future__ import annotations

from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

OPTION_RANGES: dict[str, tuple[int, int]] = {
    "--port": (0, 65535),
    "--workers": (1, 1024),  # threads
    "--top": (1, INT64_MAX),
    "--step": (0, INT64_MAX),  # a step number (`tfprof memory`)
    "--against": (0, INT64_MAX),  # a step number (`tfprof diff`)
}
"""Ranges of the command line's integer options; any other is an int64 (at least its declared ``min``)."""

VIEW_RANGES: dict[str, tuple[int, int]] = {"step": (-1, INT64_MAX)}
"""Ranges of tfprof's view options (by name); the others (``max_depth``, ``min_*``) take 0 to int64's largest."""


def out_of_range(option: str, value: Any, low: int, high: int) -> str | None:
    """The message for integer ``value`` of ``option`` outside ``[low, high]``, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or low <= value <= high:
        return None
    return f"{option} takes an integer from {low} to {high}, not `{value}`"


def view_range(name: str) -> tuple[int, int]:
    """The range of view option ``name``."""
    return VIEW_RANGES.get(name, (0, INT64_MAX))


def bound_command(command: Any) -> Any:
    """``command`` (typer's click command tree) with every integer option checked against its
    range (``OPTION_RANGES``, else int64 from its declared ``min``), before the command runs."""
    for sub in getattr(command, "commands", {}).values():
        bound_command(sub)
    for param in getattr(command, "params", ()):
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or descriptor.annotation is not int or getattr(param, "_bounded", False):
            continue
        name = max(param.opts, key=len)
        low, high = OPTION_RANGES.get(name, (INT64_MIN, INT64_MAX))
        if getattr(param, "min", None) is not None:
            low = max(low, int(param.min))
        if getattr(param, "max", None) is not None:
            high = min(high, int(param.max))
        param.callback = _checked(param.callback, name, low, high)
        param._bounded = True
    return command


def _checked(callback, name: str, low: int, high: int):
    def check(ctx, param, value):
        from tfprof.errors import OptionError

        problem = out_of_range(name, value, low, high)
        if problem is not None:
            raise OptionError(problem)
        return callback(ctx, param, value) if callback is not None else value

    return check
