"""Chrome trace JSON (Trace Event Format) from timeline events, byte for byte as tfprof writes it.

tfprof serialises with jsoncpp's FastWriter (docs/TFPROF_BEHAVIOUR.md, 'Timeline file'): one compact JSON object
``{"traceEvents":[...]}`` and a newline, object keys in byte order, non-ASCII characters as
``\\uXXXX`` escapes. Process names, categories and the memory counters' texts are built here
from the structured events of ``tfprof.queries.timeline``.
"""

from __future__ import annotations

import json

import polars as pl

# tfprof prints a warning (and still writes) past this size (ChromeTraceFormatter::Format).
LARGE_TRACE_BYTES = 200 * 1024 * 1024
LARGE_TRACE_WARNING = (
    "Trace file is over 200MB. Chrome might not be able to display it. Consider to use filters "
    "(e.g. -min_micros > 1000 or -op_type .*gpu:0.* to reduce the size."
)
TOP_KEYS = tuple(f"Top Allocation {i:02d}" for i in range(10))


def json_string(text: str) -> str:
    """``text`` as jsoncpp quotes it: like ``json.dumps`` (ASCII only) but DEL stays raw."""
    return json.dumps(text).replace("\\u007f", "\x7f")


def process_labels() -> pl.Expr:
    """tfprof's process names (tfprof_timeline.cc GetTimeDevName, GetMemoryLaneName)."""
    process, device = pl.col("process"), pl.col("device")
    return (
        pl.when(process == "scope").then(_fmt("Scope:{}", "pid"))
        .when((process == "ops") & device.str.contains("stream", literal=True))
        .then(_fmt("Op execution threads: {}", device))
        .when(process == "ops").then(_fmt("Op scheduling threads: {}", device))
        .when(process == "memory").then(_fmt("mem usage on:{}", device))
        .when(process == "allocations").then(_fmt("mem usage on:{} allocations", device))
    )


def megabytes(value: int) -> str:
    """A byte count in MB as tfprof's StrCat of a double writes it (six significant digits)."""
    return f"{value / 1000000.0:.6g}"


def _fmt(template: str, *cols: str | pl.Expr) -> pl.Expr:
    """``template`` with each ``{}`` replaced by the next column (pl.format would read the JSON
    braces as column names)."""
    pieces = template.split("{}")
    assert len(pieces) == len(cols) + 1
    parts: list[pl.Expr] = [pl.lit(pieces[0])]
    for col, piece in zip(cols, pieces[1:]):
        expr = pl.col(col) if isinstance(col, str) else col
        parts += [expr.cast(pl.String), pl.lit(piece)]
    return pl.concat_str(parts)


def _quoted(col: pl.Series) -> pl.Series:
    """Each string JSON-quoted; escaping runs once per distinct string."""
    distinct = col.drop_nulls().unique()
    mapping = dict(zip(distinct.to_list(), (json_string(s) for s in distinct.to_list())))
    return col.replace_strict(mapping, default=None, return_dtype=pl.String)


def _top_allocations(row: dict) -> str:
    args = {key: "N/A" for key in TOP_KEYS[1:]}
    for i, (value, name) in enumerate(zip(row["top_bytes"] or [], row["top_names"] or [])):
        args[TOP_KEYS[i]] = f"{megabytes(value)} MB from {name}"
    args["Not Displayed"] = f"{row['rest_bytes'] / 1000000.0:.2f} MB"
    body = ",".join(f"{json_string(k)}:{json_string(args[k])}" for k in sorted(args))
    return (
        f'{{"args":{{{body}}},"cat":"Memory","name":"Top Allocations","ph":"C",'
        f'"pid":{row["pid"]},"tid":{row["tid"]},"ts":{row["ts"]}}}'
    )


def trace_events_json(events: pl.DataFrame) -> list[str]:
    """One compact JSON object per event, in ``seq`` order."""
    if events.height == 0:
        return []
    frame = events.with_columns(
        _quoted(events.select(process_labels()).to_series()).alias("q_label"),
        _quoted(events["name"]).alias("q_name"),
        _quoted(events["name"] + "_flow").alias("q_flow"),
    )
    kind = pl.col("kind")
    text = (
        pl.when(kind == "process")
        .then(_fmt('{"args":{"name":{}},"name":"process_name","ph":"M","pid":{}}', "q_label", "pid"))
        .when((kind == "op") & pl.col("op").is_not_null())
        .then(_fmt('{"args":{"name":{},"op":{}},"cat":"Op","dur":{},"name":{},"ph":"X","pid":{},"tid":{},"ts":{}}',
                        "q_name", "q_name", "dur", "q_name", "pid", "tid", "ts"))
        .when(kind == "op")
        .then(_fmt('{"args":{"name":{}},"cat":"Op","dur":{},"name":{},"ph":"X","pid":{},"tid":{},"ts":{}}',
                        "q_name", "dur", "q_name", "pid", "tid", "ts"))
        .when(kind == "flow_start")
        .then(_fmt('{"cat":"DataFlow","id":{},"name":{},"ph":"s","pid":{},"tid":{},"ts":{}}',
                        "flow_id", "q_flow", "pid", "tid", "ts"))
        .when(kind == "flow_end")
        .then(_fmt('{"cat":"DataFlow","id":{},"name":{},"ph":"t","pid":{},"tid":{},"ts":{}}',
                        "flow_id", "q_flow", "pid", "tid", "ts"))
        .when(kind == "memory")
        .then(_fmt('{"args":{"Allocator Bytes in Use":{}},"cat":"Memory","name":"Allocated Bytes","ph":"C",'
                        '"pid":{},"tid":{},"ts":{}}', "bytes_in_use", "pid", "tid", "ts"))
    )
    out = frame.select(text.alias("json"), "kind").with_row_index("i")
    lines = out["json"].to_list()
    tops = out.filter(pl.col("kind") == "top_allocations")["i"].to_list()
    if tops:
        rows = events[tops].select("pid", "tid", "ts", "top_bytes", "top_names", "rest_bytes").to_dicts()
        for i, row in zip(tops, rows):
            lines[i] = _top_allocations(row)
    return lines


def render_trace(events: pl.DataFrame) -> bytes:
    """The timeline file's bytes (``{"traceEvents":[...]}`` and a newline)."""
    return ('{"traceEvents":[' + ",".join(trace_events_json(events)) + "]}\n").encode()


def written_message(path) -> str:
    """What tfprof prints on stdout after writing a timeline (Timeline::OutputTimeline)."""
    rule = "*" * 54
    return (
        f"\n{rule}\nTimeline file is written to {path}.\n"
        f"Open a Chrome browser, enter URL chrome://tracing and load the timeline file.\n{rule}\n"
    )


def peak_lines(peaks: pl.DataFrame) -> str:
    """`<device> peak memory: <MB> MB` per GPU, as the graph timeline prints them."""
    return "".join(f"{device} peak memory: {peak / 1000000.0:.2f} MB\n" for device, peak in peaks.iter_rows())
