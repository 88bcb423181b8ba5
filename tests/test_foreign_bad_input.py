"""A damaged or unexpected foreign file gets one line naming it, the format recognised and what is wrong
(exit code 2, no traceback), never "not a valid ProfileProto" for a file that is plainly something else.
The CLI runs in this process (``cli.main.main``), so each case costs no interpreter start."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tfprof
from tfprof import kernels
from tfprof.cli.main import main
from tfprof.errors import ProfileFormatError
from tfprof.schema.proto import xplane_pb2

FOREIGN = Path(__file__).parent / "fixtures" / "foreign"
TF2, JAX, TORCH = FOREIGN / "tf2_keras.xplane.pb", FOREIGN / "jax_mlp.xplane.pb", FOREIGN / "torch_cnn.pt.trace.json"
XSPACE = "looks like an XSpace protobuf (TensorFlow 2 / JAX profile) but"


def error_line(capsys, path: Path) -> str:
    code = main(["scope", "--profile_path", str(path), "--max_depth", "1"])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in err, err
    assert f"`{path}`" in lines[0]
    return lines[0]


def _space(path: Path) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    return space


@pytest.mark.parametrize("source", [TF2, JAX], ids=["tf2", "jax"])
@pytest.mark.parametrize("keep", [10, 40, 1000, 0.5, -1], ids=lambda k: f"cut{k}")
def test_truncated_xspace_says_so(capsys, tmp_path, source, keep):
    data = source.read_bytes()
    n = keep if isinstance(keep, int) and keep > 0 else (len(data) + keep if isinstance(keep, int) else int(len(data) * keep))
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[:n])
    line = error_line(capsys, cut)
    assert f"{XSPACE} it is truncated" in line and f"the file ends at byte {n:,}" in line
    assert "ProfileProto" not in line


def test_truncated_xspace_names_the_plane_it_ends_in(capsys, tmp_path):
    space = _space(JAX)
    data = JAX.read_bytes()
    last = space.planes[-1].name
    cut = tmp_path / "cut.xplane.pb"
    cut.write_bytes(data[: len(data) - len(space.hostnames[0]) - 2 - 10])  # inside the last plane
    assert f"(`{last}`)" in error_line(capsys, cut)


def test_idle_tf_capture(capsys, tmp_path):
    """Only runtime and tf.data events: every graph op (`<path>:<type>`) taken out."""
    space = _space(TF2)
    for plane in space.planes:
        for line in plane.lines:
            keep = [e for e in line.events if ":" not in plane.event_metadata[e.metadata_id].name]
            del line.events[:]
            line.events.extend(keep)
    idle = tmp_path / "idle.xplane.pb"
    idle.write_bytes(space.SerializeToString())
    line = error_line(capsys, idle)
    events = sum(len(ln.events) for p in space.planes for ln in p.lines)
    assert "is an XSpace protobuf (TensorFlow 2 / JAX profile) without op events" in line
    assert f"its {events:,} events" in line


def test_xspace_with_planes_but_no_events(capsys, tmp_path):
    space = _space(TF2)
    for plane in space.planes:
        del plane.lines[:]
    path = tmp_path / "metadata_only.xplane.pb"
    path.write_bytes(space.SerializeToString())
    line = error_line(capsys, path)
    assert "without events" in line and all(f"`{p.name}`" in line for p in space.planes)


def test_xspace_with_no_planes(capsys, tmp_path):
    space = xplane_pb2.XSpace()
    space.hostnames.append("worker-0")
    space.errors.append("CUPTI could not be loaded")
    path = tmp_path / "nothing.xplane.pb"
    path.write_bytes(space.SerializeToString())
    line = error_line(capsys, path)
    assert "with no planes (host `worker-0`)" in line and "CUPTI could not be loaded" in line


def test_gzipped_xspace_asks_to_gunzip(capsys, tmp_path):
    path = tmp_path / "space.xplane.pb.gz"
    path.write_bytes(gzip.compress(TF2.read_bytes()))
    assert "gzip-compressed XSpace protobuf" in error_line(capsys, path)


def test_gzip_of_something_else(capsys, tmp_path):
    path = tmp_path / "notes.gz"
    path.write_bytes(gzip.compress(b"hello world"))
    line = error_line(capsys, path)
    assert "is gzip-compressed, but what it holds is not JSON" in line and "hello world" in line


CHROME = {
    "perfetto_object": {"traceEvents": [{"ph": "X", "name": "Layout", "cat": "blink", "ts": 1, "dur": 2, "pid": 1,
                                         "tid": 1}], "displayTimeUnit": "ms"},
    "array_form": [{"ph": "X", "name": "Compile", "cat": "v8", "ts": 1, "dur": 2, "pid": 1, "tid": 1},
                   {"ph": "X", "name": "Run", "ts": 4, "dur": 2, "pid": 1, "tid": 1}],
}


@pytest.mark.parametrize("name", CHROME)
def test_chrome_trace_from_another_tool(capsys, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(CHROME[name]))
    line = error_line(capsys, path)
    assert "is a Chrome trace (JSON), but not a PyTorch (Kineto) trace: it has no op events" in line
    cats = {e.get("cat") for e in (CHROME[name] if isinstance(CHROME[name], list) else CHROME[name]["traceEvents"])}
    assert all(c in line for c in cats if c)


def test_idle_kineto_trace(capsys, tmp_path):
    doc = json.loads(TORCH.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cpu_op"]
    path = tmp_path / "idle.pt.trace.json"
    path.write_text(json.dumps(doc))
    assert "is a PyTorch (Kineto) trace without op events" in error_line(capsys, path)


@pytest.mark.parametrize("engine", [True, False], ids=["kernels", "reference"])
@pytest.mark.parametrize(("text", "phrase"), [
    ('{"nodes": [1, 2], "steps": [0]}', "nor a Chrome trace (it has no `traceEvents` array; its top-level keys: nodes, "
                                        "steps)"),
    ("[1, 2, 3]", "nor a Chrome trace (a JSON array, but its items are not event objects"),
], ids=["object", "array"])
def test_json_of_another_kind(tmp_path, engine, text, phrase):
    path = tmp_path / "other.json"
    path.write_text(text)
    with kernels.using(engine), pytest.raises(ProfileFormatError) as info:
        tfprof.load(path)
    message = str(info.value)
    assert f"`{path}` is not a valid ProfileProto (it is JSON text)" in message and phrase in message
    assert "\n" not in message


def test_empty_file(capsys, tmp_path):
    path = tmp_path / "empty.pb"
    path.write_bytes(b"")
    assert "is empty" in error_line(capsys, path)


@pytest.mark.parametrize("packed", ["plain", "gzip"])
def test_kineto_with_a_byte_order_mark_is_read(tmp_path, packed):
    data = b"\xef\xbb\xbf" + TORCH.read_bytes()
    path = tmp_path / f"bom.pt.trace.json{'.gz' if packed == 'gzip' else ''}"
    path.write_bytes(gzip.compress(data) if packed == "gzip" else data)
    with_bom, plain = tfprof.load(path), tfprof.load(TORCH)
    assert with_bom.source == "kineto"
    assert with_bom.row_counts() == plain.row_counts()
    assert with_bom.frame("execs").equals(plain.frame("execs"))
