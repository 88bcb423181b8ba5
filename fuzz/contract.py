"""The contract every tfprof reader keeps on any input, one function per reader (no atheris needed).

Any bytes given to a reader either load, and then every view (scope, graph, op and code, on
small options) runs on the profile, or raise a ``tfprof.errors.TfprofError`` whose message is
one line. Anything else is a crash: another exception, a hang, a crash of a compiled kernel,
memory running away. ``check(reader, data)`` returns "loaded" or "rejected" and lets every
other exception through; the fuzz harness (``harness.py``) and the regression tests
(``tests/test_fuzz_regressions.py``) both call it.

Readers (``READERS``):

* ``profile``: a ``--profile_path`` file through the compiled wire decoder; when it loads, the
  protobuf decoder must load it too, into equal tables.
* ``profile_reference``: the same file through protobuf and the reference decoder.
* ``graph``, ``graph_text``: a ``--graph_path`` file (binary or text GraphDef; the reader tells
  them apart by content, the seeds differ).
* ``run_meta``: a ``--run_meta_path`` file beside a fixed graph.
* ``op_log``: an ``--op_log_path`` file beside a fixed graph.
* ``checkpoint``: the ``.index`` file (a LevelDB table) of a ``--checkpoint_path`` beside a
  fixed graph and the data shards of a fixture checkpoint, chosen by the first byte; input
  whose blocks fail their CRC32C is also tried with the CRCs made right, to reach the parsing
  behind the check.
* ``kineto``, ``xspace``: a foreign profile (Chrome-trace JSON, plain or gzip; an XSpace), read
  on the kernels and on the reference engine into equal tables.
* ``store``: one file of a small store (a table's Parquet file, an index part or the
  manifest): the input is the file's path in the store, a newline, and its bytes (a path that
  is not one picks a file by its CRC). The manifest's record of that file (size, checksum) is
  made to match, to reach the decoding behind the check.
* ``catalog``, ``store_flip``: crafted surroundings (``hostile.py``): a catalog whose run list
  and folders point outside it, and a store file changed behind its manifest.
* ``kineto_memory``: a Kineto trace whose ``[memory]`` instants carry the input's numbers
  (``hostile.py``): levels below 0, beyond int64, sums that would wrap, markers that are no step;
  whatever loads shows no memory number as if true that cannot be.
* ``s3``: a catalog in object storage whose service answers with hostile responses
  (``hostile_s3.py``): damaged locks, objects of the wrong size, replaced while read, lying
  ``Content-Range`` and Date headers, a run list replaced.
* ``job``: a distributed job's folder of crafted traces and file names (``hostile_job.py``), read
  by ``ranks`` and added to a catalog whose other run must still read.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import zlib
from pathlib import Path

import tfprof

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402
import hostile_job  # noqa: E402
import hostile_s3  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

# Every view on small options, with every field it can show selected.
SELECT = ("micros", "bytes", "peak_bytes", "residual_bytes", "output_bytes", "params", "float_ops",
          "occurrence", "device", "op_types", "input_shapes", "tensor_value")
VIEWS = {
    "scope": {"max_depth": 4, "select": SELECT, "order_by": "micros"},
    "graph": {"max_depth": 4, "select": SELECT, "step": -1},
    "op": {"max_depth": 6, "select": SELECT, "order_by": "bytes"},
    "code": {"max_depth": 4, "select": ("micros", "bytes", "params", "float_ops", "occurrence")},
}

# The fixed companions of the readers that need a graph, and of the checkpoint.
GRAPH = FIXTURES / "multistep" / "graph.pb"
CHECKPOINTS = sorted(p.with_suffix("") for p in FIXTURES.rglob("*.ckpt.index"))
STORE_SOURCE = "multistep"  # its first 24 nodes: execs, memory, code traces, every index

_work: Path | None = None


def workdir() -> Path:
    """A private scratch directory for this process (removed at exit by the OS's tmp cleaning
    or the caller); every input is written here, never next to the fixtures."""
    global _work
    if _work is None:
        _work = Path(tempfile.mkdtemp(prefix="tfprof-fuzz-"))
    return _work


def _write(name: str, data: bytes) -> Path:
    path = workdir() / name
    path.write_bytes(data)
    return path


def run_views(prof) -> None:
    """Every view on small options: the report, and its rows."""
    from tfprof.api import run_view
    from tfprof.errors import OptionError

    for cmd, options in VIEWS.items():
        try:
            result = run_view(prof, cmd, options)
        except OptionError as exc:
            if cmd == "code" and "code traces" in str(exc):
                continue  # a profile without traces has no code view: said as an error, as it should
            raise
        assert isinstance(result.text, str)
        result.frame  # noqa: B018 - built on first access


def _guard(fn, data: bytes) -> str:
    """``fn(data)``: "loaded", or "rejected" for a one-line ``TfprofError``."""
    from tfprof.errors import TfprofError

    try:
        fn(data)
    except TfprofError as exc:
        message = str(exc)
        if "\n" in message or not message:
            raise AssertionError(f"an error message that is not one line: {message!r}") from exc
        return "rejected"
    return "loaded"


# --------------------------------------------------------------------------- readers


def _profile(data: bytes) -> None:
    from tfprof.errors import TfprofError
    from tfprof.ingest import profile_proto, wire

    path = _write("profile.pb", data)
    prof = tfprof.load(profile_path=path)
    # The fast decoder accepted it: protobuf must too, and both decoders give the same rows.
    ours = wire.decode_profile(path)
    try:
        ref = profile_proto.tables_from_message(profile_proto.parse_profile(path))
    except TfprofError as exc:
        raise AssertionError(f"the wire decoder loads a file protobuf rejects: {exc}") from None
    for name, table in ref.items():
        if not _plain(ours[name]).equals(_plain(table)):
            raise AssertionError(f"table {name} differs between the wire and the reference decoder")
    run_views(prof)


def _plain(table):
    import pyarrow as pa

    cols = []
    for col in table.columns:
        col = col.combine_chunks()
        cols.append(col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col)
    return pa.table(cols, names=table.column_names)


def _profile_reference(data: bytes) -> None:
    from tfprof.ingest import profile_proto
    from tfprof.profile import Profile

    path = _write("profile_ref.pb", data)
    run_views(Profile(profile_proto.tables_from_message(profile_proto.parse_profile(path))))


def _graph(data: bytes, name: str = "graph.pb") -> None:
    run_views(tfprof.load(graph_path=_write(name, data)))


def _graph_text(data: bytes) -> None:
    _graph(data, "graph.pbtxt")


def _run_meta(data: bytes) -> None:
    run_views(tfprof.load(graph_path=GRAPH, run_meta_path=[_write("run_meta.pb", data)]))


def _op_log(data: bytes) -> None:
    run_views(tfprof.load(graph_path=GRAPH, op_log_path=_write("op_log.pb", data)))


def _checkpoint(data: bytes) -> None:
    if not data:
        data = b"\x00"
    source = CHECKPOINTS[data[0] % len(CHECKPOINTS)]
    folder = workdir() / f"ckpt{data[0] % len(CHECKPOINTS)}"
    if not folder.exists():
        folder.mkdir()
        for shard in source.parent.glob(source.name + ".data-*"):
            shutil.copy(shard, folder / ("model.ckpt" + shard.name[len(source.name):]))
    (folder / "model.ckpt.index").write_bytes(data[1:])
    prof = tfprof.load(graph_path=GRAPH, checkpoint_path=folder / "model.ckpt")
    prof.table("checkpoint_tensors")
    run_views(prof)


def fix_crcs(data: bytes) -> bytes:
    """``data`` with the CRC32C of every block it points to made right (when its footer and
    index block can be followed); the bytes unchanged otherwise."""
    from tfprof.ingest.sstable import FOOTER_LEN, crc32c, varint

    def mask(crc: int) -> int:
        return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    out = bytearray(data)
    limit = len(data) - FOOTER_LEN

    def fix(handle: bytes, pos: int = 0) -> tuple[int, int] | None:
        try:
            offset, pos = varint(handle, pos)
            size, _ = varint(handle, pos)
        except IndexError:
            return None
        if offset + size + 5 > limit:
            return None
        crc = mask(crc32c(bytes(out[offset: offset + size + 1])))
        out[offset + size + 1: offset + size + 5] = crc.to_bytes(4, "little")
        return offset, size

    if limit < 0:
        return data
    footer = bytes(out[limit:])
    try:
        _, pos = varint(footer, 0)
        _, pos = varint(footer, pos)
    except IndexError:
        return data
    index = fix(footer, pos)
    if index is None:
        return bytes(out)
    block = bytes(out[index[0]: index[0] + index[1]])
    # The index block's values are the data blocks' handles (entries: shared, unshared, value length).
    if len(block) >= 4:
        end = len(block) - 4 - 4 * int.from_bytes(block[-4:], "little")
        pos = 0
        try:
            while 0 <= pos < end:
                _, pos = varint(block, pos)
                unshared, pos = varint(block, pos)
                vlen, pos = varint(block, pos)
                pos += unshared
                fix(block[pos: pos + vlen])
                pos += vlen
        except IndexError:
            pass
    return bytes(out)


def cut_profile(name: str, keep: int) -> bytes:
    """Fixture ``name``'s ProfileProto cut to its first ``keep`` nodes (inputs and strings to
    match): still valid, and small enough to fuzz fast."""
    from tfprof.schema.proto import tfprof_log_pb2

    prof = tfprof_log_pb2.ProfileProto()
    prof.ParseFromString((FIXTURES / name / "profile.pb").read_bytes())
    for nid in [k for k in prof.nodes if k >= keep]:
        del prof.nodes[nid]
    used = set()
    for node in prof.nodes.values():
        for idx in [i for i, pid in node.inputs.items() if pid >= keep]:
            del node.inputs[idx]
        for pid in [p for p in node.src_output_index if p >= keep]:
            del node.src_output_index[pid]
        for t in node.trace.traces:
            used.update((t.file_id, t.function_id, t.line_id))
    for key in [k for k in prof.id_to_string if k not in used]:
        del prof.id_to_string[key]
    return prof.SerializeToString()


# --------------------------------------------------------------------------- the store

_store: tuple[Path, list[str]] | None = None


def store_template() -> tuple[Path, list[str]]:
    """A small store (from a cut of the multistep profile) written once per process, and its files."""
    global _store
    if _store is None:
        from tfprof.api import ingest_to_store

        dest = workdir() / "store_template"
        ingest_to_store(dest, profile_path=_write("store_source.pb", cut_profile(STORE_SOURCE, 24)))
        files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
        _store = dest, files
    return _store


def store_seed(name: str) -> bytes:
    """The seed input that puts file ``name`` of the template store back unchanged."""
    template, _ = store_template()
    return name.encode() + b"\n" + (template / name).read_bytes()


def _store_file(data: bytes) -> None:
    from tfprof.profile import Profile
    from tfprof.store import MANIFEST

    template, files = store_template()
    target, _, content = data.partition(b"\n")
    name = target.decode("utf-8", "replace")
    if name not in files:
        name = files[zlib.crc32(target) % len(files)]
    dest = workdir() / "store"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(template, dest)
    (dest / name).write_bytes(content)
    if name != MANIFEST:
        _match_manifest(dest / MANIFEST, name, content)
    run_views(Profile.open(dest))


def _match_manifest(manifest: Path, name: str, content: bytes) -> None:
    """Make the manifest's record of file ``name`` (size, checksum) match ``content``."""
    doc = json.loads(manifest.read_text())
    entry = doc.get("files", {}).get(name) if isinstance(doc.get("files"), dict) else None
    if not isinstance(entry, dict):
        return
    for key in entry:
        if key in ("size", "bytes"):
            entry[key] = len(content)
        elif "crc" in key:  # written as the manifest writes it: hex text or a number
            crc = zlib.crc32(content)
            entry[key] = f"{crc:08x}" if isinstance(entry[key], str) else crc
    manifest.write_text(json.dumps(doc, indent=1) + "\n")


def _foreign(data: bytes, name: str) -> None:
    """A foreign profile file (docs/FOREIGN.md); when it loads on the kernels, the reference
    engine must load it too, into equal tables."""
    from tfprof import kernels
    from tfprof.ingest import foreign

    path = _write(name, data)
    prof = tfprof.load(path)
    run_views(prof)
    what = foreign.kind(path)
    if what is None:
        return  # no longer a foreign profile: read as a ProfileProto, which loaded
    with kernels.using(True):
        fast = foreign.read(path, what)
    with kernels.using(False):
        ref = foreign.read(path, what)
    for table in fast:
        assert fast[table].equals(ref[table]), f"kernel and reference paths differ in {table}"


def _kineto(data: bytes) -> None:
    _foreign(data, "trace.json")


def _xspace(data: bytes) -> None:
    from tfprof.ingest.foreign import xevents

    xevents.SPLIT_EVENTS = 2  # (the events in two halves walked at once, as a large capture's are)
    _foreign(data, "trace.xplane.pb")


READERS = {
    "profile": _profile,
    "profile_reference": _profile_reference,
    "graph": _graph,
    "graph_text": _graph_text,
    "run_meta": _run_meta,
    "op_log": _op_log,
    "checkpoint": _checkpoint,
    "store": _store_file,
    "kineto": _kineto,
    "xspace": _xspace,
    "catalog": lambda data: hostile.catalog(data, sys.modules[__name__]),
    "store_flip": lambda data: hostile.store_flip(data, sys.modules[__name__]),
    "kineto_memory": lambda data: hostile.kineto_memory(data, sys.modules[__name__]),
    "s3": lambda data: hostile_s3.s3(data, sys.modules[__name__]),
    "job": lambda data: hostile_job.job(data, sys.modules[__name__]),
}


def check(reader: str, data: bytes) -> str:
    """Run ``reader`` on ``data`` under the contract: "loaded" or "rejected"; any other
    exception is a crash and goes through."""
    fn = READERS[reader]
    outcome = _guard(fn, data)
    if reader == "checkpoint" and data:
        fixed = data[:1] + fix_crcs(data[1:])
        if fixed != data:
            outcome = _guard(fn, fixed)
    return outcome


def cleanup() -> None:
    """Remove this process's scratch directory."""
    global _work, _store
    if _work is not None:
        shutil.rmtree(_work, ignore_errors=True)
    _work = _store = None
