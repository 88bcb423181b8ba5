"""PyTorch Kineto traces (Chrome-trace JSON, ``torch.profiler``'s ``export_chrome_trace``) as tfprof's tables.

``trace_json.read_events`` gives the raw events; this module says what each one is (docs/FOREIGN.md):
``cpu_op`` events (``Operator`` in traces before PyTorch 1.9) are ops (op type: the event name,
e.g. ``aten::conv2d``); kernels, memcpys and memsets are GPU events, which ``build`` links through
their ``correlation`` arg to the runtime call (``cuda_runtime``, ``Runtime``, …) that launched them;
``nn.Module: <Class>_<k>`` frames and user annotations are scopes; other ``python_function`` events
are code frames (``B``/``E`` pairs count as ``X`` spans); ``ProfilerStep#N`` marks step N;
ops' recorded input shapes give their estimated float_ops (``torch_flops``, per execution);
``[memory]`` instants are allocations; ``C`` events are counters; ``s``/``f`` events are flows;
an op that runs an autograd node (``autograd::engine::evaluate_function: …``, 1.8's ``…Backward<N>``)
is named after the forward op its ``fwdbwd`` flow links it to, else the one with its ``Sequence number``
(``paths.backward_scopes``).
A ``/`` in a name is a character of that name, never a scope level: labels carry ``NAME_SLASH``
in its place. ``build`` turns that into tables.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from tfprof.errors import ProfileFormatError
from tfprof.ingest import validate
from tfprof.ingest.foreign import build, codes, memory, paths, torch_flops, trace_columns, trace_json
from tfprof.ingest.foreign.progress import Tell, part, silent
from tfprof.ingest.sources import one_line
from tfprof.schema.flops_rules import node_flops_table

ACCELERATOR_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset",  # then 1.8's
                          "mtia_ccp_events")  # Meta's MTIA: its kernels and DMA copies
DEVICE_MARKS = {"mtia_ccp_events": ("event_record", "event_wait")}
"""Device-side events of an accelerator category that are no work: an MTIA stream recording an
event, or waiting on another stream's (kept as trace events, not as GPU time)."""
DMA_COPY = "dma_request"  # an MTIA copy; its args' `direction` says which way
CPU_OP_CATEGORIES = ("cpu_op", "Operator")
OP_CATEGORIES = (*CPU_OP_CATEGORIES, *ACCELERATOR_CATEGORIES)
STEP_CATEGORIES = ("user_annotation", *CPU_OP_CATEGORIES)  # PyTorch 1.8 wrote ProfilerStep#N as an Operator
LAUNCH_CATEGORY = r"(?i)runtime|driver"  # cuda_runtime, cuda_driver, Runtime (1.8), xpu_runtime, …
NAME_SLASH = "\u2215"  # `∕`, DIVISION SLASH: stands for `/` inside one name, which is no scope level
STEP_PREFIX = "ProfilerStep#"
MODULE_PREFIX = "nn.Module: "
MEMORY_EVENT = "[memory]"
TIMED_PHASES = ("X", "B", "E", "i", "I", "s", "f", "t", "C")  # the phases read, each needs a time
# Times are kept as int64 ns: a time, length or end beyond 9e18 ns (the year 2255) cannot be.
MAX_NS = 9e18
_BEYOND = "±9e18 ns (1970 ± 285 years), more than int64 ns hold"
_SPECIAL_TOKEN = r"NaN|Infinity"
_SPECIAL = r"([:\[,]\s*)(-?(?:NaN|Infinity))(\s*[,}\]])"  # a bare value, between JSON punctuation


def read(path: Path, data, tell: Tell = silent) -> dict[str, pa.Table]:
    """The tables of the Kineto trace ``data`` (read from ``path``): its bytes, or a list holding
    them, which is emptied so that the bytes are freed as soon as the events are gathered;
    ``tell`` is told how far the read has got (``progress``)."""
    tell(0, "events")
    top, rows = trace_json.read_events(path, data, part(tell, 0, 0.45))
    tell(0.45, "ops")
    origin = trace_columns.ts_origin(rows)
    # the text columns that say something for few events (the args, flow ids, the args keys read)
    # stay Arrow, looked up by event id for the rows that need them (``_on_rows``): polars would
    # copy them whole, and each filter of the frame again
    # (the args, a chunk per window of a large file, stay so: ``trace_table.texts_at`` frees them a chunk at a time)
    side = rows.select([c for c in rows.column_names if c not in (*_FRAME_COLUMNS, "args")]).combine_chunks()
    side = side.append_column("args", rows["args"])
    raw = pl.from_arrow(rows.select(list(_FRAME_COLUMNS))).with_row_index("event_id").with_columns(
        pl.col("event_id").cast(pl.Int64), pl.col("name").fill_null(""))
    del rows
    if raw.height == 0:
        raise ProfileFormatError(f"`{path}` is a Chrome trace without events; nothing to profile")
    timed = pl.col("ph").is_in(list(TIMED_PHASES))
    untimed = raw.lazy().filter(timed & pl.col("ts").is_null()).select("name", "ph").head(1).collect()
    if untimed.height:
        bad = untimed.row(0, named=True)
        raise ProfileFormatError(f"`{path}`: event `{bad['name']}` (ph `{bad['ph']}`) has no `ts`")
    try:
        base = int(top.get("baseTimeNanoseconds") or 0)
    except (TypeError, ValueError, OverflowError):
        raise ProfileFormatError(f"`{path}`: `baseTimeNanoseconds` is not a number of nanoseconds") from None
    if abs(base) > MAX_NS:
        raise ProfileFormatError(f"`{path}`: `baseTimeNanoseconds` {base} is beyond {_BEYOND}")
    base += origin * 1000  # the µs the ts are given from (epoch times, read exactly: trace_columns)
    _check_times(path, raw, timed, base, "ts", origin)
    # what is needed of the raw events later is kept, so that each frame goes once the next is made
    counter_events = raw.lazy().filter(pl.col("ph") == "C").select("event_id", "pid", "name", "ts").collect()
    categories, events = raw["cat"], raw.height
    spans = _begin_end_spans(_named(raw, side))
    del raw
    _check_times(path, spans, pl.col("ph") == "X", base, "dur")
    ev = _classify(spans, side, base)
    del spans
    if not (ev["role"] == "op").any():
        raise ProfileFormatError(trace_json.without_ops(path, top, categories, events, OP_CATEGORIES))
    if (ev["dur_ns"] < 0).any():
        bad = ev.filter(pl.col("dur_ns") < 0).row(0, named=True)
        raise ProfileFormatError(f"`{path}`: event `{bad['name']}` has a negative duration ({bad['dur_ns']} ns)")
    _check_bytes(path, ev)
    found = _bad_steps(ev)
    counters = _counters(path, counter_events, side["args"], ev, base)
    args = side["args"]  # handed over to build, as the events are (a chunked array when the file was read in windows)
    args = [args.chunk(0) if args.num_chunks == 1 else args]
    del counter_events, categories, side  # from here the events live in `ev` alone, which build takes over
    owned = [ev]
    del ev
    tables = build.build(owned, args=args, counters=counters, flops=torch_flops.per_execution, job=_job(path, top),
                         tell=part(tell, 0.55, 1), findings=found)
    formulas = {op: parts[0][0] for op, parts in torch_flops.RULES.items()}  # (its first part's)
    return {**tables, "node_flops": node_flops_table(tables["nodes"], formulas, estimated=True)}


def _job(path: Path, top: dict) -> dict:
    """The rank and world size ``distributedInfo`` records (PyTorch writes it in a distributed
    run); an error naming the file where it holds something else than whole numbers."""
    info = top.get("distributedInfo")
    if not isinstance(info, dict):
        return {}
    job = {k: info.get(key) for k, key in (("rank", "rank"), ("world_size", "world_size"))}
    for key, value in job.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31):
            raise ProfileFormatError(f"`{path}`: `distributedInfo.{key}` is {one_line(repr(value))}, not a whole "
                                     "number of ranks; the trace is damaged")
    return job


def exact_ns(us: pl.Expr) -> pl.Expr:
    """A time in µs (a float: Chrome trace's unit) in whole ns, the µs and their fraction apart:
    an epoch time in µs times 1000 is beyond a double's exact integers (2^53 ns is 104 days), so
    multiplying first would move it by up to 128 ns."""
    whole = us.floor()
    return whole.cast(pl.Int64) * 1000 + ((us - whole) * 1000).round(0).cast(pl.Int64)


def _check_times(path: Path, events: pl.DataFrame, where: pl.Expr, base: int, field: str, origin: int = 0) -> None:
    """A ``ts`` (or an ``X`` span's ``dur``) of an event of ``events`` ``where`` it holds that is
    not finite, or whose time in ns (the start, the length, the end) lies beyond ``MAX_NS``, is an
    error naming the event (a ``ts`` as the file writes it: ``origin`` µs added back): cast to
    int64 it would fail or wrap. Values within it that only look wrong are the validation table's."""
    start = pl.lit(float(base)) + pl.col("ts") * 1000
    if field == "ts":
        bad = pl.col("ts").is_finite().not_() | (start.abs() > MAX_NS)
    else:
        dur = pl.col("dur").fill_null(0) * 1000
        bad = pl.col("dur").fill_null(0).is_finite().not_() | (dur.abs() > MAX_NS) | ((start + dur).abs() > MAX_NS)
    wrong = events.lazy().filter(where & bad).select("name", "ph", field).collect()
    if wrong.height:
        row = wrong.row(0, named=True)
        value = row[field] + (origin if field == "ts" else 0)
        what = (f"{value}, not a finite number of microseconds" if not math.isfinite(value)
                else f"{value!r} µs, which puts its start beyond {_BEYOND}" if field == "ts"
                else f"{value!r} µs, which puts its length or its end beyond {_BEYOND}")
        more = f" ({wrong.height - 1:,} more events like it)" if wrong.height > 1 else ""
        raise ProfileFormatError(f"`{path}`: event `{one_line(row['name'])}` (ph `{row['ph']}`) has `{field}` "
                                 f"{what}{more}; the trace is damaged")


def _check_bytes(path: Path, ev: pl.DataFrame) -> None:
    """A ``[memory]`` instant whose ``Bytes`` is missing, not a number, or not a whole number
    int64 holds is an error naming it: left out, it would make every total wrong unseen. So is
    a ``Total Allocated`` given but not such a number (beyond int64, fractional, a word): read as
    none, it would turn the allocator's recorded levels into a running sum unseen. (One that is
    not finite, ``NaN``, is a counter sample left out and reported: ``non_finite_counter``.)"""
    memory_rows = pl.col("role") == "memory"
    not_finite = pl.col("_total").cast(pl.Float64, strict=False).is_finite().not_().fill_null(False)
    bad = ev.lazy().filter(memory_rows & (pl.col("mem_bytes").is_null()
                                          | (pl.col("_total").is_not_null() & pl.col("in_use").is_null()
                                             & not_finite.not_()))).select(
        "_bytes", "_total", "ts", pl.col("mem_bytes").is_null().alias("_on_bytes")).collect()
    if bad.height:
        row = bad.row(0, named=True)
        raw = row["_bytes"] if row["_on_bytes"] else row["_total"]
        field = "Bytes" if row["_on_bytes"] else "Total Allocated"
        what = "no `Bytes`" if raw is None else f"`{field}` {raw}, not a whole number of bytes within ±9.2e18 (int64)"
        more = f" ({bad.height - 1:,} more like it)" if bad.height > 1 else ""
        raise ProfileFormatError(f"`{path}`: the `{MEMORY_EVENT}` event at ts {row['ts']!r} µs has {what}{more}; "
                                 "the trace is damaged")


def _bad_steps(ev: pl.DataFrame) -> validate.Findings:
    """The step markers whose number is no step number (read as annotations), as findings."""
    found = validate.Findings()
    bad = ev.lazy().filter(pl.col("_bad_step")).select(pl.col("name").cast(pl.String), "ts").collect()
    found.add("bad_step_marker", bad.height, [
        (None, None, f"`{one_line(r['name'])}` at ts {r['ts']!r} µs: its number is not a whole number from 0 to "
                     f"{2**63 - 1:,}, so it marks no step (read as an annotation)")
        for r in bad.head(validate.ROWS_PER_CODE).iter_rows(named=True)])
    return found


_FRAME_COLUMNS = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
"""The events' columns the reader's polars frame holds (the others stay Arrow, by event id)."""


def _arg(key: str) -> pl.Expr:
    """Arg ``key`` of each event as text (a string as it is, a number as written; null when
    absent): ``trace_json`` gives the args keys read here as columns of their own."""
    return pl.col(f"arg:{key}")


def _on_rows(ev: pl.DataFrame, side: pa.Table, rows: np.ndarray, **exprs: pl.Expr) -> list[pl.Series]:
    """Each of ``exprs`` worked out on ``ev``'s rows ``rows`` only, null on the others: it reads
    ``ev``'s columns and ``side``'s (the Arrow columns, taken at those rows' event ids)."""
    used = sorted({name for expr in exprs.values() for name in expr.meta.root_names()})
    here = ev.select("event_id", *(c for c in used if c in ev.columns and c != "event_id"))[rows]
    there = pl.from_arrow(side.select([c for c in used if c not in ev.columns]).take(here["event_id"].to_arrow()))
    return memory.scattered(pl.concat([here, there], how="horizontal").select(**exprs), rows, ev.height)


def _whole(text: pl.Expr) -> pl.Expr:
    """``text`` as an int64 when it is a whole number int64 holds (``12``, ``4.0``), else null."""
    as_float = text.cast(pl.Float64, strict=False)
    exact = as_float.is_finite() & (as_float == as_float.floor()) & (as_float.abs() < 2.0**53)
    return pl.coalesce(text.cast(pl.Int64, strict=False), pl.when(exact).then(as_float.cast(pl.Int64)))


def _named(raw: pl.DataFrame, side: pa.Table) -> pl.DataFrame:
    """Events with their process and thread names from the ``M`` metadata events (else the ids),
    as categoricals worked out once per distinct (pid, tid) and gathered back per event."""
    meta = raw.lazy().filter(pl.col("ph") == "M").select("event_id", "pid", "tid", pl.col("name").cast(pl.String)
                                                         ).collect()
    meta = meta.with_columns(pl.Series("_n", side["arg:name"].take(pa.array(meta["event_id"].to_numpy()))))
    procs = meta.filter(pl.col("name") == "process_name").group_by("pid").agg(pl.col("_n").first().alias("_p"))
    threads = meta.filter(pl.col("name") == "thread_name").group_by("pid", "tid").agg(
        pl.col("_n").first().alias("_t"))
    first, inverse = codes.distinct(raw["pid"], raw["tid"])
    pairs = raw.select("pid", "tid")[first].with_row_index("_k")
    pairs = pairs.join(procs, on="pid", how="left", nulls_equal=True).join(
        threads, on=["pid", "tid"], how="left", nulls_equal=True).sort("_k").select(
        pl.coalesce("_p", pl.col("pid").cast(pl.String).fill_null("")).cast(pl.Categorical).alias("process"),
        pl.coalesce("_t", pl.col("tid").cast(pl.String).fill_null("")).cast(pl.Categorical).alias("thread"))
    at = pl.Series(inverse)
    return raw.with_columns(pairs["process"].gather(at), pairs["thread"].gather(at))


def _begin_end_spans(ev: pl.DataFrame) -> pl.DataFrame:
    """``B``/``E`` pairs as ``X`` spans (the ``B`` event's row, name and args, ``dur`` up to its ``E``).

    Per thread, in (ts, file) order, an ``E`` closes the innermost open ``B``, as in Chrome's viewer:
    the nesting depth is a running sum (+1 per B, -1 per E) held at 0 from below (an ``E`` with
    nothing open is dropped), so each B's level is its depth after it and each E's its depth before
    it, and at one level of one thread B and E alternate: the k-th B there pairs with the k-th E.
    An unclosed ``B`` is dropped too."""
    if not ev["ph"].is_in(["B", "E"]).any():
        return ev
    be = ev.filter(pl.col("ph").is_in(["B", "E"]))
    thread = ["pid", "tid"]
    be = be.sort("pid", "tid", "ts", "event_id", nulls_last=True).with_columns(
        pl.when(pl.col("ph") == "B").then(1).otherwise(-1).cum_sum().over(thread).alias("_sum"))
    be = be.with_columns((pl.col("_sum") - pl.col("_sum").cum_min().over(thread).clip(upper_bound=0)).alias("_depth"))
    be = be.with_columns(pl.when(pl.col("ph") == "B").then(pl.col("_depth"))
                         .otherwise(pl.col("_depth").shift(1, fill_value=0).over(thread)).alias("_level"))
    be = be.filter(pl.col("_level") > 0).with_columns(
        pl.int_range(pl.len()).over([*thread, "_level", "ph"]).alias("_k"))
    ns = exact_ns(pl.col("ts"))
    ends = be.filter(pl.col("ph") == "E").select(*thread, "_level", "_k", ns.alias("_end"))
    spans = be.filter(pl.col("ph") == "B").join(ends, on=[*thread, "_level", "_k"], nulls_equal=True).with_columns(
        pl.lit("X").cast(pl.Categorical).alias("ph"), ((pl.col("_end") - ns) / 1000).alias("dur"))
    return pl.concat([ev.filter(pl.col("ph").is_in(["B", "E"]).not_()),
                      spans.select(ev.columns)]).sort("event_id")


def _quoted_specials(args: pl.Expr) -> pl.Expr:
    """``args`` with each bare ``NaN``, ``Infinity`` and ``-Infinity`` value (which PyTorch may
    write and strict JSON refuses, failing the whole object) put in quotes."""
    return pl.when(args.str.contains(_SPECIAL_TOKEN)).then(
        args.str.replace_all(_SPECIAL, '${1}"${2}"${3}')).otherwise(args)


def _classify(ev: pl.DataFrame, side: pa.Table, base: int) -> pl.DataFrame:
    ev = ev.filter(pl.col("ph").is_in(["X", "i", "I", "s", "f", "t"]))
    span = pl.col("ph") == "X"
    kind = _by_kind(ev.select("name", "cat", "ph"))
    ev = ev.with_columns(
        (pl.lit(base, pl.Int64) + exact_ns(pl.col("ts"))).alias("start_ns"),
        pl.when(span).then((pl.col("dur").fill_null(0) * 1000).round(0).cast(pl.Int64)).otherwise(0).alias("dur_ns"),
        *kind, pl.col("cat").alias("category"), pl.col("name").alias("op_type"))
    # what the args say, and the flow ids, only on the rows they mean something for: a GPU
    # event's device, a launch's correlation, an allocation's bytes, allocator and totals
    where = {k: np.flatnonzero(ev[k].to_numpy()) for k in ("accelerator", "_launched", "_memory", "_dma")}
    where["op"] = np.flatnonzero(((ev["role"] == "op") & ~ev["accelerator"]).to_numpy())
    where["flow"] = np.flatnonzero(ev["ph"].is_in(["s", "f", "t"]).to_numpy())
    gpu = pl.lit("/device:gpu:") + pl.coalesce(_arg("device"), pl.col("pid").cast(pl.String))
    return ev.with_columns(
        *_on_rows(ev, side, where["accelerator"], device=gpu.cast(pl.Categorical)),
        *(_on_rows(ev, side, where["_dma"], copy_direction=pl.col("args").str.json_path_match("$.direction"))
          if len(where["_dma"]) else ()),  # (only MTIA's copies: build.ABSENT_COLUMNS)
        *_on_rows(ev, side, where["_memory"], _bytes=_arg("Bytes"), mem_bytes=_whole(_arg("Bytes")),
                  _total=_arg("Total Allocated"),
                  in_use=_whole(_arg("Total Allocated")), reserved=_whole(_arg("Total Reserved")),
                  allocator=memory.kineto_allocator(_arg("Device Type"), _arg("Device Id")),
                  **{f"_{series}": _arg(series).cast(pl.Float64, strict=False) for series in _TOTALS}),
        *_on_rows(ev, side, where["_launched"], correlation=_whole(_arg("correlation"))),
        *_on_rows(ev, side, where["op"], seq=_whole(_arg("Sequence number"))),
        *_on_rows(ev, side, where["flow"], flow_id=pl.col("cat").cast(pl.String).fill_null("") + ":"
                  + pl.col("id").fill_null("")),
    ).with_columns(pl.col("device").fill_null("/device:cpu:0"))


_TOTALS = ("Total Allocated", "Total Reserved")  # the allocator totals a [memory] instant records


def _by_kind(keys: pl.DataFrame) -> list[pl.Series]:
    """What an event's ``name``, ``cat`` and ``ph`` alone say (``keys``), worked out once per
    distinct triple and gathered back per event: ``phase``, ``role``, ``label`` (the name of an op,
    module or annotation is one scope level; a code frame keeps its file path), ``accelerator``, ``_launched`` (a GPU event or a runtime call that may launch one),
    ``_memory``, ``_dma`` (an MTIA copy, whose direction is in its args), ``backward`` (an autograd node's op: ``autograd::engine::evaluate_function: X``, or
    ``XBackward<N>`` as PyTorch 1.8 names it), ``step_num`` and ``_bad_step`` (a step marker whose
    number is not a step number)."""
    first, inverse = codes.distinct(*keys)
    keys = keys[first].select(pl.all().cast(pl.String))
    name, cat, ph = pl.col("name"), pl.col("cat").fill_null(""), pl.col("ph")
    marks = pl.any_horizontal(*((cat == c) & name.is_in(list(n)) for c, n in DEVICE_MARKS.items()))
    accelerator = cat.is_in(ACCELERATOR_CATEGORIES) & ~marks
    span = ph == "X"
    is_memory = ph.is_in(["i", "I"]) & (name == MEMORY_EVENT)
    # a step marker's number: a whole number from 0 to int64's largest, else the marker is no step
    # (`ProfilerStep#abc`, `#-1`, `#1e30`: an annotation, counted as `bad_step_marker`)
    number = name.str.strip_prefix(STEP_PREFIX).cast(pl.Int64, strict=False)
    step_num = pl.when(name.str.starts_with(STEP_PREFIX) & (number >= 0)).then(number)
    marker = span & cat.is_in(STEP_CATEGORIES) & name.str.starts_with(STEP_PREFIX)
    role = (
        pl.when(marker & step_num.is_not_null()).then(pl.lit("step"))
        .when(span & (cat.is_in(CPU_OP_CATEGORIES) | accelerator)).then(pl.lit("op"))
        .when(span & (cat == "user_annotation")).then(pl.lit("scope"))
        .when(span & (cat == "python_function") & name.str.starts_with(MODULE_PREFIX)).then(pl.lit("scope"))
        .when(span & (cat == "python_function")).then(pl.lit("frame"))
        .when(is_memory).then(pl.lit("memory"))
        .when(ph == "s").then(pl.lit("flow_start"))
        .when((ph == "f") | (ph == "t")).then(pl.lit("flow_end"))
        .otherwise(pl.lit("other"))
    )
    own = pl.when(name.str.starts_with(MODULE_PREFIX)).then(name.str.strip_prefix(MODULE_PREFIX)).otherwise(name)
    frame = (cat == "python_function") & ~name.str.starts_with(MODULE_PREFIX)
    found = keys.select(
        pl.when(span).then(pl.lit("X")).otherwise(pl.lit("i")).cast(pl.Categorical).alias("phase"),
        role.cast(pl.Categorical).alias("role"),
        pl.when(frame).then(own).otherwise(own.str.replace_all("/", NAME_SLASH, literal=True)).cast(pl.Categorical)
        .alias("label"),
        accelerator.alias("accelerator"),
        (accelerator | (span & cat.str.contains(LAUNCH_CATEGORY))).alias("_launched"),
        is_memory.alias("_memory"),
        (accelerator & (name == DMA_COPY)).alias("_dma"),
        (name.str.starts_with(paths.BACKWARD_PREFIX) | name.str.contains(paths.BACKWARD_NAME)).alias("backward"),
        step_num.alias("step_num"),
        (marker & step_num.is_null()).alias("_bad_step"),
    )
    at = pl.Series(inverse)
    return [found[c].gather(at) for c in found.columns]


def _counters(path: Path, counters: pl.DataFrame, args: pa.Array, ev: pl.DataFrame, base: int) -> pl.DataFrame:
    """``C`` events (``counters``: their ``event_id``, ``pid``, ``name`` and ``ts``; ``args``: every
    event's, by event id) as one series per arg, and the allocator totals of ``[memory]`` events."""
    parts = []
    named = (pl.col("process").cast(pl.String), pl.col("name").cast(pl.String))
    for series in _TOTALS:
        parts.append(ev.lazy().filter(pl.col("role") == "memory").select(
            *named, pl.lit(series).alias("series"), pl.col("start_ns").alias("time_ns"),
            pl.col(f"_{series}").alias("value")).collect())
    if counters.height:
        counters = counters.with_columns(pl.Series("args", args.take(pa.array(counters["event_id"].to_numpy()))),
                                         pl.col("pid").cast(pl.String))
        try:  # every key of every counter (the Series method reads them all; the expression does not)
            values = counters.select(_quoted_specials(pl.col("args")))["args"].str.json_decode(infer_schema_length=None)
        except pl.exceptions.PolarsError as exc:
            raise ProfileFormatError(f"`{path}`: the args of its counter (`C`) events are not one JSON object of "
                                     f"numbers each ({one_line(str(exc))})") from None
        decoded = counters.select(
            pl.col("pid").fill_null("").alias("process"), named[1],
            (pl.lit(base, pl.Int64) + exact_ns(pl.col("ts"))).alias("time_ns"),
        ).with_columns(values.alias("_a"))
        if isinstance(decoded.schema["_a"], pl.Struct):
            # a series is a number (a quoted NaN or Infinity makes its field one of strings)
            fields = [f.name for f in decoded.schema["_a"].fields if f.dtype.is_numeric() or (
                f.dtype == pl.String and _numbers(decoded["_a"].struct.field(f.name)))]
            if fields:
                long = decoded.select("process", "name", "time_ns", *(
                    pl.col("_a").struct.field(f).cast(pl.Float64, strict=False).alias(f) for f in fields)).unpivot(
                    index=["process", "name", "time_ns"], variable_name="series")
                parts.append(long.select("process", "name", "series", "time_ns", "value"))
    return pl.concat(parts).filter(pl.col("value").is_not_null())


def _numbers(values: pl.Series) -> bool:
    """Whether every value of the string series ``values`` that is there reads as a number."""
    return bool((values.cast(pl.Float64, strict=False).is_null() == values.is_null()).all())
