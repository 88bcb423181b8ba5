"""The committed foreign captures (tests/fixtures/foreign/) are real, complete and what their README says.

Each check is a fact of a genuine torch.profiler / jax.profiler / TensorFlow 2 capture of the models that
tools/capture_foreign.py defines, computed with tests/foreign_expect.py from the raw bytes: a truncated,
hand-made or wrongly captured file fails here before any reader test compares against it.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from foreign_expect import kineto_expect, load_trace_events, load_xspace, xspace_expect
from google.protobuf import unknown_fields

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TORCH = {
    "torch_cnn.pt.trace.json": {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Linear", "CrossEntropyLoss"},
    "torch_transformer.pt.trace.json.gz": {"Embedding", "LayerNorm", "Linear", "GELU", "CrossEntropyLoss"},
}
XSPACES = ["jax_mlp.xplane.pb", "tf2_keras.xplane.pb"]
# captures made or cut for one reader feature, checked by that feature's tests (the README says what each holds)
OTHERS = ["tf2_keras_memory.xplane.pb", "tf_gpu_bert_slice.xplane.pb", "kineto_alexnet.pt.trace.json.gz",
          "kineto_ddp_nccl_step5.pt.trace.json.gz", "kineto_resnet50_step6.pt.trace.json.gz",
          "kineto_mi250_rocm.pt.trace.json.gz", "kineto_mtia_train_slice.pt.trace.json.gz",
          "torch_ops.pt.trace.json.gz", "torch_cuda_cnn.pt.trace.json.gz", "torch_cuda_transformer.pt.trace.json.gz",
          "torch_cuda_compiled_transformer.pt.trace.json.gz", "jax_cuda_mlp.xplane.pb", "jax_cuda_mlp_thunks.xplane.pb"]
MAX_BYTES = 2 * 1024 * 1024


def test_every_capture_is_small_and_listed_in_the_readme():
    files = sorted(p.name for p in FOREIGN.iterdir() if p.name != "README.md")
    assert files == sorted([*TORCH, *XSPACES, *OTHERS])
    readme = (FOREIGN / "README.md").read_text()
    for name in files:
        assert 0 < (FOREIGN / name).stat().st_size < MAX_BYTES
        assert f"`{name}`" in readme


# ---------------------------------------------------------------- PyTorch


def test_gzip_form_decompresses_and_plain_form_is_plain():
    gz = (FOREIGN / "torch_transformer.pt.trace.json.gz").read_bytes()
    assert gz[:2] == b"\x1f\x8b"
    assert isinstance(json.loads(gzip.decompress(gz))["traceEvents"], list)
    plain = (FOREIGN / "torch_cnn.pt.trace.json").read_bytes()
    assert plain.lstrip()[:1] == b"{"  # torch indents the top-level object


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_capture_has_the_options_it_was_made_with(name):
    top, events = load_trace_events(FOREIGN / name)
    for flag in ("record_shapes", "profile_memory", "with_stack", "with_modules"):
        assert top[flag] == 1, flag
    assert len(events) > 100


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_capture_has_two_profiled_steps(name):
    k = kineto_expect(FOREIGN / name)
    # schedule(wait=1, warmup=1, active=2): the active steps are numbered 2 and 3
    assert sorted(k["steps_ns"]) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert all(d > 0 for d in k["steps_ns"].values())
    _, events = load_trace_events(FOREIGN / name)
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("aten::")]
    for step in (e for e in events if e["name"] in k["steps_ns"]):
        inside = [e for e in ops if step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"]]
        assert inside, f"no aten op inside {step['name']}"


@pytest.mark.parametrize("name", sorted(TORCH))
def test_torch_capture_has_aten_ops_shapes_memory_modules_and_stacks(name):
    k = kineto_expect(FOREIGN / name)
    assert sum(n for n, _ in k["complete_by_cat_name"].values()) == k["ph_counts"]["X"]
    aten = {n: v for (cat, n), v in k["complete_by_cat_name"].items() if cat == "cpu_op" and n.startswith("aten::")}
    assert len(aten) > 10 and all(count > 0 and total >= 0 for count, total in aten.values())
    assert k["shapes_events"] > 0 and k["arg_key_counts"]["Input Dims"] == k["arg_key_counts"]["Input type"]
    assert k["memory_events"] > 0 and k["memory_alloc_bytes"] > 0 and k["memory_free_bytes"] > 0
    assert k["arg_key_counts"]["Bytes"] == k["memory_events"]
    classes = {re.sub(r"_\d+$", "", m) for m in k["modules"]}
    assert TORCH[name] <= classes
    assert k["cat_counts"].get("python_function", 0) > 0  # with_stack frames are events of their own
    assert k["ph_counts"].get("s") == k["ph_counts"].get("f") > 0  # forward/backward flow pairs
    assert k["distinct_threads"] >= 1 and any(n.startswith("thread ") for n in k["thread_names"].values())


def test_torch_cnn_conv_inputs_are_nchw():
    _, events = load_trace_events(FOREIGN / "torch_cnn.pt.trace.json")
    convs = [e for e in events if e["name"] == "aten::conv2d"]
    assert convs
    for e in convs:
        data, weight = e["args"]["Input Dims"][:2]
        assert len(data) == 4 and len(weight) == 4 and data[1] == weight[1]


# ---------------------------------------------------------------- XSpace


def _unknown_anywhere(message) -> int:
    count = len(unknown_fields.UnknownFieldSet(message))
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = value.values() if field.message_type.fields_by_name["value"].message_type else []
        else:
            values = value if field.is_repeated else [value]
        count += sum(_unknown_anywhere(v) for v in values)
    return count


@pytest.mark.parametrize("name", XSPACES)
def test_xspace_parses_with_the_vendored_proto_without_unknown_fields(name):
    assert _unknown_anywhere(load_xspace(FOREIGN / name)) == 0


@pytest.mark.parametrize("name", XSPACES)
def test_xspace_has_a_host_cpu_plane_with_events(name):
    x = xspace_expect(FOREIGN / name)
    planes = {p["name"]: p for p in x["planes"]}
    assert "/host:CPU" in planes and planes["/host:CPU"]["events"] > 50
    for p in x["planes"]:
        assert sum(p["line_events"].values()) == p["events"]
    per_plane = {}
    for (plane, _), (count, _) in x["events_by_plane_name"].items():
        per_plane[plane] = per_plane.get(plane, 0) + count
    assert per_plane == {p["name"]: p["events"] for p in x["planes"] if p["events"]}
    assert not x["errors"]


def test_jax_named_scopes_reach_the_hlo_of_the_executed_ops():
    x = xspace_expect(FOREIGN / "jax_mlp.xplane.pb")
    (program,) = [p for p in x["programs"] if p.startswith("jit_train_step")]
    instructions = {n: v for comp in x["programs"][program].values() for n, v in comp.items()}
    op_names = {op_name for _, op_name in instructions.values()}
    for scope in ("/mlp/hidden/", "/mlp/out/", "/sgd/", "(loss)"):
        assert any(scope in n for n in op_names), scope
    executed = x["string_stats"]["/host:CPU"]["hlo_op"]
    assert executed and executed <= set(instructions)
    assert any("/mlp/" in instructions[op][1] for op in executed)


def test_jax_steps_are_annotated():
    x = xspace_expect(FOREIGN / "jax_mlp.xplane.pb")
    count, total_ps = x["events_by_plane_name"][("/host:CPU", "train")]
    assert count == 3 and total_ps > 0
    assert {"step_num", "hlo_op", "hlo_module"} <= x["stat_names_used"]["/host:CPU"]


def test_tf2_ops_are_named_path_colon_type_with_keras_layers():
    x = xspace_expect(FOREIGN / "tf2_keras.xplane.pb")
    names = [n for (plane, n) in x["events_by_plane_name"] if plane == "/host:CPU"]
    layers = {m.group(1) for n in names if (m := re.search(r"/small_keras(?:_\d+)?/(\w+?)(?:_\d+)?/", n))}
    assert {"conv", "hidden", "logits"} <= layers
    typed = {n: t for (plane, n), t in x["display_names"].items() if "/small_keras" in n}
    assert typed and all(n.endswith(":" + t) for n, t in typed.items())
    assert any(t.endswith("MatMul") for t in typed.values()) and any("Conv2D" in t for t in typed.values())
