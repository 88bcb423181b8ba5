"""Our file outputs for every view (trace, folded, pprof_tree, html), each opened by what reads it.

pprof files are parsed by the protobuf runtime as profile.proto; folded stacks by a parser
written here in flamegraph.pl's terms (the last space splits stack and count); the Chrome trace
is loaded as JSON; the HTML page in headless Chromium where it is installed, and always by
html.parser for references to the network. Each file's numbers are compared with the view's own
rows, walked here from their levels (independently of ``tfprof.queries.stacks``).
"""

from __future__ import annotations

import gzip
import html.parser
import json
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest

import tfprof
from tfprof.api import check_output, run_view, write_output
from tfprof.cli.main import main
from tfprof.errors import OptionError, OutputError
from tfprof.queries.options import Options
from tfprof.schema.proto import pprof_pb2
from tfprof.views.units import fmt_memory

VIEWS = ("scope", "graph", "op", "code")
CHROMIUM = Path("/usr/bin/chromium")
_PROFILES: dict[str, tfprof.Profile] = {}


def _profile(name: str = "cnn") -> tfprof.Profile:
    if name not in _PROFILES:
        _PROFILES[name] = tfprof.load(tfprof.sample_path() if name == "cnn" else tfprof.sample_path(name))
    return _PROFILES[name]


def _run(cmd: str, tmp_path: Path, kind: str, select=("micros",), name: str = "cnn", **options):
    out = tmp_path / f"{cmd}.{kind}"
    opts = {"max_depth": 6, "select": list(select), "output": f"{kind}:outfile={out}", **options}
    result = run_view(_profile(name), cmd, opts)
    write_output(_profile(name), result)
    return result, out


def _paths(frame: pl.DataFrame) -> list[tuple[str, ...]]:
    """Each row's names from the top, by a stack walk over the levels (op rows: the name)."""
    if "level" not in frame.columns:
        return [(n,) for n in frame["name"].to_list()]
    out, stack = [], []
    for name, level in zip(frame["name"].to_list(), frame["level"].to_list()):
        stack = [*stack[:level], name]
        out.append(tuple(stack))
    return out


def _expected(cmd: str, frame: pl.DataFrame, column: str) -> dict[tuple[str, ...], int]:
    """What each stack prefix should add up to: the row's total (op view: its own value)."""
    col = column if cmd == "op" else "total_" + column
    want: dict[tuple[str, ...], int] = defaultdict(int)
    for path, value in zip(_paths(frame), frame[col].fill_null(0).to_list()):
        want[path] += value
    return want


def _prefix_sums(stacks: list[tuple[tuple[str, ...], int]]) -> dict[tuple[str, ...], int]:
    got: dict[tuple[str, ...], int] = defaultdict(int)
    for stack, value in stacks:
        for i in range(1, len(stack) + 1):
            got[stack[:i]] += value
    return got


def _assert_stacks_match(cmd, frame, column, stacks):
    want, got = _expected(cmd, frame, column), _prefix_sums(stacks)
    assert want, "the view shows no rows"
    for path, value in want.items():
        assert got.get(path, 0) == value, (path, got.get(path, 0), value)
    assert set(got) <= set(want), set(got) - set(want)


def parse_folded(text: str) -> list[tuple[tuple[str, ...], int]]:
    """flamegraph.pl's reading of a folded file: `frame;frame;frame count` per line."""
    out = []
    for line in text.splitlines():
        match = re.fullmatch(r"(.*)\s+(\d+)", line)
        assert match, f"not a folded line: {line!r}"
        out.append((tuple(match.group(1).split(";")), int(match.group(2))))
    return out


@pytest.mark.parametrize("cmd", VIEWS)
def test_pprof_tree_samples_are_the_views_numbers(cmd, tmp_path):
    result, out = _run(cmd, tmp_path, "pprof_tree", select=("micros", "bytes", "float_ops"))
    data = out.read_bytes()
    assert data[:2] == b"\x1f\x8b"
    p = pprof_pb2.Profile.FromString(gzip.decompress(data))
    s = list(p.string_table)
    assert s[0] == ""
    types = [(s[t.type], s[t.unit]) for t in p.sample_type]
    assert types == [("micros", "microseconds"), ("bytes", "bytes"), ("float_ops", "count")]
    names = {f.id: s[f.name] for f in p.function}
    loc = {location.id: names[location.line[0].function_id] for location in p.location}
    for k, column in enumerate(("exec_micros", "requested_bytes", "float_ops")):
        stacks = [(tuple(loc[i] for i in reversed(sm.location_id)), sm.value[k]) for sm in p.sample]
        _assert_stacks_match(cmd, result.frame, column, stacks)


@pytest.mark.parametrize("cmd", VIEWS)
def test_folded_stacks_add_up_to_the_views_totals(cmd, tmp_path):
    result, out = _run(cmd, tmp_path, "folded", select=("bytes", "micros"))  # times first
    stacks = parse_folded(out.read_text())
    assert stacks and all(v > 0 for _, v in stacks)
    _assert_stacks_match(cmd, result.frame, "exec_micros", stacks)


def test_folded_of_a_foreign_profile(tmp_path):
    result, out = _run("scope", tmp_path, "folded", name="torch", max_depth=4)
    stacks = parse_folded(out.read_text())  # a foreign profile's times are exact: whole ns
    in_ns = result.frame.with_columns((pl.col("^.*exec_micros$") * 1000).round(0).cast(pl.Int64))
    _assert_stacks_match("scope", in_ns, "exec_micros", stacks)
    assert sum(v for _, v in stacks) == in_ns["total_exec_micros"][0] > 0


@pytest.mark.parametrize("cmd", VIEWS)
def test_trace_has_a_bar_per_timed_row(cmd, tmp_path):
    result, out = _run(cmd, tmp_path, "trace")
    events = json.loads(out.read_text())["traceEvents"]
    bars = [e for e in events if e["ph"] == "X"]
    assert bars and all(e["dur"] > 0 and e["ts"] >= 0 for e in bars)
    frame = result.frame
    if cmd == "op":
        want = sorted((n, v) for n, v in zip(frame["name"], frame["exec_micros"]) if v > 0)
        assert sorted((e["name"], e["dur"]) for e in bars if e["pid"] == 1) == want
        root = next(e for e in bars if e["pid"] == 0)
        assert root["dur"] == sum(v for _, v in want)
    else:
        rows = Counter(zip(frame["name"], frame["total_exec_micros"]))  # code view names repeat
        assert not Counter((e["name"], e["dur"]) for e in bars) - rows
        assert bars[0]["name"] == "_TFProfRoot" and bars[0]["dur"] == frame["total_exec_micros"][0]


class _Refs(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs += [v or "" for _, v in attrs]


@pytest.mark.parametrize("cmd", VIEWS)
def test_html_report_is_one_offline_file(cmd, tmp_path):
    result, out = _run(cmd, tmp_path, "html")
    page = out.read_text()
    refs = _Refs()
    refs.feed(page)
    assert {"pre", "script", "style"} <= refs.tags
    assert not re.search(r"https?://", page), "the page names a network address"
    assert not any(re.match(r"\s*(//|[a-z]+:)", v) for v in refs.attrs if v and not v.startswith("default-src"))
    assert html.unescape(page.split('<pre id="report">')[1].split("</pre>")[0]) == result.text
    data = json.loads(page.split('id="flame-data">')[1].split("</script>")[0])
    assert len(data["names"]) == result.frame.height


@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless check needs /usr/bin/chromium (installed by .ci/run)")
@pytest.mark.parametrize("cmd", ("scope", "op"))
def test_html_report_loads_in_chromium(cmd, tmp_path):
    _, out = _run(cmd, tmp_path, "html")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # no playwright: Chromium's own DOM dump shows the script ran
        import subprocess

        dom = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--dump-dom", out.as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
        assert dom.count('style="left:') > 1
        return
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page()
        errors, requests = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(out.as_uri())
        frames = page.locator("#flame div")
        assert frames.count() > 1
        assert frames.first.text_content() == "_TFProfRoot" if cmd != "op" else frames.count() > 1
        widths = [frames.nth(i).bounding_box()["width"] for i in range(min(frames.count(), 50))]
        widest = max(range(1, len(widths)), key=widths.__getitem__)
        name = frames.nth(widest).text_content()
        frames.nth(widest).click(position={"x": 2, "y": 2})  # zoom in: the clicked frame fills the width
        assert page.locator("#flame div").first.text_content() == name
        assert page.locator("#flame div").first.bounding_box()["width"] > 0.9 * page.locator("#flame").bounding_box()["width"]
        browser.close()
    assert errors == [] and requests == [out.as_uri()]


def test_tfprof_kinds_keep_their_refusals_and_ours_take_every_view(tmp_path):
    opts = {"output": f"timeline:outfile={tmp_path}/t"}
    with pytest.raises(OptionError, match="^op view doesn't support timeline yet. Consider graph/scope/code view.$"):
        check_output("op", Options.from_tfprof(opts))
    with pytest.raises(OptionError, match="^Only 'code' view supports pprof output now.$"):
        check_output("scope", Options.from_tfprof({"output": f"pprof:outfile={tmp_path}/p"}))
    for kind in ("trace", "folded", "pprof_tree", "html"):
        for cmd in VIEWS:
            check_output(cmd, Options.from_tfprof({"output": f"{kind}:outfile={tmp_path}/x"}))


def test_stack_files_need_a_metric(tmp_path, capsys):
    assert main(["scope", str(tfprof.sample_path()), "--select", "device",
                 "--output", f"folded:outfile={tmp_path}/f"]) == 2
    err = capsys.readouterr().err
    assert "-output folded needs a numeric select field (got `device`); valid: micros," in err
    assert not (tmp_path / "f").exists()


def test_view_files_are_not_clobbered(tmp_path, capsys):
    target = tmp_path / "r.html"
    target.write_text("mine")
    args = ["op", str(tfprof.sample_path()), "--output", f"html:outfile={target}"]
    assert main(args) == 2
    assert target.read_text() == "mine" and "--force" in capsys.readouterr().err
    assert main([*args, "--force"]) == 0
    assert target.read_text().startswith("<!DOCTYPE html>")
    copy = tmp_path / "in.pb"
    shutil.copy(tfprof.sample_path(), copy)
    with pytest.raises(OutputError):
        check_output("scope", Options.from_tfprof({"output": f"trace:outfile={copy}"}), tfprof.load(copy),
                     force=True)


@pytest.mark.parametrize("cmd", VIEWS)
def test_formats_carry_the_views_rows(cmd, tmp_path, capsys):
    frames = {}
    for fmt in ("csv", "json", "parquet"):
        out = tmp_path / f"v.{fmt}"
        assert main([cmd, str(tfprof.sample_path()), "--max_depth", "4", "--select", "micros,params", "--format", fmt,
                     "--output", f"file:outfile={out}"]) == 0
        frames[fmt] = {"csv": pl.read_csv, "json": pl.read_json, "parquet": pl.read_parquet}[fmt](out)
    rows = run_view(_profile(), cmd, {"max_depth": 4, "select": ["micros", "params"]}).frame
    for fmt, frame in frames.items():
        assert frame["name"].to_list() == rows["name"].cast(pl.String).to_list(), fmt
        assert frame["total_exec_micros"].to_list() == rows["total_exec_micros"].to_list(), fmt


@pytest.mark.parametrize(("kind", "how"), [("trace", "ui.perfetto.dev"), ("folded", "flamegraph.pl"),
                                           ("pprof_tree", "pprof -http=:"), ("html", "browser")])
def test_our_files_are_named_on_stderr_and_stdout_stays_empty(kind, how, tmp_path, capsys):
    out = tmp_path / f"view.{kind}"
    assert main(["scope", str(tfprof.sample_path()), "--select", "micros", "--output", f"{kind}:outfile={out}"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    line, = captured.err.strip().splitlines()
    assert line.startswith("Wrote ") and f" to {out} ({fmt_memory(out.stat().st_size)}); " in line and how in line
