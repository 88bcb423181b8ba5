"""The UI's pages beside the views: Overview (the landing page), Steps, Memory, Advisor and Ranks
(the profiles as one distributed job's ranks), each one endpoint over ``tfprof.api``."""

from __future__ import annotations

import json

from starlette.responses import Response

from tfprof.api.options import VIEWS
from tfprof.ui import params as P
from tfprof.ui.endpoints import Call, endpoint, export_rows, json_response


@endpoint
def api_steps(call: Call) -> Response:
    """Each step's time per GPU in parts (``tfprof steps``): the rows in ns, and the report's text;
    ``window`` (next, marker, kernels), ``drop_last_step``, ``total`` and ``unlinked`` (0 or 1) as
    the command's options."""
    from tfprof.api.breakdown import WINDOWS, steps, steps_report

    window = P.choice(call.params, "window", WINDOWS, "next")
    flags = [P.choice(call.params, name, ("0", "1"), "0") == "1" for name in ("drop_last_step", "total", "unlinked")]
    rows = steps(call.profiles.get(call.path["pid"]).profile, window, *flags)
    return json_response({"rows": json.loads(export_rows(rows, "json")), "text": steps_report(rows)})


@endpoint
def api_overview(call: Call) -> Response:
    """The landing page (``tfprof.api.overview``): facts, the op types by time, each step."""
    from tfprof.api.overview import overview

    return json_response(overview(call.profiles.get(call.path["pid"]).profile))


@endpoint
def api_memory(call: Call) -> Response:
    """Memory over time (``tfprof.api.memory.memory_page``): ``step`` and ``allocator`` (default:
    the highest peak), ``limit`` ops at the peak."""
    from tfprof.api.memory import memory_page

    step = P.integer(call.params, "step", -1, -1, 2**62)
    return json_response(memory_page(call.profiles.get(call.path["pid"]).profile, None if step < 0 else step,
                             P.text(call.params, "allocator") or None, P.integer(call.params, "limit", 10, 1, 100)))


@endpoint
def api_advice(call: Call) -> Response:
    from tfprof.api.advice import advise, evidence_table

    entry = call.profiles.get(call.path["pid"])
    result = advise(entry.profile)
    checkers = []
    for name, rows in result.evidence.items():
        evidence = json.loads(export_rows(rows, "json"))
        columns, cells = evidence_table(rows)  # as the reports write them; the raw rows are in `tfprof advise --format json`
        labels = [c.removesuffix("_ns").removesuffix("_micros").replace("_", " ") for c in columns]
        lines = [line for report in result.reports.get(name, ()) for line in report.split("\n") if line]
        checkers.append({"name": name, "reports": lines, "columns": columns,
                         "labels": labels, "rows": cells, "links": [_link(r) for r in evidence]})
    return json_response({"text": result.text, "notes": result.notes, "checkers": checkers})


def _link(row: dict) -> dict | None:
    """The node an evidence row is about, and the view that shows it (the row's ``section``
    where it names one: op types in the op view, code paths in the code view)."""
    name = row.get("name") or row.get("example") or row.get("node")
    if not isinstance(name, str) or not name:
        return None
    view = row.get("section") if row.get("section") in VIEWS else "scope"
    return {"name": name, "view": "scope" if VIEWS[view].layout == "graph" else view}


@endpoint
def api_ranks(call: Call) -> Response:
    """The server's profiles as the ranks of one job (``Profiles.job``): each rank's steps, the
    stragglers, the ops that differ most, the findings."""
    return json_response(call.profiles.job())
