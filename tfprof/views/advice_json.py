"""The advice as one JSON document (``tfprof advise --format json``; docs/schemas/advise.schema.json).

Stable shape: ``{"schema": "tfprof-advice/1", "checkers": [{"name", "reports", "evidence"}],
"notes"}``. ``checkers`` are in the order they ran (tfprof's for the built-in ones, then SQL
checkers); ``reports`` are the lines the text prints for the checker; ``evidence`` the rows
the checker's query returned, one object per row (columns as the check names them;
docs/ADVISOR.md); ``notes`` tfprof's stderr lines (missing inputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

SCHEMA = "tfprof-advice/1"


def document(reports: Mapping[str, Sequence[str]], evidence: Mapping[str, pl.DataFrame],
             notes: Sequence[str]) -> dict[str, Any]:
    """The document of an advice (``AdviceResult``'s parts; module docstring)."""
    checkers = [
        {"name": name, "reports": list(lines),
         "evidence": evidence[name].to_dicts() if name in evidence else []}
        for name, lines in reports.items()
    ]
    return {"schema": SCHEMA, "checkers": checkers, "notes": list(notes)}


def render_json(reports: Mapping[str, Sequence[str]], evidence: Mapping[str, pl.DataFrame],
                notes: Sequence[str]) -> str:
    """``document`` as text; values JSON lacks (dates, decimals) become their strings."""
    return json.dumps(document(reports, evidence, notes), indent=1, default=str) + "\n"
