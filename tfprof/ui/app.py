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
``GET /api/profiles``                  the profiles: id, label, path, source, nodes, steps; whether they are
                                       one job's ranks (``Profiles.is_job``: the Ranks page); the views; the
                                       option panel's select fields, order_by values and thresholds
``GET /api/view/{id}/{cmd}``           a view (CLI options as parameters): columns, command line,
                                       notes, the top-level rows and ``open`` levels below them
``GET /api/children/{id}/{cmd}``       ``node``'s children, ``offset``/``limit`` (same options)
``GET /api/search/{id}/{cmd}``         rows whose name, or the name of a kernel their node launched,
                                       contains ``q``, with their ancestors (``tfprof.ui.search``)
``GET /api/flame/{id}/{cmd}``          ``metric`` boxes of ``node``'s subtree (-1: all)
``GET /api/advice/{id}``               each checker's reports and evidence, the nodes they name
``GET /api/overview/{id}``             the landing page: facts, the op types by time, each step
``GET /api/memory/{id}``               memory in use over ``step`` on ``allocator``, the ops at its peak
``GET /api/ranks``                     the profiles as one job's ranks: steps, stragglers, ops, findings
``POST /api/sql/{id}``                 ``q`` through the SQL sandbox, at most ``limit`` rows
``POST /api/sql/{id}/csv``             the same result as a CSV download
``GET /api/timeline/{id}``             ``step``'s bars, flows and counters as binary columns
``GET /api/trace/{id}``                ``step``'s Chrome trace JSON as a download
``POST /api/diff/{a}/{b}/{cmd}``       ``tfprof diff``'s rows of b against a (same options), the
                                       ``limit`` largest changes first, with the noise band
                                       where both have several steps
=====================================  =========================================================
"""

from __future__ import annotations

import json
import shlex
from importlib.resources import files

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tfprof.api.browse import FLAME_METRICS, ORDER_OF_COLUMN, command_line
from tfprof.api.diff import ORDERS
from tfprof.api.options import VIEWS, view_help
from tfprof.schema.metrics import kind_of
from tfprof.ui import guard
from tfprof.ui import params as P
from tfprof.ui.endpoints import Call, columns_response, endpoint, error_response, export_rows, json_response
from tfprof.ui.pages import api_advice, api_memory, api_overview, api_ranks, api_steps
from tfprof.ui.profiles import Profiles, check_view
from tfprof.ui.search import search

# The page's files: request name -> (package file, media type).
STATIC = {
    "app.css": "text/css",
    "app.js": "text/javascript",
    "tree.js": "text/javascript",
    "charts.js": "text/javascript",
    "timeline.js": "text/javascript",
    "ranks.js": "text/javascript",
}
ROW_LIMIT = 2_000
EXPAND_LIMIT = 20_000  # the rows one Expand all brings (a view's first levels beyond it open on demand)
SQL_LIMIT = 10_000
SQL_CSV_LIMIT = 1_000_000
MAX_SQL = 20_000
DIFF_LIMIT = 2_000


def _tree(call: Call):
    pid, cmd = call.path["pid"], call.path["cmd"]
    call.profiles.get(pid)
    check_view(cmd)
    options = P.view_options(call.params)
    tree = call.profiles.tree(pid, cmd, options)
    # ours, the page's two-way sort: siblings in the opposite of the view's order
    reverse = P.choice(call.params, "reverse", ("0", "1"), "0") == "1"
    return call.profiles.get(pid), tree.reversed() if reverse else tree


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
    return json_response({"profiles": call.profiles.listing(), "job": call.profiles.is_job(), "views": views,
                          "options": P.panel_options()})


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
    return json_response({
        "profile": entry.id, "cmd": tree.cmd, "layout": tree.layout, "label": _row_label(VIEWS[tree.cmd]),
        "options": P.option_values(tree.options), "reverse": tree.is_reversed,
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
    return json_response({"node": node, "offset": offset, "total": total, "rows": tree.rows_of(node, offset, limit)})


@endpoint
def api_subtree(call: Call) -> Response:
    _, tree = _tree(call)
    node = _node(call, tree)
    limit = P.integer(call.params, "limit", 5000, 1, EXPAND_LIMIT)
    below = (len(tree.level) if node < 0 else int(tree.end[node]) - node - 1)
    return json_response({"node": node, "total": below, "rows": tree.subtree(node, limit)})


@endpoint
def api_search(call: Call) -> Response:
    entry, tree = _tree(call)
    q = P.text(call.params, "q")
    if not q:
        raise P.BadRequest("`q` is empty: give part of a name")
    limit = P.integer(call.params, "limit", 50, 1, 500)
    return json_response(search(entry.profile, tree, q, limit))  # names, and the kernels their nodes launched


@endpoint
def api_flame(call: Call) -> Response:
    _, tree = _tree(call)
    metric = P.choice(call.params, "metric", tuple(FLAME_METRICS), "micros")
    if P.choice(call.params, "inverted", ("0", "1"), "0") == "1":  # bottom-up: no zoom, no path
        return json_response({**tree.inverted(metric), "path": [], "path_names": []})
    if call.params.get("sandwich"):  # one frame's callers above it, its callees below
        return json_response({**tree.sandwich(metric, P.text(call.params, "sandwich")), "path": [], "path_names": []})
    node = _node(call, tree)
    path = tree.ancestors(node) if node >= 0 else []
    return json_response({**tree.flame(metric, node), "path": path, "path_names": [tree.table["name"][i] for i in path]})


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
    return json_response({"columns": shown.columns, "rows": json.loads(export_rows(shown, "json")) if shown.width else [],
                  "total": frame.height, "truncated": frame.height > limit})


@endpoint
def api_sql_csv(call: Call) -> Response:
    frame = _sql(call)
    body = export_rows(frame.head(SQL_CSV_LIMIT), "csv") if frame.width else b""
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
    return columns_response(step_timeline(entry.profile, _step(call, entry)))


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
    order = P.choice(call.params, "order", ORDERS, "delta")  # tree: the merged tree, in display order
    against = P.integer(call.params, "against", -1, -1, 2**62)  # step vs step: b's step `against`, a's `step`
    if against >= 0:
        result = run_diff(a.profile, b.profile, cmd, options, against=against, order_by=order,
                          labels=(f"{a.label} step {options.step}", f"{b.label} step {against}"))
    else:
        result = run_diff(a.profile, b.profile, cmd, options, order_by=order, labels=(a.label, b.label))
    doc = dataclasses.replace(result, frame=result.frame.head(limit)).document()
    flags = command_line(cmd, "-", options)[len(f"tfprof {cmd} -"):]
    flags += f" --against {against}" if against >= 0 else ""
    flags += f" --order_by {order}" if order != "delta" else ""
    return json_response({**doc, "total_rows": result.frame.height,
                  "command": f"tfprof diff {shlex.quote(a.path)} {shlex.quote(b.path)} {cmd}{flags}"})


def page(request: Request) -> Response:
    body = _read("index.html").replace(b"{{token}}", request.app.state.token.encode())
    return Response(body, media_type="text/html",
                    headers={"Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
                             "Cache-Control": "no-store"})  # the token is this server's only


def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return error_response(404, f"no static file `{name[:40]}`")
    return Response(_read(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


def not_found(request: Request, exc: Exception) -> Response:
    return error_response(getattr(exc, "status_code", 404), "no such page: the UI's pages are / and /api/...")


def wrong_method(request: Request, exc: Exception) -> Response:
    allow = (getattr(exc, "headers", None) or {}).get("Allow", "GET")
    answer = error_response(405, f"`{request.method[:10]}` is not allowed here; this endpoint takes {allow}"
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
        Route("/api/memory/{pid}", api_memory),
        Route("/api/search/{pid}/{cmd}", api_search),
        Route("/api/flame/{pid}/{cmd}", api_flame),
        Route("/api/advice/{pid}", api_advice),
        Route("/api/ranks", api_ranks),
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
