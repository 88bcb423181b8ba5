"""One step of a foreign profile (Kineto, XSpace) as a Chrome trace of its own events: every
event the trace recorded in the step's time (CPU ops nested per thread, runtime calls, GPU
kernels, copies and memsets per stream, the step marker, allocation instants), its flows (launch
to kernel, forward to backward) and its counters, each event's args as recorded. Perfetto and
chrome://tracing open it; tfprof's own profiles keep tfprof's graph timeline.

The step's time runs from the first start to the last end of what it owns: its ops
(``trace_events.step``), the GPU work they launched (``kernels.step``) and its step marker;
every event that overlaps it is written (one starting where it ends belongs to the next). The JSON is made column-wise (polars writes each event's fields; the args
text is spliced in as recorded), not event by event.
"""

from __future__ import annotations

import polars as pl

from tfprof.errors import OptionError
from tfprof.profile import Profile
from tfprof.queries.advisor.trace import STEP_PREFIX


def has_events(prof: Profile) -> bool:
    """Whether ``prof`` holds a trace's own events (a Kineto or XSpace profile)."""
    return prof.row_counts().get("trace_events", 0) > 0


def step_window(prof: Profile, step: int) -> tuple[int, int]:
    """The step's time (ns since epoch): from the first start to the last end of its ops, their
    GPU work and its step marker (``ProfilerStep#N``); ``OptionError`` for a step that owns no
    event."""
    marker = (pl.col("name").cast(pl.String) == f"{STEP_PREFIX}{step}") & (pl.col("phase").cast(pl.String) == "X")
    spans = pl.concat([
        prof.lazy("trace_events").filter((pl.col("step") == step) | marker).select("start_ns", "duration_ns"),
        prof.lazy("kernels").filter(pl.col("step") == step).select("start_ns", "duration_ns"),
    ]).select(pl.col("start_ns").min().alias("lo"), (pl.col("start_ns") + pl.col("duration_ns")).max().alias("hi")).collect()
    lo, hi = spans.row(0)
    if lo is None:
        raise OptionError(f"step {step} owns no event of the trace: there is nothing to draw")
    return int(lo), int(hi)


def in_window(lo: int, hi: int) -> pl.Expr:
    """Whether an event overlaps the window ``[lo, hi)`` (ns) or starts where it starts."""
    return (pl.col("start_ns") < hi) & (pl.col("start_ns") + pl.col("duration_ns") >= lo) | (pl.col("start_ns") == lo)


def window_events(prof: Profile, step: int) -> tuple[pl.DataFrame, int, int]:
    """The events of step ``step``'s time (module docstring) sorted by start, with their process
    and thread as text (``""`` where the trace names none), and the window's ends (ns)."""
    lo, hi = step_window(prof, step)
    ev = (prof.lazy("trace_events").filter(in_window(lo, hi)).sort("start_ns", "event_id").collect()
          .with_columns(pl.col("process", "thread").cast(pl.String).fill_null("")))
    return ev, lo, hi


def _us(ns: pl.Expr) -> pl.Expr:
    """ns as the text of Chrome's µs, exact to the ns (``1623142623636325.120``): written from
    the integers, as a double holds an epoch time in µs to a quarter µs only."""
    return pl.concat_str((ns // 1000).cast(pl.String), pl.lit("."), (ns % 1000).cast(pl.String).str.zfill(3))


def raw_trace(prof: Profile, step: int) -> bytes:
    """Step ``step`` of ``prof`` as Chrome trace JSON (module docstring)."""
    ev, lo, hi = window_events(prof, step)
    pid = {p: k + 1 for k, p in enumerate(ev["process"].unique(maintain_order=True))}
    threads = ev.select("process", "thread").unique(maintain_order=True).with_columns(
        pl.col("process").replace_strict(pid).alias("pid"), pl.int_range(1, pl.len() + 1).over("process").alias("tid"))
    ev = ev.join(threads, on=["process", "thread"], how="left", maintain_order="left")
    phase = pl.col("phase").cast(pl.String)
    body = ev.select(pl.concat_str(
        pl.lit('{"ph":'), _json_text(phase), pl.lit(',"name":'), _json_text(pl.col("name")),
        pl.lit(',"cat":'), _json_text(pl.col("category").fill_null("")), pl.lit(',"pid":'), pl.col("pid").cast(pl.String),
        pl.lit(',"tid":'), pl.col("tid").cast(pl.String), pl.lit(',"ts":'), _us(pl.col("start_ns")),
        pl.when(phase == "X").then(pl.concat_str(pl.lit(',"dur":'), _us(pl.col("duration_ns"))))
        .otherwise(pl.lit(',"s":"t"')),  # an instant: the thread's
        pl.when(pl.col("args").is_not_null()).then(pl.concat_str(pl.lit(',"args":'), pl.col("args"))).otherwise(pl.lit("")),
        pl.lit("}")).alias("e"))["e"]
    meta = [
        *threads.select(pl.struct(pl.lit("M").alias("ph"), pl.lit("thread_name").alias("name"), "pid", "tid",
                                  pl.struct(pl.col("thread").alias("name")).alias("args")).struct.json_encode())
        .to_series().to_list(),
        *(pl.DataFrame({"p": list(pid), "id": list(pid.values())})
          .select(pl.struct(pl.lit("M").alias("ph"), pl.lit("process_name").alias("name"), pl.col("id").alias("pid"),
                            pl.lit(0).alias("tid"), pl.struct(pl.col("p").alias("name")).alias("args")).struct.json_encode())
          .to_series().to_list()),
    ]
    parts = [*meta, *body.to_list(), *_flows(prof, ev, lo, hi), *_counters(prof, pid, lo, hi)]
    return ('{"displayTimeUnit":"ns","traceEvents":[\n' + ",\n".join(parts) + "\n]}\n").encode()


def _flows(prof: Profile, ev: pl.DataFrame, lo: int, hi: int) -> list[str]:
    """Each flow that starts in the window as an ``s`` at its start and an ``f`` (bound to the
    enclosing slice) at its end, on the threads of the events it joins."""
    where = ev.select("event_id", "pid", "tid")
    flows = (prof.lazy("flows").filter(pl.col("from_ns").is_between(lo, hi) & pl.col("to_ns").is_not_null()).collect()
             .join(where.rename({"event_id": "from_event", "pid": "fp", "tid": "ft"}), on="from_event", how="inner")
             .join(where.rename({"event_id": "to_event", "pid": "tp", "tid": "tt"}), on="to_event", how="inner")
             .with_row_index("n"))
    if flows.height == 0:
        return []
    cat = pl.col("category").cast(pl.String).fill_null("flow")
    def event(ph: str, pid: str, tid: str, at: str, tail: str) -> pl.Expr:
        return pl.concat_str(pl.lit(f'{{"ph":"{ph}","name":"flow","cat":'), _json_text(cat), pl.lit(',"id":'),
                             pl.col("n").cast(pl.String), pl.lit(',"pid":'), pl.col(pid).cast(pl.String),
                             pl.lit(',"tid":'), pl.col(tid).cast(pl.String), pl.lit(',"ts":'), _us(pl.col(at)), pl.lit(tail))

    start = flows.select(event("s", "fp", "ft", "from_ns", "}")).to_series()
    end = flows.select(event("f", "tp", "tt", "to_ns", ',"bp":"e"}')).to_series()  # bound to the slice it ends in
    return [*start.to_list(), *end.to_list()]


def _counters(prof: Profile, pid: dict[str, int], lo: int, hi: int) -> list[str]:
    """The counter samples in the window as ``C`` events, one per sample: its series the arg's
    key (a value that is not finite is written as null)."""
    c = prof.lazy("counters").filter(pl.col("time_ns").is_between(lo, hi)).collect()
    if c.height == 0:
        return []
    value = pl.col("value")
    event = pl.concat_str(
        pl.lit('{"ph":"C","name":'), _json_text(pl.col("name")), pl.lit(',"pid":'),
        pl.col("process").cast(pl.String).fill_null("").replace_strict(pid, default=0).cast(pl.String),
        pl.lit(',"tid":0,"ts":'), _us(pl.col("time_ns")).cast(pl.String), pl.lit(',"args":{'), _json_text(pl.col("series")),
        pl.lit(":"), pl.when(value.is_finite()).then(value.cast(pl.String)).otherwise(pl.lit("null")), pl.lit("}}"))
    return c.select(event).to_series().to_list()


def _json_text(text: pl.Expr) -> pl.Expr:
    """Each string as a JSON string literal (quoted and escaped by polars' JSON writer)."""
    return pl.struct(text.cast(pl.String).alias("v")).struct.json_encode().str.strip_prefix('{"v":').str.strip_suffix("}")
