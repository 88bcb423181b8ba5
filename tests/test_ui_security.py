"""The web UI answers only its own page (tfprof/ui/guard.py, tfprof/ui/jobs.py; docs/SECURITY.md,
"Local servers"): a request must name the server in its Host header (DNS rebinding), an API call
must carry the token of the page the server served (cross-site requests), what runs user-chosen
work is POST only, and a query stops when its client goes away or its time is up."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
import urllib.parse

import pytest
from conftest import FIXTURES
from starlette.testclient import TestClient

import tfprof
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER, host_allowed
from tfprof.ui.profiles import Profiles

SAMPLE = str(tfprof.sample_path())
MULTISTEP = str(FIXTURES / "multistep" / "profile.pb")
# the security campaign's runaway: about 10^13 rows, hours of work for DuckDB
RUNAWAY = "select sum(a.range * b.range) from range(100000000) a, range(100000) b"


def ask(port: int, path: str, host: str, *, method: str = "GET", token: str | None = None,
        form: dict | None = None, timeout: float = 30) -> tuple[int, bytes]:
    """One request to 127.0.0.1:``port`` with ``host`` as its Host header."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host)
        body = urllib.parse.urlencode(form).encode() if form is not None else b""
        if token is not None:
            conn.putheader(TOKEN_HEADER, token)
        if method == "POST":
            conn.putheader("Content-Type", "application/x-www-form-urlencoded")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def port_of(running) -> int:
    return int(str(running).rstrip("/").rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def server():
    running = tfprof.ui([SAMPLE, MULTISTEP])
    yield running
    running.stop()


# --------------------------------------------------------------------------- Host

@pytest.mark.parametrize("path", ["/", "/static/app.js", "/api/profiles", "/api/advice/0", "/nothing"])
@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example", "127.0.0.1.evil.example:{port}",
                                  "localhost.evil.example:{port}", "127.0.0.1:{other}", "localhost:{other}",
                                  "127.0.0.1", "[::1]:{port}", "0.0.0.0:{port}", "127.0.0.2:{port}", "",
                                  "127.0.0.1:{port}@evil.example", "::1:{port}"])
def test_a_request_for_another_host_is_refused_before_any_handler(server, path, host):
    """DNS rebinding: evil.example resolved to 127.0.0.1 sends `Host: evil.example`; the page,
    the static files and the API (token or not) all answer 421 with one plain line."""
    port = port_of(server)
    status, body = ask(port, path, host.format(port=port, other=port + 1), token=server.token)
    assert status == 421 and body.decode().count("\n") == 1 and "tfprof ui" in body.decode()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}"])
def test_the_servers_own_address_is_answered(server, host):
    port = port_of(server)
    status, body = ask(port, "/api/profiles", host.format(port=port), token=server.token)
    assert status == 200 and len(json.loads(body)["profiles"]) == 2


@pytest.mark.parametrize(("host", "server_address", "names", "allowed"), [
    ("[::1]:8765", ("::1", 8765), {"localhost"}, True),
    ("[::1]:8765", ("127.0.0.1", 8765), {"localhost"}, False),  # that address is not where it came
    ("127.0.0.1:8765", ("::ffff:127.0.0.1", 8765), {"localhost"}, True),  # dual-stack socket
    ("[::1]", ("::1", 80), {"localhost"}, True),
    ("10.1.2.3:8765", ("10.1.2.3", 8765), {"localhost"}, True),  # bound to 0.0.0.0, reached by address
    ("10.1.2.4:8765", ("10.1.2.3", 8765), {"localhost"}, False),
    ("workstation:8765", ("10.1.2.3", 8765), {"localhost", "workstation"}, True),
    ("workstation:8765", ("10.1.2.3", 8765), {"localhost"}, False),
    ("[::1:8765", ("::1", 8765), {"localhost"}, False),
    ("localhost:80x", ("127.0.0.1", 80), {"localhost"}, False),
    ("localhost:8765", None, {"localhost"}, False),  # no local address known: nothing to compare with
])
def test_host_rule(host, server_address, names, allowed):
    assert host_allowed(host, server_address, frozenset(names)) is allowed


def test_bound_to_every_interface_the_machine_names_and_allowed_names_are_answered():
    """--host 0.0.0.0 is the user asking to be reached from the network: the machine's own name
    and any address of its own (as the connection arrived) are answered, and --allow-host adds
    names; other names still get 421."""
    from tfprof.ui import start

    running = start(SAMPLE, host="0.0.0.0", port=0, allow_hosts=["ui.example"])
    try:
        port, token = port_of(running), running.token
        assert str(running) == f"http://127.0.0.1:{port}/"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"{socket.gethostname()}:{port}", f"ui.example:{port}"):
            assert ask(port, "/api/profiles", host, token=token)[0] == 200, host
        assert ask(port, "/api/profiles", f"evil.example:{port}", token=token)[0] == 421
    finally:
        running.stop()


# --------------------------------------------------------------------------- token and methods

POST_ONLY = {"/api/sql/{pid}", "/api/sql/{pid}/csv", "/api/diff/{a}/{b}/{cmd}"}
# reading the profiles: a view, its pieces, the advisor's fixed checks, one step's timeline
GET = {"/api/profiles", "/api/view/{pid}/{cmd}", "/api/children/{pid}/{cmd}", "/api/subtree/{pid}/{cmd}", "/api/steps/{pid}",
       "/api/search/{pid}/{cmd}",
       "/api/flame/{pid}/{cmd}", "/api/advice/{pid}", "/api/timeline/{pid}", "/api/trace/{pid}", "/api/overview/{pid}",
       "/api/memory/{pid}", "/api/ranks"}


@pytest.fixture(scope="module")
def app():
    return make_app(Profiles.load([SAMPLE, MULTISTEP]))


def api_routes(app) -> list[tuple[str, str, str]]:
    """Every API route: (pattern, method, a URL of it)."""
    out = []
    for route in app.routes:
        if route.path.startswith("/api/"):
            url = route.path.format(pid="0", a="0", b="1", cmd="scope")
            out.append((route.path, "POST" if "POST" in route.methods else "GET", url))
    return out


def test_what_runs_user_chosen_work_is_post_only(app):
    """SQL and comparing two profiles run what a request chooses: POST only. A new endpoint
    must be placed on one side or the other here."""
    methods = {path: method for path, method, _ in api_routes(app)}
    assert methods == {**{p: "GET" for p in GET}, **{p: "POST" for p in POST_ONLY}}


def test_every_api_call_needs_the_pages_token(app):
    """A page elsewhere can make the browser send a GET (an <img> pointing at /api/sql) or a form
    POST, but cannot add the header: every API endpoint answers such calls 403 and runs nothing;
    a GET to a POST endpoint is 405. With the token, each answers."""
    good = {TOKEN_HEADER: app.state.token}
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    needs = {"/api/sql/{pid}": {"q": "select 1 as x"}, "/api/sql/{pid}/csv": {"q": "select 1 as x"},
             "/api/search/{pid}/{cmd}": {"q": "conv"}}
    for path, method, url in api_routes(app):
        args = {"data" if method == "POST" else "params": needs.get(path, {})}
        for headers in ({}, {TOKEN_HEADER: ""}, {TOKEN_HEADER: "x" * 43}, {TOKEN_HEADER: app.state.token[:-1]}):
            answer = client.request(method, url, headers=headers, **args)
            assert answer.status_code == 403 and TOKEN_HEADER in answer.json()["error"], (url, headers)
        assert client.request(method, url, headers=good, **args).status_code == 200, url
        if method == "POST":
            wrong = client.get(url + "?q=select%201", headers=good)
            assert wrong.status_code == 405 and wrong.headers["allow"] == "POST" and "POST" in wrong.json()["error"]


def test_the_token_is_in_the_page_only_and_new_per_server(app):
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    page = client.get("/")
    token = re.search(r'<meta name="tfprof-token" content="([\w-]+)">', page.text)[1]
    assert token == app.state.token and len(token) >= 40 and page.headers["cache-control"] == "no-store"
    for name in ("app.js", "tree.js"):
        assert token not in client.get(f"/static/{name}").text
    assert make_app(Profiles.load([SAMPLE])).state.token != token


# --------------------------------------------------------------------------- runaway queries

def _send_runaway(port: int, token: str) -> socket.socket:
    body = urllib.parse.urlencode({"q": RUNAWAY})
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall((f"POST /api/sql/0 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{TOKEN_HEADER}: {token}\r\n"
                  f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    return sock


def test_a_query_whose_client_went_away_is_interrupted():
    """The campaign's case: a runaway query, its client gone after a while. Before, it held the
    lock and two cores for hours and the UI did not answer; now DuckDB is interrupted when the
    connection closes, the next query is answered at once and the process's CPU falls idle."""
    running = tfprof.ui(SAMPLE, query_timeout=600)  # the limit is not what stops it here
    try:
        port, host = port_of(running), f"127.0.0.1:{port_of(running)}"
        sock = _send_runaway(port, running.token)
        sock.settimeout(2.0)
        with pytest.raises(TimeoutError):  # running: nothing answered
            sock.recv(1)
        with pytest.raises(TimeoutError):  # and holding the lock: the UI waits for it
            ask(port, "/api/profiles", host, token=running.token, timeout=0.5)
        sock.close()
        t0 = time.monotonic()
        status, body = ask(port, "/api/sql/0", host, method="POST", token=running.token, form={"q": "select 42 as answer"})
        waited = time.monotonic() - t0
        assert status == 200 and json.loads(body)["rows"] == [{"answer": 42}]
        assert waited < 2.0, f"answered {waited:.1f} s after the client left"
        cpu = time.process_time()
        time.sleep(1.0)
        assert time.process_time() - cpu < 0.5  # DuckDB's threads stopped too
    finally:
        running.stop()


def test_a_query_past_the_time_limit_answers_a_clear_error():
    running = tfprof.ui(SAMPLE, query_timeout=1)
    try:
        port, host = port_of(running), f"127.0.0.1:{port_of(running)}"
        t0 = time.monotonic()
        status, body = ask(port, "/api/sql/0", host, method="POST", token=running.token, form={"q": RUNAWAY})
        waited = time.monotonic() - t0
        assert status == 400 and 1.0 <= waited < 5.0
        assert json.loads(body) == {"error": "the query was stopped after 1 s, the UI's time limit "
                                             "(tfprof ui --query-timeout SECONDS)"}
        status, body = ask(port, "/api/sql/0", host, method="POST", token=running.token, form={"q": "select 1 as x"})
        assert status == 200 and json.loads(body)["rows"] == [{"x": 1}]
    finally:
        running.stop()


@pytest.mark.parametrize("value", ["-1", "nan", "1e12"])
def test_a_bad_query_timeout_is_one_error_line(value, capsys):
    from tfprof.cli.main import main as cli_main

    assert cli_main(["ui", SAMPLE, "--no-browser", "--port", "0", "--query-timeout", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: --query-timeout takes seconds") and err.count("\n") == 1
