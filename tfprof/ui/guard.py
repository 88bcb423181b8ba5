"""Who the UI server answers: requests addressed to it by name, and API calls from its own page.

**The Host rule.** A page on ``evil.example`` can point that name at 127.0.0.1 (DNS rebinding)
and then read from the server as its own origin; the request still says ``Host: evil.example``.
So every request, before any handler runs, must name the server: its port, and as host either
one of ``names`` (``localhost``, the name it was told to bind, names added with
``--allow-host``; bound to every interface, also this machine's host name and FQDN), or an IP
address literal equal to the address the connection arrived at (``127.0.0.1``, ``[::1]``; on
0.0.0.0 whichever of the machine's addresses the browser used). Anything else is answered 421
with one plain line. An IP literal cannot be rebound, so it needs no list.

**The token.** Any page can make the browser send a GET or a form POST here (an ``<img>``
pointing at the SQL endpoint), though it cannot read the answer. So every ``/api/`` call must
carry ``X-Tfprof-Token``: a random value made per server and written into the page it serves.
A page elsewhere cannot read that page, and cannot add the header without a CORS preflight,
which this server never grants. A missing or wrong token is answered 403.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from collections.abc import Iterable

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_HEADER = "X-Tfprof-Token"
WILDCARDS = ("0.0.0.0", "::", "")
MISDIRECTED = ("Misdirected request: this tfprof ui server answers only to its own address "
               "(127.0.0.1, localhost; `tfprof ui --allow-host NAME` adds a name).\n")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def host_names(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names (not addresses) a server bound to ``bind`` answers to."""
    names = {"localhost", *(n.strip().lower() for n in extra if n.strip())}
    if bind in WILDCARDS:  # the user asked to be reachable from the network: the machine's names
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    elif _ip(bind) is None:
        names.add(bind.lower())
    return frozenset(names)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)  # an IPv4 client of a dual-stack socket
    return mapped or ip


def split_host(value: str) -> tuple[str, int] | None:
    """``Host`` header ``value`` as (host, port); None if it is not one."""
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        if _ip(host) is None or (rest and not rest.startswith(":")):
            return None
        port = rest[1:]
    else:
        host, sep, port = value.rpartition(":")
        if not sep:
            host, port = value, ""
        if ":" in host:  # an IPv6 address needs its brackets
            return None
    if not host or (port and not port.isdigit()):
        return None
    return host.lower(), int(port) if port else 80


def host_allowed(value: str | None, server: tuple[str, int] | None, names: frozenset[str]) -> bool:
    """Whether a request whose ``Host`` header is ``value``, arriving at local address
    ``server``, names this server (module docstring)."""
    parsed = split_host(value) if value else None
    if parsed is None or not server:
        return False
    host, port = parsed
    if port != int(server[1]):
        return False
    if host in names:
        return True
    ip = _ip(host)
    return ip is not None and ip == _ip(str(server[0]))


class HostGuard:
    """ASGI middleware: requests that do not name this server are answered 421 (module docstring)."""

    def __init__(self, app: ASGIApp, names: frozenset[str]) -> None:
        self.app, self.names = app, names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            hosts = [v.decode("latin-1") for k, v in scope["headers"] if k == b"host"]
            if len(hosts) != 1 or not host_allowed(hosts[0], scope.get("server"), self.names):
                if scope["type"] == "websocket":  # the UI has none; refused all the same
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await PlainTextResponse(MISDIRECTED, status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def token_ok(request: Request, token: str) -> bool:
    given = request.headers.get(TOKEN_HEADER, "")
    return secrets.compare_digest(given.encode(), token.encode())
