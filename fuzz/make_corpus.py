"""Build the seed corpus of every reader from the test fixtures: ``python fuzz/make_corpus.py [OUT]``.

The seeds are the fixtures (``tests/fixtures``): the small ones as they are, and of the large
ones (hundreds of KB, which would make every fuzz input slow) a cut-down copy that is still
valid: the first nodes of a graph or profile, the first records of each device of a step, the
first entries of an op log. Written to ``OUT/<reader>/`` (default ``fuzz/corpus``, which git
ignores); nothing here is committed but this script.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from contract import CHECKPOINTS, FIXTURES, READERS, cut_profile, store_seed, store_template  # noqa: E402
from hostile import TWISTS  # noqa: E402

LARGE = ("cnn", "rnn", "multistep")
KEEP = 24  # nodes, records or entries kept of a large fixture


def _graph(name: str, text: bool = False) -> bytes:
    from google.protobuf import text_format

    from tfprof.schema.proto import graph_pb2

    graph = graph_pb2.GraphDef()
    graph.ParseFromString((FIXTURES / name / "graph.pb").read_bytes())
    del graph.node[KEEP:]
    return text_format.MessageToString(graph).encode() if text else graph.SerializeToString()


def _run_meta(path: Path) -> bytes:
    from tfprof.schema.proto import run_metadata_pb2

    rm = run_metadata_pb2.RunMetadata()
    rm.ParseFromString(path.read_bytes())
    for dev in rm.step_stats.dev_stats:
        del dev.node_stats[KEEP:]
    rm.ClearField("partition_graphs")
    rm.ClearField("cost_graph")
    rm.ClearField("function_graphs")
    return rm.SerializeToString()


def _op_log(name: str) -> bytes:
    from tfprof.schema.proto import tfprof_log_pb2

    log = tfprof_log_pb2.OpLogProto()
    log.ParseFromString((FIXTURES / name / "op_log.pb").read_bytes())
    del log.log_entries[KEEP:]
    used = {i for e in log.log_entries for t in e.code_def.traces for i in (t.file_id, t.function_id, t.line_id)}
    for key in [k for k in log.id_to_string if k not in used]:
        del log.id_to_string[key]
    return log.SerializeToString()


FOREIGN = FIXTURES / "foreign"


def _kineto_seeds() -> dict[str, bytes]:
    """Each Kineto fixture cut to its first events (metadata, steps, ops, frames, memory and flows
    among them), plain and gzipped, and a small trace of B/E pairs and counters."""
    import gzip
    import json

    out = {}
    for name in ("torch_cnn.pt.trace.json", "torch_transformer.pt.trace.json.gz"):
        raw = (FOREIGN / name).read_bytes()
        doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
        events = doc["traceEvents"]
        keep = [e for e in events if e.get("ph") == "M" or e.get("name", "").startswith("ProfilerStep#")]
        keep += [e for e in events if e.get("cat") in ("cpu_op", "python_function", "fwdbwd")][:KEEP * 2]
        keep += [e for e in events if e.get("name") == "[memory]"][:KEEP // 4]
        doc["traceEvents"] = keep
        text = json.dumps(doc).encode()
        out[name.split(".")[0]] = gzip.compress(text, mtime=0) if name.endswith(".gz") else text
    be = [{"ph": "B", "name": "aten::outer", "cat": "cpu_op", "ts": 0, "pid": 1, "tid": 1},
          {"ph": "B", "name": "aten::inner", "cat": "cpu_op", "ts": 1, "pid": 1, "tid": 1},
          {"ph": "E", "ts": 2, "pid": 1, "tid": 1}, {"ph": "E", "ts": 4, "pid": 1, "tid": 1},
          {"ph": "C", "name": "mem", "ts": 3, "pid": 1, "args": {"a": 1, "b": 2.5}}]
    out["begin_end"] = json.dumps(be).encode()
    return out


def _nonfinite_seeds() -> dict[str, bytes]:
    """Chrome traces whose times are not finite or do not fit 64 bits."""
    out = {}
    for name, value in (("nan", "NaN"), ("inf", "Infinity"), ("neg_inf", "-Infinity"), ("huge", "1e400"),
                        ("1e29", "1e29"), ("2_64", str(2**64 + 1))):
        for field in ("ts", "dur"):
            event = {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": 1, "dur": 2, "pid": 1, "tid": 1}
            text = json.dumps({"traceEvents": [event]}).replace(f'"{field}": {event[field]}', f'"{field}": {value}')
            out[f"bad_{field}_{name}"] = text.encode()
    return out


def _catalog_parts() -> list[Path]:
    import contract
    from hostile import _template_catalog

    return sorted(_template_catalog(contract).rglob("part-*.parquet"))


def _xspace_cut(name: str) -> bytes:
    from tfprof.schema.proto import xplane_pb2

    space = xplane_pb2.XSpace.FromString((FOREIGN / name).read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            del line.events[KEEP * 2:]
    return space.SerializeToString()


def seeds(reader: str) -> dict[str, bytes]:
    """The seeds of ``reader``: name -> bytes. Seeds named ``bad_*`` are hostile on purpose and
    may be rejected; every other seed loads."""
    out: dict[str, bytes] = {}
    if reader in ("profile", "profile_reference"):
        out["gpu_tiny"] = (FIXTURES / "gpu_tiny" / "profile.pb").read_bytes()
        out["flops"] = (FIXTURES / "flops" / "profile.pb").read_bytes()
        out.update({f"{n}_cut": cut_profile(n, KEEP) for n in LARGE})
    elif reader == "graph":
        out["flops"] = (FIXTURES / "flops" / "graph.pb").read_bytes()
        out.update({f"{n}_cut": _graph(n) for n in LARGE})
    elif reader == "graph_text":
        out["gpu_tiny"] = (FIXTURES / "gpu_tiny" / "graph.pbtxt").read_bytes()
        out.update({f"{n}_cut": _graph(n, text=True) for n in LARGE})
    elif reader == "run_meta":
        out["gpu_tiny_text"] = (FIXTURES / "gpu_tiny" / "run_meta_0.pbtxt").read_bytes()
        for path in sorted(FIXTURES.glob("multistep/run_meta_*.pb")):
            out[f"multistep_{path.stem}"] = path.read_bytes()
        out.update({f"{n}_cut": _run_meta(FIXTURES / n / "run_meta_0.pb") for n in ("cnn", "rnn")})
    elif reader == "op_log":
        out["flops"] = (FIXTURES / "flops" / "op_log.pb").read_bytes()
        out.update({f"{n}_cut": _op_log(n) for n in LARGE})
    elif reader == "checkpoint":
        for k, prefix in enumerate(CHECKPOINTS):  # the first byte picks the data shards
            index = prefix.parent / (prefix.name + ".index")
            out["_".join(index.relative_to(FIXTURES).parts[:-1])] = bytes([k]) + index.read_bytes()
    elif reader == "store":
        _, files = store_template()
        out.update({name.replace("/", "_"): store_seed(name) for name in files})
    elif reader == "kineto":
        out.update(_kineto_seeds())
        out.update(_nonfinite_seeds())
    elif reader == "catalog":
        out["plain"] = b"\x00"
        out["dotdot"] = b"\x00../outside/victim.txt\nnodes/../../outside/sub/keep.txt"
        out["absolute"] = b"\x00@OUT@/victim.txt\n@OUT@/sub"
        out["copies_outside"] = b"\x00" + "\n".join(f"../outside/{p.name}" for p in _catalog_parts()).encode()
        out.update({f"{twist}": bytes([k]) for k, twist in enumerate(TWISTS) if k})
    elif reader == "kineto_memory":  # hostile.memory_trace: the step number, then `TS BYTES TOTAL` a line
        out["levels"] = b"1\n1020 100 100\n1030 50 150\n1040 -150 0"
        out["running_sum"] = b"1\n1020 100 -\n1030 -300 -\n1040 64 -"
        out["cpu_and_gpu"] = b"3\n1020 64 64 0 -1\n1021 128 128 1 0\n1030 -64 0 0 -1"
        out["bad_negative_level"] = b"1\n1020 100 100\n1030 -200 -100"
        out["bad_wrap"] = f"1\n1020 {2**63 - 808} -\n1030 {2**63 - 808} -\n1040 1648 -".encode()
        out["bad_total_beyond_int64"] = f"1\n1020 100 {2**64 - 1}".encode()
        out["bad_step_abc"] = b"abc\n1020 100 100"
        out["bad_nan"] = b"1\n1020 NaN 1e400"
    elif reader == "store_flip":
        from tfprof.store import MANIFEST

        _, files = store_template()
        for name in (f for f in files if f != MANIFEST):  # the manifest itself is the store reader's
            seed = store_seed(name)
            mid = len(seed) - (len(seed) - len(name) - 1) // 2
            out[name.replace("/", "_")] = seed
            out["bad_" + name.replace("/", "_") + "_flip"] = seed[:mid] + bytes([seed[mid] ^ 0x10]) + seed[mid + 1:]
    elif reader == "s3":  # hostile_s3.py: lock flag, lie, target, then lock \n--\n extra \n--\n \n--\n run list
        from hostile_s3 import LIES

        sep = b"\n--\n"
        out["plain"] = b"\x00\x00\x00"
        for k, lie in enumerate(LIES[1:], 1):
            out[f"lie_{lie}"] = bytes([0, k, 3]) + sep + b"9" * 40 + sep
        out["bad_lock_nan"] = b"\x01\x00\x00" + b'{"owner": "w", "ttl": NaN}'
        out["bad_lock_string"] = b"\x01\x00\x00" + b'{"owner": "w", "ttl": "60"}'
        out["live_lock"] = b"\x01\x00\x00" + b'{"owner": "w", "ttl": 60}'
        out["bad_run_list"] = b"\x00\x00\x00" + sep + sep + sep + b"PAR1 not really PAR1"
    elif reader == "job":  # hostile_job.py: sections of `name\nbody`, separated by \n--\n
        import gzip

        def section(name: str | bytes, trace: dict) -> bytes:
            return (name.encode() if isinstance(name, str) else name) + b"\n" + json.dumps(trace).encode()

        traces = [json.loads(gzip.decompress(p.read_bytes())) for p in sorted((FIXTURES / "ranks" / "gloo4").glob("rank-*"))]
        small = [dict(t, traceEvents=t["traceEvents"][:120]) for t in traces]
        sep = b"\n--\n"
        out["gloo4"] = sep.join(section(f"rank-{r}.pt.trace.json", t) for r, t in enumerate(small))
        out["rank_beyond_int64"] = section("rank-99999999999999999999999.pt.trace.json", small[0]) + sep + \
            section("rank-1.pt.trace.json", small[1])
        out["rank_1e9"] = section("rank-0.pt.trace.json", small[0]) + sep + section(
            "rank-1.pt.trace.json", dict(small[1], distributedInfo=dict(small[1]["distributedInfo"], rank=1_000_000_000)))
        out["two_claim_one_rank"] = section("rank-1.pt.trace.json", small[1]) + sep + section("b.pt.trace.json", small[1])
        out["not_utf8_name"] = section(b"rank-1\xff.pt.trace.json", small[1]) + sep + section("rank-0.pt.trace.json", small[0])
        out["world_size_huge"] = section("rank-0.pt.trace.json", dict(
            small[0], distributedInfo=dict(small[0]["distributedInfo"], world_size=2**40)))
    elif reader == "xspace":
        out["jax_mlp"] = (FOREIGN / "jax_mlp.xplane.pb").read_bytes()
        out["tf2_keras_cut"] = _xspace_cut("tf2_keras.xplane.pb")
    else:
        raise KeyError(reader)
    return out


def write(out: Path, readers=READERS) -> dict[str, Path]:
    """Write the seeds of ``readers`` under ``out/<reader>/``; returns each reader's folder."""
    folders = {}
    for reader in readers:
        folder = out / reader
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in seeds(reader).items():
            digest = hashlib.sha1(data).hexdigest()[:12]
            (folder / f"seed_{name}_{digest}").write_bytes(data)
        folders[reader] = folder
    return folders


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "corpus"
    for reader, folder in write(target).items():
        files = list(folder.iterdir())
        print(f"{reader}: {len(files)} files, largest {max(f.stat().st_size for f in files)} bytes in {folder}")
