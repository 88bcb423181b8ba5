"""``Options``: tfprof's view options, with tfprof's names and the command line's defaults.

One frozen, keyword-only record used by every front end (CLI, interactive shell, Python API).
``Options.from_tfprof(d)`` accepts the option dicts tfprof's Python API takes (and the golden
``cases.json`` files) unchanged. Validation raises ``OptionError`` naming the option and the
valid values.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tfprof.errors import OptionError
from tfprof.schema.bounds import view_range
from tfprof.schema.metrics import METRIC_LIST, derived, registered

# Select fields in tfprof's own order of definition (kShown); the text views print them in a
# view-specific order (see the registry tfprof.views.fields.FIELDS).
_TFPROF_FIELDS = (
    "bytes",
    "micros",
    "params",
    "float_ops",
    "tensor_value",
    "device",
    "op_types",
    "occurrence",
    "input_shapes",
    "accelerator_micros",
    "cpu_micros",
    "peak_bytes",
    "residual_bytes",
    "output_bytes",
    "macs",  # ours (docs/COMPATIBILITY.md): node_flops.macs
    "kernels",  # ours (docs/FOREIGN.md, 'GPU events'): the GPU work under each row
)
# ... then the metrics registered at run time (schema.metrics.register)
SELECT_FIELDS = derived(lambda: (*_TFPROF_FIELDS, *(m.select for m in METRIC_LIST if m.select not in _TFPROF_FIELDS)))
# tfprof's order_by values (its metrics', from their records in schema.metrics), then ours
ORDER_BY = derived(lambda: (
    "name",
    "depth",
    *(m.order_by for m in METRIC_LIST if m.order_by and not m.ours),
    "occurrence",
    *(m.order_by for m in METRIC_LIST if m.order_by and m.ours),
))


@dataclass(frozen=True)
class OutputKind:
    """One ``-output`` kind as the option's grammar knows it: the keys it takes (all required),
    whether it writes files (each checked before any work: no clobber without force, never an
    input), and its help. What carries it out is its ``tfprof.api.sinks.Sink``, which registers
    the kind here (``tfprof.api.sinks.register``)."""

    name: str
    keys: tuple[str, ...] = ()
    writes_file: bool = False
    help: str = ""

    @property
    def usage(self) -> str:
        """How the kind is written: ``stdout``, ``file:outfile=PATH``."""
        return self.name + (":" + ",".join(f"{k}={k.removeprefix('out').upper()}" for k in self.keys)
                            if self.keys else "")


# The -output kinds, by name: tfprof's, then ours (any view; docs/COMPATIBILITY.md).
OUTPUT_KINDS: dict[str, OutputKind] = {k.name: k for k in (
    OutputKind("file", ("outfile",), True, "the report"),
    OutputKind("none", help="nothing"),
    OutputKind("pprof", ("outfile",), True, "gzipped pprof; code view, one select"),
    OutputKind("stdout", help="the report (the default)"),
    OutputKind("timeline", ("outfile",), True, "Chrome trace, one file per step: PATH_<step>; not the op view"),
    OutputKind("trace", ("outfile",), True, "ours, any view: Chrome trace of the rows"),
    OutputKind("folded", ("outfile",), True, "ours, any view: flame graph stacks"),
    OutputKind("pprof_tree", ("outfile",), True, "ours, any view: pprof of name stacks"),
    OutputKind("html", ("outfile",), True, "ours, any view: offline report"),
)}


def output_help() -> str:
    """The ``-output`` option's help: each kind's usage and what it writes."""
    return ", ".join(f"{k.usage} ({k.help})" for k in OUTPUT_KINDS.values())

INT_OPTIONS = derived(lambda: ("max_depth", *(m.threshold for m in METRIC_LIST if m.threshold), "min_occurrence", "step"))
# the min_* options of registered metrics: no field of Options, held in its ``more_thresholds``
MORE_THRESHOLDS = derived(lambda: tuple(m.threshold for m in registered() if m.threshold))
LIST_OPTIONS = (
    "account_type_regexes",
    "start_name_regexes",
    "trim_name_regexes",
    "show_name_regexes",
    "hide_name_regexes",
)


@dataclass(frozen=True, kw_only=True)
class Output:
    """A parsed ``-output`` value: ``stdout``, ``none``, ``file:outfile=F``, ``timeline:…``, ``pprof:…``."""

    kind: str = "stdout"
    options: tuple[tuple[str, str], ...] = ()

    @property
    def outfile(self) -> str | None:
        return dict(self.options).get("outfile")

    def __str__(self) -> str:
        # docs/TFPROF_BEHAVIOUR.md, 'Options listing': printed as `<type>:<k=v joined by ,>`
        return f"{self.kind}:" + ",".join(f"{k}={v}" for k, v in self.options)

    @classmethod
    def parse(cls, text: str) -> Output:
        """tfprof's ``-output`` grammar (docs/TFPROF_BEHAVIOUR.md, 'Output option syntax')."""
        text = text or "stdout"
        kind, sep, rest = text.partition(":")
        if kind not in OUTPUT_KINDS:
            raise OptionError(f"Unknown -output type `{kind}`; valid: {', '.join(OUTPUT_KINDS)}")
        keys = OUTPUT_KINDS[kind].keys
        opts: dict[str, str] = {}
        for piece in (p for p in rest.split(",") if p):
            parts = [p for p in piece.split("=") if p]
            if len(parts) < 2:
                raise OptionError(f"Bad -output `{text}`; the format is -output {kind}:key=value,key=value,...")
            key, value = parts[0], "=".join(parts[1:])
            if key not in keys:
                raise OptionError(f"Unrecognized -output option `{key}` for output type `{kind}`")
            opts[key] = value
        missing = [k for k in keys if k not in opts]
        if missing:
            raise OptionError(f"-output {kind} needs {missing[0]}: e.g. -output {kind}:{missing[0]}=PATH")
        return cls(kind=kind, options=tuple(opts.items()))


def _default_list(*items: str) -> tuple[str, ...]:
    return field(default=items)


@dataclass(frozen=True, kw_only=True)
class Options:
    """tfprof's options. Defaults are those of tfprof's command line (docs/TFPROF_BEHAVIOUR.md, 'Options')."""

    max_depth: int = 10
    min_bytes: int = 0
    min_peak_bytes: int = 0
    min_residual_bytes: int = 0
    min_output_bytes: int = 0
    min_micros: int = 0
    min_accelerator_micros: int = 0
    min_cpu_micros: int = 0
    min_params: int = 0
    min_float_ops: int = 0
    min_occurrence: int = 0
    step: int = -1
    order_by: str = "name"
    account_type_regexes: tuple[str, ...] = (".*",)
    start_name_regexes: tuple[str, ...] = (".*",)
    trim_name_regexes: tuple[str, ...] = ()
    show_name_regexes: tuple[str, ...] = (".*",)
    hide_name_regexes: tuple[str, ...] = ()
    account_displayed_op_only: bool = False
    select: tuple[str, ...] = ("micros",)
    output: Output = Output()
    # ours: the min_* options of registered metrics (``MORE_THRESHOLDS``), as (option, value)
    # pairs; read them as attributes (``opts.min_flops_per_byte``) like tfprof's own
    more_thresholds: tuple[tuple[str, int], ...] = ()
    # ours: the names of the options the user gave (``from_tfprof`` keeps them), whatever their
    # values; None where unknown (built directly): then those that differ from the defaults
    # (``explicit``). Not part of equality: the same values are the same options.
    given: frozenset[str] | None = field(default=None, compare=False, repr=False)

    def __getattr__(self, name: str) -> Any:
        if name in MORE_THRESHOLDS:
            return dict(self.more_thresholds).get(name, 0)
        raise AttributeError(name)

    def __post_init__(self) -> None:
        object.__setattr__(self, "more_thresholds", tuple(sorted((k, v) for k, v in self.more_thresholds if v)))
        for name, _ in self.more_thresholds:
            if name not in MORE_THRESHOLDS:
                raise OptionError(unknown_value("option", name, option_names()))
        for name in INT_OPTIONS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise OptionError(f"Option `{name}` takes an integer, not `{v}`")
            # tfprof takes negative values silently (max_depth -1 prints the root alone, a
            # negative min_* filters nothing); a negative depth or threshold is a typo to report.
            lowest, highest = view_range(name)
            if v < lowest:
                what = "a step, or -1 for the mean over steps" if name == "step" else "0 or more"
                raise OptionError(f"Option `{name}` takes {what}, not `{v}`")
            if v > highest:  # (an int64 everywhere below: a larger one would overflow in a query)
                raise OptionError(f"Option `{name}` takes an integer from {lowest} to {highest}, not `{v}`")
        if self.order_by not in ORDER_BY and self.order_by != "":
            raise OptionError(unknown_value("order_by value", self.order_by, ORDER_BY))
        # select is a set in tfprof: sorted, duplicates removed. A name tfprof does not know is
        # kept: the report's option doc says `Unknown select: NAME` and the view carries on, as
        # the real tool does (``unknown_select`` lists them for a warning).
        object.__setattr__(self, "select", tuple(sorted(set(self.select))))
        for s in self.select:
            if not isinstance(s, str):
                raise OptionError(f"Option `select` takes field names, not `{s!r}`")
        for name in LIST_OPTIONS:
            value = tuple(getattr(self, name))
            object.__setattr__(self, name, value)
            for rx in value:
                compile_regex(rx, name)
        if isinstance(self.output, str):
            object.__setattr__(self, "output", Output.parse(self.output))

    @property
    def explicit(self) -> frozenset[str]:
        """The options the user gave: ``given``, or where that is unknown those whose values
        differ from the defaults."""
        if self.given is not None:
            return self.given
        default = Options()
        return frozenset({*(n for n in _field_options() if getattr(self, n) != getattr(default, n)),
                          *(n for n, _ in self.more_thresholds)})

    def under(self, defaults: Mapping[str, Any]) -> Options:
        """These options over ``defaults`` (tfprof's option names, e.g. a view's own): each
        option the user did not give (``explicit``) takes its value from ``defaults``, and counts
        as given from then on (the same defaults again change nothing)."""
        mine = self.explicit
        taken = {k: v for k, v in defaults.items() if ("output" if k == "dump_to_file" else k) not in mine}
        return self.from_tfprof(taken, base=self) if taken else self

    @property
    def unknown_select(self) -> tuple[str, ...]:
        """The ``select`` names that are no field of tfprof's (shown as unknown, otherwise ignored)."""
        return tuple(s for s in self.select if s not in SELECT_FIELDS)

    # -------------------------------------------------------------------- construction

    @classmethod
    def from_tfprof(cls, options: Mapping[str, Any], *, base: Options | None = None) -> Options:
        """Options from a tfprof option dict (the Python API's, or a golden case's).

        Keys missing from ``options`` keep ``base``'s values (the CLI defaults by default).
        ``dump_to_file`` is honoured as tfprof does: it becomes ``file:outfile=...``. The
        options given are ``options``' keys and those ``base`` had (``explicit``).
        """
        known = set(option_names())
        values: dict[str, Any] = {}
        more = dict((base or cls()).more_thresholds)
        for key, value in options.items():
            if key in MORE_THRESHOLDS:
                more[key] = value
                continue
            if key == "dump_to_file":
                if value:
                    values["output"] = f"file:outfile={value}"
                continue
            if key not in known:
                raise OptionError(unknown_value("option", key, sorted(known)))
            if key in LIST_OPTIONS or key == "select":
                value = tuple(value) if not isinstance(value, str) else tuple(p for p in value.split(",") if p)
            if key == "output" and isinstance(value, str):
                value = Output.parse(value)
            values[key] = value
        given = (base.explicit if base is not None else frozenset()) | {
            "output" if k == "dump_to_file" else k for k in options}
        return replace(base or cls(), **values, more_thresholds=tuple(more.items()), given=given)

    def with_(self, **changes: Any) -> Options:
        """A copy with some options changed (validated)."""
        return self.from_tfprof(changes, base=self)

    def to_tfprof(self) -> dict[str, Any]:
        """The tfprof option dict for these options (what ProfileOptionBuilder().build() returns)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "given":
                continue
            if f.name == "more_thresholds":  # its options, by name, where set (a registered metric's)
                out.update(self.more_thresholds)
                continue
            v = getattr(self, f.name)
            if isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Output):
                v = str(v).rstrip(":") if not v.options else str(v)
            out[f.name] = v
        return out


def _field_options() -> tuple[str, ...]:
    """tfprof's options: the fields of ``Options`` that are options."""
    return tuple(f.name for f in fields(Options) if f.name not in ("more_thresholds", "given"))


def option_names() -> tuple[str, ...]:
    """Every option's name: tfprof's, then the registered metrics' thresholds."""
    return (*_field_options(), *MORE_THRESHOLDS)


def unknown_value(what: str, value: str, valid: Iterable[str]) -> str:
    valid = list(valid)
    close = difflib.get_close_matches(value, valid, n=1)
    hint = f" (did you mean `{close[0]}`?)" if close else ""
    return f"Unknown {what} `{value}`; valid: {', '.join(valid)}{hint}"


@functools.cache
def compile_regex(rx: str, option: str = "regex") -> str:
    """Check a tfprof (RE2) regex with the engine queries use (Rust's, RE2 syntax); return it.

    A bad regex is an ``OptionError`` naming it and the option. The defaults' ``.*`` needs no
    engine to be valid (the help's defaults are shown without polars).
    """
    if rx == ".*":
        return rx
    import polars as pl  # lazy: the command line's help reads these options without polars (tfprof/cli/__init__.py)

    try:
        pl.Series([""]).str.contains(full_match_any([rx]))
    except Exception as exc:  # polars raises ComputeError with the engine's message
        first = str(exc).strip().splitlines()
        detail = next((ln.strip() for ln in reversed(first) if "error:" in ln), first[-1] if first else "")
        raise OptionError(f"Bad regex `{rx}` in {option}: {detail}") from None
    return rx


def full_match_any(regexes: Iterable[str]) -> str | None:
    """One regex that fully matches what any of ``regexes`` fully matches (None for no regexes)."""
    regexes = list(regexes)
    if not regexes:
        return None
    return "^(?:" + "|".join(f"(?:{rx})" for rx in regexes) + ")$"
