"""The advice as one JSON document (``tfprof advise --format json``; docs/schemas/advise.schema.json).

Stable shape: ``{"schema": "tfprof-advice/1", "checkers": [{"name", "reports", "evidence"}],
"notes"}``. ``checkers`` are in the order they ran (tfprof's for the built-in ones, then SQL
checkers); ``reports`` are the lines the text prints for the checker; ``evidence`` the rows
the checker's query returned, one object per row (columns as the check names them;
docs/ADVISOR.md); a GPU check's rows also carry ``display``: their times, shares and sizes
formatted as the text prints them (``1.23ms``, ``23.45%``); ``notes`` tfprof's stderr lines
(missing inputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from tfprof.views.advice_gpu import display

SCHEMA = "tfprof-advice/1"


def document(reports: Mapping[str, Sequence[str]], evidence: Mapping[str, pl.DataFrame],
             notes: Sequence[str]) -> dict[str, Any]:
    """The document of an advice (``AdviceResult``'s parts; module docstring)."""
    checkers = [
        {"name": name, "reports": list(lines), "evidence": _rows(name, evidence[name]) if name in evidence else []}
        for name, lines in reports.items()
    ]
    return {"schema": SCHEMA, "checkers": checkers, "notes": list(notes)}


def _rows(name: str, rows: pl.DataFrame) -> list[dict[str, Any]]:
    """The evidence rows as objects; a GPU check's with their ``display`` strings."""
    shown = display(name, rows)
    if shown is None:
        return rows.to_dicts()
    return [{**row, "display": extra} for row, extra in zip(rows.to_dicts(), shown, strict=True)]


def render_json(reports: Mapping[str, Sequence[str]], evidence: Mapping[str, pl.DataFrame],
                notes: Sequence[str]) -> str:
    """``document`` as text; values JSON lacks (dates, decimals) become their strings."""
    return json.dumps(document(reports, evidence, notes), indent=1, default=str) + "\n"
