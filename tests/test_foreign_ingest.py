"""Foreign profiles (Kineto traces, XSpace) read into tfprof's tables and views: every number is held against what
tests/foreign_expect.py, or a small computation here over Python's ``json``, finds in the raw file.

The self times computed here walk each thread's spans with a stack in plain Python (no tfprof code),
so the readers' whole-column nesting and the views' totals are checked against an independent route.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from foreign_expect import kineto_expect, load_trace_events, subtract_children, xspace_expect

import tfprof
from tfprof.api import run_view

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TORCH = ["torch_cnn.pt.trace.json", "torch_transformer.pt.trace.json.gz"]
XSPACES = ["jax_mlp.xplane.pb", "tf2_keras.xplane.pb"]
OP_CATS = ("cpu_op", "kernel", "gpu_memcpy", "gpu_memset")

_LOADED: dict[str, tfprof.Profile] = {}


def load(name: str) -> tfprof.Profile:
    if name not in _LOADED:
        _LOADED[name] = tfprof.load(FOREIGN / name)
    return _LOADED[name]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, timeout=300)


def torch_self_micros(name: str) -> dict[int, Counter]:
    """step -> op name -> sum of round(self ns / 1000): each op's span less the spans of the ops directly inside."""
    return torch_self_ns(name, whole_micros=True)


def torch_self_ns(name: str, *, whole_micros: bool = False) -> dict[int, Counter]:
    """step -> op name -> sum of self ns (each op's span less the spans of the ops directly inside), or with
    ``whole_micros`` of each execution's self time rounded to whole µs."""
    _, events = load_trace_events(FOREIGN / name)
    ns = lambda us: round(float(us) * 1000)  # noqa: E731
    steps = sorted((ns(e["ts"]), int(e["name"].split("#")[1])) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in OP_CATS]
    by_thread = defaultdict(list)
    for e in ops:
        by_thread[(e["pid"], e["tid"])].append([ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"], ns(e["dur"])])
    out: dict[int, Counter] = defaultdict(Counter)
    for spans in by_thread.values():
        for start, _, op, self_ns in subtract_children(spans):
            step = next((n for s, n in reversed(steps) if s <= start), steps[0][1])
            out[step][op] += round(max(self_ns, 0) / 1000) if whole_micros else max(self_ns, 0)  # halves to even
    return out


# ---------------------------------------------------------------- tables against the raw files


@pytest.mark.parametrize("name", TORCH)
def test_kineto_trace_events_keep_every_span_and_instant(name):
    k = kineto_expect(FOREIGN / name)
    events = load(name).frame("trace_events")
    phases = Counter(events["phase"].cast(str).to_list())
    assert phases["X"] == k["ph_counts"]["X"]
    assert phases["i"] == k["ph_counts"].get("i", 0) + k["ph_counts"].get("I", 0)
    spans = events.filter(events["phase"].cast(str) == "X")
    got = defaultdict(lambda: [0, 0])
    for cat, n, d in zip(spans["category"].cast(str).fill_null("").to_list(), spans["name"].cast(str).to_list(),
                         spans["duration_ns"].to_list(), strict=True):
        got[(cat, n)][0] += 1
        got[(cat, n)][1] += d
    want = {(c or "", n): v for (c, n), v in k["complete_by_cat_name"].items()}
    assert {key: tuple(v) for key, v in got.items()} == want
    steps = {n: d for n, d in zip(spans["name"].cast(str), spans["duration_ns"]) if n.startswith("ProfilerStep#")}
    assert steps == k["steps_ns"]


@pytest.mark.parametrize("name", TORCH)
def test_kineto_ops_steps_memory_and_flows(name):
    k = kineto_expect(FOREIGN / name)
    prof = load(name)
    ops = sum(n for (cat, _), (n, _) in k["complete_by_cat_name"].items() if cat in OP_CATS)
    assert prof.frame("execs").height == ops
    assert prof.frame("node_steps")["run_count"].sum() == ops
    assert prof.frame("steps")["step"].to_list() == sorted(int(s.split("#")[1]) for s in k["steps_ns"])
    nodes = prof.frame("nodes")
    assert nodes["name"].is_unique().all()
    classes = {m for m in k["modules"]}
    assert any(any(part in classes for part in n.split("/")) for n in nodes["name"].to_list())
    # every [memory] instant is either an allocation of an op or outside every op; the totals series has one sample each
    allocations = prof.frame("allocations")
    outside = prof.frame("trace_events").filter((prof.frame("trace_events")["name"].cast(str) == "[memory]")
                                                & prof.frame("trace_events")["node_id"].is_null())
    assert allocations.height == k["memory_events"]  # those outside every op too (tests/test_foreign_kineto_rules.py)
    assert allocations.filter(allocations["alloc_bytes"] > 0)["alloc_bytes"].sum() == k["memory_alloc_bytes"]
    assert outside.height == k["memory_events"]  # instants are trace events, never ops
    counters = prof.frame("counters")
    assert (counters["series"].cast(str) == "Total Allocated").sum() == k["memory_events"]
    assert prof.frame("flows").height * 2 == k["flows"]
    assert prof.frame("code_frames").height > 0 and bool(prof.frame("info")["has_trace"][0])


@pytest.mark.parametrize("name", TORCH)
def test_kineto_self_times_per_op_and_step_match_an_independent_walk(name):
    want = torch_self_micros(name)
    prof = load(name)
    got = prof.sql("SELECT e.step, n.op::VARCHAR AS op, sum(e.duration_micros)::BIGINT AS us FROM execs e "
                   "JOIN nodes n USING (node_id) GROUP BY ALL")
    table = defaultdict(Counter)
    for step, op, us in got.iter_rows():
        table[step][op] = us
    assert {s: dict(c) for s, c in table.items()} == {s: dict(c) for s, c in want.items()}
    # exact: the ns of each execution, summed as they are
    exact = prof.sql("SELECT e.step, n.op::VARCHAR AS op, sum(e.duration_ns)::BIGINT AS ns FROM execs e "
                     "JOIN nodes n USING (node_id) GROUP BY ALL")
    want_ns = torch_self_ns(name)
    assert {(s, o): v for s, o, v in exact.iter_rows()} == {(s, o): v for s, c in want_ns.items() for o, v in c.items()}
    # the scope view's root in one step is the sum of that step's self times, at ns resolution
    for step in want:
        root = run_view(prof, "scope", {"step": step, "max_depth": 1, "select": ["micros"]}).frame.row(0, named=True)
        assert root["total_exec_micros"] * 1000 == pytest.approx(sum(want_ns[step].values()), abs=1e-6)


@pytest.mark.parametrize("name", XSPACES)
def test_xspace_events_per_plane_and_name(name):
    x = xspace_expect(FOREIGN / name)
    events = load(name).frame("trace_events")
    got = Counter(zip(events["process"].cast(str), events["name"].cast(str)))
    want = {k: n for k, (n, _) in x["events_by_plane_name"].items()}
    assert dict(got) == want
    total = defaultdict(int)
    for p, n, d in zip(events["process"].cast(str), events["name"].cast(str), events["duration_ns"]):
        total[(p, n)] += d
    for key, (count, ps) in x["events_by_plane_name"].items():
        assert abs(total[key] * 1000 - ps) <= 500 * count, key


def test_jax_scopes_come_from_the_hlo_metadata():
    x = xspace_expect(FOREIGN / "jax_mlp.xplane.pb")
    (program,) = [p for p in x["programs"] if p.startswith("jit_train_step")]
    instructions = {n: v for comp in x["programs"][program].values() for n, v in comp.items()}
    executed = x["string_stats"]["/host:CPU"]["hlo_op"]
    want = {f"{instructions[op][1].split(';')[0]}/{op}" for op in executed}
    prof = load("jax_mlp.xplane.pb")
    assert set(prof.frame("nodes")["name"].to_list()) == want
    assert prof.frame("steps")["step"].to_list() == [1, 2, 3]
    count, _ = x["events_by_plane_name"][("/host:CPU", "train")]
    assert prof.frame("execs").height == sum(
        n for (plane, name), (n, _) in x["events_by_plane_name"].items() if name in executed)
    assert count == 3


def test_tf2_ops_are_nodes_with_their_type():
    x = xspace_expect(FOREIGN / "tf2_keras.xplane.pb")
    typed = {n: t for (plane, n), t in x["display_names"].items() if n.endswith(":" + t)}
    prof = load("tf2_keras.xplane.pb")
    nodes = dict(zip(prof.frame("nodes")["name"].to_list(), prof.frame("nodes")["op"].cast(str).to_list()))
    assert nodes == {n[: -len(t) - 1]: t for n, t in typed.items()}
    ops = sum(n for (plane, name), (n, _) in x["events_by_plane_name"].items() if name in typed)
    assert prof.frame("execs").height == ops
    assert prof.frame("steps").height == 3


# ---------------------------------------------------------------- views, SQL, timeline


@pytest.mark.parametrize("name", TORCH + XSPACES)
@pytest.mark.parametrize("view,options", [
    ("scope", ["--max_depth", "3", "--select", "micros,occurrence"]),
    ("scope", ["--min_micros", "5", "--order_by", "micros"]),
    ("op", ["--select", "micros,bytes,occurrence", "--order_by", "micros"]),
    ("op", ["--show_name_regexes", ".*(conv|Conv|dot|Mat|mm).*"]),
])
def test_views_run_on_every_foreign_profile_and_say_what_has_no_source(name, view, options):
    proc = cli(view, "--profile_path", str(FOREIGN / name), *options)
    assert proc.returncode == 0, proc.stderr
    if name in TORCH:  # record_shapes: float_ops estimated (tests/test_foreign_flops.py)
        assert "No source in this profile: params (no graph)" in proc.stdout
        assert "float_ops are estimated from recorded input shapes" in proc.stdout
    else:
        assert "No source in this profile: params and float_ops" in proc.stdout
    assert "_TFProfRoot" in proc.stdout or view == "op"


@pytest.mark.parametrize("name", TORCH)
def test_code_view_walks_the_python_stacks(name):
    proc = cli("code", "--profile_path", str(FOREIGN / name), "--max_depth", "6", "--select", "micros")
    assert proc.returncode == 0, proc.stderr
    assert "train_step" in proc.stdout


def test_tfprof_profiles_have_no_foreign_line():
    proc = cli("scope", "--profile_path", str(tfprof.sample_path()), "--max_depth", "1")
    assert proc.returncode == 0 and "No source" not in proc.stdout


@pytest.mark.parametrize("name", TORCH + XSPACES)
def test_sql_over_the_new_tables_and_a_timeline(name, tmp_path):
    prof = load(name)
    n = prof.sql("SELECT count(*) AS n FROM trace_events WHERE node_id IS NOT NULL")["n"][0]
    assert n == prof.frame("execs").height
    out = tmp_path / "timeline.json"
    proc = cli("scope", "--profile_path", str(FOREIGN / name), "--output", f"timeline:outfile={out}")
    assert proc.returncode == 0, proc.stderr
    written = sorted(tmp_path.iterdir())
    assert written
    trace = json.loads(written[0].read_text())
    assert all("dur" in e for e in trace["traceEvents"] if e.get("ph") == "X")


def test_store_round_trip_keeps_the_source(tmp_path):
    out = tmp_path / "store"
    proc = cli("ingest", "--profile_path", str(FOREIGN / TORCH[0]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    prof = tfprof.load(out)
    assert prof.source == "kineto"
    assert prof.row_counts()["trace_events"] == load(TORCH[0]).row_counts()["trace_events"]


# ---------------------------------------------------------------- damaged files


def _one_line_error(path: Path) -> str:
    proc = cli("scope", "--profile_path", str(path))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(path) in lines[0]
    return lines[0]


def test_truncated_json_is_one_line(tmp_path):
    bad = tmp_path / "cut.pt.trace.json"
    bad.write_bytes((FOREIGN / TORCH[0]).read_bytes()[:300_000])
    assert "complete" in _one_line_error(bad)


def test_truncated_gzip_is_one_line(tmp_path):
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes((FOREIGN / TORCH[1]).read_bytes()[:20_000])
    assert "gzip" in _one_line_error(bad)


def test_json_that_is_not_a_trace_is_one_line(tmp_path):
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"hello": [1, 2, 3]}))
    _one_line_error(bad)
    bad2 = tmp_path / "no_ops.json"
    bad2.write_bytes(gzip.compress(json.dumps({"traceEvents": [{"ph": "i", "name": "x", "ts": 1, "pid": 1, "tid": 1}]})
                                   .encode()))
    assert "op events" in _one_line_error(bad2)


def test_garbage_xspace_is_one_line(tmp_path):
    data = (FOREIGN / XSPACES[0]).read_bytes()
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) // 2])
    _one_line_error(cut)
    junk = tmp_path / "junk.xplane.pb"
    junk.write_bytes(bytes(range(256)) * 10)
    _one_line_error(junk)


def test_detection_is_by_content_not_name(tmp_path):
    renamed = tmp_path / "profile.bin"
    renamed.write_bytes((FOREIGN / TORCH[1]).read_bytes())
    assert tfprof.load(renamed).source == "kineto"
    renamed = tmp_path / "trace.json"
    renamed.write_bytes((FOREIGN / XSPACES[1]).read_bytes())
    assert tfprof.load(renamed).source == "xspace"
    assert re.match(r"^(profile|run_metadata)$", tfprof.load(tfprof.sample_path()).source)


@pytest.mark.parametrize("name", sorted(p.name for p in FOREIGN.iterdir() if p.name != "README.md"))
def test_kernel_and_reference_paths_give_the_same_tables(name):
    """On every capture (GPU, memory and XSpace slices included)."""
    from tfprof import kernels
    from tfprof.ingest import foreign

    what = foreign.kind(FOREIGN / name)
    with kernels.using(True):
        fast = foreign.read(FOREIGN / name, what)
    with kernels.using(False):
        ref = foreign.read(FOREIGN / name, what)
    for table in fast:
        assert fast[table].equals(ref[table]), table


@pytest.mark.parametrize("name", [TORCH[0], TORCH[1], XSPACES[1]])
@pytest.mark.parametrize("engine", [True, False], ids=["kernels", "reference"])
def test_a_foreign_read_reports_its_progress(monkeypatch, name, engine):
    """A foreign read tells an ingest progress callback how far it has got, in thousandths that
    never go back, and reaches done == total once, at its end; a Kineto trace read in windows
    moves the bar a window at a time."""
    from tfprof import kernels
    from tfprof.ingest import iter_inputs
    from tfprof.ingest.foreign import trace_columns

    monkeypatch.setattr(trace_columns, "WINDOW_BYTES", 1 << 16)
    calls = []
    with kernels.using(engine):  # (``tfprof.load`` picks the engine by the file's size)
        list(iter_inputs(profile_path=FOREIGN / name, progress=lambda *a: calls.append(a)))
    done = [c[0] for c in calls]
    assert {c[1] for c in calls} == {1000}
    assert done == sorted(done) and done[0] == 0 and done[-1] == 1000 and done.count(1000) == 1
    steps = {what for _, _, what in calls}
    assert {"events", "ops", "tables"} <= steps
    reading = [d for d, _, what in calls if what == "events"]
    assert (len(set(reading)) > 3) == (engine and name.endswith((".json", ".json.gz")))


def test_the_cli_draws_a_foreign_read_as_a_bar_on_a_terminal():
    """On a terminal the views' command line draws the read's progress on stderr (and takes the
    bar away when done); piped, stderr stays empty."""
    import os
    import pty
    import threading

    main, child = pty.openpty()
    seen = bytearray()

    def drain():
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = subprocess.run([sys.executable, "-m", "tfprof", "scope", str(FOREIGN / TORCH[0]), "-max_depth", "1"],
                              stdout=subprocess.PIPE, stderr=child, timeout=300, env={**os.environ, "COLUMNS": "100"})
    finally:
        os.close(child)
    reader.join(10)
    os.close(main)
    text = seen.decode("utf-8", "replace")
    assert done.returncode == 0 and b"Profile:" in done.stdout
    assert "ingesting events" in text and "ingesting tables" in text and "100%" in text
    piped = cli("scope", str(FOREIGN / TORCH[0]), "-max_depth", "1")
    assert piped.returncode == 0 and piped.stderr == ""


def test_a_slow_foreign_read_suggests_a_store_on_a_terminal(monkeypatch, tmp_path):
    """After a Kineto trace or XSpace (any profile file) took long to read, the command line says
    on a terminal how to read it once into a store; not when quick, not piped, not for a store."""
    import io

    from tfprof.cli import app

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    slow = app.SLOW_READ_S

    def said(path, seconds: float | None = None, stream=Terminal) -> str:
        monkeypatch.setattr(sys, "stderr", stream())
        monkeypatch.setattr(app, "SLOW_READ_S", slow)
        if seconds is None:  # the whole way, as a view's command loads its profile
            monkeypatch.setattr(app, "SLOW_READ_S", 0.0)
            monkeypatch.setattr(app, "progress_bar", lambda: None)  # (the bar is another test's)
            app.load_profile(graph_path=None, run_meta_path=None, op_log_path=None, checkpoint_path=None,
                             profile_path=str(path))
        else:
            app.suggest_store(str(path), seconds)
        return sys.stderr.getvalue()

    line = said(FOREIGN / TORCH[1])
    assert line.startswith("Note: reading ") and line.count("\n") == 1
    assert f"`tfprof ingest {FOREIGN / TORCH[1]} --out torch_transformer.tfprof`" in line
    assert f"took {slow + 2:.1f} s" in said(FOREIGN / XSPACES[0], slow + 2)
    assert said(FOREIGN / XSPACES[0], slow - 0.5) == ""
    assert said(FOREIGN / XSPACES[0], slow + 2, io.StringIO) == ""
    store = tmp_path / "s"
    tfprof.save(tfprof.load(FOREIGN / XSPACES[0]), store)
    assert said(store, slow + 2) == ""
