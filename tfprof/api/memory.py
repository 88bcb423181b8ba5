"""Memory over time (``tfprof memory``, ``tfprof.memory``, the UI's Memory page): per allocator
and step, the level before, at the peak and after, and what the ops had allocated at the peak
(``tfprof.queries.memory_time``)."""

from __future__ import annotations

import polars as pl

from tfprof.errors import OptionError
from tfprof.profile import Profile


def memory(prof: Profile) -> pl.DataFrame:
    """Per allocator and step: ``events``, ``start_micros``/``end_micros`` (the step's first
    and last allocation event), ``start_bytes``, ``peak_bytes`` (first reached ``peak_micros``
    after the start; the start included), ``end_bytes``, ``allocated``, ``freed``, ``exact`` (the
    levels are the allocator's own where the trace records them, else a running sum from the
    capture's first event), ``relative`` (such a sum below 0), ``damage`` (what cannot be
    true: levels below 0 or beyond 1 PiB, whose numbers are null; null where nothing is wrong),
    ``source`` (``recorded``, ``events`` or ``per-node``: an estimate from a tfprof profile's
    node memory records, ``tfprof.schema.memory_levels``) and ``reserved_bytes`` (the most the
    allocator had reserved in the step, where the trace records it; else null).

    >>> import tfprof
    >>> rows = memory(tfprof.load(tfprof.sample_path("torch")))
    >>> rows.select("allocator", "step", "peak_bytes").rows()
    [('cpu', 2, 81272), ('cpu', 3, 81272)]
    """
    from tfprof.queries.memory_time import memory_steps

    return memory_steps(prof)


def pick(rows: pl.DataFrame, step: int | None, allocator: str | None) -> dict:
    """The row of ``memory``'s ``rows`` for ``step`` and ``allocator`` (each None: the highest
    peak among the others); ``OptionError`` naming what does not exist."""
    chosen = rows
    if allocator is not None:
        chosen = chosen.filter(pl.col("allocator") == allocator)
        if chosen.height == 0:
            raise OptionError(f"no allocation events on allocator `{allocator}`; allocators: "
                              f"{', '.join(rows['allocator'].unique(maintain_order=True)) or 'none'}")
    if step is not None:
        chosen = chosen.filter(pl.col("step") == step)
        if chosen.height == 0:
            raise OptionError(f"no allocation events in step {step}"
                              + (f" on `{allocator}`" if allocator else "")
                              + f"; steps: {', '.join(map(str, rows['step'].unique().sort()))}")
    if chosen.height == 0:
        raise OptionError("this profile records no allocation events: there is no memory over time to show")
    # (a damaged row is shown when asked for, never chosen as the highest peak while a sound one is there)
    return chosen.sort(pl.col("damage").is_not_null(), "peak_bytes", "step", descending=[False, True, False],
                       nulls_last=True).row(0, named=True)


def peak_ops(prof: Profile, step: int, allocator: str, top: int = 10) -> pl.DataFrame:
    """The ops that had allocated the most on ``allocator`` in ``step`` when its peak came
    (net of what they freed): ``node_id``, ``name``, ``bytes``, ``events``."""
    from tfprof.queries.memory_time import at_peak

    return at_peak(prof, step, allocator, top)


def curve(prof: Profile, step: int, allocator: str) -> pl.DataFrame:
    """The level of ``allocator`` in ``step`` after each µs that had events: ``time_micros``
    (since the step's first event), ``bytes`` (the events' sum), ``in_use``, ``reserved`` (null
    where the trace records none)."""
    from tfprof.queries.memory_time import memory_curve

    return memory_curve(prof, step, allocator)


def memory_report(prof: Profile, step: int | None = None, allocator: str | None = None, top: int = 10) -> str:
    """``tfprof memory``'s text: every allocator's steps, then the ops at the peak of ``step``
    on ``allocator`` (by default the highest peak)."""
    from tfprof.views.memory_text import render_memory

    rows = memory(prof)
    if rows.height == 0:
        return ("no memory data in this profile: no allocation events and no node memory records "
                "(it was captured without memory)\n")
    row = pick(rows, step, allocator)
    return render_memory(rows, row, peak_ops(prof, row["step"], row["allocator"], top))


def memory_page(prof: Profile, step: int | None, allocator: str | None, top: int = 10,
                points: int = 4000) -> dict:
    """What the UI's Memory page draws: every allocator's steps (``rows``), the one shown
    (``shown``: ``step`` and ``allocator``, by default the highest peak), its curve (at most
    ``points`` points: beyond that each of ``points // 2`` equal slices of time keeps its lowest
    and highest level, so the peak is always drawn; null where the level is beyond 1 PiB), the
    ops at its peak, ``damage``: a sentence when the shown row's levels cannot be true
    (``memory``'s ``damage``), else None, and ``reserved_curve``: the allocator's reserved bytes
    where the trace records them (Kineto's ``Total Reserved``), a point where they change (else
    empty)."""
    rows = memory(prof)
    if rows.height == 0:
        return {"rows": [], "shown": None, "curve": [], "ops": [], "damage": None, "reserved_curve": []}
    row = pick(rows, step, allocator)
    line = curve(prof, row["step"], row["allocator"])
    reserved = line.filter(pl.col("reserved").is_not_null()).filter(
        pl.col("reserved").ne_missing(pl.col("reserved").shift(1))).select("time_micros", "reserved").rows()
    if line.height > points:
        end = max(int(line["time_micros"].max()), 1)
        line = (line.with_columns((pl.col("time_micros") * (points // 2) // (end + 1)).alias("_slice"))
                .group_by("_slice").agg(pl.col("time_micros").first(), pl.col("in_use").min().alias("low"),
                                         pl.col("in_use").max().alias("high"))
                .sort("_slice").select("time_micros", pl.concat_list("low", "high").alias("in_use"))
                .explode("in_use"))
    return {"rows": rows.to_dicts(), "shown": row,
            "curve": line.select("time_micros", "in_use").rows(),
            "ops": peak_ops(prof, row["step"], row["allocator"], top).to_dicts(),
            "damage": damage_note(row), "reserved_curve": reserved}


def damage_note(row: dict) -> str | None:
    """What the page says over a damaged row of ``memory`` (None for a sound one)."""
    if not row.get("damage"):
        return None
    return (f"damaged: the trace's levels of {row['allocator']} in step {row['step']} cannot be true "
            f"({row['damage']}); the numbers here are not memory in use (null beyond 1 PiB); see `tfprof check`")
