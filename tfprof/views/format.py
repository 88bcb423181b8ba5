"""tfprof's number formatting (spec 7.3.1) and the registry of selectable fields.

Display strings exist only here: tables and query results hold plain numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def fmt_number(n: int | float) -> str:
    """FormatNumber: 930580 -> ``930.58k``; negative numbers are printed whole."""
    if n < 1000:
        return "%d" % n
    if n < 1000000:
        return "%.2fk" % (n / 1e3)
    if n < 1000000000:
        return "%.2fm" % (n / 1e6)
    return "%.2fb" % (n / 1e9)


def fmt_time(us: int | float) -> str:
    """FormatTime: 999 -> ``999us``, 1000 -> ``1.00ms``, 3610000 -> ``3.61sec``."""
    if us < 1000:
        return "%dus" % us
    if us < 1000000:
        return "%.2fms" % (us / 1e3)
    return "%.2fsec" % (us / 1e6)


def fmt_memory(b: int | float) -> str:
    """FormatMemory: decimal units, no GB (120 GB prints ``120356.38MB``)."""
    if b < 1000:
        return "%dB" % b
    if b < 1000000:
        return "%.2fKB" % (b / 1e3)
    return "%.2fMB" % (b / 1e6)


def fmt_shape(dims: Sequence[int]) -> str:
    """FormatShapes: dims joined by ``x``."""
    return "x".join(str(d) for d in dims)


@dataclass(frozen=True)
class Field:
    """One selectable metric: its legend, its self and total columns and its formatter."""

    name: str
    legend: str
    column: str
    fmt: object
    help: tuple[str, ...]


# The metric fields, keyed by select name. Legend, self column (`total_` + column is the total)
# and formatter are read by the legend line and by every node line, so they cannot drift.
FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        Field("params", "# parameters", "parameters", fmt_number, ("param: Number of parameters (in the Variable).",)),
        Field(
            "float_ops",
            "# float_ops",
            "float_ops",
            fmt_number,
            ("flops: Number of float operations. Note: Please read the implementation for the math behind it.",),
        ),
        Field(
            "bytes",
            "requested bytes",
            "requested_bytes",
            fmt_memory,
            ("requested bytes: The memory requested by the operation, accumulatively.",),
        ),
        Field(
            "peak_bytes",
            "peak bytes",
            "peak_bytes",
            fmt_memory,
            ("peak bytes: The peak amount of memory that the operation is holding at some point.",),
        ),
        Field(
            "residual_bytes",
            "residual bytes",
            "residual_bytes",
            fmt_memory,
            ("residual bytes: The memory not de-allocated after the operation finishes.",),
        ),
        Field(
            "output_bytes",
            "output bytes",
            "output_bytes",
            fmt_memory,
            (
                "output bytes: The memory that is output from the operation "
                "(not necessarily allocated by the operation)",
            ),
        ),
        Field(
            "micros",
            "total execution time",
            "exec_micros",
            fmt_time,
            ("total execution time: Sum of accelerator execution time and cpu execution time.",),
        ),
        Field(
            "accelerator_micros",
            "accelerator execution time",
            "accelerator_exec_micros",
            fmt_time,
            (
                "accelerator execution time: Time spent executing on the accelerator. "
                "This is normally measured by the actual hardware library.",
            ),
        ),
        Field(
            "cpu_micros",
            "cpu execution time",
            "cpu_exec_micros",
            fmt_time,
            (
                "cpu execution time: The time from the start to the end of the operation. It's the sum of "
                "actual cpu run time plus the time that it spends waiting if part of computation is "
                "launched asynchronously.",
            ),
        ),
    )
}

# Help lines of the doc block for every select value (spec 7.1.1); `micros` prints three.
SELECT_HELP: dict[str, tuple[str, ...]] = {
    **{name: f.help for name, f in FIELDS.items()},
    "micros": FIELDS["micros"].help + FIELDS["cpu_micros"].help + FIELDS["accelerator_micros"].help,
    "tensor_value": ("tensor_value: Not supported now.",),
    "device": ("device: which device is placed on.",),
    "op_types": (
        "op_types: The attributes of the operation, includes the Kernel name device placed on and "
        "user-defined strings.",
    ),
    "occurrence": ("occurrence: The number of times it occurs",),
    "input_shapes": ("input shape: The shape of input tensors",),
}

COMMAND_HELP = {
    "scope": "scope: The nodes in the model graph are organized by their names, which is hierarchical like filesystem.",
    "graph": "scope: The nodes in the model graph are organized by their names, which is hierarchical like filesystem.",
    "code": "code: When python trace is available, the nodes are python lines and their are organized by the python call stack.",
    "op": "op: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes belonging to the same type are aggregated together.",
}

MISSING_STREAM_WARNING = (
    "\n\nFound accelerator operation but misses accelerator stream stats!\n\n"
    "It's likely a gpu tracing issue rather than tf-profiler issue.\n"
    "If you found your operation missing accelerator time, consider to post to discuss@tensorflow.org!\n\n"
)


def doc_block(cmd: str, select: Sequence[str]) -> str:
    """The explanatory block printed above ``Profile:`` (spec 7.1.1), for sorted ``select``."""
    lines = [line for s in sorted(select) for line in SELECT_HELP.get(s, (f"Unknown select: {s}",))]
    return "\nDoc:\n" + COMMAND_HELP.get(cmd, f"Unknown command: {cmd}") + "\n" + "\n".join(lines) + "\n\n"


def time_fields(select: Sequence[str]) -> list[str]:
    """The time group: `micros` prints all three columns and suppresses the separate ones."""
    if "micros" in select:
        return ["micros", "accelerator_micros", "cpu_micros"]
    return [f for f in ("accelerator_micros", "cpu_micros") if f in select]
