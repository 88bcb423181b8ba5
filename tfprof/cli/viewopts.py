"""tfprof's view options as the command line spells them, parsed into ``Options``.

Accepted spellings (all equivalent): ``--max_depth 3``, ``--max_depth=3``, ``-max_depth 3``,
``-max_depth=3``. Lists are comma-separated (``--select micros,bytes``); an empty value
(``--trim_name_regexes=``) is an empty list; surrounding quotes are stripped as tfprof does.
``--account_displayed_op_only`` alone (or before another option) means true; it also takes
``true/false`` words. The same parser serves the interactive shell's ``-name value`` pairs.
"""

from __future__ import annotations

from tfprof.api.options import (
    INT_OPTIONS,
    LIST_OPTIONS,
    METRIC_LIST,
    MORE_THRESHOLDS,
    Options,
    Output,
    derived,
    option_names,
    output_help,
    unknown_value,
)
from tfprof.errors import OptionError

BOOL_OPTIONS = ("account_displayed_op_only",)
TRUE = {"true", "t", "yes", "y", "1"}
FALSE = {"false", "f", "no", "n", "0"}

OPTION_HELP = {
    "max_depth": "show nodes down to this depth (scope/graph/code: root = 1; op: rows after the start row)",
    "min_bytes": "hide nodes whose requested bytes are below this",
    "min_peak_bytes": "hide nodes whose peak bytes are below this",
    "min_residual_bytes": "hide nodes whose residual bytes are below this",
    "min_output_bytes": "hide nodes whose output bytes are below this",
    "min_micros": "hide nodes whose total execution time (us) is below this",
    "min_accelerator_micros": "hide nodes whose accelerator time (us) is below this",
    "min_cpu_micros": "hide nodes whose cpu time (us) is below this",
    "min_params": "hide nodes with fewer parameters",
    "min_float_ops": "hide nodes with fewer float operations",
    "min_occurrence": "hide nodes that ran fewer times (op view: fewer member nodes)",
    "step": "use this step's statistics; -1 averages over the steps each node ran in",
    "order_by": "sort children: name, bytes, peak_bytes, residual_bytes, output_bytes, micros, "
    "accelerator_micros, cpu_micros, params, float_ops, occurrence; ours: macs",
    "account_type_regexes": "aggregate only nodes with an op type matching one of these",
    "start_name_regexes": "show only subtrees starting at the first nodes matching one of these",
    "trim_name_regexes": "do not show what is below nodes matching one of these",
    "show_name_regexes": "show only nodes matching one of these",
    "hide_name_regexes": "hide nodes matching one of these",
    "account_displayed_op_only": "totals count only the nodes shown",
    "select": "what to print: bytes, peak_bytes, residual_bytes, output_bytes, micros, "
    "accelerator_micros, cpu_micros, params, float_ops, occurrence, tensor_value, device, op_types, input_shapes; "
    "ours: macs (multiply-accumulates of the matrix product and convolution FLOPs rules), kernels (the GPU "
    "kernels, copies and memsets of a Kineto or XSpace trace, listed under the op that launched them: scope "
    "and graph views)",
}

NAMES = derived(option_names)  # tfprof's options, then the registered metrics' thresholds


def _strip_quotes(value: str) -> str:
    return value.strip("\"'")


def parse_view_args(tokens: list[str], base: Options | None = None) -> tuple[Options, list[str]]:
    """``Options`` from tfprof-style option tokens on top of ``base`` (the CLI defaults), and
    the tokens that are not options (a profile path)."""
    values: dict[str, object] = {}
    positionals: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token in ("-", "--"):
            positionals.append(token)
            i += 1
            continue
        name, eq, value = token.lstrip("-").partition("=")
        name = name.replace("-", "_")
        if name not in NAMES:
            raise OptionError(unknown_value("option", name, NAMES))
        if name in BOOL_OPTIONS:
            if not eq:
                nxt = tokens[i + 1] if i + 1 < len(tokens) else None
                if nxt is not None and not nxt.startswith("-"):
                    value, i = nxt, i + 1
                else:
                    value = "true"
            word = _strip_quotes(value).lower()
            if word not in TRUE | FALSE:
                raise OptionError(f"Option `{name}` takes true or false, not `{value}`")
            values[name] = word in TRUE
            i += 1
            continue
        if not eq:
            if i + 1 >= len(tokens):
                raise OptionError(f"Option `{name}` needs a value")
            value, i = tokens[i + 1], i + 1
        i += 1
        values[name] = _convert(name, value)
    return Options.from_tfprof(values, base=base), positionals


def _convert(name: str, value: str) -> object:
    if name in INT_OPTIONS:
        try:
            return int(value)
        except ValueError:
            raise OptionError(f"Option `{name}` takes an integer, not `{value}`") from None
    if name in LIST_OPTIONS or name == "select":
        return tuple(p for p in _strip_quotes(value).split(",") if p)
    if name == "output":
        return Output.parse(_strip_quotes(value))
    return _strip_quotes(value)


def option_help(name: str) -> str:
    """What option ``name`` does (``output``: the kinds registered now; order_by, select and the
    thresholds: with the metrics registered now)."""
    if name == "output":
        return output_help()
    mine = [m for m in METRIC_LIST if m.ours and m.select != "macs"]  # registered at run time
    if name in MORE_THRESHOLDS:
        metric = next(m for m in mine if m.threshold == name)
        return f"hide rows whose {metric.legend or metric.select} ({metric.doc}) is below this"
    more = {"order_by": [m.order_by for m in mine if m.order_by], "select": [f"{m.select} ({m.doc})" for m in mine]}
    return OPTION_HELP[name] + "".join(", " + s for s in more.get(name, ()))


def options_help() -> str:
    """One line per option: name, default and meaning."""
    defaults = Options().to_tfprof()
    lines = []
    for name in NAMES:
        default = defaults.get(name, 0)  # a registered metric's threshold: 0, like tfprof's
        if isinstance(default, list):
            default = ",".join(default)
        lines.append(f"  --{name:<26} {option_help(name)} (default: {default if default != '' else 'empty'})")
    return "\n".join(lines)
