"""Golden outputs of the REAL tfprof's four views (scope, graph, op, code) for many options.

Usage (from anywhere; paths are taken from the repository root):

    /work/shared/tools/tfprof-reference python tools/make_golden.py [--only FIXTURE ...]

Runs only under the reference Python (tensorflow-cpu installed); TensorFlow is not a dependency
of the tfprof package. For each fixture profile tests/fixtures/<F>/profile.pb it writes
tests/golden/<F>/:

    cases.json     [{"id", "cmd", "options"}], one case per line; "options" is the FULL dict
                   given to model_analyzer._build_options (every key; "output": "stdout")
    <id>.txt       the exact bytes the real tool wrote for `-output file:outfile=<tmp>`
                   (doc prefix + "Profile:" + legend + body); empty when it wrote no file
                   (meta.json then says "file_written": false: invalid step, no code traces)
    <id>.pbtxt     the returned proto in text format (GraphNodeProto for scope/graph,
                   MultiGraphNodeProto for op/code) with the indentation stripped; parse it
                   with text_format.Parse and compare messages; empty when no bytes came back
    <id>.stderr    what the native code wrote on file descriptor 2 during the call (only if any)
    <id>.stdout    the same for file descriptor 1 (only if any; none so far)
    meta.json      TensorFlow version, exact commands, per-case facts (file written, nodes shown,
                   thresholds read from the data), crashed cases left out, an order check
    tests/golden/COVERAGE.md   how many cases of each view cover each option, select field and
                   order_by value (also printed at the end)

A min_* value written AUTO in the case list is read from the data when the case runs: the
case runs first with that threshold at 0 (`-output none`), and the threshold becomes the median
of the positive values that the option compares over the nodes shown (totals; self
params/flops/run count in scope/graph; member count for op-view occurrence), moved up to the
next distinct value when the median is the smallest positive value. So a threshold hides some
nodes that have data; meta.json records it with the node counts before and after.

All cases of a fixture run in ONE child process (this script with --child; importing TensorFlow
is slow and the native profiler is a per-process singleton). If the native code kills the child
(abort, segfault), the parent records the case that was running, leaves it out, and runs the
child again without it. Never hand-edit the goldens: rerun this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _reference import (
    CLI_DEFAULTS,
    FIXTURES,
    GOLDEN,
    OPTION_KEYS,
    captured,
    options,
    reference_env,
    run_surviving_crashes,
    write_cases,
)

SCRIPT_REL = "tools/make_golden.py"

REAL_FIXTURES = ("cnn", "rnn", "multistep")
NAMES = (*REAL_FIXTURES, "gpu_tiny")
VIEWS = ("scope", "graph", "op", "code")

SELECT_FIELDS = ("bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros",
                 "accelerator_micros", "cpu_micros", "params", "float_ops", "occurrence",
                 "tensor_value", "device", "op_types", "input_shapes")
ORDER_BY = ("name", "depth", "bytes", "peak_bytes", "residual_bytes", "output_bytes", "micros",
            "accelerator_micros", "cpu_micros", "params", "float_ops", "occurrence")
# min_* option -> (select field that shows it, GraphNodeProto field used by scope/graph,
# MultiGraphNodeProto field used by op/code). See docs/TFPROF_BEHAVIOUR.md, 'Options'.
MIN_OPTIONS = {
    "min_bytes": ("bytes", "total_requested_bytes", "total_requested_bytes"),
    "min_peak_bytes": ("peak_bytes", "total_peak_bytes", "total_peak_bytes"),
    "min_residual_bytes": ("residual_bytes", "total_residual_bytes", "total_residual_bytes"),
    "min_output_bytes": ("output_bytes", "total_output_bytes", "total_output_bytes"),
    "min_micros": ("micros", "total_exec_micros", "total_exec_micros"),
    "min_accelerator_micros": ("accelerator_micros", "total_accelerator_exec_micros",
                               "total_accelerator_exec_micros"),
    "min_cpu_micros": ("cpu_micros", "total_cpu_exec_micros", "total_cpu_exec_micros"),
    # tfprof: scope/graph compare SELF params/flops/run_count, op/code the totals;
    # op min_occurrence counts member graph nodes, code ignores it (docs/TFPROF_BEHAVIOUR.md, Known quirk 20).
    "min_params": ("params", "parameters", "total_parameters"),
    "min_float_ops": ("float_ops", "float_ops", "total_float_ops"),
    "min_occurrence": ("occurrence", "run_count", "#members"),
}

PRESETS = {"params": "trainable_variables_parameter", "flops": "float_operation",
           "time_mem": "time_and_memory"}
AUTO = "auto"  # a min_* value read from the data when the case runs (resolve_auto)

# Names that exist in each fixture (see tests/fixtures/README.md and the scope view).
REGEXES = {
    "cnn": {
        "build": "build_cnn", "narrow": r"resnet/block1.*", "start": r"resnet/block1.*",
        "gnarrow": r"resnet/block1/sub1/.*",
        "trim": r"resnet/block\d", "show": r"resnet/.*/Conv2D", "show_any": r".*Conv2D.*",
        "hide": r"save.*|.*Initializer.*|.*/Assign.*", "grad": r"train/gradients/.*",
        "deep": r"resnet/block2/.*",
        "op_start": "Conv2D", "op_trim": "Identity", "op_hide": r"Const|Identity|NoOp|Assign",
        "op_show": r"Conv2D|MatMul|Placeholder|_arg_.*",
    },
    "rnn": {
        "build": "build_rnn", "narrow": r"model/rnn/while.*", "start": r"model/rnn.*",
        "gnarrow": r"model/rnn/while.*",
        "trim": r"model/rnn/while", "show": r"model/.*MatMul.*", "show_any": r".*MatMul.*",
        "hide": r"save.*|.*Initializer.*|.*/Assign.*", "grad": r"train/gradients/.*",
        "deep": r"model/rnn/while/.*",
        "op_start": "MatMul", "op_trim": "Identity", "op_hide": r"Const|Identity|NoOp|Assign",
        "op_show": r"MatMul|LoopCond|Tanh|Placeholder|_arg_.*",
    },
    "multistep": {
        "build": "build_multistep", "narrow": r"mlp/fc1.*", "start": r"mlp/fc1.*",
        "gnarrow": r"mlp/fc1.*",
        "trim": r"mlp/fc\d", "show": r"mlp/.*MatMul.*", "show_any": r".*MatMul.*",
        "hide": r"save.*|.*Initializer.*|.*/Assign.*", "grad": r"train/gradients/.*",
        "deep": r"mlp/fc2/.*",
        "op_start": "MatMul", "op_trim": "Identity",
        "op_hide": r"Const|Identity|NoOp|AssignVariableOp",
        "op_show": r"MatMul|Relu|Placeholder|_arg_.*|_retval_.*",
    },
}


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------

def preset(name: str) -> dict:
    """A ProfileOptionBuilder static preset; missing keys from ProfileOptionBuilder().build().

    Keys absent from both (min_peak_bytes, min_residual_bytes, min_output_bytes,
    min_accelerator_micros, min_cpu_micros) take _build_options' default, 0, which is what the
    tool receives for them anyway.
    """
    from tensorflow.python.profiler import option_builder as ob  # reference python only

    full = dict(ob.ProfileOptionBuilder().build())
    full.update(getattr(ob.ProfileOptionBuilder, name)())
    full = {k: full.get(k, 0) for k in OPTION_KEYS}
    return json.loads(json.dumps(full))


class Cases:
    def __init__(self) -> None:
        self.items: list[dict] = []

    def add(self, cid: str, cmd: str, opts: dict) -> None:
        assert cmd in VIEWS and cid.startswith(cmd + "_"), cid
        assert all(c["id"] != cid for c in self.items), f"duplicate case id {cid}"
        assert list(opts) == list(OPTION_KEYS), cid
        self.items.append({"id": cid, "cmd": cmd, "options": opts})

    def opt(self, cid: str, cmd: str, **over) -> None:
        self.add(cid, cmd, options(**over))


# Which extra case groups each real fixture gets (every fixture gets the core set). The
# coverage is spread over the fixtures to keep tests/golden small (~6 MB).
EXTRAS = {
    "cnn": {"select_single_op", "select_combos", "names_a", "accounts_scope", "order_rest"},
    "rnn": {"select_single_code", "names_b", "accounts_graph_code", "order_some"},
    "multistep": {"order_all", "steps_all_views", "presets_graph_code", "max_depth"},
}


def real_cases(name: str, steps: list[int]) -> list[dict]:
    """The cases of a fixture made with real TensorFlow (cnn, rnn, multistep).

    Most cases narrow the output (small max_depth, a start or show regex): the returned protos
    are large (an op-view row carries every member graph node).
    """
    rx, extra = REGEXES[name], EXTRAS[name]
    k = REAL_FIXTURES.index(name)
    c = Cases()
    small = {  # narrow settings per view, for cases about formatting or ordering
        "scope": {"max_depth": 4, "start_name_regexes": [rx["narrow"]]},
        "graph": {"max_depth": 3, "start_name_regexes": [rx["gnarrow"]]},
        "op": {"max_depth": 100, "show_name_regexes": [rx["op_show"]]},
        "code": {"max_depth": 4},
    }

    def narrow(v: str, **over) -> dict:
        return {**small[v], **over}

    # ---- core: every fixture ----------------------------------------------------------
    # Command-line defaults and the ProfileOptionBuilder presets (all presets in all four
    # views on multistep only: their graph/code views and the op view of time_and_memory
    # are large on the other fixtures).
    for v in VIEWS:
        c.opt(f"{v}_default_cli", v)
    for v in VIEWS:
        for tag, method in PRESETS.items():
            if "presets_graph_code" in extra or v == "scope" or (v, tag) in (
                    ("op", "params"), ("op", "flops")):
                c.add(f"{v}_preset_{tag}", v, preset(method))

    # min_* thresholds read from the data (AUTO). Totals-based ones in one view per fixture,
    # rotating, so that over the three fixtures each is seen in three views (the op view
    # compares cumulative totals); min_params/min_float_ops (self in scope/graph, total in
    # op/code) and min_occurrence (self run count / member count / ignored by code) in the
    # scope, op and code views (the graph view uses the scope view's rule; all
    # four views on multistep).
    depth = {"scope": {"max_depth": 5}, "graph": {"max_depth": 4}, "op": small["op"],
             "code": {"max_depth": 5}}
    for i, opt_name in enumerate(MIN_OPTIONS):
        field = MIN_OPTIONS[opt_name][0]
        views = (VIEWS if name == "multistep" else ("scope", "op", "code")) if opt_name in (
            "min_params", "min_float_ops", "min_occurrence") else (VIEWS[(i + k) % 4],)
        views = tuple(dict.fromkeys(views))
        for v in views:
            c.opt(f"{v}_min_{opt_name[4:]}", v, select=[field], **depth[v], **{opt_name: AUTO})

    # step: every real step, -1, and a step that does not exist (stderr, no file, no proto).
    for s in [-1, *steps, 99]:
        c.opt(f"op_step_{'m1' if s < 0 else s}", "op", step=s,
              select=["micros", "bytes", "occurrence"], **narrow("op"))
    c.opt("scope_step_99", "scope", step=99, **narrow("scope"))

    # account_type_regexes. "double": a trainable variable matches both regexes, which the
    # op/code views count twice (docs/TFPROF_BEHAVIOUR.md, Known quirk 2).
    accounts = {
        "all": [".*"], "trainable": ["_trainable_variables"],
        "variables": ["VariableV2|VarHandleOp"], "cpu": [".*cpu.*"],
        "double": ["VariableV2|VarHandleOp", "_trainable_variables"], "empty": [],
    }
    account_views = {"op": tuple(accounts), "scope": ("trainable",), "code": ("double",)}
    if "accounts_scope" in extra:
        account_views["scope"] += ("variables", "cpu", "double", "empty")
    if "accounts_graph_code" in extra:
        account_views["graph"] = ("trainable", "empty")
        account_views["code"] += ("trainable", "variables", "empty")
    acc = {"scope": narrow("scope", max_depth=6), "graph": narrow("graph", max_depth=6),
           "op": {"max_depth": 10, "hide_name_regexes": [rx["op_hide"]]},
           "code": {"max_depth": 7}}
    for v, tags in account_views.items():
        for tag in tags:
            c.opt(f"{v}_account_{tag}", v, account_type_regexes=accounts[tag],
                  select=["params", "micros", "occurrence"], **acc[v])

    # Name regexes, with account_displayed_op_only false/true next to a show regex.
    own = r"make_fixtures\.py:.*"
    grad = r".*\(gradient\)"
    c.opt("scope_start", "scope", start_name_regexes=[rx["start"]], max_depth=4,
          select=["micros", "params"])
    for v in ("scope", "graph"):
        c.opt(f"{v}_trim", v, trim_name_regexes=[rx["trim"]], max_depth=8,
              hide_name_regexes=[rx["hide"]], select=["bytes"], min_bytes=AUTO)
        for flag in (False, True):
            c.opt(f"{v}_show_displayed_{str(flag).lower()}", v, show_name_regexes=[rx["show"]],
                  account_displayed_op_only=flag, max_depth=100,
                  select=["micros", "bytes", "float_ops", "occurrence"])
    c.opt("op_start", "op", start_name_regexes=[rx["op_start"]], select=["micros", "occurrence"],
          max_depth=6)
    c.opt("op_trim", "op", trim_name_regexes=[rx["op_trim"]], select=["micros", "occurrence"],
          **narrow("op"))
    for flag in (False, True):
        c.opt(f"op_show_displayed_{str(flag).lower()}", "op", show_name_regexes=[rx["op_show"]],
              account_displayed_op_only=flag, max_depth=100,
              select=["micros", "bytes", "float_ops", "occurrence"])
    # Code view: "file.py:line:function" nodes; gradient nodes are folded under
    # "... (gradient)" copies of their forward op's stack.
    c.opt("code_show_gradient", "code", show_name_regexes=[rf"make_fixtures\.py:.*{grad}"],
          max_depth=100, select=["micros", "float_ops"])
    c.opt("code_trim", "code", trim_name_regexes=[r".*ops\.py:.*"], max_depth=100,
          show_name_regexes=[own, r".*ops\.py:.*"], select=["micros"])
    c.opt("code_show_displayed_true", "code", show_name_regexes=[own],  # ignored, stderr note
          account_displayed_op_only=True, max_depth=100, select=["micros", "bytes"])

    # select: all fields at once in every view.
    for v in VIEWS:
        c.opt(f"{v}_select_all", v, select=list(SELECT_FIELDS), **narrow(v))

    # ---- extras: some fixtures ---------------------------------------------------------
    if "names_a" in extra:
        c.opt("scope_start_deep", "scope", start_name_regexes=[rx["start"]], max_depth=100,
              select=["micros", "params"])
        c.opt("scope_hide", "scope", hide_name_regexes=[rx["hide"], rx["grad"]], max_depth=4,
              select=["micros", "bytes"])
        c.opt("scope_start_trim_show_hide", "scope",
              start_name_regexes=[rx["start"], rx["grad"]], trim_name_regexes=[rx["trim"]],
              show_name_regexes=[rx["deep"], rx["start"]], hide_name_regexes=[rx["hide"]],
              max_depth=7, select=["micros", "params"])
        c.opt("graph_start_grad_show", "graph", start_name_regexes=[rx["grad"]],
              max_depth=100, select=["micros", "float_ops"], show_name_regexes=[rx["show_any"]])
        c.opt("op_hide", "op", hide_name_regexes=[rx["op_hide"]], max_depth=12,
              select=["micros", "bytes"])
        c.opt("op_max_depth_0", "op", max_depth=0, select=["micros"])
        c.opt("code_start_build", "code", max_depth=3, select=["micros", "params"],
              start_name_regexes=[rf"make_fixtures\.py:\d+:{rx['build']}.*"])
        c.opt("code_hide_gradient", "code", hide_name_regexes=[grad, r".*_ops\.py:.*"],
              max_depth=6, select=["micros"])
    if "names_b" in extra:
        c.opt("scope_show_shallow", "scope", show_name_regexes=[rx["show"]], max_depth=4,
              select=["micros", "float_ops"])
        c.opt("scope_start_none", "scope", start_name_regexes=[], select=["micros"])
        c.opt("graph_hide_deep", "graph", hide_name_regexes=[rx["hide"], rx["grad"]],
              max_depth=100, select=["micros"], min_micros=AUTO)
        c.opt("graph_show_none", "graph", show_name_regexes=[], select=["micros"])
        c.opt("op_start_nomatch", "op", start_name_regexes=["NoSuchOp"], select=["micros"])
        c.opt("op_start_none", "op", start_name_regexes=[], select=["micros"], max_depth=5)
        c.opt("code_start_gradient", "code", start_name_regexes=[grad], max_depth=100,
              show_name_regexes=[own], select=["micros", "float_ops"])
        c.opt("code_show_displayed_false", "code", show_name_regexes=[own],
              account_displayed_op_only=False, max_depth=100, select=["micros", "bytes"])
        c.opt("code_start_none", "code", start_name_regexes=[], select=["micros"])

    for v in [v for v in VIEWS if f"select_single_{v}" in extra]:
        for field in SELECT_FIELDS:
            c.opt(f"{v}_select_{field}", v, select=[field], **narrow(v))
    if "select_combos" in extra:
        combos = {
            "mem": ["bytes", "peak_bytes", "residual_bytes", "output_bytes"],
            "time": ["micros", "accelerator_micros", "cpu_micros"],
            "accel_cpu": ["accelerator_micros", "cpu_micros"],
            "dev_types_occ_shapes": ["device", "op_types", "occurrence", "input_shapes"],
            "none": [],
            "unknown": ["micros", "no_such_field"],
        }
        for i, (tag, sel) in enumerate(combos.items()):
            v = VIEWS[(i + 1) % 4]
            c.opt(f"{v}_select_{tag}", v, select=sel, **narrow(v))

    if "order_all" in extra or "order_some" in extra:
        values = ORDER_BY if "order_all" in extra else ("name", "bytes", "micros", "occurrence")
        for o in values:
            field = "micros" if o in ("name", "depth") else o
            sel = ["micros"] if field == "micros" else ["micros", field]
            views = ("scope", "op") if "order_all" in extra else ("op",)
            if o in ("name", "bytes", "micros", "occurrence"):
                views += ("graph", "code")
            elif o in ("params", "float_ops") and "order_all" in extra:
                views += ("code",)
            for v in views:
                c.opt(f"{v}_order_{o}", v, order_by=o, select=sel, **narrow(v))
        c.opt("op_order_empty", "op", order_by="", select=["micros"], **narrow("op"))
        c.opt("op_order_micros_displayed", "op", order_by="micros",
              account_displayed_op_only=True, select=["micros", "bytes", "params"],
              **narrow("op"))

    if "order_rest" in extra:  # the values multistep orders only in the scope and op views
        for o in ORDER_BY:
            field = "micros" if o in ("name", "depth") else o
            sel = ["micros"] if field == "micros" else ["micros", field]
            views = () if o in ("name", "bytes", "micros", "occurrence") else \
                ("graph",) if o in ("params", "float_ops") else ("graph", "code")
            for v in views:
                c.opt(f"{v}_order_{o}", v, order_by=o, select=sel, **narrow(v))

    if "steps_all_views" in extra:
        for s in (-1, steps[1]):
            c.opt(f"scope_step_{'m1' if s < 0 else s}", "scope", step=s,
                  select=["micros", "bytes", "occurrence"], **narrow("scope"))
        c.opt(f"graph_step_{steps[-1]}", "graph", step=steps[-1],
              select=["micros", "occurrence"], **narrow("graph"))
        c.opt(f"code_step_{steps[0]}", "code", step=steps[0], select=["micros", "bytes"],
              **narrow("code"))
        c.opt("code_step_99", "code", step=99, **narrow("code"))
        c.opt("graph_step_99", "graph", step=99, **narrow("graph"))

    if "max_depth" in extra:
        c.opt("scope_max_depth_1", "scope", max_depth=1, select=["micros", "bytes"])
        c.opt("graph_max_depth_2", "graph", max_depth=2, select=["micros", "bytes"])
        c.opt("code_max_depth_2", "code", max_depth=2, select=["micros", "bytes"])
    return c.items


def gpu_tiny_cases() -> list[dict]:
    """gpu_tiny: a hand-made GPU trace (accelerator time, stream:all, memcpy); no code traces."""
    c = Cases()
    gpu = ["accelerator_micros", "cpu_micros", "device", "op_types", "occurrence"]
    for v in ("scope", "graph", "op"):
        c.opt(f"{v}_gpu_fields", v, select=gpu)
    for v in ("scope", "op"):
        c.opt(f"{v}_gpu_micros_bytes", v, select=["micros", "bytes", "peak_bytes",
                                                  "residual_bytes", "output_bytes",
                                                  "input_shapes"])
    c.opt("op_order_accelerator_micros", "op", order_by="accelerator_micros", select=gpu)
    c.opt("scope_min_accelerator_micros", "scope", min_accelerator_micros=AUTO, select=gpu)
    c.opt("scope_account_gpu", "scope", account_type_regexes=[".*gpu.*"], select=gpu)
    c.opt("op_account_gpu", "op", account_type_regexes=[".*gpu.*"], select=gpu)
    c.opt("code_default_cli", "code")  # no code traces: stderr "No code trace information"
    return c.items


# --------------------------------------------------------------------------------------
# Child process: real tfprof
# --------------------------------------------------------------------------------------

# Where the child captures fd 2 during a call: a named file, so that the parent can still read
# what the native code printed when it killed the process (set by run_child).
_STDERR_FILE: Path | None = None


class Real:
    """The real tool, profile loaded once for this process."""

    def __init__(self, profile: Path) -> None:
        from tensorflow.core.profiler import tfprof_output_pb2
        from tensorflow.python.profiler import model_analyzer
        from tensorflow.python.util import _pywrap_tfprof

        self.p = _pywrap_tfprof
        self.out_pb2 = tfprof_output_pb2
        self.build = model_analyzer._build_options
        _, self.load_stdout, self.load_stderr, err = captured(
            lambda: self.p.ProfilerFromFile(str(profile).encode()), _STDERR_FILE)
        if err:
            raise RuntimeError(f"cannot load {profile}: {err}")

    def proto(self, cmd: str, raw: bytes):
        cls = (self.out_pb2.GraphNodeProto if cmd in ("scope", "graph")
               else self.out_pb2.MultiGraphNodeProto)
        return cls.FromString(raw)

    def run(self, cmd: str, opts: dict):
        raw = self.p.Profile(cmd.encode(), self.build(opts).SerializeToString())
        return self.proto(cmd, raw)


def walk(node, depth=0):
    yield node, depth
    for ch in node.children:
        yield from walk(ch, depth + 1)


def shown_nodes(node) -> list:
    """The displayed nodes of a returned proto, root excluded (op view: the row chain)."""
    return [n for n, d in walk(node) if d > 0]


def threshold(values: list[int]) -> int:
    """Median of the positive values, moved up when it is the smallest positive value."""
    pos = sorted(v for v in values if v > 0)
    if not pos:
        return 1
    t = pos[len(pos) // 2]
    if t == pos[0]:
        t = next((v for v in pos if v > t), t)
    return int(t)


def node_value(cmd: str, opt_name: str, node) -> int:
    """The value that option ``opt_name`` compares for ``node`` in view ``cmd`` (docs/TFPROF_BEHAVIOUR.md, 'Options')."""
    _, single, multi = MIN_OPTIONS[opt_name]
    if cmd in ("scope", "graph"):
        return int(getattr(node, single))
    if multi == "#members":
        return len(node.graph_nodes)
    return int(getattr(node, multi))


def resolve_auto(real: Real, case: dict) -> tuple[dict, dict]:
    """Replace AUTO thresholds by a value from the case's own baseline (threshold 0) output."""
    opts, info = dict(case["options"]), {}
    for opt_name in MIN_OPTIONS:
        if opts[opt_name] != AUTO:
            continue
        base = dict(opts, output="none", **{opt_name: 0})
        base = {k: (0 if v == AUTO else v) for k, v in base.items()}
        res, _, _, err = captured(lambda: real.run(case["cmd"], base), _STDERR_FILE)
        if err:
            raise RuntimeError(f"{case['id']}: baseline failed: {err}")
        nodes = shown_nodes(res)
        opts[opt_name] = threshold([node_value(case["cmd"], opt_name, n) for n in nodes])
        info[opt_name] = {"threshold": opts[opt_name], "nodes_at_0": len(nodes)}
    return {**case, "options": opts}, info


def pbtxt(proto) -> str:
    """Text format without indentation.

    The op view returns its rows as a chain (row k+1 is the only child of row k), so indented
    text nests one level per row and grows ~7x; text_format.Parse ignores the whitespace.
    """
    from google.protobuf import text_format

    return "".join(line.lstrip(" ") + "\n" for line in
                   text_format.MessageToString(proto).splitlines())


def run_case(real: Real, case: dict, tmp: Path):
    """One real call; returns (text or None, raw proto bytes, stdout, stderr, python error)."""
    outfile = tmp / f"{case['id']}.txt"
    outfile.unlink(missing_ok=True)
    opts = dict(case["options"], output=f"file:outfile={outfile}")
    raw, so, se, err = captured(
        lambda: real.p.Profile(case["cmd"].encode(), real.build(opts).SerializeToString()),
        _STDERR_FILE)
    text = outfile.read_bytes() if outfile.exists() else None
    return text, raw, so, se, err


def run_child(name: str, out_dir: Path, skip: set[str], progress: Path) -> None:
    import tensorflow as tf
    from tensorflow.core.profiler import tfprof_log_pb2

    global _STDERR_FILE
    _STDERR_FILE = progress.with_suffix(".stderr")

    profile = FIXTURES / name / "profile.pb"
    real = Real(profile)
    steps = sorted(tfprof_log_pb2.ProfileProto.FromString(profile.read_bytes()).steps)
    cases = gpu_tiny_cases() if name == "gpu_tiny" else real_cases(name, steps)

    out_dir.mkdir(parents=True, exist_ok=True)
    kept, facts, failed, results = [], {}, [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            cid, cmd = case["id"], case["cmd"]
            if cid in skip:
                continue
            progress.write_text(cid)
            case, auto = resolve_auto(real, case)
            text, raw, so, se, err = run_case(real, case, Path(tmp))
            if err:
                failed.append({"id": cid, "error": err, "stderr": se})
                continue
            proto = real.proto(cmd, raw)
            results[cid] = (text, pbtxt(proto), so, se)
            (out_dir / f"{cid}.txt").write_bytes(text or b"")
            (out_dir / f"{cid}.pbtxt").write_text(pbtxt(proto))
            if se:
                (out_dir / f"{cid}.stderr").write_text(se)
            if so:
                (out_dir / f"{cid}.stdout").write_text(so)
            facts[cid] = {"file_written": text is not None, "returned_bytes": len(raw),
                          "nodes": len(shown_nodes(proto))}
            if auto:
                facts[cid]["auto_thresholds"] = auto
            kept.append(case)

        # The tool re-initialises shared node state on every query (docs/TFPROF_BEHAVIOUR.md,
        # Known quirk 24): check that no answer depends on the queries run before it.
        # (Compare parsed protos: the raw bytes differ from call to call, C++ map fields
        # such as input_shapes serialise in no fixed order.)
        order_dependent = []
        for case in reversed(kept):
            progress.write_text(case["id"])
            text, raw, so, se, _ = run_case(real, case, Path(tmp))
            if (text, pbtxt(real.proto(case["cmd"], raw)), so, se) != results[case["id"]]:
                order_dependent.append(case["id"])
        progress.write_text("")

    write_cases(out_dir / "cases.json", kept)
    meta = {
        "fixture": name,
        "profile": f"tests/fixtures/{name}/profile.pb",
        "profile_sha256": hashlib.sha256(profile.read_bytes()).hexdigest(),
        "tf_version": tf.__version__,
        "steps": steps,
        "command": os.environ.get("MAKE_GOLDEN_COMMAND", ""),
        "child_command": " ".join([sys.executable, SCRIPT_REL, "--child", name]),
        "environment": {k: os.environ.get(k, "") for k in
                        ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")},
        "how": ("_pywrap_tfprof.ProfilerFromFile(profile) once; per case "
                "_pywrap_tfprof.Profile(cmd, model_analyzer._build_options(options with "
                "output='file:outfile=<tmp>/<id>.txt')); fds 1 and 2 captured around each "
                "call; the returned bytes parsed with tfprof_output_pb2 and written with "
                "text_format.MessageToString, indentation stripped"),
        "load_stderr": real.load_stderr,
        # What each min_* option compares: docs/TFPROF_BEHAVIOUR.md, 'Options'.
        "threshold_rule": ("min_* values marked auto in the case list: run the case with that "
                           "threshold at 0 (output none), take the median of the positive "
                           "values the option compares (totals; self params/flops/"
                           "run_count in scope/graph; member count for op/code occurrence) "
                           "over the shown nodes, moved up to the next distinct value when "
                           "it is the smallest positive value"),
        "num_cases": len(kept),
        "order_dependent": order_dependent,
        "python_errors": failed,
        "crashed": [],  # filled in by the parent
        "cases": facts,
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


# --------------------------------------------------------------------------------------
# Parent: one child per fixture, crash handling, coverage
# --------------------------------------------------------------------------------------

def generate(name: str, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / name
        crashed = run_surviving_crashes(SCRIPT_REL, name, stage, Path(tmp) / "progress", env)
        meta = json.loads((stage / "meta.json").read_text())
        meta["crashed"] = crashed
        (stage / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        dest = GOLDEN / name
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(stage, dest)
    return meta


def coverage(names) -> str:
    """Markdown tables: how many cases of each view set each option, select field, order_by."""
    per = {n: json.loads((GOLDEN / n / "cases.json").read_text())
           for n in names if (GOLDEN / n / "cases.json").exists()}
    checks = [(f"option `{k}` != CLI default", lambda o, k=k: o[k] != CLI_DEFAULTS[k])
              for k in OPTION_KEYS if k != "output"]
    checks += [(f"select `{f}`", lambda o, f=f: f in o["select"]) for f in SELECT_FIELDS]
    checks += [(f"order_by `{ob}`", lambda o, ob=ob: o["order_by"] == ob) for ob in ORDER_BY]

    def table(title: str, cases: list[dict]) -> list[str]:
        out = [f"## {title} ({len(cases)} cases)", "",
               "| item | " + " | ".join(VIEWS) + " |", "|---|" + "---|" * len(VIEWS)]
        for label, pred in checks:
            cells = [sum(1 for c in cases if c["cmd"] == v and pred(c["options"]))
                     for v in VIEWS]
            out.append(f"| {label} | " + " | ".join(str(n) if n else "." for n in cells) + " |")
        gaps = [label for label, pred in checks
                if not any(pred(c["options"]) for c in cases)]
        return out + ["", "Not covered in any view: " + (", ".join(gaps) or "none"), ""]

    lines = ["# Coverage of the golden cases", "",
             "Generated by `tools/make_golden.py`; do not edit. Cells count the cases of a view",
             "that set the item (an option away from the CLI default, a select field, an",
             "order_by value); `.` = none.", ""]
    lines += table("all fixtures", [c for cases in per.values() for c in cases])
    for n, cases in per.items():
        lines += table(n, cases)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Golden outputs of the real tfprof views.")
    ap.add_argument("--only", choices=NAMES, action="append", help="this fixture only (repeatable)")
    ap.add_argument("--child", choices=NAMES, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--progress", help=argparse.SUPPRESS)
    ap.add_argument("--skip", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(args.child, Path(args.out), set(args.skip), Path(args.progress))
        return 0
    env = dict(reference_env(SCRIPT_REL, args.only), PYTHONHASHSEED="0")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in args.only or NAMES:
        print(f"=== {name}", flush=True)
        meta = generate(name, env)
        print(f"  {meta['num_cases']} cases, {len(meta['crashed'])} crashed, "
              f"{len(meta['python_errors'])} Python errors", flush=True)
    table = coverage(NAMES)
    (GOLDEN / "COVERAGE.md").write_text(table + "\n")
    print(table.split("\n## cnn")[0])  # the all-fixtures table; per fixture in COVERAGE.md
    subprocess.run(["du", "-sh", str(GOLDEN)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
