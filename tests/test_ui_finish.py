"""The web UI's finish, in a real browser: long names cut in the middle with their leaf kept, the
largest changes ordered by the field they name, units that read (GB, M), and no page wider than
the window at 1024, 1440 and 1920 px. Screenshots go under build/ui-screenshots."""

from __future__ import annotations

import re

import pytest
from conftest import FIXTURES

import tfprof

sync_playwright = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need playwright: pip install -e '.[dev]'").sync_playwright
from test_ui_browser import CHROMIUM, page_on, settle, shot  # noqa: E402 - after the skip

RESNET = str(FIXTURES / "foreign" / "kineto_resnet50_step6.pt.trace.json.gz")
DDP = str(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz")
MEMORY = str(FIXTURES / "foreign" / "tf2_keras_memory.xplane.pb")
GLOO_JOB = FIXTURES / "ranks" / "gloo4"
WIDTHS = (1024, 1440, 1920)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()

# each name element (nameEl): its text, tooltip, head and leaf; with the widths the page's font
# gives the whole name and the leaf, and the room the element has
NAMES = """sel => [...document.querySelectorAll(sel)].map(e => {
  const ctx = document.createElement("canvas").getContext("2d"), st = getComputedStyle(e);
  ctx.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
  return { text: e.textContent, title: e.title, head: e.dataset.head, leaf: e.dataset.leaf, mid: e.classList.contains("mid"),
           room: e.clientWidth, whole: ctx.measureText(e.textContent).width, leafWidth: ctx.measureText(e.dataset.leaf || "").width,
           headShrinks: getComputedStyle(e, "::before").flexShrink, leafShrinks: getComputedStyle(e, "::after").flexShrink };
})"""


def leaf(name: str) -> str:
    """The last path segment of a plain name (no template or call brackets), with its `/`."""
    return name[name.rindex("/"):] if "/" in name[1:-1] else name


def check_names(items: list[dict], title=lambda e: e["text"]) -> None:
    assert items
    for e in items:
        assert e["mid"], e
        assert e["head"] + e["leaf"] == e["text"]
        assert e["title"].startswith(title(e))
        if not re.search(r"[<(\[]", e["text"]):
            assert e["leaf"] == leaf(e["text"]), e


def test_long_names_keep_their_leaf(browser):
    """In the views' tree a name wider than its column loses its middle, not its leaf: the leaf
    fits whole (the head shrinks first) and the tooltip holds the whole name; the memory page's
    ops, the ranks' table and the search's hits are drawn the same way."""
    with page_on(browser, RESNET) as pg:
        pg.set_viewport_size({"width": 1024, "height": 860})
        pg.click("#views button[data-cmd=scope]")
        pg.fill("#options [name=max_depth]", "100")
        pg.dispatch_event("#options [name=max_depth]", "change")
        settle(pg)
        pg.click("#expand")
        pg.wait_for_function("tfprofUI.ui.tree.rows().some(r => r.level >= 4)")
        settle(pg)
        items = pg.evaluate(NAMES, ".tt-row .nm")
        check_names(items)
        cut = [e for e in items if e["whole"] > e["room"] + 1]
        assert cut, "no name is cut at 1024 px: the test shows nothing"
        for e in cut:
            assert (e["headShrinks"], e["leafShrinks"]) == ("1", "0")
            if e["head"]:
                assert e["leafWidth"] <= e["room"] + 1, e  # the whole leaf is drawn
        shot(pg, "names_cut_in_the_middle")
        pg.fill("#search", "conv")
        pg.press("#search", "Enter")
        pg.wait_for_selector("#hits.on .hit")
        check_names(pg.evaluate(NAMES, "#hits .hit > .mid:first-child"))
    with page_on(browser, MEMORY) as pg:
        pg.click("#tabs button[data-tab=memory]")
        settle(pg)
        check_names(pg.evaluate(NAMES, "#memory .oprow .nm"))
    with page_on(browser, str(GLOO_JOB)) as pg:
        pg.click("#tabs button[data-tab=ranks]")
        settle(pg)
        check_names(pg.evaluate(NAMES, "#ranks table.grid td .mid"))


def test_largest_changes_are_ordered_by_the_field_they_name(browser):
    """With accelerator time selected before time, the table of largest changes names the field
    its rows are ordered by, shows that field, and its |Δ| falls row by row."""
    with page_on(browser, RESNET, DDP) as pg:
        pg.click("#tabs button[data-tab=compare]")
        pg.click("#views button[data-cmd=op]")
        settle(pg)
        pg.evaluate("tfprofUI.state.opts.select = 'accelerator_micros,micros'; tfprofUI.refresh()")
        settle(pg)
        caption = pg.inner_text("#changes .bar .muted")
        field = re.search(r"by \|Δ\| of (\w+)", caption).group(1)
        heads = pg.eval_on_selector_all("#changes thead th", "ths => ths.map(t => t.textContent)")
        assert f"{field} A" in heads and f"{field} B" in heads
        names = pg.eval_on_selector_all("#changes tbody tr td:nth-child(2)", "tds => tds.map(t => t.textContent)")
        # the same diff from the library, each row's change of that field
        a, b = tfprof.load(RESNET), tfprof.load(DDP)
        from tfprof.api.diff import public_column, run_diff

        frame = run_diff(a, b, "op", {"select": ["accelerator_micros", "micros"]}).frame
        column = public_column(field)
        delta = dict(zip(frame["name"], frame[f"{column}_delta"].fill_null(0).abs()))
        shown = [delta[n] for n in names]
        assert len(shown) > 3 and shown == sorted(shown, reverse=True), list(zip(names, shown))
        largest = max(delta.values())
        assert shown[0] == largest


def fmt(pg, kind: str, value: float) -> str:
    return pg.evaluate(f"Fmt.{kind}({value!r})")


def test_units_read_gb_and_counts_read_m(browser):
    """Bytes go on to GB and TB, counts read k, M, G (never `m`, which reads as milli), the
    tfprof formats below that unchanged; the flame graph of FLOPs says its total so."""
    with page_on(browser, RESNET) as pg:
        assert fmt(pg, "memory", 6629.51e6) == "6.63GB"
        assert fmt(pg, "memory", 2.5e12) == "2.50TB"
        assert fmt(pg, "memory", 19.27e6) == "19.27MB"
        assert fmt(pg, "memory", 999) == "999B"
        assert fmt(pg, "number", 709.27e6) == "709.27M"
        assert fmt(pg, "number", 1500) == "1.50k"
        assert fmt(pg, "number", 3.2e9) == "3.20G"
        assert fmt(pg, "number", 12) == "12"
        pg.click("#tabs button[data-tab=flame]")
        pg.click("#metrics button[data-metric=float_ops]")
        settle(pg)
        total = pg.evaluate("tfprofUI.ui.flame.data.total")
        assert total > 1e6
        k = max(j for j, unit in enumerate((1, 1e3, 1e6, 1e9, 1e12)) if total >= unit)
        expected = f"total {total / 10 ** (3 * k):.2f}{['', 'k', 'M', 'G', 'T'][k]}"
        assert expected in pg.inner_text("#crumbs")
        shot(pg, "flame_flops")


OVERFLOW = """sels => sels.flatMap(s => [...document.querySelectorAll(s)]).filter(e => e.offsetParent !== null)
  .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => `${e.id || e.className}: ${e.scrollWidth} > ${e.clientWidth}`)"""


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_is_clipped_at_common_widths(browser, width):
    """At 1024, 1440 and 1920 px the header, the advisor's cards and tables, the compare bar and
    its table of changes, and the ranks' cards are no wider than their boxes."""
    with page_on(browser, RESNET, DDP) as pg:
        pg.set_viewport_size({"width": width, "height": 860})
        pg.click("#tabs button[data-tab=advisor]")
        settle(pg)
        assert pg.evaluate(OVERFLOW, ["body", "header", "#advice", "#advice .card"]) == []
        shot(pg, f"advisor_{width}")
        pg.click("#tabs button[data-tab=compare]")
        settle(pg)
        assert pg.evaluate(OVERFLOW, ["body", "header", "#tab-compare > .bar", "#cmp-mode", "#changes"]) == []
        shot(pg, f"compare_{width}")
    with page_on(browser, str(GLOO_JOB)) as pg:
        pg.set_viewport_size({"width": width, "height": 860})
        pg.click("#tabs button[data-tab=ranks]")
        settle(pg)
        assert pg.evaluate(OVERFLOW, ["body", "header", "#ranks", "#ranks .card"]) == []
        shot(pg, f"ranks_{width}")


def test_search_finds_the_op_that_launched_a_kernel(browser):
    """Part of a kernel's name finds the rows whose node launched it, each with the kernel's
    name; the rows come from the trace's GPU events, read here on their own."""
    import polars as pl
    from starlette.testclient import TestClient

    from tfprof.api.browse import browse
    from tfprof.ui.app import make_app
    from tfprof.ui.guard import TOKEN_HEADER
    from tfprof.ui.profiles import Profiles

    app = make_app(Profiles.load([RESNET]))
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers={TOKEN_HEADER: app.state.token})
    text = "winograd"
    work = tfprof.load(RESNET).lazy("kernels").select("node_id", pl.col("name").cast(pl.String)).collect()
    nodes = set(work.filter(pl.col("name").str.contains(text))["node_id"].drop_nulls().to_list())
    tree = browse(tfprof.load(RESNET), "scope", {"max_depth": 100})
    expected = [i for i, n in enumerate(tree.table["node_id"].to_list()) if n in nodes]
    assert expected and not any(text in n.lower() for n in tree.table["name"])
    found = client.get(f"/api/search/0/scope?max_depth=100&q={text.upper()}&limit=500").json()
    assert [h["i"] for h in found["hits"]] == expected and found["total"] == len(expected)
    assert all(text in r["kernel"] for r in found["rows"])
    assert all(r["kernel"] in set(work["name"]) for r in found["rows"])
    # a name match is still a name match: no kernel beside it
    named = client.get("/api/search/0/scope?max_depth=100&q=conv2d").json()
    assert named["rows"] and all("conv2d" in r["name"].lower() and "kernel" not in r for r in named["rows"])
    with page_on(browser, RESNET) as pg:
        pg.click("#views button[data-cmd=scope]")
        pg.fill("#options [name=max_depth]", "100")
        pg.dispatch_event("#options [name=max_depth]", "change")
        settle(pg)
        pg.fill("#search", text)
        pg.press("#search", "Enter")
        pg.wait_for_selector("#hits.on .hit")
        pg.wait_for_selector(".tt-row.sel")
        hits = pg.eval_on_selector_all("#hits .hit .kernel", "es => es.map(e => e.textContent)")
        assert len(hits) == len(expected) and all(h.startswith("launched ") and text in h for h in hits)
        assert int(pg.get_attribute(".tt-row.sel", "data-i")) == expected[0]
        shot(pg, "search_by_kernel")


TORCH_CUDA = str(FIXTURES / "foreign" / "torch_cuda_cnn.pt.trace.json.gz")


def test_memory_page_says_reserved_and_estimated(browser):
    """PyTorch's reserved bytes are drawn beside the allocated level and named with their peak
    (the page's own figure, /api/memory's); a tfprof profile without allocation events shows the
    per-node estimate, said to be one."""
    from tfprof.api.memory import memory_page

    reserved = memory_page(tfprof.load(TORCH_CUDA), None, None, 10)["shown"]["reserved_bytes"]
    assert reserved and reserved > 0
    with page_on(browser, TORCH_CUDA, str(tfprof.sample_path())) as pg:
        pg.click("#tabs button[data-tab=memory]")
        settle(pg)
        assert pg.locator(".memchart .reserved").count() == 1
        said = pg.inner_text("#memory")
        assert f"reserved by the caching allocator: up to {fmt(pg, 'memory', reserved)}" in said
        shot(pg, "memory_reserved")
        pg.select_option("#profile", "1")
        settle(pg)
        assert "~ estimated" in pg.inner_text("#memory") and pg.locator(".memchart .reserved").count() == 0
        shot(pg, "memory_estimated")


def test_timeline_keys_zoom_and_pan(browser):
    """W/S zoom around the middle, A/D and the arrows pan a tenth of the view, 0 fits the step;
    a key typed into the search field moves nothing."""
    with page_on(browser, RESNET) as pg:
        pg.click("#tabs button[data-tab=timeline]")
        settle(pg)
        view = lambda: pg.evaluate("[tfprofUI.ui.timeline.t0, tfprofUI.ui.timeline.t1]")  # noqa: E731
        t0, t1 = view()
        pg.keyboard.press("w")
        z0, z1 = view()
        assert abs((z1 - z0) - 0.8 * (t1 - t0)) < 1e-6 * (t1 - t0) and abs((z0 + z1) - (t0 + t1)) < 1e-6 * (t1 - t0)
        pg.keyboard.press("d")
        d0, d1 = view()
        assert abs(d0 - (z0 + (z1 - z0) / 10)) < 1e-6 * (t1 - t0) and abs((d1 - d0) - (z1 - z0)) < 1e-6 * (t1 - t0)
        pg.keyboard.press("ArrowLeft")
        assert abs(view()[0] - z0) < 1e-6 * (t1 - t0)
        pg.keyboard.press("s")
        pg.keyboard.press("0")
        assert view() == [t0, t1]
        pg.click("#tl-search")
        pg.keyboard.press("w")
        assert view() == [t0, t1]
        shot(pg, "timeline_keys")
