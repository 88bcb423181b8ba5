"""The shape every advisor check shares: ``Check`` (name + query) and ``Evidence`` (its rows)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tfprof.profile import Profile

# A checker's options: tfprof's AdvisorOptionsProto.CheckerOption.options (string -> string).
CheckOptions = Mapping[str, Any]


@dataclass(frozen=True)
class Evidence:
    """What a check found: structured ``rows`` (one per finding, in report order) and the
    inputs it needed but the profile lacks (``missing``: ``run_meta``, ``code_traces``).
    ``status`` says in one word why a check found nothing to look at (``no_trace``: not a
    foreign trace; ``no_gpu_events``: a trace without device events; ``store_predates_kernels``:
    a store written before the ``kernels`` table); the view prints it as one line."""

    rows: pl.DataFrame
    missing: tuple[str, ...] = ()
    status: str | None = None


@dataclass(frozen=True)
class Check:
    """One advisor checker: ``run(profile, options)`` returns its evidence, or None when the
    checker produces no entry in the advice at all."""

    name: str
    run: Callable[[Profile, CheckOptions], Evidence | None] = field(repr=False)
    doc: str = ""
    source: str | None = None  # the SQL file of a user checker
    # The frameworks whose profiles the check is about (``framework.framework``); None: all.
    # On another framework's profile the advisor skips it and says so in one line.
    frameworks: tuple[str, ...] | None = None
