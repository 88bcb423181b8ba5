"""The web UI's JSON endpoints (tfprof.ui.app) through Starlette's test client: each endpoint
answers from the same functions as the CLI (a tree's rows are the rows `--format json` prints,
its lines the report's lines), and every bad parameter answers 4xx with a one-line message."""

from __future__ import annotations

import csv
import io
import itertools
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from conftest import FIXTURES, read_columns
from starlette.testclient import TestClient

import tfprof
from tfprof.cli.main import main as cli_main
from tfprof.ui.app import make_app
from tfprof.ui.guard import TOKEN_HEADER
from tfprof.ui.profiles import Profiles

SAMPLE = str(tfprof.sample_path())
MULTISTEP = str(FIXTURES / "multistep" / "profile.pb")


def page_client(app) -> TestClient:
    """A client as the UI's page is one: addressed to the server's own address, with its token."""
    return TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})


@pytest.fixture(scope="module")
def client() -> TestClient:
    return page_client(make_app(Profiles.load([SAMPLE, MULTISTEP])))


def cli_json(capsysbinary, *args: str) -> list[dict]:
    assert cli_main([*args, "--format", "json"]) == 0
    return json.loads(capsysbinary.readouterr().out)


def cli_text(capsysbinary, *args: str) -> list[str]:
    assert cli_main(list(args)) == 0
    text = capsysbinary.readouterr().out.decode()
    return text.partition("\nnode name |")[2].split("\n")[1:-1]


def all_rows(client: TestClient, pid: str, cmd: str, query: str) -> list[dict]:
    """Every row of a view, unfolded through /children as a person clicking would, in display order."""
    view = client.get(f"/api/view/{pid}/{cmd}?{query}&open=0").json()
    columns = [c["name"] for c in view["columns"]]

    def below(node: int) -> list[dict]:
        out, offset = [], 0
        while True:
            page = client.get(f"/api/children/{pid}/{cmd}?{query}&node={node}&offset={offset}&limit=50").json()
            for row in page["rows"]:
                out.append(row)
                if row["children"]:
                    out += below(row["i"])
            offset += len(page["rows"])
            if offset >= page["total"]:
                return [{**r, "columns": columns} for r in out]

    return below(-1)


CASES = [
    ("scope", ["--max_depth", "4", "--select", "micros,params"]),
    ("scope", ["--show_name_regexes", ".*conv.*", "--select", "bytes,peak_bytes,occurrence", "--order_by", "bytes"]),
    ("graph", ["--max_depth", "3", "--min_micros", "5", "--account_displayed_op_only"]),
    ("op", ["--select", "micros,occurrence,float_ops", "--order_by", "micros", "--max_depth", "20"]),
    ("code", ["--max_depth", "6", "--select", "micros,params", "--order_by", "micros", "--hide_name_regexes", ".*<module>.*"]),
]


def _query(flags: list[str]) -> str:
    pairs, i = [], 0
    while i < len(flags):
        name = flags[i].lstrip("-")
        if name == "account_displayed_op_only":
            pairs.append(f"{name}=true")
            i += 1
        else:
            pairs.append(f"{name}={flags[i + 1]}")
            i += 2
    return "&".join(pairs)


@pytest.mark.parametrize("path,pid", [(SAMPLE, "0"), (MULTISTEP, "1")], ids=["sample", "multistep"])
@pytest.mark.parametrize("cmd,flags", CASES, ids=[f"{c}{i}" for i, (c, _) in enumerate(CASES)])
def test_tree_rows_are_the_cli_rows(client, capsysbinary, cmd, flags, path, pid):
    rows = all_rows(client, pid, cmd, _query(flags))
    expected = cli_json(capsysbinary, cmd, path, *flags)
    lines = cli_text(capsysbinary, cmd, path, *flags)
    assert len(rows) == len(expected) == len(lines) > 0
    for row, want, line in zip(rows, expected, lines):
        got = {"name": row["name"], "accounted": row["accounted"], **dict(zip(row["columns"], row["values"]))}
        assert got == {k: v for k, v in want.items() if k not in ("depth", "node_id")}
        assert row["line"] == line
        if cmd != "op":
            assert row["level"] == want["depth"]


def test_view_opens_first_levels_and_gives_the_command(client):
    view = client.get("/api/view/0/scope?max_depth=3&select=params,micros&order_by=params").json()
    assert view["command"] == f"tfprof scope {SAMPLE} --max_depth 3 --order_by params --select micros,params"
    levels = [r["level"] for r in view["rows"]]
    assert levels[0] == 0 and max(levels) == 1 and view["total_rows"] > len(view["rows"])
    assert [c["name"] for c in view["columns"]][:2] == ["exec_micros", "total_exec_micros"]
    assert {c["kind"] for c in view["columns"]} == {"time", "number"}


def test_children_pages(client):
    whole = client.get("/api/children/0/graph?node=0&limit=2000").json()
    assert whole["total"] == len(whole["rows"]) > 10
    page = client.get("/api/children/0/graph?node=0&offset=5&limit=3").json()
    assert page["rows"] == whole["rows"][5:8]
    assert all(r["parent"] == 0 for r in whole["rows"])


def test_search_gives_rows_and_their_ancestors(client):
    found = client.get("/api/search/0/scope?max_depth=100&q=Conv2D").json()
    assert found["total"] >= len(found["hits"]) > 0
    for hit, row in zip(found["hits"], found["rows"]):
        assert "conv2d" in row["name"].lower() and hit["i"] == row["i"]
        assert hit["path"][0] == 0 and len(hit["path"]) == row["level"]


def test_flame_boxes_nest_inside_their_parents(client):
    flame = client.get("/api/flame/0/scope?max_depth=100&metric=micros").json()
    assert flame["total"] == client.get("/api/view/0/scope").json()["rows"][0]["values"][1]
    box = {i: (x, w, lv) for i, x, w, lv in zip(flame["i"], flame["x"], flame["w"], flame["level"])}
    parents = {r["i"]: r["parent"] for r in all_rows(client, "0", "scope", "max_depth=100")}
    for i, (x, w, level) in box.items():
        if level:
            px, pw, plevel = box[parents[i]]
            assert plevel == level - 1 and px <= x and x + w <= px + pw + 1e-6
    zoomed = client.get(f"/api/flame/0/scope?max_depth=100&metric=params&node={flame['i'][1]}").json()
    assert zoomed["root"] == flame["i"][1] and zoomed["level"][0] == 0 and zoomed["path"] == [0]


def test_advice_names_nodes(client, capsysbinary):
    advice = client.get("/api/advice/0").json()
    assert cli_main(["advise", SAMPLE]) == 0
    assert advice["text"] == capsysbinary.readouterr().out.decode()
    expensive = next(c for c in advice["checkers"] if c["name"] == "ExpensiveOperationChecker")
    assert expensive["reports"] and {link["view"] for link in expensive["links"]} == {"op", "scope", "code"}
    assert "Conv2D" in [link["name"] for link in expensive["links"] if link["view"] == "op"]


def test_sql_limits_rows_and_downloads_csv(client):
    answer = client.post("/api/sql/1", data={"q": "select node_id, name from nodes order by node_id", "limit": 7}).json()
    assert answer["columns"] == ["node_id", "name"] and len(answer["rows"]) == 7 and answer["truncated"]
    full = client.post("/api/sql/1/csv", data={"q": "select node_id, name from nodes order by node_id"})
    assert full.headers["content-disposition"].startswith("attachment")
    rows = list(csv.DictReader(io.StringIO(full.text)))
    assert len(rows) == answer["total"] and rows[:7] == [{k: str(v) for k, v in r.items()} for r in answer["rows"]]


def test_timeline_columns_match_the_chrome_trace(client):
    data = read_columns(client.get("/api/timeline/1?step=1").content)
    trace = json.loads(client.get("/api/trace/1?step=1").content)["traceEvents"]
    ops = sorted((e["ts"] - data["origin"], e["dur"], e["name"]) for e in trace if e.get("ph") == "X")
    mine = sorted(zip(data["ts"], data["dur"], (data["names"][n] for n in data["name"])))
    assert mine == ops and len(ops) > 10
    for lane in range(len(data["lanes"])):  # sorted, non-overlapping bars per lane
        bars = [(t, d) for t, d, k in zip(data["ts"], data["dur"], data["lane"]) if k == lane]
        assert all(a[0] + a[1] <= b[0] for a, b in itertools.pairwise(bars))
    assert read_columns(client.get("/api/timeline/1").content)["step"] == 2  # the last step by default


def test_page_and_static_files(client):
    page = client.get("/")
    assert page.status_code == 200 and "tfprof" in page.text and "http" not in page.text.replace("http-equiv", "")
    for name in ("app.js", "app.css", "tree.js", "charts.js", "timeline.js"):
        body = client.get(f"/static/{name}")
        assert body.status_code == 200 and len(body.content) > 100
        assert "http://" not in body.text and "https://" not in body.text  # nothing fetched from elsewhere


BAD = [
    ("/api/view/0/nope", 404, "unknown view `nope`"),
    ("/api/view/7/scope", 404, "no profile `7`"),
    ("/api/view/..%2F..%2Fetc%2Fpasswd/scope", 404, ""),
    ("/api/advice/..", 404, ""),
    ("/api/advice/%2E%2E", 404, "no profile `..`"),
    ("/static/..%2F__init__.py", 404, ""),
    ("/static/%2Fetc%2Fpasswd", 404, ""),
    ("/api/view/0/scope?show_name_regexes=a(b", 400, "Bad regex `a(b` in show_name_regexes"),
    ("/api/view/0/scope?max_depth=1000000000000", 400, "`max_depth` takes 0 to 100000"),
    ("/api/view/0/scope?max_depth=-4", 400, "`max_depth` takes 0"),
    ("/api/view/0/scope?min_bytes=lots", 400, "`min_bytes` takes an integer"),
    ("/api/view/0/scope?select=microsecs", 400, "Unknown select field `microsecs`"),
    ("/api/view/0/scope?order_by=size", 400, "Unknown order_by value `size`"),
    ("/api/view/0/scope?profile_path=/etc/passwd", 400, "Unknown parameter `profile_path`"),
    ("/api/view/0/scope?output=file:outfile=/tmp/x", 400, "Unknown parameter `output`"),
    ("/api/view/0/scope?account_displayed_op_only=maybe", 400, "takes true or false"),
    ("/api/view/0/scope?step=9", 400, "Option `step` 9 not found"),
    ("/api/children/0/scope?node=100000", 400, "`node` takes -1 to"),
    ("/api/search/0/scope?q=", 400, "`q` is empty"),
    ("/api/flame/0/scope?metric=joules", 400, "Unknown metric `joules`"),
    ("/api/timeline/0?step=3", 400, "Option `step` 3 not found"),
    ("/api/trace/0?step=../../x", 400, "`step` takes an integer"),
    ("/nothing/here", 404, "no such page"),
]


@pytest.mark.parametrize("url,status,message", BAD, ids=[b[0][:48] for b in BAD])
def test_bad_requests_answer_one_line(client, url, status, message):
    answer = client.get(url)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert message in error and "\n" not in error and "Traceback" not in error


BAD_SQL = [
    ({"q": "copy nodes to '/tmp/x'"}, 400, "`COPY` statements cannot run here"),
    ({"q": "select * from read_csv('/etc/passwd')"}, 400, "read_csv"),
    ({"q": ""}, 400, "`q` is empty"),
    ({}, 400, "`q` is empty"),
    ({"q": "select " + "1+" * 10_000 + "1"}, 400, "longer than 20000"),
    ({"q": "x" * 300_000}, 413, "larger than"),
]


@pytest.mark.parametrize("form,status,message", [*BAD_SQL, ({"q": "select 1", "limit": 0}, 400, "`limit` takes 1 to")],
                         ids=lambda v: str(v)[:40])
def test_bad_queries_answer_one_line(client, form, status, message):
    for url in ("/api/sql/0", "/api/sql/0/csv") if "limit" not in form else ("/api/sql/0",):
        answer = client.post(url, data=form)
        assert answer.status_code == status
        error = answer.json()["error"]
        assert message in error and "\n" not in error and "Traceback" not in error


def test_files_are_read_only_from_the_given_profiles(client, tmp_path):
    target = tmp_path / "out.parquet"
    answer = client.post("/api/sql/0", data={"q": f"copy (select 1) to '{target}'"})
    assert answer.status_code == 400 and not target.exists()
    answer = client.post("/api/sql/0", data={"q": "select * from glob('/etc/*')"})
    assert answer.status_code == 400


def test_ui_command_prints_the_url_and_stops_on_ctrl_c():
    import os
    import re
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "tfprof", "ui", SAMPLE, MULTISTEP, "--port", "0", "--no-browser",
                             "--query-timeout", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TFPROF_SERVER": "0"})
    try:
        line = proc.stdout.readline()
        assert line.startswith("tfprof ui: serving 2 profiles at http://127.0.0.1:")
        url = line.split(" at ")[1].split()[0]
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        token = {TOKEN_HEADER: re.search(r'<meta name="tfprof-token" content="([\w-]{40,})">', page)[1]}
        listed = json.loads(urllib.request.urlopen(urllib.request.Request(url + "api/profiles", headers=token),
                                                   timeout=30).read())
        assert [p["path"] for p in listed["profiles"]] == [SAMPLE, MULTISTEP]
        assert listed["job"] is False  # two profiles opened together: no Ranks page
        q = "select sum(a.range * b.range) from range(100000000) a, range(100000) b"  # hours of work
        runaway = urllib.parse.urlencode({"q": q}).encode()
        with pytest.raises(urllib.error.HTTPError) as stopped:  # --query-timeout 1
            urllib.request.urlopen(urllib.request.Request(url + "api/sql/0", runaway, token), timeout=30)
        assert stopped.value.code == 400 and "stopped after 1 s" in json.load(stopped.value)["error"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err == "Interrupted.\n"


@pytest.mark.parametrize("how", ["directory", "glob", "catalog"])
def test_ui_command_opens_a_jobs_ranks(how, tmp_path):
    """``tfprof ui traces/``, ``tfprof ui 'traces/rank-*'`` and ``tfprof ui --catalog DIR --run
    JOB`` open a profile per rank, as one job's, and the Ranks page compares them."""
    import os
    import re
    import signal
    import subprocess
    import sys

    gloo = FIXTURES / "ranks" / "gloo4"
    if how == "catalog":
        from tfprof.catalog import add_job

        add_job(tmp_path / "cat", "job", [gloo])
        args = ["--catalog", str(tmp_path / "cat"), "--run", "job"]
    else:
        args = [str(gloo / "rank-*.pt.trace.json.gz") if how == "glob" else str(gloo)]
    proc = subprocess.Popen([sys.executable, "-m", "tfprof", "ui", *args, "--port", "0", "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "TFPROF_SERVER": "0"})
    try:
        line = proc.stdout.readline()
        assert line.startswith("tfprof ui: serving 4 profiles at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        token = {TOKEN_HEADER: re.search(r'<meta name="tfprof-token" content="([\w-]{40,})">', page)[1]}
        listed = json.loads(urllib.request.urlopen(urllib.request.Request(url + "api/profiles", headers=token),
                                                   timeout=60).read())
        assert listed["job"] is True and len(listed["profiles"]) == 4
        job = json.loads(urllib.request.urlopen(urllib.request.Request(url + "api/ranks", headers=token), timeout=60).read())
        assert [s["rank"] for s in job["sources"]] == [0, 1, 2, 3]
        assert [r["rank"] for r in job["ranks"] if r["straggler"]] == [2]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 130


def test_python_entry_serves_in_the_background():
    import urllib.request

    running = tfprof.ui(tfprof.load(SAMPLE))
    try:
        assert str(running).startswith("http://127.0.0.1:") and "<iframe" in running._repr_html_()
        page = urllib.request.urlopen(str(running), timeout=30).read().decode()
        assert "/static/app.js" in page and f'content="{running.token}"' in page
    finally:
        running.stop()
    assert not running.thread.is_alive()
    assert callable(tfprof.ui) and __import__("tfprof.ui.app").ui is tfprof.ui  # the submodule did not replace it


DIFF = FIXTURES / "diff"


@pytest.fixture(scope="module")
def pair() -> TestClient:
    """A server with two runs of one model, the second with a widened layer (tests/fixtures/diff)."""
    return page_client(make_app(Profiles.load([str(DIFF / "base" / "profile.pb"), str(DIFF / "wide" / "profile.pb")])))


def test_diff_gives_the_rows_tfprof_diff_prints(pair, capsysbinary):
    got = pair.post("/api/diff/0/1/scope", data={"max_depth": 3, "select": "micros,params", "limit": 8}).json()
    args = ["diff", str(DIFF / "base" / "profile.pb"), str(DIFF / "wide" / "profile.pb"), "scope",
            "--max_depth", "3", "--select", "micros,params", "--format", "json"]
    assert cli_main(args) == 0
    cli = json.loads(capsysbinary.readouterr().out)
    assert got["rows"] == cli["rows"][:8]  # the same rows, values, noise band and order
    assert got["total_rows"] == len(cli["rows"]) and got["schema"] == cli["schema"]
    assert got["rows"][0]["significant"]  # the widened model's whole step: outside the noise band
    assert got["command"].split()[:5] == ["tfprof", "diff", str(DIFF / "base" / "profile.pb"),
                                          str(DIFF / "wide" / "profile.pb"), "scope"]
    assert "--max_depth 3" in got["command"]


@pytest.mark.parametrize(("url", "status", "words"), [
    ("/api/diff/0/7/scope", 404, "no profile `7`"),
    ("/api/diff/0/1/nope", 404, "unknown view"),
    ("/api/diff/0/1/scope?max_depth=-5", 400, "max_depth"),
    ("/api/diff/0/1/scope?hide_name_regexes=(", 400, "Bad regex"),
    ("/api/diff/0/1/scope?limit=999999", 400, "limit"),
    ("/api/diff/0/1/scope?output=file:outfile=/tmp/x", 400, "Unknown parameter `output`"),
    ("/api/diff/..%2F..%2Fetc/1/scope", 404, "no such page"),
    ("/api/diff/..%5C..%5Cetc/1/scope", 404, "no profile"),
])
def test_diff_refuses_bad_parameters(pair, url, status, words):
    path, _, form = url.partition("?")
    got = pair.post(path, content=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert got.status_code == status and words in got.json()["error"]


def test_a_post_takes_its_parameters_in_the_body_only(pair):
    got = pair.post("/api/diff/0/1/scope?max_depth=3")  # not silently the default max_depth
    assert got.status_code == 400 and "in its body" in got.json()["error"]


def test_select_kernels_puts_each_rows_gpu_work_beside_it():
    """A GPU trace with ``select=kernels``: each row carries the kernels its node launched (what the
    CLI prints under the row), and the rows are the same as without it."""
    trace = str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")
    gpu = page_client(make_app(Profiles.load([trace])))
    query = "select=accelerator_micros,kernels&order_by=accelerator_micros&max_depth=3"
    rows = all_rows(gpu, "0", "scope", query)
    plain = all_rows(gpu, "0", "scope", "select=accelerator_micros&order_by=accelerator_micros&max_depth=3")
    assert [r["name"] for r in rows] == [r["name"] for r in plain]
    with_work = [r for r in rows if r["kernels"]]
    assert with_work and all("kernels" not in r for r in plain)
    at = {c["name"]: k for k, c in enumerate(gpu.get(f"/api/view/0/scope?{query}").json()["columns"])}
    for r in with_work:  # a row's kernels add up to its own accelerator time (one step: to the ns)
        assert round(sum(k["micros"] for k in r["kernels"]) * 1000) == round(r["values"][at["accelerator_exec_micros"]] * 1000)
        assert all(k["runs"] > 0 and k["kind"] in ("compute", "memset") or k["kind"].startswith("memcpy")
                   for k in r["kernels"])
    from tfprof.api import run_view

    text = run_view(tfprof.load(trace), "scope", {"select": ["accelerator_micros", "kernels"],
                                                  "order_by": "accelerator_micros", "max_depth": 3}).text
    for r in with_work[:3]:
        for k in r["kernels"]:
            assert f"[{k['kind']}] {k['name']} (" in text


def test_a_running_server_shows_its_url_and_never_its_token():
    running = tfprof.ui(SAMPLE)
    try:
        assert str(running) == running.url and running.url.startswith("http://127.0.0.1:")
        assert repr(running) == f"Running(url={running.url!r})" and running.token not in repr(running)
    finally:
        running.stop()


def test_advice_cells_read_as_the_reports_write_them():
    """The advisor page's tables: times as tfprof prints them, shares as percentages, no raw
    clock readings, ``--`` for an absent value; the labels drop the unit suffixes."""
    from tfprof.api import advise

    trace = str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")
    gpu = page_client(make_app(Profiles.load([trace])))
    checkers = {c["name"]: c for c in gpu.get("/api/advice/0").json()["checkers"]}
    idle = checkers["GpuIdleChecker"]
    assert "window_start_ns" not in idle["columns"] and "gap_start_ns" not in idle["columns"]
    assert idle["labels"][idle["columns"].index("idle_share")] == "idle share"
    raw = advise(tfprof.load(trace)).evidence["GpuIdleChecker"].row(0, named=True)
    row = idle["rows"][0]
    assert row["idle_share"] == f"{100 * raw['idle_share']:.2f}%" and row["window_ns"] == "186.96ms"
    assert raw["window_ns"] == 186_955_000  # the step's whole µs: Kineto's integer timestamps, exact
    assert row["gap_after_event"] == "--" and row["gap_before_event"] == str(raw["gap_before_event"])
    expensive = checkers["ExpensiveOperationChecker"]
    shares = [r["share"] for r in expensive["rows"]]
    assert shares[0].endswith("%") and "--" in shares and all(v != "NULL" for r in expensive["rows"] for v in r.values())


def test_flame_runs_of_small_frames_fill_their_gaps():
    """Rows too narrow to draw come back as runs: each run sits where its rows would be, under a
    drawn parent, and the drawn children and runs of a parent tile exactly what its children hold."""
    from tfprof.api.browse import browse

    tree = browse(tfprof.load(SAMPLE), "scope", {"max_depth": 100})
    flame = tree.flame("micros", fraction=1 / 50)
    small = flame["small"]
    assert small["count"] and sum(small["count"]) <= flame["dropped"]
    boxes = {i: (x, w, lv) for i, x, w, lv in zip(flame["i"], flame["x"], flame["w"], flame["level"], strict=True)}
    runs = list(zip(small["x"], small["w"], small["level"], strict=True))
    for x, w, level in runs:  # inside a drawn parent one level up, overlapping no drawn box of its level
        assert level == 0 or any(lv == level - 1 and px <= x + 1e-6 and x + w <= px + pw + 1e-6
                                 for px, pw, lv in boxes.values())
        assert not any(lv == level and bx < x + w - 1e-6 and x < bx + bw - 1e-6 for bx, bw, lv in boxes.values())
    total = tree.full["total_exec_micros"].to_numpy()
    for i, (x, w, level) in boxes.items():  # children drawn + runs = the children's total
        kids = tree.children(i)
        if len(kids):
            drawn = sum(boxes[k][1] for k in kids if k in boxes)
            ran = sum(rw for rx, rw, rl in runs if rl == level + 1 and x - 1e-6 <= rx < x + w)
            assert abs(drawn + ran - total[kids].sum()) < 1e-6


def test_subtree_is_every_row_in_display_order_in_one_answer(client):
    query = "max_depth=100"
    rows = all_rows(client, "0", "scope", query)
    whole = client.get(f"/api/subtree/0/scope?{query}&node=-1&limit=20000").json()
    assert whole["total"] == len(rows) and [r["i"] for r in whole["rows"]] == [r["i"] for r in rows]
    first = next(r for r in rows if r["children"])
    part = client.get(f"/api/subtree/0/scope?{query}&node={first['i']}&limit=3").json()
    assert [r["i"] for r in part["rows"]] == [first["i"] + 1, first["i"] + 2, first["i"] + 3] and part["total"] > 3


def test_steps_gives_the_breakdown_and_its_report():
    trace = str(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz")
    gpu = page_client(make_app(Profiles.load([trace, SAMPLE])))
    answer = gpu.get("/api/steps/0").json()
    rows = tfprof.steps(tfprof.load(trace))
    assert answer["rows"] == json.loads(rows.write_json()) and "comm hidden by compute" in answer["text"]
    r = answer["rows"][0]
    assert r["compute_ns"] + r["communication_ns"] + r["memcpy_ns"] + r["idle_ns"] == r["window_ns"]
    cpu = gpu.get("/api/steps/1").json()
    assert all(r["device"] is None for r in cpu["rows"]) and "step times only" in cpu["text"]


def test_ranks_of_a_job_and_of_profiles_that_are_none(client):
    job = page_client(make_app(Profiles.load([str(FIXTURES / "ranks" / "gloo4")])))
    answer = job.get("/api/ranks").json()
    assert [s["rank"] for s in answer["sources"]] == [0, 1, 2, 3] and len({s["pid"] for s in answer["sources"]}) == 4
    assert [r["rank"] for r in answer["ranks"] if r["straggler"]] == [2]
    assert answer["findings"][0].startswith("straggler: rank 2") and answer["text"].startswith("Job: 4 ranks")
    none = client.get("/api/ranks").json()  # the sample and the multistep profile: no ranks recorded or named
    assert none["job"] is None and "do not look like one job's ranks" in none["why"]
    one = page_client(make_app(Profiles.load([SAMPLE]))).get("/api/ranks").json()
    assert one["job"] is None and one["why"].startswith("one profile is open")


def test_a_job_whose_traces_claim_one_rank_answers_400_with_the_reason(tmp_path):
    """Two files of a job folder claiming one rank: the ranks page was a 200 with no job and no
    status saying what was wrong; it is a 400 naming both files."""
    import shutil

    job = tmp_path / "job"
    job.mkdir()
    for name in ("a.pt.trace.json.gz", "b.pt.trace.json.gz"):
        shutil.copy(FIXTURES / "ranks" / "gloo4" / "rank-0.pt.trace.json.gz", job / name)
    answer = page_client(make_app(Profiles.load([str(job)]))).get("/api/ranks")
    assert answer.status_code == 400
    assert answer.json() == {"error": f"`{job / 'a.pt.trace.json.gz'}` and `{job / 'b.pt.trace.json.gz'}` are both "
                                      "rank 0 (recorded); a job has one trace per rank"}
