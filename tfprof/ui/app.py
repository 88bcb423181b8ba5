"""The web UI's ASGI app: the page, its static files, and JSON endpoints over ``tfprof.api``.

Every endpoint answers from the profiles the server was given (``Profiles``) through the same
functions the CLI calls: ``run_view`` (via ``tfprof.api.browse``), ``advise``, ``Profile.sql``
(the sandbox) and the graph view's timeline. Errors a request can cause answer 4xx with
``{"error": "<one line>"}``; anything else answers 500 with one line too, never a traceback.
Static files are served from a fixed list, not from a path taken from the request.

Every request must name this server in its ``Host`` header, and every ``/api/`` call must carry
the token written into the page (``tfprof.ui.guard``). Work that a request chooses beyond
reading the profiles (SQL, and comparing two profiles) is POST only, its parameters in a form
body; a query is stopped when its client goes away or it passes the time limit
(``tfprof.ui.jobs``).

=====================================  =========================================================
``GET /api/profiles``                  the profiles: id, label, path, source, nodes, steps; the views; the
                                       option panel's select fields, order_by values and thresholds
``GET /api/view/{id}/{cmd}``           a view (CLI options as parameters): columns, command line,
                                       notes, the top-level rows and ``open`` levels below them
``GET /api/children/{id}/{cmd}``       ``node``'s children, ``offset``/``limit`` (same options)
``GET /api/search/{id}/{cmd}``         rows whose name contains ``q``, with their ancestors
``GET /api/flame/{id}/{cmd}``          ``metric`` boxes of ``node``'s subtree (-1: all)
``GET /api/advice/{id}``               each checker's reports and evidence, the nodes they name
``GET /api/overview/{id}``             the landing page: facts, the op types by time, each step
``POST /api/sql/{id}``                 ``q`` through the SQL sandbox, at most ``limit`` rows
``POST /api/sql/{id}/csv``             the same result as a CSV download
``GET /api/timeline/{id}``             ``step``'s op bars and memory counters as columns
``GET /api/trace/{id}``                ``step``'s Chrome trace JSON as a download
``POST /api/diff/{a}/{b}/{cmd}``       ``tfprof diff``'s rows of b against a (same options), the
                                       ``limit`` largest changes first, with the noise band
                                       where both have several steps
=====================================  =========================================================
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tfprof.api.browse import FLAME_METRICS, ORDER_OF_COLUMN, command_line
from tfprof.api.options import VIEWS, view_help
from tfprof.errors import TfprofError
from tfprof.schema.metrics import kind_of
from tfprof.ui import guard, jobs
from tfprof.ui import params as P
from tfprof.ui.profiles import Profiles, check_view

# The page's files: request name -> (package file, media type).
STATIC = {
    "app.css": "text/css",
    "app.js": "text/javascript",
    "tree.js": "text/javascript",
    "charts.js": "text/javascript",
    "timeline.js": "text/javascript",
}
ROW_LIMIT = 2_000
EXPAND_LIMIT = 20_000  # the rows one Expand all brings (a view's first levels beyond it open on demand)
SQL_LIMIT = 10_000
SQL_CSV_LIMIT = 1_000_000
MAX_SQL = 20_000
MAX_BODY = 256 * 1024  # a form body: MAX_SQL characters, each up to 4 bytes of UTF-8 percent-encoded
DIFF_LIMIT = 2_000


def _json(data: Any, status: int = 200) -> Response:
    body = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
    return Response(body, status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message.splitlines()[0] if message else "error"}, status)


@dataclass
class Call:
    """One API request as an endpoint sees it: its path parameters, its parameters (a GET's query
    string, a POST's form body), the server's profiles, and the job its queries run in."""

    path: Mapping[str, str]
    params: Mapping[str, str]
    profiles: Profiles
    job: jobs.Job


def endpoint(fn: Callable[[Call], Response]):
    """An API endpoint: the token checked, then ``fn(call)`` run in a worker thread with the
    profiles' lock (``jobs.run``); what it raises is mapped to a one-line answer."""

    async def handler(request: Request) -> Response:
        state = request.app.state
        if not guard.token_ok(request, state.token):
            return _error(403, f"the API answers only the page this server serves (its {guard.TOKEN_HEADER} header)")
        params: Mapping[str, str] = request.query_params
        if request.method == "POST":
            if request.query_params:
                return _error(400, "a POST takes its parameters in its body (a form), not in the URL")
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY:
                    return _error(413, f"the request's body is larger than {MAX_BODY} bytes")
            params = QueryParams(body.decode("utf-8", "replace"))

        def work(job: jobs.Job) -> Response:
            try:
                with state.profiles.lock:
                    job.check()  # the client left while the request waited for the lock
                    return fn(Call(request.path_params, params, state.profiles, job))
            except LookupError as exc:
                return _error(404, str(exc.args[0]) if exc.args else "not found")
            except TfprofError as exc:  # BadRequest, a bad option, a refused or stopped query
                return _error(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - a bug: said in one line, never a traceback
                return _error(500, f"internal error: {type(exc).__name__}: {exc}")

        return await jobs.run(request.receive, work, state.query_timeout)

    return handler


def _tree(call: Call):
    pid, cmd = call.path["pid"], call.path["cmd"]
    call.profiles.get(pid)
    check_view(cmd)
    options = P.view_options(call.params)
    return call.profiles.get(pid), call.profiles.tree(pid, cmd, options)


def _row_label(spec) -> str:
    """What a view's rows are, for the name column's header."""
    if spec.layout == "groups":
        return "op type" if spec.group_key == "op" else spec.group_key.replace("_", " ")
    return "code path" if spec.layout == "code" else "node name"


def _node(call: Call, tree) -> int:
    return P.integer(call.params, "node", -1, -1, max(tree.table.height - 1, -1))


@endpoint
def api_profiles(call: Call) -> Response:
    views = [{"name": name, "layout": spec.layout, "help": view_help(spec)} for name, spec in VIEWS.items()]
    return _json({"profiles": call.profiles.listing(), "views": views, "options": P.panel_options()})


@endpoint
def api_view(call: Call) -> Response:
    entry, tree = _tree(call)
    levels = P.integer(call.params, "open", 1, 0, 3)
    limit = P.integer(call.params, "limit", 200, 1, ROW_LIMIT)
    rows = tree.rows_of(-1, 0, limit)
    frontier = [r for r in rows if r["children"]]
    for _ in range(levels):  # the first levels come open, so the page paints in one round trip
        below = []
        for r in frontier:
            kids = tree.rows_of(r["i"], 0, limit)
            rows += kids
            below += [k for k in kids if k["children"]]
        frontier = below
    columns = [{"name": c, "kind": kind_of(c), "order_by": ORDER_OF_COLUMN.get(c.removeprefix("total_"))}
               for c in tree.metrics]
    return _json({
        "profile": entry.id, "cmd": tree.cmd, "layout": tree.layout, "label": _row_label(VIEWS[tree.cmd]),
        "options": P.option_values(tree.options),
        "command": command_line(tree.cmd, entry.path, tree.options), "notes": tree.notes,
        "columns": columns, "total_rows": tree.table.height, "top": int(tree.first[1] - tree.first[0]),
        "rows": rows, "open": levels,
    })


@endpoint
def api_children(call: Call) -> Response:
    _, tree = _tree(call)
    node = _node(call, tree)
    offset = P.integer(call.params, "offset", 0, 0, 2**31)
    limit = P.integer(call.params, "limit", 200, 1, ROW_LIMIT)
    total = len(tree.children(node))
    return _json({"node": node, "offset": offset, "total": total, "rows": tree.rows_of(node, offset, limit)})


@endpoint
def api_subtree(call: Call) -> Response:
    _, tree = _tree(call)
    node = _node(call, tree)
    limit = P.integer(call.params, "limit", 5000, 1, EXPAND_LIMIT)
    below = (len(tree.level) if node < 0 else int(tree.end[node]) - node - 1)
    return _json({"node": node, "total": below, "rows": tree.subtree(node, limit)})


@endpoint
def api_steps(call: Call) -> Response:
    """Each step's time per GPU in parts (``tfprof steps``): the rows in ns, and the report's text."""
    from tfprof.api.breakdown import steps, steps_report

    rows = steps(call.profiles.get(call.path["pid"]).profile)
    return _json({"rows": json.loads(_export(rows, "json")), "text": steps_report(rows)})


@endpoint
def api_overview(call: Call) -> Response:  # the landing page: facts, op types by time, steps
    from tfprof.api.overview import overview
    return _json(overview(call.profiles.get(call.path["pid"]).profile))


@endpoint
def api_search(call: Call) -> Response:
    _, tree = _tree(call)
    q = P.text(call.params, "q")
    if not q:
        raise P.BadRequest("`q` is empty: give part of a name")
    limit = P.integer(call.params, "limit", 50, 1, 500)
    hits, total = tree.search(q, limit)
    return _json({"q": q, "total": total, "hits": [{"i": i, "path": tree.ancestors(i)} for i in hits],
                  "rows": tree.rows(hits)})


@endpoint
def api_flame(call: Call) -> Response:
    _, tree = _tree(call)
    metric = P.choice(call.params, "metric", tuple(FLAME_METRICS), "micros")
    node = _node(call, tree)
    path = tree.ancestors(node) if node >= 0 else []
    return _json({**tree.flame(metric, node), "path": path, "path_names": [tree.table["name"][i] for i in path]})


@endpoint
def api_advice(call: Call) -> Response:
    from tfprof.api.advice import advise, evidence_table

    entry = call.profiles.get(call.path["pid"])
    result = advise(entry.profile)
    checkers = []
    for name, rows in result.evidence.items():
        evidence = json.loads(_export(rows, "json"))
        columns, cells = evidence_table(rows)  # as the reports write them; the raw rows are in `tfprof advise --format json`
        labels = [c.removesuffix("_ns").removesuffix("_micros").replace("_", " ") for c in columns]
        lines = [line for report in result.reports.get(name, ()) for line in report.split("\n") if line]
        checkers.append({"name": name, "reports": lines, "columns": columns,
                         "labels": labels, "rows": cells, "links": [_link(r) for r in evidence]})
    return _json({"text": result.text, "notes": result.notes, "checkers": checkers})


def _link(row: dict) -> dict | None:
    """The node an evidence row is about, and the view that shows it (the row's ``section``
    where it names one: op types in the op view, code paths in the code view)."""
    name = row.get("name") or row.get("example") or row.get("node")
    if not isinstance(name, str) or not name:
        return None
    view = row.get("section") if row.get("section") in VIEWS else "scope"
    return {"name": name, "view": "scope" if VIEWS[view].layout == "graph" else view}


def _export(frame, fmt: str) -> bytes:
    from tfprof.api.shell import export

    return export(frame, fmt)


def _sql(call: Call):
    entry = call.profiles.get(call.path["pid"])
    q = call.params.get("q", "")
    if not q.strip():
        raise P.BadRequest("`q` is empty: give one SQL query")
    if len(q) > MAX_SQL:
        raise P.BadRequest(f"`q` is longer than {MAX_SQL} characters")
    return call.job.query(entry.profile.connection(), lambda: entry.profile.sql(q))


@endpoint
def api_sql(call: Call) -> Response:
    limit = P.integer(call.params, "limit", 1000, 1, SQL_LIMIT)
    frame = _sql(call)
    shown = frame.head(limit)
    return _json({"columns": shown.columns, "rows": json.loads(_export(shown, "json")) if shown.width else [],
                  "total": frame.height, "truncated": frame.height > limit})


@endpoint
def api_sql_csv(call: Call) -> Response:
    frame = _sql(call)
    body = _export(frame.head(SQL_CSV_LIMIT), "csv") if frame.width else b""
    return Response(body, media_type="text/csv",
                    headers={"Content-Disposition": 'attachment; filename="tfprof-query.csv"'})


def _step(call: Call, entry) -> int:
    from tfprof.api.steps import default_step

    raw = call.params.get("step")
    return default_step(entry.profile) if raw in (None, "") else P.integer(call.params, "step", 0, 0, 2**62)


@endpoint
def api_timeline(call: Call) -> Response:
    from tfprof.api.steps import step_timeline

    entry = call.profiles.get(call.path["pid"])
    return _json(step_timeline(entry.profile, _step(call, entry)))


@endpoint
def api_trace(call: Call) -> Response:
    from tfprof.api.steps import chrome_trace

    entry = call.profiles.get(call.path["pid"])
    step = _step(call, entry)
    name = f"tfprof-{entry.id}-step{step}.trace.json"
    return Response(chrome_trace(entry.profile, step), media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@endpoint
def api_diff(call: Call) -> Response:
    import dataclasses

    from tfprof.api.diff import run_diff

    a, b = call.profiles.get(call.path["a"]), call.profiles.get(call.path["b"])
    cmd = call.path["cmd"]
    check_view(cmd)
    options = P.view_options(call.params)
    limit = P.integer(call.params, "limit", 50, 1, DIFF_LIMIT)
    result = run_diff(a.profile, b.profile, cmd, options, labels=(a.label, b.label))
    doc = dataclasses.replace(result, frame=result.frame.head(limit)).document()
    flags = command_line(cmd, "-", options)[len(f"tfprof {cmd} -"):]
    return _json({**doc, "total_rows": result.frame.height,
                  "command": f"tfprof diff {shlex.quote(a.path)} {shlex.quote(b.path)} {cmd}{flags}"})


def page(request: Request) -> Response:
    body = _read("index.html").replace(b"{{token}}", request.app.state.token.encode())
    return Response(body, media_type="text/html",
                    headers={"Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
                             "Cache-Control": "no-store"})  # the token is this server's only


def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return _error(404, f"no static file `{name[:40]}`")
    return Response(_read(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


def not_found(request: Request, exc: Exception) -> Response:
    return _error(getattr(exc, "status_code", 404), "no such page: the UI's pages are / and /api/...")


def wrong_method(request: Request, exc: Exception) -> Response:
    allow = (getattr(exc, "headers", None) or {}).get("Allow", "GET")
    answer = _error(405, f"`{request.method[:10]}` is not allowed here; this endpoint takes {allow}"
                    + (" with the page's token" if "POST" in allow else ""))
    answer.headers["Allow"] = allow
    return answer


def _read(name: str) -> bytes:
    return files("tfprof.ui").joinpath("static", name).read_bytes()


def make_app(profiles: Profiles, *, token: str | None = None, hosts: frozenset[str] = frozenset({"localhost"}),
             query_timeout: float | None = 30.0) -> Starlette:
    """The UI's ASGI app over ``profiles``: its page carries ``token`` (a new random one by
    default), it answers requests naming ``hosts`` or the address they came to
    (``guard.HostGuard``), and stops a query after ``query_timeout`` seconds (None: never)."""
    post = ["POST"]
    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/profiles", api_profiles),
        Route("/api/view/{pid}/{cmd}", api_view),
        Route("/api/children/{pid}/{cmd}", api_children),
        Route("/api/subtree/{pid}/{cmd}", api_subtree),
        Route("/api/steps/{pid}", api_steps),
        Route("/api/overview/{pid}", api_overview),
        Route("/api/search/{pid}/{cmd}", api_search),
        Route("/api/flame/{pid}/{cmd}", api_flame),
        Route("/api/advice/{pid}", api_advice),
        Route("/api/sql/{pid}", api_sql, methods=post),
        Route("/api/sql/{pid}/csv", api_sql_csv, methods=post),
        Route("/api/timeline/{pid}", api_timeline),
        Route("/api/trace/{pid}", api_trace),
        Route("/api/diff/{a}/{b}/{cmd}", api_diff, methods=post),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: wrong_method},
                    middleware=[Middleware(guard.HostGuard, names=hosts)])
    app.state.profiles = profiles
    app.state.token = token or guard.new_token()
    app.state.query_timeout = query_timeout or None
    return app
