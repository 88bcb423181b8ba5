"""The web UI in a real browser: Debian's chromium driven by playwright, on the bundled sample and
the multistep fixture. What the page shows is checked against the CLI run with the same options;
each tab is saved as a screenshot under build/ui-screenshots (CI keeps them as artefacts)."""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES

import tfprof
from tfprof.cli.main import main as cli_main

# playwright is in the dev extra; without it this module is skipped, not a collection error.
sync_playwright = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need playwright: pip install -e '.[dev]'").sync_playwright

SAMPLE = str(tfprof.sample_path())
MULTISTEP = str(FIXTURES / "multistep" / "profile.pb")
GLOO_JOB = FIXTURES / "ranks" / "gloo4"
CHROMIUM = "/usr/bin/chromium"  # Debian's package (.ci/run installs it); playwright's download is not used
SHOTS = Path(__file__).resolve().parent.parent / "build" / "ui-screenshots"


@pytest.fixture(scope="module")
def server():
    running = tfprof.ui([SAMPLE, MULTISTEP])
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        # evil.example resolves to this machine: a DNS-rebinding attacker's name (test_a_rebound_name...)
        b = p.chromium.launch(executable_path=CHROMIUM,
                              args=["--no-sandbox", "--host-resolver-rules=MAP evil.example 127.0.0.1"])
        yield b
        b.close()


def open_page(browser, server):
    """A page on ``server``, ready, and the list its script errors go to."""
    # bypass_csp: playwright's wait_for_function evaluates strings, which the page's CSP forbids
    pg = browser.new_page(viewport={"width": 1440, "height": 860}, bypass_csp=True)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto(f"{server}#tree")  # the views: most tests start there (the Overview's own test opens the page bare)
    pg.wait_for_function("window.tfprofReady === true")
    return pg, errors


@pytest.fixture
def page(server, browser):
    pg, errors = open_page(browser, server)
    yield pg
    pg.close()
    assert not errors, errors


@contextlib.contextmanager
def page_on(browser, *paths: str):
    """A page on a server of its own for ``paths``; its script errors checked at the end, the
    server stopped whatever happens."""
    running = tfprof.ui(list(paths))
    try:
        pg, errors = open_page(browser, running)
        yield pg
        pg.close()
        assert not errors, errors
    finally:
        running.stop()


def shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"))


def settle(pg) -> None:
    pg.evaluate("tfprofUI.idle()")  # the page's refreshes run one after another: wait for the last
    pg.wait_for_load_state("networkidle")


def set_option(pg, name: str, value: str) -> None:
    pg.fill(f"#options [name={name}]", value)
    pg.dispatch_event(f"#options [name={name}]", "change")
    settle(pg)


def cli_rows(capsysbinary, command: str) -> list[dict]:
    assert cli_main([*shlex.split(command)[1:], "--format", "json"]) == 0
    return json.loads(capsysbinary.readouterr().out)


def cli_lines(capsysbinary, command: str) -> list[str]:
    assert cli_main(shlex.split(command)[1:]) == 0
    return capsysbinary.readouterr().out.decode().partition("\nnode name |")[2].split("\n")[1:-1]


def shown(pg) -> list[dict]:
    return pg.evaluate("tfprofUI.ui.tree.rows().map(r => ({name: r.name, level: r.level, values: r.values, line: r.line}))")


def test_tree_equals_the_cli_for_the_same_options(page, capsysbinary):
    set_option(page, "max_depth", "4")
    page.check("#options input[name=select][value=params]")
    page.dispatch_event("#options input[name=select][value=params]", "change")
    set_option(page, "hide_name_regexes", ".*Initializer.*")
    page.click("#expand")
    page.wait_for_function("tfprofUI.ui.tree.rows().some(r => r.level === 3)")
    settle(page)
    command = page.inner_text("#command code")
    assert command == f"tfprof scope {SAMPLE} --max_depth 4 --hide_name_regexes '.*Initializer.*' --select micros,params"
    expected, lines = cli_rows(capsysbinary, command), cli_lines(capsysbinary, command)
    rows = shown(page)
    assert [(r["name"], r["level"]) for r in rows] == [(e["name"], e["depth"]) for e in expected]
    columns = page.evaluate("tfprofUI.ui.tree.cols.map(c => c.name)")
    assert [dict(zip(columns, r["values"])) for r in rows] == [{c: e[c] for c in columns} for e in expected]
    assert [r["line"] for r in rows] == lines
    # the cells drawn on screen are the report's: each row's self/total pairs appear in its line
    for row in page.query_selector_all(".tt-row[data-i]")[:20]:
        i = int(row.get_attribute("data-i"))
        cells = [c.inner_text() for c in row.query_selector_all(".num")]
        line = next(r["line"] for r in rows if r["name"] == row.query_selector(".nm").inner_text())
        for self_cell, total_cell in zip(cells[::2], cells[1::2]):
            assert f"{self_cell}/{total_cell}" in line, (i, line)
    shot(page, "views")


def test_order_by_a_column_and_other_views(page, capsysbinary):
    page.click("#views button[data-cmd=op]")
    settle(page)
    page.click(".tt-head .tt-name")  # order by name (the list opens by time)
    settle(page)
    assert "--order_by" not in page.inner_text("#command code")  # name: the default
    page.click(".tt-head .num.total >> nth=0")  # order by the time column
    settle(page)
    command = page.inner_text("#command code")
    assert "--order_by micros" in command and command.startswith("tfprof op ")
    expected = cli_rows(capsysbinary, command)
    assert [r["name"] for r in shown(page)] == [e["name"] for e in expected]


def test_each_view_starts_from_its_own_defaults(page, capsysbinary):
    """The op view opens ranked by time (by name its rows are an alphabet); a depth set in the
    scope view stays there and is not carried into the op view."""
    set_option(page, "max_depth", "3")
    settle(page)
    page.click("#views button[data-cmd=op]")
    settle(page)
    command = page.inner_text("#command code")
    assert command.startswith("tfprof op ") and "--order_by micros" in command and "--max_depth" not in command
    expected = cli_rows(capsysbinary, command)
    assert [r["name"] for r in shown(page)] == [e["name"] for e in expected] and len(expected) > 4
    page.click("#views button[data-cmd=scope]")
    settle(page)
    command = page.inner_text("#command code")
    assert command.startswith("tfprof scope ") and "--max_depth 3" in command and "--order_by" not in command


def test_expand_all_is_one_request_and_an_option_changed_meanwhile_wins(page):
    set_option(page, "max_depth", "100")
    settle(page)
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/api/" in r.url else None)
    page.click("#expand")
    set_option(page, "max_depth", "3")  # before the expansion's answer has come back, perhaps
    settle(page)
    assert sum("/api/subtree/" in u for u in asked) == 1 and not any("/api/children/" in u for u in asked)
    assert page.inner_text("#error") == ""
    assert page.evaluate("tfprofUI.ui.tree.rows().length") < page.evaluate("tfprofUI.ui.tree.view.total_rows")
    page.click("#expand")  # every row of the view, now
    page.wait_for_function("tfprofUI.ui.tree.rows().length === tfprofUI.ui.tree.view.total_rows")
    assert page.inner_text("#error") == ""


def test_expand_and_collapse(page):
    before = len(shown(page))
    resnet = page.locator(".tt-row", has=page.locator(".nm", has_text="resnet")).first
    children = int(resnet.locator(".n").inner_text())
    resnet.locator(".tw").click()
    page.wait_for_function(f"tfprofUI.ui.tree.rows().length === {before + children}")
    resnet.locator(".tw").click()
    page.wait_for_function(f"tfprofUI.ui.tree.rows().length === {before}")


def test_search_reveals_a_deep_node(page):
    page.fill("#search", "resnet/block2/sub1/conv/Conv2D")
    page.press("#search", "Enter")
    page.wait_for_selector(".tt-row.sel")
    selected = page.inner_text(".tt-row.sel .nm")
    assert selected == "resnet/block2/sub1/conv/Conv2D"
    assert page.inner_text("#line").startswith(" " * 2)  # the report's line of the node, indented


def test_flame_graph_click_through(page):
    page.click("#tabs button[data-tab=flame]")
    page.wait_for_function("tfprofUI.ui.flame.data && tfprofUI.ui.flame.boxes.length > 3")
    shot(page, "flame")
    box = page.evaluate("""(() => { const f = tfprofUI.ui.flame, d = f.data;
        const b = f.boxes.find(([x, y, w, k]) => d.level[k] === 1 && d.name[k] === 'resnet');
        return {x: b[0] + b[2] / 2, y: b[1] + 8, i: d.i[b[3]]}; })()""")
    canvas = page.locator("#flame").bounding_box()
    page.mouse.click(canvas["x"] + box["x"], canvas["y"] + box["y"])
    page.wait_for_function(f"tfprofUI.ui.flame.data.root === {box['i']}")
    data = page.evaluate("tfprofUI.ui.flame.data")
    assert data["name"][0] == "resnet" and data["level"][0] == 0 and max(data["level"]) >= 1
    assert "resnet" in page.inner_text("#crumbs")
    page.click("#crumbs a >> text=all")
    page.wait_for_function("tfprofUI.ui.flame.data.root === -1")


def test_timeline_zoom_and_trace_download(page):
    page.select_option("#profile", "1")
    page.click("#tabs button[data-tab=timeline]")
    page.wait_for_function("tfprofUI.ui.timeline.data !== null")
    shot(page, "timeline")
    width = page.evaluate("tfprofUI.ui.timeline.t1 - tfprofUI.ui.timeline.t0")
    canvas = page.locator("#timeline").bounding_box()
    page.mouse.move(canvas["x"] + canvas["width"] * 0.6, canvas["y"] + 40)
    for _ in range(5):
        page.mouse.wheel(0, -300)
    page.wait_for_function(f"tfprofUI.ui.timeline.t1 - tfprofUI.ui.timeline.t0 < {width / 4}")
    with page.expect_download() as download:
        page.click("#trace")
    trace = json.loads(Path(download.value.path()).read_text())
    steps = page.evaluate("tfprofUI.ui.timeline.data")
    assert sum(e.get("ph") == "X" for e in trace["traceEvents"]) == len(steps["ts"])


def test_advisor_link_selects_the_node(page):
    page.click("#tabs button[data-tab=advisor]")
    page.wait_for_selector(".card")
    shot(page, "advisor")
    page.click("table.grid a >> text=Conv2D")
    page.wait_for_selector(".tt-row.sel")
    assert page.inner_text(".tt-row.sel .nm") == "Conv2D"
    assert page.inner_text("#command code").startswith("tfprof op ")
    assert "--order_by micros" in page.inner_text("#command code")  # the op view's order: Conv2D first


def test_sql_console_and_a_refused_query(page, tmp_path):
    page.click("#tabs button[data-tab=sql]")
    page.fill("#sql", "select op, count(*) as n from nodes group by op order by n desc, op")
    page.click("#run-sql")
    page.wait_for_selector("#sql-result table")
    expected = tfprof.load(SAMPLE).sql("select op, count(*) as n from nodes group by op order by n desc, op")
    cells = page.eval_on_selector_all("#sql-result tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert cells == [[op, str(n)] for op, n in expected.iter_rows()]
    shot(page, "sql")
    target = tmp_path / "x"
    page.fill("#sql", f"copy nodes to '{target}'")
    page.click("#run-sql")
    page.wait_for_selector("#error.on")
    assert "COPY" in page.inner_text("#error") and not target.exists()


def test_sql_csv_download(page):
    page.click("#tabs button[data-tab=sql]")
    page.fill("#sql", "select node_id, name from nodes order by node_id limit 5")
    with page.expect_download() as download:
        page.click("#sql-csv")
    assert download.value.suggested_filename == "tfprof-query.csv"
    rows = Path(download.value.path()).read_text().splitlines()
    expected = tfprof.load(SAMPLE).sql("select node_id, name from nodes order by node_id limit 5")
    assert rows == ["node_id,name", *(f"{i},{n}" for i, n in expected.iter_rows())]


def test_a_rebound_name_gets_no_page_and_other_pages_no_api(browser, server):
    """DNS rebinding in the browser: evil.example resolves to 127.0.0.1 (the browser's resolver
    rule), and neither the page nor the API answers it. A script of another origin that calls
    the real address is stopped too: without the token by the server (403), with a header at all
    by the browser's CORS preflight, which the server never grants."""
    port = int(str(server).rstrip("/").rsplit(":", 1)[1])
    pg = browser.new_page()
    statuses: dict[str, int] = {}
    pg.on("response", lambda r: statuses.__setitem__(f"{r.request.method} {r.url}", r.status))
    answer = pg.goto(f"http://evil.example:{port}/")
    assert answer.status == 421 and "Misdirected request" in pg.inner_text("body")
    assert pg.evaluate("fetch('/api/profiles').then(r => r.status)") == 421
    sql = f"http://127.0.0.1:{port}/api/sql/0"
    pg.evaluate(f"""fetch('{sql}', {{method: 'POST', mode: 'no-cors', body: new URLSearchParams({{q: 'select 1'}})}})""")
    pg.wait_for_timeout(300)
    assert statuses[f"POST {sql}"] == 403
    refused = pg.evaluate(f"""fetch('{sql}', {{method: 'POST', headers: {{'X-Tfprof-Token': 'guess'}},
                                               body: new URLSearchParams({{q: 'select 1'}})}}).then(() => 'sent', e => String(e))""")
    assert refused.startswith("TypeError")
    pg.close()


def test_two_profiles_side_by_side(page):
    page.click("#tabs button[data-tab=compare]")
    page.wait_for_function("tfprofUI.ui.left.view && tfprofUI.ui.right.view")
    settle(page)
    left = page.evaluate("tfprofUI.ui.left.view.command")
    right = page.evaluate("tfprofUI.ui.right.view.command")
    assert left == f"tfprof scope {SAMPLE}" and right == f"tfprof scope {MULTISTEP}"
    assert page.inner_text("#cmp-left .tt-row >> nth=0") != page.inner_text("#cmp-right .tt-row >> nth=0")
    shot(page, "compare")
    page.select_option("#profile", "1")
    assert "3 steps" in page.inner_text("#facts")


def test_bad_option_shows_a_message_not_a_trace(page):
    set_option(page, "show_name_regexes", "a(b")
    page.wait_for_selector("#error.on")
    message = page.inner_text("#error")
    assert message.startswith("Bad regex `a(b`") and "Traceback" not in message


def test_compare_lists_the_largest_changes_as_tfprof_diff_does(browser, capsysbinary):
    """Two runs of one model, the second with a widened layer: the compare page's table of
    changes holds tfprof diff's first rows, in its order, the significant ones marked."""
    base, wide = (str(FIXTURES / "diff" / name / "profile.pb") for name in ("base", "wide"))
    with page_on(browser, base, wide) as pg:
        pg.click("#tabs button[data-tab=compare]")
        pg.wait_for_selector("#changes table.grid tbody tr")
        settle(pg)
        shown = [pg.inner_text(f"#changes tbody tr >> nth={k} >> td >> nth=1") for k in range(5)]
        marks = [pg.inner_text(f"#changes tbody tr >> nth={k} >> td >> nth=0") for k in range(5)]
        assert cli_main(["diff", base, wide, "scope", "--format", "json"]) == 0
        rows = json.loads(capsysbinary.readouterr().out)["rows"]
        assert shown == [r["name"] for r in rows[:5]]
        assert marks == ["*" if r["significant"] else "" for r in rows[:5]] and marks[0] == "*"
        command = pg.inner_text("#changes code")
        assert command.startswith(f"tfprof diff {base} {wide} scope")
        pg.click("#changes tbody tr >> nth=0 >> td >> nth=1 >> a")  # the change, selected in both trees
        for side in ("#cmp-left", "#cmp-right"):
            pg.wait_for_selector(f"{side} .tt-row.sel")
            assert pg.inner_text(f"{side} .tt-row.sel .nm") == shown[0]
        shot(pg, "compare_changes")


def test_a_larger_profile(browser, tmp_path, capsysbinary):
    """A 30,000-node, 2-step synthetic profile (benchmarks/synthlib.py, a fixed seed): the top
    levels equal the CLI's, a node with many children expands, the flame graph and one step's
    timeline draw, and every op of the step is on the timeline."""
    import importlib
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    synth = importlib.import_module("synthlib")
    profile = tmp_path / "large.pb"
    synth.write_profile(profile, 30_000, 2, seed=11)
    with page_on(browser, str(profile)) as pg:
        set_option(pg, "max_depth", "2")
        command = pg.inner_text("#command code")
        expected = cli_rows(capsysbinary, command)
        top = [(r["name"], r["level"]) for r in shown(pg)]
        assert top == [(e["name"], e["depth"]) for e in expected if e["depth"] <= max(d for _, d in top)]
        pg.click("#expand")  # every level max_depth shows: the rows are the CLI's, in its order
        pg.wait_for_function(f"tfprofUI.ui.tree.rows().length === {len(expected)}")
        assert [(r["name"], r["level"]) for r in shown(pg)] == [(e["name"], e["depth"]) for e in expected]
        pg.click("#tabs button[data-tab=flame]")
        pg.wait_for_function("tfprofUI.ui.flame.data !== null && tfprofUI.ui.flame.data !== undefined")
        boxes = pg.evaluate("tfprofUI.ui.flame.boxes.length")
        assert 1 < boxes <= len(expected), boxes  # one box per row the view shows, at most
        pg.click("#tabs button[data-tab=timeline]")
        pg.wait_for_function("tfprofUI.ui.timeline.data !== null")
        ops = pg.evaluate("tfprofUI.ui.timeline.data.ts.length")
        step = int(pg.input_value("#tl-step"))
        from tfprof.api.steps import step_timeline

        assert ops == len(step_timeline(tfprof.load(profile), step)["ts"]) > 10_000  # every op of the step
        shot(pg, "large_timeline")


def test_kernels_open_beneath_their_op(browser):
    """A GPU trace, ``kernels`` ticked: opening an op shows the kernels it launched, their time in
    the self accelerator-time column, as the CLI lists them under its line."""
    import re

    from playwright.sync_api import expect

    trace = str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")
    with page_on(browser, trace) as pg:
        pg.uncheck("input[name=select][value=micros]")
        pg.check("input[name=select][value=accelerator_micros]")
        pg.check("input[name=select][value=kernels]")
        pg.select_option("select[name=order_by]", "accelerator_micros")
        settle(pg)  # the refreshes of each change, one after another: the last one drawn
        op = pg.locator(".tt-row").filter(has=pg.locator(".nm", has_text=re.compile(r"^aten::add$")))
        expect(op.first.locator(".tw")).to_have_text("▶")  # a leaf with kernels opens
        assert pg.locator(".tt-row.kernel").count() == 0  # closed until opened
        op.first.locator(".tw").click()
        pg.locator(".tt-row.kernel").first.wait_for()
        shown = pg.locator(".tt-row.kernel .nm").all_inner_texts()
        from tfprof.api import run_view

        text = run_view(tfprof.load(trace), "scope", {"select": ["accelerator_micros", "kernels"],
                                                      "order_by": "accelerator_micros"}).text
        block = text.split("\n  aten::add (", 1)[1].split("\n  aten::", 1)[0]
        want = re.findall(r"^    (\[\w+\] .*) \([^(]*, \d+ runs?\)$", block, re.M)
        assert shown == want and len(want) == 2
        assert pg.locator(".tt-row.kernel .num").first.inner_text() in block
        shot(pg, "kernels")


def test_steps_tab_draws_each_steps_parts(browser):
    trace = str(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz")
    with page_on(browser, trace) as pg:
        pg.click("#tabs button[data-tab=steps]")
        pg.wait_for_selector("#steps .steprow")
        parts = pg.locator(".steppart")
        titles = [parts.nth(k).get_attribute("title") for k in range(parts.count())]
        assert [t.split(":")[0] for t in titles] == ["compute", "communication", "memcpy/memset", "idle"]
        assert titles[0] == "compute: 38.43ms (17.5%)" and "1.76ms of 12.30ms (14.3%)" in pg.inner_text("#steps .reports")
        shot(pg, "steps")


def test_flame_search_highlights_names_and_counts_them_once(page):
    """Highlighting `conv` in the flame graph: the crumbs give the matched total, a match inside a
    match counted once, which is the scope view's total of the top-most matching rows."""
    set_option(page, "max_depth", "100")
    page.click("#tabs button[data-tab=flame]")
    page.wait_for_function("tfprofUI.ui.flame.data && tfprofUI.ui.flame.data.i.length > 0")
    page.fill("#flame-search", "conv")
    found = page.inner_text("#crumbs .found")
    d = page.evaluate("tfprofUI.ui.flame.data")
    hits = [k for k, n in enumerate(d["name"]) if "conv" in n.lower()]
    top = [k for k in hits if not any(d["level"][j] < d["level"][k] and d["x"][j] <= d["x"][k] + 1e-9
                                      and d["x"][k] + d["w"][k] <= d["x"][j] + d["w"][j] + 1e-9 for j in hits)]
    total = sum(d["w"][k] for k in top)
    assert hits and len(top) < len(hits)  # the scopes named conv hold ops named Conv2D
    assert found.startswith(f" · {len(hits)} matches: ") and f"({100 * total / d['total']:.2f}%)" in found
    page.fill("#flame-search", "")
    assert page.locator("#crumbs .found").count() == 0


def test_a_registered_metric_is_offered_and_drawn(browser):
    """A metric registered in the server's process (the ``tests/test_metric_recipe.py`` kinds) is
    a select box, an order and a threshold in the panel, and a column whose cells are the report's."""
    from test_metric_recipe import INTENSITY, KFLOPS

    from tfprof.api.options import register_metric, unregister

    register_metric(KFLOPS)
    register_metric(INTENSITY)
    try:
        with page_on(browser, SAMPLE) as pg:
            assert pg.eval_on_selector_all("#options [name=min_kflops]", "els => els.length") == 1
            assert pg.eval_on_selector("select[name=order_by]", "s => [...s.options].map(o => o.value)")[-2:] == [
                "kflops", "flops_per_byte"]
            for name in ("kflops", "flops_per_byte"):
                pg.check(f"#options input[name=select][value={name}]")
                pg.dispatch_event(f"#options input[name=select][value={name}]", "change")
                settle(pg)
            command = pg.inner_text("#command code")
            assert command.endswith("--select flops_per_byte,kflops,micros"), command
            columns = pg.evaluate("tfprofUI.ui.tree.cols.map(c => c.name)")
            assert {"kflops", "total_kflops", "flops_per_byte", "total_flops_per_byte"} <= set(columns)
            rows = shown(pg)
            table = tfprof.view(tfprof.load(SAMPLE), "scope", select=["kflops", "flops_per_byte", "micros"])
            by_name = {r["name"]: r for r in table.iter_rows(named=True)}
            for r in rows:
                values = dict(zip(columns, r["values"]))
                assert values["total_kflops"] == by_name[r["name"]]["total_kflops"]
                assert values["total_flops_per_byte"] == pytest.approx(by_name[r["name"]]["total_flops_per_byte"])
                assert "%.2f" % by_name[r["name"]]["total_flops_per_byte"] in r["line"]
            shot(pg, "registered-metric")
    finally:
        unregister("flops_per_byte")
        unregister("kflops")


def test_the_overview_is_the_landing_page_and_leads_on(browser, capsysbinary):
    """A bare address lands on the Overview: the op types by time are the op view's (ordered by
    time), the steps and the advisor's findings follow, and an op type opens the op view."""
    running = tfprof.ui([SAMPLE])
    try:
        pg = browser.new_page(viewport={"width": 1440, "height": 860}, bypass_csp=True)
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(str(running))
        pg.wait_for_function("window.tfprofReady === true")
        settle(pg)
        assert pg.get_attribute("#tabs button[data-tab=overview]", "class") == "on"
        assert not pg.is_visible("#panel")  # the view options belong to the views
        expected = cli_rows(capsysbinary, f"tfprof op {SAMPLE} --order_by micros --max_depth 9 --select micros")
        names = pg.eval_on_selector_all("#overview .card:nth-child(2) .oprow .nm", "els => els.map(e => e.textContent)")
        assert names == [e["name"] for e in expected]
        total = expected[0]["total_exec_micros"]
        shares = pg.eval_on_selector_all("#overview .card:nth-child(2) .oprow .val:last-child",
                                         "els => els.map(e => e.textContent)")
        assert shares == [f"{100 * e['exec_micros'] / total:.1f}%" for e in expected]
        from tfprof.api.advice import advise

        advice = advise(tfprof.load(SAMPLE))
        findings = pg.eval_on_selector_all("#overview .finding b", "els => els.map(e => e.textContent)")
        assert findings == [f"{name}: " for name, reports in advice.reports.items() if reports]
        shot(pg, "overview")
        pg.click("#overview .oprow >> nth=0")
        settle(pg)
        assert pg.get_attribute("#tabs button[data-tab=tree]", "class") == "on"
        assert pg.inner_text("#command code").startswith(f"tfprof op {SAMPLE}")
        assert shown(pg)[0]["name"] == expected[0]["name"]  # the op view opens by time
        pg.close()
        assert not errors, errors
    finally:
        running.stop()


def _fmt_time_ns(ns: int) -> str:
    """The page's Fmt.time of a time in ns (tfprof's FormatTime)."""
    from tfprof.views.units import fmt_time_ns

    return fmt_time_ns(ns)


def _fmt_memory(b: int) -> str:
    """The page's Fmt.memory (tfprof's FormatMemory)."""
    from tfprof.views.units import fmt_memory

    return fmt_memory(b)


def test_memory_page_draws_the_peak_and_its_ops(browser):
    """The Memory page of a trace with allocation events: the highest peak is shown first, its
    ops are ``tfprof memory``'s, another step can be picked, and an op opens its node."""
    from tfprof.api.memory import memory, peak_ops, pick

    path = str(FIXTURES / "foreign" / "tf2_keras_memory.xplane.pb")
    prof = tfprof.load(path)
    rows = memory(prof)
    first = pick(rows, None, None)
    with page_on(browser, path) as pg:
        pg.click("#tabs button[data-tab=memory]")
        settle(pg)
        assert pg.inner_text("#memory h3 >> nth=0") == f"Memory in use: step {first['step']} on {first['allocator']}"
        want = peak_ops(prof, first["step"], first["allocator"]).to_dicts()
        names = pg.eval_on_selector_all("#memory .oprow .nm", "els => els.map(e => e.textContent)")
        assert names == [r["name"] for r in want]
        assert pg.eval_on_selector_all("#memory svg path.line", "els => els.length") == 1
        texts = pg.eval_on_selector_all("#memory svg text", "els => els.map(e => e.textContent)")
        assert f"peak {_fmt_memory(first['peak_bytes'])}" in texts
        shot(pg, "memory")
        other = next(r for r in rows.iter_rows(named=True) if r["step"] != first["step"])
        pg.select_option("#memory select", f"step={other['step']}&allocator={other['allocator']}")
        settle(pg)
        assert pg.inner_text("#memory h3 >> nth=0") == f"Memory in use: step {other['step']} on {other['allocator']}"
        pg.click("#memory .oprow >> nth=0")
        pg.wait_for_selector(".tt-row.sel")
        top = peak_ops(prof, other["step"], other["allocator"])["name"][0]
        assert pg.get_attribute("#tabs button[data-tab=tree]", "class") == "on"
        assert pg.inner_text(".tt-row.sel .nm") == top
        assert pg.inner_text("#command code").startswith("tfprof scope ")
        # the peak on the timeline: the step's timeline, zoomed to the peak's moment and marked there
        pg.click("#tabs button[data-tab=memory]")
        settle(pg)
        pg.click("#memory .to-timeline")
        pg.wait_for_function("tfprofUI.state.tab === 'timeline' && tfprofUI.ui.timeline.mark")
        settle(pg)
        assert pg.input_value("#tl-step") == str(other["step"])
        mark, origin = pg.evaluate("[tfprofUI.ui.timeline.mark.t, tfprofUI.ui.timeline.data.origin_ns]")
        assert mark == pytest.approx(other["start_micros"] + other["peak_micros"] - origin / 1000)
        assert pg.evaluate("tfprofUI.ui.timeline.t0 < tfprofUI.ui.timeline.mark.t && tfprofUI.ui.timeline.mark.t < tfprofUI.ui.timeline.t1")


def open_bottom_up(pg) -> None:
    """The code view's flame graph, bottom-up."""
    pg.click("#views button[data-cmd=code]")
    settle(pg)
    pg.click("#tabs button[data-tab=flame]")
    settle(pg)
    pg.click("#flame-invert")
    settle(pg)


def test_bottom_up_flame_graph(browser):
    """The flame graph's bottom-up view of the code view: the bottom row is each function's own
    time summed over its places (the report's self values), widest first."""
    path = str(tfprof.sample_path("torch"))
    table = tfprof.view(tfprof.load(path), "code", select=["micros"], max_depth=10)
    own = (table.filter(pl.col("accounted")).group_by("name").agg(pl.col("exec_micros").sum())
           .filter(pl.col("exec_micros") > 0).sort(["exec_micros", "name"], descending=[True, False]))
    with page_on(browser, path) as pg:
        open_bottom_up(pg)
        data = pg.evaluate("tfprofUI.ui.flame.data")
        assert data["inverted"] and data["total"] == pytest.approx(own["exec_micros"].sum())
        bottom = [(n, w) for n, w, lv in zip(data["name"], data["w"], data["level"]) if lv == 0]
        assert [n for n, _ in bottom] == own["name"].head(len(bottom)).to_list()
        assert [w for _, w in bottom] == pytest.approx(own["exec_micros"].head(len(bottom)).to_list())
        assert "bottom-up" in pg.inner_text("#crumbs")
        assert "_TFProfRoot" not in data["name"]  # the root is no caller
        shot(pg, "flame-bottom-up")  # a click opens a frame's sandwich: test_sandwich_of_a_frame


def test_two_way_sort_and_resizable_columns(page, capsysbinary):
    """A second click on the ordering column turns the siblings' order round (the page's own:
    tfprof sorts one way); dragging a column's edge widens that column in every row."""
    page.click("#views button[data-cmd=op]")  # a list opens ordered by time, tfprof's way
    settle(page)
    command = page.inner_text("#command code")
    assert "--order_by micros" in command
    expected = [e["name"] for e in cli_rows(capsysbinary, command)]
    assert [r["name"] for r in shown(page)] == expected
    assert page.inner_text(".tt-head .num.sorted").startswith("time ▼")
    page.click(".tt-head .num.total >> nth=0")  # again: the other way round
    settle(page)
    assert [r["name"] for r in shown(page)] == expected[::-1]
    assert page.inner_text(".tt-head .num.sorted").startswith("time ▲")
    assert page.inner_text("#command code").startswith(command) and "other way round" in page.inner_text("#command code")
    # resize the first number column by 80 px: the header and the rows' cells follow
    grip = page.query_selector(".tt-head .num >> nth=0").query_selector(".grip").bounding_box()
    before = page.eval_on_selector(".tt-row[data-i] .num", "c => c.getBoundingClientRect().width")
    page.mouse.move(grip["x"] + 3, grip["y"] + 5)
    page.mouse.down()
    page.mouse.move(grip["x"] + 83, grip["y"] + 5, steps=4)
    page.mouse.up()
    after = page.eval_on_selector(".tt-row[data-i] .num", "c => c.getBoundingClientRect().width")
    assert after == pytest.approx(before + 80, abs=2)
    # the order stays a page setting: another view starts from its own
    page.click("#views button[data-cmd=scope]")
    settle(page)
    assert "other way round" not in page.inner_text("#command code")


def test_compare_two_steps_and_the_differential_flame(browser, capsysbinary):
    """Compare with one profile on both sides compares two of its steps (tfprof diff --step S
    --against T), and the differential flame graph lays out that diff's merged tree: each box
    as wide as its value in B, red where it grew and blue where it shrank."""
    with page_on(browser, MULTISTEP) as pg:
        pg.click("#tabs button[data-tab=compare]")
        pg.select_option("#cmp-b", "0")
        settle(pg)
        assert pg.is_visible("#cmp-steps")
        steps = pg.eval_on_selector_all("#cmp-step-a option", "os => os.map(o => o.value)")
        pg.select_option("#cmp-step-b", steps[-1])
        settle(pg)
        command = pg.inner_text("#changes .cmdline")
        assert f"--step {steps[0]} --against {steps[-1]}" in command
        from tfprof.api.diff import run_diff

        prof = tfprof.load(MULTISTEP)
        want = run_diff(prof, None, "scope", {"step": int(steps[0])}, against=int(steps[-1]))
        names = pg.eval_on_selector_all("#changes tbody tr td:nth-child(2)", "tds => tds.map(t => t.textContent)")
        assert names == want.frame["name"].head(len(names)).to_list()
        pg.click("#cmp-mode button[data-mode=flame]")
        settle(pg)
        assert pg.is_visible("#cmp-flame") and not pg.is_visible("#cmp-left")
        data = pg.evaluate("tfprofUI.ui.diffFlame.data")
        tree = run_diff(prof, None, "scope", {"step": int(steps[0])}, against=int(steps[-1]), order_by="tree")
        column = tree.value_columns[0]
        top = tree.frame.filter(pl.col("depth") == 0)
        assert data["total"] == pytest.approx(top[f"{column}_b"].fill_null(0).sum())
        shown_rows = [r for r in data["rows"] if r["level"] == 1]
        children = tree.frame.filter((pl.col("depth") == 1) & (pl.col(f"{column}_b").fill_null(0) > 0))
        assert [r["name"] for r in shown_rows] == children["name"].to_list()[:len(shown_rows)]
        # siblings lie side by side from their parent's start
        xs = [r["x"] for r in shown_rows]
        assert xs == pytest.approx([sum(r["w"] for r in shown_rows[:k]) for k in range(len(shown_rows))])
        shot(pg, "compare-flame")


def test_timeline_search_and_click_through(page):
    """The timeline highlights the bars whose name matches and counts them; a click on a bar
    opens its op in the views."""
    from tfprof.api.steps import step_timeline

    page.click("#tabs button[data-tab=timeline]")
    page.wait_for_function("tfprofUI.ui.timeline.data !== null")
    data = step_timeline(tfprof.load(SAMPLE), 0)
    want = sum("conv2d" in data["names"][k].lower() for k in data["name"])
    page.fill("#tl-search", "Conv2D")
    page.dispatch_event("#tl-search", "input")
    assert page.inner_text("#tl-info").startswith(f"{want:,} of {len(data['ts']):,} match")
    # the longest bar, clicked at its middle
    k = max(range(len(data["dur"])), key=lambda i: data["dur"][i])
    x, y = page.evaluate(f"""(() => {{ const t = tfprofUI.ui.timeline, {{ x0, w }} = t.span();
        const s = w / (t.t1 - t.t0), r = t.canvas.getBoundingClientRect();
        return [r.left + x0 + (t.ts[{k}] + t.dur[{k}] / 2 - t.t0) * s, r.top + t.TOP + {data['lane'][k]} * t.LANE + t.LANE / 2]; }})()""")
    page.mouse.click(x, y)
    page.wait_for_selector(".tt-row.sel")
    assert page.inner_text(".tt-row.sel .nm") == data["names"][data["name"][k]]


def test_foreign_timeline_nests_events_and_follows_flows(browser):
    """A Kineto GPU trace's timeline is its own events: the CPU threads' ops nested, the stream's
    kernels, the flows; hovering a kernel draws its launch's arrow and names the op that
    launched it, and a click opens that op in the views."""
    from tfprof.api.steps import step_timeline

    resnet = FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz"
    data = step_timeline(tfprof.load(resnet), 6)
    with page_on(browser, str(resnet)) as pg:
        pg.click("#tabs button[data-tab=timeline]")
        pg.wait_for_function("tfprofUI.ui.timeline.data !== null")
        settle(pg)
        assert pg.inner_text("#tl-info") == f"{len(data['ts']):,} events on 3 tracks ({len(data['lanes'])} lanes) · 1,516 flows"
        kernels = [k for k in range(len(data["ts"])) if data["cats"][data["cat"][k]] == "Kernel"]
        k = max(kernels, key=lambda i: data["dur"][i])  # the longest kernel, zoomed to
        pg.evaluate(f"""(() => {{ const t = tfprofUI.ui.timeline;
            t.t0 = t.ts[{k}] - 2 * t.dur[{k}]; t.t1 = t.ts[{k}] + 3 * t.dur[{k}]; t.draw(); }})()""")
        x, y = pg.evaluate(f"""(() => {{ const t = tfprofUI.ui.timeline, {{ x0, w }} = t.span();
            const s = w / (t.t1 - t.t0), r = t.canvas.getBoundingClientRect();
            return [r.left + x0 + (t.ts[{k}] + t.dur[{k}] / 2 - t.t0) * s, r.top + t.laneY({data['lane'][k]}) + t.LANE / 2]; }})()""")
        pg.mouse.move(x, y)
        tip = pg.inner_text("#tl-tip")
        op = data["nodes"][data["node"][k]]
        assert data["names"][data["name"][k]] in tip and f"op: {op}" in tip and "1 flow" in tip
        assert pg.evaluate("tfprofUI.ui.timeline.focus") == k
        shot(pg, "timeline_kineto")
        pg.mouse.click(x, y)
        pg.wait_for_selector(".tt-row.sel")
        assert pg.inner_text(".tt-row.sel .nm") == op


def test_ranks_page_marks_the_straggler_and_opens_its_timeline(browser):
    """A job's directory opens as one profile per rank; the Ranks page draws each rank's median
    step with the straggler marked, says what the checks found, lists the ops that differ, and a
    click on a rank opens its timeline."""
    job = tfprof.ranks(GLOO_JOB)
    with page_on(browser, str(GLOO_JOB)) as pg:
        assert pg.evaluate("tfprofUI.state.profiles.length") == 4
        pg.click("#tabs button[data-tab=ranks]")
        settle(pg)
        rows = pg.eval_on_selector_all(".rankrow", "rs => rs.map(r => [r.dataset.rank, r.classList.contains('straggler')])")
        assert rows == [[str(r), r == 2] for r in range(4)]
        assert pg.inner_text("#ranks .reports").splitlines() == job.finding_lines()
        assert pg.inner_text("#ranks table.grid tbody tr td") == job.ops["name"][0]
        shot(pg, "ranks")
        pg.click(".rankrow[data-rank='2']")
        pg.wait_for_function("tfprofUI.state.tab === 'timeline' && tfprofUI.ui.timeline.data !== null")
        settle(pg)
        label = pg.evaluate("tfprofUI.state.profiles.find(p => p.id === tfprofUI.state.pid).path")
        assert label.endswith("rank-2.pt.trace.json.gz")
    with page_on(browser, SAMPLE) as pg:  # one profile: no Ranks tab
        assert pg.is_hidden("#tabs button[data-tab=ranks]")
    # two profiles that are no job's ranks (none recorded or named; two jobs' ranks): no Ranks tab either
    for paths in ((SAMPLE, MULTISTEP), (str(GLOO_JOB / "rank-1.pt.trace.json.gz"),
                                        str(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz"))):
        with page_on(browser, *paths) as pg:
            assert pg.evaluate("tfprofUI.state.profiles.length") == 2
            assert pg.is_hidden("#tabs button[data-tab=ranks]")


def test_every_page_on_a_gpu_trace(browser, capsysbinary):
    """Each page on a real PyTorch GPU trace draws what the command line or the API says, with no
    error: the Overview's op types, the views' rows, the flame graph's total, every slice of the
    timeline, the step's parts, memory in use, the advisor's checks and a SQL query."""
    from tfprof.api.breakdown import steps
    from tfprof.api.steps import step_timeline

    trace = str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")
    prof = tfprof.load(trace)
    with page_on(browser, trace) as pg:
        def open_tab(tab: str) -> None:
            pg.click(f"#tabs button[data-tab={tab}]")
            settle(pg)
            assert pg.inner_text("#error") == "", tab

        open_tab("overview")
        expected = cli_rows(capsysbinary, f"tfprof op {trace} --order_by micros --max_depth 9 --select micros")
        first = pg.eval_on_selector_all("#overview .oprow .nm", "els => els.map(e => e.textContent)")[0]
        assert first == expected[0]["name"]
        open_tab("tree")
        assert len(shown(pg)) > 5
        open_tab("flame")
        pg.wait_for_function("tfprofUI.ui.flame.data !== null && tfprofUI.ui.flame.data.total > 0")
        open_tab("timeline")
        pg.wait_for_function("tfprofUI.ui.timeline.data !== null")
        assert pg.evaluate("tfprofUI.ui.timeline.data.ts.length") == len(step_timeline(prof, 6)["ts"])
        open_tab("steps")
        window = steps(prof)["window_ns"][0]
        assert f"step 6 · gpu:0 · {_fmt_time_ns(window)}" in pg.inner_text("#steps")
        open_tab("memory")
        assert pg.locator("#memory svg").count() > 0 and "Memory in use: step 6" in pg.inner_text("#memory")
        open_tab("advisor")
        assert pg.locator("#advice .card").count() > 3
        open_tab("sql")
        pg.click("#run-sql")
        settle(pg)
        pg.wait_for_selector("#sql-result table.grid tbody tr")
        assert pg.locator("#sql-result table.grid tbody tr").count() > 5
        shot(pg, "gpu_sql")


def test_compare_merged_tree_folds(browser):
    """Compare's merged tree lists the diff's rows in tree order with A, B, Δ and Δ%, indented by
    depth; a click folds what is under a row and a second unfolds it."""
    from tfprof.api.diff import run_diff

    with page_on(browser, SAMPLE, MULTISTEP) as pg:
        pg.click("#tabs button[data-tab=compare]")
        settle(pg)
        pg.click("#cmp-mode button[data-mode=merged]")
        settle(pg)
        want = run_diff(tfprof.load(SAMPLE), tfprof.load(MULTISTEP), "scope", {}, order_by="tree")
        names = pg.eval_on_selector_all("#cmp-merged tbody td.nm", "tds => tds.map(t => t.title)")
        assert names == want.frame["path"].head(len(names)).to_list()

        def visible() -> int:
            return pg.eval_on_selector_all("#cmp-merged tbody tr", "trs => trs.filter(t => !t.hidden).length")

        before = visible()
        first_parent = pg.query_selector("#cmp-merged tbody tr.open")
        first_parent.click()
        assert visible() < before
        first_parent.click()
        assert visible() == before


def test_sandwich_of_a_frame(browser):
    """In the bottom-up flame graph a click opens the frame's sandwich: the frame once, as wide
    as its outermost rows' subtrees in the report, its callers above and its callees below."""
    path = str(tfprof.sample_path("torch"))
    table = tfprof.view(tfprof.load(path), "code", select=["micros"], max_depth=10)
    with page_on(browser, path) as pg:
        open_bottom_up(pg)
        box = pg.evaluate("tfprofUI.ui.flame.boxes[0]")
        rect = pg.eval_on_selector("#flame", "c => { const r = c.getBoundingClientRect(); return [r.left, r.top]; }")
        pg.mouse.click(rect[0] + box[0] + 5, rect[1] + box[1] + 5)
        pg.wait_for_function("tfprofUI.ui.flame.data && tfprofUI.ui.flame.data.sandwich")  # a click's own request
        data = pg.evaluate("tfprofUI.ui.flame.data")
        name = data["sandwich"]
        at = data["callers"]
        target = [w for lv, n, w in zip(data["level"], data["name"], data["w"]) if lv == at]
        rows = table.filter(pl.col("name") == name)
        assert len(target) == 1 and target[0] == pytest.approx(rows["total_exec_micros"].sum())  # no recursion here
        assert all(n != name for lv, n in zip(data["level"], data["name"]) if lv < at)  # callers above
        assert "sandwich of" in pg.inner_text("#crumbs")
        shot(pg, "flame-sandwich")
        pg.click("#crumbs a >> text=back to bottom-up")
        pg.wait_for_function("tfprofUI.ui.flame.data && tfprofUI.ui.flame.data.inverted")
