"""Time the web UI in a browser (Debian's chromium through playwright) on a large store.

    python benchmarks/bench_ui.py --store /tmp/x.tfprof            # a store made with synth.py + ingest
    python benchmarks/bench_ui.py --nodes 2000 --steps 3 --quick   # makes a small one

Measured in the page with performance.now(): first paint (navigation to the first frame with
the scope view's tree drawn, after the server has opened the store and built that view, as
`tfprof ui` does before it prints the URL); expanding a node (the request for its children,
the layout and the redraw), on the nodes with the most children among those shown; one
step's timeline: loading it (request, JSON, typed arrays, first frame) and the time of one
frame at several zoom levels and while wheel-zooming and dragging. Prints a Markdown table;
fails only on errors, never on timing. --shots DIR saves the flame graph and the timeline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TFPROF_ENGINE", "kernels")
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tfprof  # noqa: E402


def _store(args, tmp: Path) -> str:
    """``--store``, or a synthetic profile's store written into ``tmp``."""
    if args.store:
        return args.store
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "synth.py"), "--nodes", str(args.nodes), "--steps",
                    str(args.steps), "--out", str(tmp / "p.pb")], check=True)
    tfprof.save(tfprof.load(tmp / "p.pb"), tmp / "p.tfprof")
    return str(tmp / "p.tfprof")


def _q(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"{statistics.median(values):.1f} (p95 {p95:.1f}, n={len(values)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store")
    ap.add_argument("--nodes", type=int, default=70_000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shots")
    ap.add_argument("--trace-events", type=int, default=0,
                    help="also time the timeline of a synthetic Kineto trace with one step of this many slices")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_ui_") as tmp:  # the generated profile and store go with it
        _run(args, _store(args, Path(tmp)))


def _run(args: argparse.Namespace, store: str) -> None:
    from playwright.sync_api import sync_playwright

    t = time.perf_counter()
    running = tfprof.ui(store)  # opens the store and builds the default scope view, as `tfprof ui` does
    start_s = time.perf_counter() - t
    rows: list[tuple[str, str]] = [("server start: open the store, build the scope view (s)", f"{start_s:.2f}")]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        paints = []
        for _ in range(1 if args.quick else 3):
            page = browser.new_page(viewport={"width": 1440, "height": 860}, bypass_csp=True)
            page.goto(f"{running}#tree")  # the scope view's tree (the page lands on the Overview)
            page.wait_for_function("window.tfprofFirstPaint !== undefined")
            paints.append(page.evaluate("window.tfprofFirstPaint"))
            page.close()
        page = browser.new_page(viewport={"width": 1440, "height": 860}, bypass_csp=True)
        page.goto(f"{running}#tree")
        page.wait_for_function("window.tfprofFirstPaint !== undefined")
        total = page.evaluate("tfprofUI.ui.tree.view.total_rows")
        rows.append((f"first paint, scope view ({total:,} rows; ms)", _q(paints)))
        expand = page.evaluate("""(async () => {
            const tree = tfprofUI.ui.tree, out = [];
            for (let round = 0; round < 3; round++) {
              const closed = tree.visible.filter(n => n.row && n.row.children && !n.kids)
                                 .sort((a, b) => b.row.children - a.row.children).slice(0, 4);
              for (const node of closed) {
                const t = performance.now();
                await tree.toggle(node);
                await new Promise(r => requestAnimationFrame(r));
                out.push([performance.now() - t, node.row.children]);
              }
            }
            return out; })()""")
        rows.append(("expand a node: request, layout, redraw (ms)", _q([e[0] for e in expand])))
        rows.append(("  children of the nodes expanded", f"{min(e[1] for e in expand):,} to {max(e[1] for e in expand):,}"))
        rows += _timeline(page, args.shots)
        if args.shots:
            page.click("#tabs button[data-tab=flame]")
            page.wait_for_function("tfprofUI.ui.flame.data !== null")
            page.screenshot(path=str(Path(args.shots) / "flame.png"))
        if args.trace_events:
            rows += _foreign(browser, args)
        browser.close()
    running.stop()
    print(f"\nweb UI on {store}\n\n| what | value |\n|---|---:|")
    for what, value in rows:
        print(f"| {what} | {value} |")


def _timeline(page, shots: str | None, tag: str = "") -> list[tuple[str, str]]:
    """Open the Timeline tab on ``page`` and time its load, single frames and a wheel-zoom and drag."""
    rows = []
    t = page.evaluate("performance.now()")
    page.click("#tabs button[data-tab=timeline]")
    page.wait_for_function("tfprofUI.ui.timeline.data !== null")
    page.wait_for_function("tfprofUI.ui.timeline.frames.length > 0")
    load_ms = page.evaluate("performance.now()") - t
    events = page.evaluate("tfprofUI.ui.timeline.data.ts.length")
    lanes = page.evaluate("tfprofUI.ui.timeline.data.lanes.length")
    rows.append((f"timeline{tag}: load one step, to its first frame ({events:,} bars, {lanes} lanes; ms)", f"{load_ms:.0f}"))
    frames = page.evaluate("""(() => { const tl = tfprofUI.ui.timeline, out = [];
        for (const f of [1, 0.5, 0.1, 0.01, 0.001]) {
          const mid = tl.end / 2, w = tl.end * f;
          tl.t0 = mid - w / 2; tl.t1 = mid + w / 2;
          for (let k = 0; k < 10; k++) { const t = performance.now(); tl.draw(); out.push(performance.now() - t); }
        }
        tl.reset(); return out; })()""")
    rows.append((f"timeline{tag}: one frame, whole step to 1/1000 of it (ms)", _q(frames)))
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"timeline{tag.replace(' ', '_')}.png"))
    box = page.locator("#timeline").bounding_box()
    page.evaluate("tfprofUI.ui.timeline.frames.length = 0")
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 60)
    for _ in range(15):
        page.mouse.wheel(0, -240)
    page.mouse.down()
    for k in range(20):
        page.mouse.move(box["x"] + box["width"] * 0.5 - 15 * k, box["y"] + 60)
    page.mouse.up()
    interactive = page.evaluate("tfprofUI.ui.timeline.frames.slice()")
    rows.append((f"timeline{tag}: frames while wheel-zooming and dragging (ms)", _q(interactive)))
    return rows


def _foreign(browser, args: argparse.Namespace) -> list[tuple[str, str]]:
    """The timeline of a synthetic Kineto trace of ``--trace-events`` slices in one step."""
    from synth_kineto import write_kineto

    with tempfile.TemporaryDirectory(prefix="bench_ui_kineto_") as tmp:
        path = Path(tmp) / "k.pt.trace.json"
        write_kineto(path, args.trace_events)
        running = tfprof.ui(str(path))
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 860}, bypass_csp=True)
            page.goto(f"{running}#tree")
            page.wait_for_function("window.tfprofFirstPaint !== undefined")
            return _timeline(page, args.shots, " (Kineto)")
        finally:
            running.stop()


if __name__ == "__main__":
    main()
