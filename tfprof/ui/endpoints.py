"""How the UI's API endpoints answer: a request's ``Call``, the ``endpoint`` decorator (the
token, the form body, the worker thread and the profiles' lock, one-line errors) and the JSON
and table answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from tfprof.errors import ProfileChangedError, TfprofError
from tfprof.ui import guard, jobs
from tfprof.ui.profiles import ProfileGone, Profiles

MAX_BODY = 256 * 1024  # a form body: a SQL query of 20,000 characters, each up to 4 bytes of UTF-8 percent-encoded
CHANGED_TRIES = 3  # a request whose profile changed while it read it is asked again, up to this many times


def json_response(data: Any, status: int = 200) -> Response:
    body = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
    return Response(body, status_code=status, media_type="application/json")


COLUMNS_MAGIC = b"TFCL"
_KINDS = {np.dtype("<f8"): "f8", np.dtype("<i4"): "i4"}


def columns_response(data: dict[str, Any]) -> Response:
    """``data`` with its numpy arrays sent as raw little-endian columns after the rest as JSON,
    which a page reads as typed arrays without parsing a number: ``TFCL``, the JSON's length
    (uint32), the JSON (``arrays``: each array's name, kind and length, in the order they
    follow), then each array, every part starting at a multiple of 8 bytes."""
    arrays = {k: v for k, v in data.items() if isinstance(v, np.ndarray)}
    cols = [np.ascontiguousarray(v, "<f8" if v.dtype.kind == "f" else "<i4") for v in arrays.values()]
    meta = {k: v for k, v in data.items() if k not in arrays}
    meta["arrays"] = [[k, _KINDS[c.dtype], len(c)] for k, c in zip(arrays, cols)]
    head = json.dumps(meta, separators=(",", ":"), allow_nan=False, default=str).encode()
    parts = [COLUMNS_MAGIC, len(head).to_bytes(4, "little"), head]
    for c in cols:
        parts.append(bytes(-sum(map(len, parts)) % 8))
        parts.append(c.tobytes())
    return Response(b"".join(parts), media_type="application/octet-stream")


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message.splitlines()[0] if message else "error"}, status)


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
    profiles' lock (``jobs.run``); what it raises is mapped to a one-line answer. A profile
    replaced on disk while ``fn`` read it makes ``fn`` run again on the profile read anew
    (``Profiles.reading``); one deleted is answered 410."""

    async def handler(request: Request) -> Response:
        state = request.app.state
        if not guard.token_ok(request, state.token):
            return error_response(403, f"the API answers only the page this server serves (its {guard.TOKEN_HEADER} header)")
        params: Mapping[str, str] = request.query_params
        if request.method == "POST":
            if request.query_params:
                return error_response(400, "a POST takes its parameters in its body (a form), not in the URL")
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY:
                    return error_response(413, f"the request's body is larger than {MAX_BODY} bytes")
            params = QueryParams(body.decode("utf-8", "replace"))

        def work(job: jobs.Job) -> Response:
            try:
                with state.profiles.lock:
                    job.check()  # the client left while the request waited for the lock
                    for _ in range(CHANGED_TRIES):
                        try:
                            with state.profiles.reading():
                                return fn(Call(request.path_params, params, state.profiles, job))
                        except ProfileChangedError as exc:  # asked again: get() reads it anew or says it is gone
                            changed = exc
                    return error_response(409, f"{changed}, {CHANGED_TRIES} times running; ask again once "
                                               "it is written")
            except ProfileGone as exc:
                return error_response(410, str(exc.args[0]))
            except LookupError as exc:
                return error_response(404, str(exc.args[0]) if exc.args else "not found")
            except TfprofError as exc:  # BadRequest, a bad option, a refused or stopped query
                return error_response(400, str(exc))
            except Exception as exc:  # noqa: BLE001 - a bug: said in one line, never a traceback
                return error_response(500, f"internal error: {type(exc).__name__}: {exc}")

        return await jobs.run(request.receive, work, state.query_timeout)

    return handler


def export_rows(frame, fmt: str) -> bytes:
    from tfprof.api.shell import export

    return export(frame, fmt)
