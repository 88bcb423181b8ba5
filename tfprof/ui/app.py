"""The web UI's ASGI app: the page, its static files, and JSON endpoints over ``tfprof.api``.

Every endpoint answers from the profiles the server was given (``Profiles``) through the same
functions the CLI calls: ``run_view`` (via ``tfprof.api.browse``), ``advise``, ``Profile.sql``
(the sandbox) and the graph view's timeline. Errors a request can cause answer 4xx with
``{"error": "<one line>"}``; anything else answers 500 with one line too, never a traceback.
Static files are served from a fixed list, not from a path taken from the request.

=====================================  =========================================================
``GET /api/profiles``                  the profiles: id, label, path, source, nodes, steps
``GET /api/view/{id}/{cmd}``           a view (CLI options as parameters): columns, command line,
                                       notes, the top-level rows and ``open`` levels below them
``GET /api/children/{id}/{cmd}``       ``node``'s children, ``offset``/``limit`` (same options)
``GET /api/search/{id}/{cmd}``         rows whose name contains ``q``, with their ancestors
``GET /api/flame/{id}/{cmd}``          ``metric`` boxes of ``node``'s subtree (-1: all)
``GET /api/advice/{id}``               each checker's reports and evidence, the nodes they name
``GET /api/sql/{id}``                  ``q`` through the SQL sandbox, at most ``limit`` rows
``GET /api/sql/{id}/csv``              the same result as a CSV download
``GET /api/timeline/{id}``             ``step``'s op bars and memory counters as columns
``GET /api/trace/{id}``                ``step``'s Chrome trace JSON as a download
``GET /api/diff/{a}/{b}/{cmd}``        ``tfprof diff``'s rows of b against a (same options), the
                                       ``limit`` largest changes first, with the noise band
                                       where both have several steps
=====================================  =========================================================
"""

from __future__ import annotations

import json
import shlex
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tfprof.api.browse import FLAME_METRICS, ORDER_OF_COLUMN, column_kind, command_line
from tfprof.errors import TfprofError
from tfprof.ui import params as P
from tfprof.ui.profiles import Profiles

# The page's files: request name -> (package file, media type).
STATIC = {
    "app.css": "text/css",
    "app.js": "text/javascript",
    "tree.js": "text/javascript",
    "charts.js": "text/javascript",
    "timeline.js": "text/javascript",
}
ROW_LIMIT = 2_000
SQL_LIMIT = 10_000
SQL_CSV_LIMIT = 1_000_000
MAX_SQL = 20_000
DIFF_LIMIT = 2_000


def _json(data: Any, status: int = 200) -> Response:
    body = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
    return Response(body, status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message.splitlines()[0] if message else "error"}, status)


def endpoint(fn):
    """Run ``fn(request)`` with the profiles' lock; map what it raises to a one-line answer."""

    def handler(request: Request) -> Response:
        profiles: Profiles = request.app.state.profiles
        try:
            with profiles.lock:
                return fn(request, profiles)
        except LookupError as exc:
            return _error(404, str(exc.args[0]) if exc.args else "not found")
        except TfprofError as exc:  # BadRequest, a bad option, a refused query
            return _error(400, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug: said in one line, never a traceback
            return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    return handler


def _tree(request: Request, profiles: Profiles):
    pid, cmd = request.path_params["pid"], request.path_params["cmd"]
    profiles.get(pid)
    if cmd not in ("scope", "graph", "op", "code"):
        raise LookupError(f"unknown view `{cmd[:40]}`; valid: scope, graph, op, code")
    options = P.view_options(request.query_params)
    return profiles.get(pid), profiles.tree(pid, cmd, options)


def _node(request: Request, tree) -> int:
    return P.integer(request.query_params, "node", -1, -1, max(tree.table.height - 1, -1))


@endpoint
def api_profiles(request: Request, profiles: Profiles) -> Response:
    return _json({"profiles": profiles.listing()})


@endpoint
def api_view(request: Request, profiles: Profiles) -> Response:
    entry, tree = _tree(request, profiles)
    levels = P.integer(request.query_params, "open", 1, 0, 3)
    limit = P.integer(request.query_params, "limit", 200, 1, ROW_LIMIT)
    rows = tree.rows_of(-1, 0, limit)
    frontier = [r for r in rows if r["children"]]
    for _ in range(levels):  # the first levels come open, so the page paints in one round trip
        below = []
        for r in frontier:
            kids = tree.rows_of(r["i"], 0, limit)
            rows += kids
            below += [k for k in kids if k["children"]]
        frontier = below
    columns = [{"name": c, "kind": column_kind(c), "order_by": ORDER_OF_COLUMN.get(c.removeprefix("total_"))}
               for c in tree.metrics]
    return _json({
        "profile": entry.id, "cmd": tree.cmd, "options": P.option_values(tree.options),
        "command": command_line(tree.cmd, entry.path, tree.options), "notes": tree.notes,
        "columns": columns, "total_rows": tree.table.height, "top": int(tree.first[1] - tree.first[0]),
        "rows": rows, "open": levels,
    })


@endpoint
def api_children(request: Request, profiles: Profiles) -> Response:
    _, tree = _tree(request, profiles)
    node = _node(request, tree)
    offset = P.integer(request.query_params, "offset", 0, 0, 2**31)
    limit = P.integer(request.query_params, "limit", 200, 1, ROW_LIMIT)
    total = len(tree.children(node))
    return _json({"node": node, "offset": offset, "total": total, "rows": tree.rows_of(node, offset, limit)})


@endpoint
def api_search(request: Request, profiles: Profiles) -> Response:
    _, tree = _tree(request, profiles)
    q = P.text(request.query_params, "q")
    if not q:
        raise P.BadRequest("`q` is empty: give part of a name")
    limit = P.integer(request.query_params, "limit", 50, 1, 500)
    hits, total = tree.search(q, limit)
    return _json({"q": q, "total": total, "hits": [{"i": i, "path": tree.ancestors(i)} for i in hits],
                  "rows": tree.rows(hits)})


@endpoint
def api_flame(request: Request, profiles: Profiles) -> Response:
    _, tree = _tree(request, profiles)
    metric = P.choice(request.query_params, "metric", tuple(FLAME_METRICS), "micros")
    node = _node(request, tree)
    path = tree.ancestors(node) if node >= 0 else []
    return _json({**tree.flame(metric, node), "path": path, "path_names": [tree.table["name"][i] for i in path]})


@endpoint
def api_advice(request: Request, profiles: Profiles) -> Response:
    from tfprof.api.advice import advise

    entry = profiles.get(request.path_params["pid"])
    result = advise(entry.profile)
    checkers = []
    for name, rows in result.evidence.items():
        evidence = json.loads(_export(rows, "json"))
        checkers.append({"name": name, "reports": _reports(result.text, name), "columns": rows.columns,
                         "rows": evidence, "links": [_link(r) for r in evidence]})
    return _json({"text": result.text, "notes": result.notes, "checkers": checkers})


def _reports(text: str, checker: str) -> list[str]:
    """The report lines printed under ``checker:`` in the advisor's text."""
    lines = text.split("\n")
    try:
        start = lines.index(f"{checker}:") + 1
    except ValueError:
        return []
    out = []
    for line in lines[start:]:
        if line == "" or (line.endswith(":") and " " not in line):
            break
        out.append(line)
    return out


def _link(row: dict) -> dict | None:
    """The node an evidence row is about, and the view that shows it (the row's ``section``
    where it names one: op types in the op view, code paths in the code view)."""
    name = row.get("name") or row.get("example") or row.get("node")
    if not isinstance(name, str) or not name:
        return None
    view = row.get("section") if row.get("section") in ("op", "code", "scope", "graph") else "scope"
    return {"name": name, "view": "scope" if view == "graph" else view}


def _export(frame, fmt: str) -> bytes:
    from tfprof.api.shell import export

    return export(frame, fmt)


def _sql(request: Request, profiles: Profiles, limit: int):
    entry = profiles.get(request.path_params["pid"])
    q = request.query_params.get("q", "")
    if not q.strip():
        raise P.BadRequest("`q` is empty: give one SQL query")
    if len(q) > MAX_SQL:
        raise P.BadRequest(f"`q` is longer than {MAX_SQL} characters")
    frame = entry.profile.sql(q)
    return frame, limit


@endpoint
def api_sql(request: Request, profiles: Profiles) -> Response:
    limit = P.integer(request.query_params, "limit", 1000, 1, SQL_LIMIT)
    frame, _ = _sql(request, profiles, limit)
    shown = frame.head(limit)
    return _json({"columns": shown.columns, "rows": json.loads(_export(shown, "json")) if shown.width else [],
                  "total": frame.height, "truncated": frame.height > limit})


@endpoint
def api_sql_csv(request: Request, profiles: Profiles) -> Response:
    frame, _ = _sql(request, profiles, SQL_CSV_LIMIT)
    body = _export(frame.head(SQL_CSV_LIMIT), "csv") if frame.width else b""
    return Response(body, media_type="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="tfprof-query.csv"'})


def _step(request: Request, entry) -> int:
    from tfprof.api.steps import default_step

    raw = request.query_params.get("step")
    return default_step(entry.profile) if raw in (None, "") else P.integer(request.query_params, "step", 0, 0, 2**62)


@endpoint
def api_timeline(request: Request, profiles: Profiles) -> Response:
    from tfprof.api.steps import step_timeline

    entry = profiles.get(request.path_params["pid"])
    return _json(step_timeline(entry.profile, _step(request, entry)))


@endpoint
def api_trace(request: Request, profiles: Profiles) -> Response:
    from tfprof.api.steps import chrome_trace

    entry = profiles.get(request.path_params["pid"])
    step = _step(request, entry)
    name = f"tfprof-{entry.id}-step{step}.trace.json"
    return Response(chrome_trace(entry.profile, step), media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@endpoint
def api_diff(request: Request, profiles: Profiles) -> Response:
    import dataclasses

    from tfprof.api.diff import run_diff

    a, b = profiles.get(request.path_params["a"]), profiles.get(request.path_params["b"])
    cmd = request.path_params["cmd"]
    if cmd not in ("scope", "graph", "op", "code"):
        raise LookupError(f"unknown view `{cmd[:40]}`; valid: scope, graph, op, code")
    options = P.view_options(request.query_params)
    limit = P.integer(request.query_params, "limit", 50, 1, DIFF_LIMIT)
    result = run_diff(a.profile, b.profile, cmd, options, labels=(a.label, b.label))
    doc = dataclasses.replace(result, frame=result.frame.head(limit)).document()
    flags = command_line(cmd, "-", options)[len(f"tfprof {cmd} -"):]
    return _json({**doc, "total_rows": result.frame.height,
                  "command": f"tfprof diff {shlex.quote(a.path)} {shlex.quote(b.path)} {cmd}{flags}"})


def page(request: Request) -> Response:
    return Response(_read("index.html"), media_type="text/html",
                    headers={"Content-Security-Policy": "default-src 'self'; img-src 'self' data:"})


def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return _error(404, f"no static file `{name[:40]}`")
    return Response(_read(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


def not_found(request: Request, exc: Exception) -> Response:
    return _error(getattr(exc, "status_code", 404), "no such page: the UI's pages are / and /api/...")


def _read(name: str) -> bytes:
    return files("tfprof.ui").joinpath("static", name).read_bytes()


def make_app(profiles: Profiles) -> Starlette:
    """The UI's ASGI app over ``profiles``."""
    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/profiles", api_profiles),
        Route("/api/view/{pid}/{cmd}", api_view),
        Route("/api/children/{pid}/{cmd}", api_children),
        Route("/api/search/{pid}/{cmd}", api_search),
        Route("/api/flame/{pid}/{cmd}", api_flame),
        Route("/api/advice/{pid}", api_advice),
        Route("/api/sql/{pid}", api_sql),
        Route("/api/sql/{pid}/csv", api_sql_csv),
        Route("/api/timeline/{pid}", api_timeline),
        Route("/api/trace/{pid}", api_trace),
        Route("/api/diff/{a}/{b}/{cmd}", api_diff),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    app.state.profiles = profiles
    return app
