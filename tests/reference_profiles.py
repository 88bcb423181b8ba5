"""Small random profiles for holding the engine equal to the reference backend
(tests/test_reference_backend.py): a hypothesis strategy and a loader.

A profile is a GraphDef whose node names nest and collide with scopes (a few scope words,
gradient names now and then), with inputs between random nodes (cycles, repeated inputs and
inputs naming no node included), one to three RunMetadata steps for random nodes, and an op
log giving most nodes a short call stack drawn from a few frames (so that stacks share
prefixes) and some nodes an extra op type.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

import tfprof
from tfprof.schema.proto import graph_pb2, run_metadata_pb2, tfprof_log_pb2

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
OPS = ("MatMul", "Conv2D", "Add", "VariableV2", "Const", "Relu")
WORDS = ("a", "b", "dense", "conv", "gradients", "a_grad")
FRAMES = (("model.py", 10, "build"), ("model.py", 20, "layer"), ("layers.py", 5, "dense_with_a_long_name"),
          ("train.py", 3, "main"))


@st.composite
def profiles(draw) -> dict:
    """A profile as plain data (written to files by ``load``)."""
    names = draw(st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map("/".join), min_size=1, max_size=30, unique=True,
    ))
    n = len(names)
    nodes = []
    for name in names:
        inputs = draw(st.lists(st.integers(0, n), max_size=3))  # n: an input naming no node
        nodes.append(dict(
            name=name, op=draw(st.sampled_from(OPS)),
            inputs=[names[i] if i < n else "missing" for i in inputs],
            stack=draw(st.lists(st.integers(0, len(FRAMES) - 1), max_size=4)),
            extra_type=draw(st.sampled_from([None, "gpu", "cpu"])),
            float_ops=draw(st.integers(0, 1000)),
        ))
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        ran = draw(st.lists(st.sampled_from(names), min_size=1, max_size=n, unique=True))
        steps.append([dict(
            name=name, device=draw(st.sampled_from((CPU, GPU))), start=draw(st.integers(1, 10**6)),
            dur=draw(st.integers(0, 5000)), requested=draw(st.integers(0, 10**6)), peak=draw(st.integers(0, 10**6)),
        ) for name in ran])
    return dict(nodes=nodes, steps=steps)


def load(spec: dict, folder: Path) -> tfprof.Profile:
    """Write ``spec``'s GraphDef, RunMetadata and op log to ``folder`` and load them."""
    graph = graph_pb2.GraphDef()
    log = tfprof_log_pb2.OpLogProto()
    for node in spec["nodes"]:
        g = graph.node.add(name=node["name"], op=node["op"], device=CPU)
        g.input.extend(node["inputs"])
        if node["op"] == "VariableV2":
            for d in (3, 4):
                g.attr["shape"].shape.dim.add(size=d)
        entry = log.log_entries.add(name=node["name"], float_ops=node["float_ops"])
        if node["extra_type"]:
            entry.types.append(node["extra_type"])
        for k in node["stack"]:
            file, line, function = FRAMES[k]
            entry.code_def.traces.add(file=file, lineno=line, function=function, line=f"{function}()")
    (folder / "graph.pb").write_bytes(graph.SerializeToString())
    (folder / "op_log.pb").write_bytes(log.SerializeToString())
    paths = []
    for i, stats in enumerate(spec["steps"]):
        rm = run_metadata_pb2.RunMetadata()
        devices = {}
        for s in stats:
            dev = devices.get(s["device"])
            if dev is None:
                dev = devices[s["device"]] = rm.step_stats.dev_stats.add(device=s["device"])
            ns = dev.node_stats.add(node_name=s["name"], all_start_micros=s["start"], op_start_rel_micros=0,
                                    op_end_rel_micros=s["dur"], all_end_rel_micros=s["dur"])
            mem = ns.memory.add(allocator_name="cpu")
            mem.total_bytes, mem.peak_bytes = s["requested"], s["peak"]
        path = folder / f"run_meta_{i}.pb"
        path.write_bytes(rm.SerializeToString())
        paths.append(str(path))
    return tfprof.load(graph_path=folder / "graph.pb", run_meta_path=",".join(paths), op_log_path=folder / "op_log.pb")
