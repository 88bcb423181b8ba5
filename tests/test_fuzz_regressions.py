"""Every input the fuzzers found crashing a reader, kept under ``tests/fuzz_regressions/<reader>/``,
runs through that reader's contract (``fuzz/contract.py``, no atheris needed): it loads and
every view runs, or it raises a one-line ``TfprofError``. Anything else fails the test.

Each file is named after what it broke. A file is also checked to still reach the reader's
code (not rejected for a reason that has nothing to do with the bug) where the bug's fix names
the problem: ``EXPECT`` gives a phrase of the error, or "loaded".
"""

from __future__ import annotations

import importlib.util
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "fuzz_regressions"


def _contract():
    spec = importlib.util.spec_from_file_location("tfprof_fuzz_contract", ROOT / "fuzz" / "contract.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


contract = _contract()

# What each regression input must give now (a phrase of its error message, or "loaded").
EXPECT = {
    "checkpoint/slice_with_more_extents_than_dims": "does not fit its shape",
    "checkpoint/tensor_name_with_a_newline": "the entry of tensor `f\\x08\\nsl` cannot be parsed",
    # a dtype no TensorFlow names is read (as DT_45); the scope view's tensor_value note failed on it
    "checkpoint/tensor_of_dtype_45_in_tensor_value": "loaded",
    # a nodes entry replaced by a later one of the same key was not decoded, so not checked
    "profile/replaced_node_entry_with_a_damaged_attr": "field 6 `nodes[57].attrs['T'].6`",
    "profile/replaced_attr_entry_damaged": "field 6 `nodes[0].attrs['T'].6`",
    # canonical_device given twice: the first is not UTF-8 (protobuf keeps the last, checks both)
    "profile/node_device_given_twice_first_not_utf8": "field 6 `nodes[3].canonical_device` (string) at byte 599",
    # a map entry with a third field is no map entry for protobuf, but protobuf parses it
    "profile/map_entry_with_extra_field_damaged_attr": "field 6 `nodes[1].attrs['T'].6`",
    # an index part whose values agree with the manifest but index outside the nodes: a segfault
    "store/graph_index_root_out_of_range": "graph_structure` is damaged (a child or root is not a node)",
    # a valid Parquet file of another table in a table's place (the manifest made to agree)
    "store/another_tables_parquet_file": "does not hold the store's `output_shapes` table",
    "store/parquet_footer_text_not_utf8": "node_types.parquet` is damaged ('utf-8' codec can't decode",
    # Chrome-trace counter events: without a time stamp (a null in counters.time_ns), without a name
    "kineto/counter_event_without_ts": "has no `ts`",
    "kineto/counter_event_without_name": "loaded",
    # times that are not finite or do not fit int64 nanoseconds (an InvalidOperationError before)
    "kineto/ts_nan_event_time": "has `ts` nan, not a finite number",
    "kineto/dur_neg_inf_event_time": "has `dur` -inf, not a finite number",
    "kineto/dur_1e29_event_time": "more than int64 ns hold",
    "kineto/ts_2_64_event_time": "more than int64 ns hold",
    # one bit of a table changed behind the manifest: answered from before checksums were read
    "store_flip/execs_bit_flipped": "its checksum differs from the one written",
    "profile/map_entry_with_extra_field_bad_utf8_name":
        "field 1 `nodes[1].name` (string) at byte 22 is not valid UTF-8",
}

FILES = sorted(p for p in CASES.glob("*/*") if p.is_file())


@pytest.fixture(scope="module", autouse=True)
def _scratch():
    yield
    contract.cleanup()


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_regression_input_keeps_the_contract(path):
    reader = path.parent.name
    assert reader in contract.READERS, f"{path}: no reader named {reader!r}"
    data = path.read_bytes()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(60)  # generous: the first input of a process loads the compiled kernels
    try:
        outcome = contract.check(reader, data)
    except _Hang:
        pytest.fail(f"{path.name}: the {reader} reader hangs on it")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert outcome in ("loaded", "rejected")
    expected = EXPECT.get(f"{reader}/{path.name}")
    if expected == "loaded":
        assert outcome == "loaded"
    elif expected:
        assert expected in _message(reader, data), (path.name, expected)


def _message(reader: str, data: bytes) -> str:
    """The error message(s) of the input (the checkpoint reader's input is tried twice)."""
    from tfprof.errors import TfprofError

    messages = []
    tries = [data] if reader != "checkpoint" else [data, data[:1] + contract.fix_crcs(data[1:])]
    for attempt in tries:
        try:
            contract.READERS[reader](attempt)
        except TfprofError as exc:
            messages.append(str(exc))
    return " | ".join(messages)


def test_every_reader_has_a_harness_and_seeds():
    """The contract covers the readers the fuzz runner knows, and each has seeds that load (the
    hostile ``bad_*`` seeds may be rejected, but must keep the contract too)."""
    spec = importlib.util.spec_from_file_location("tfprof_fuzz_make_corpus", ROOT / "fuzz" / "make_corpus.py")
    sys.path.insert(0, str(ROOT / "fuzz"))
    sys.modules["contract"] = contract  # make_corpus imports it by that name: the same module
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for reader in contract.READERS:
            seeds = module.seeds(reader)
            assert seeds, reader
            outcomes = {name: contract.check(reader, data) for name, data in seeds.items()}
            assert {o for n, o in outcomes.items() if not n.startswith("bad_")} == {"loaded"}, (reader, outcomes)
    finally:
        sys.path.remove(str(ROOT / "fuzz"))
        del sys.modules["contract"]


@pytest.mark.parametrize(("dtype", "number"),
                         [("DT_45", 45), ("DT_INT4", 29), ("DT_FLOAT4_E2M1FN", 33), ("DT_HALF", 19)])
def test_unsupported_dtype_note_names_its_number(dtype, number):
    """tfprof's note for a tensor it cannot show gives the DataType number, also for the types
    newer than our types.proto and for numbers no release names (the fuzzer's DT_45)."""
    import polars as pl

    from tfprof.views.tensor_text import tensor_notes

    frame = pl.DataFrame({"name": ["w"], "found": [True], "dtype": [dtype], "kind": [None], "huge": [False]},
                         schema_overrides={"kind": pl.String})
    assert tensor_notes(frame) == [f"Not Supported type {number}"]


# An index part whose values agree with the manifest (size, checksum) but not with the tables:
# (index, part, column, how to damage it, a view that walks it).
INDEX_DAMAGE = [
    ("graph_structure", "perm", "perm", lambda v: v.__setitem__(0, len(v)), "graph"),
    ("graph_structure", "children", "children", lambda v: v.__setitem__(0, -5), "graph"),
    ("graph_structure", "starts", "starts", lambda v: v.__setitem__(-1, v[-1] + 1), "graph"),
    ("scope_layout", "layout", "parent", lambda v: v.__setitem__(1, 10**6), "scope"),
    ("code_trie", "trie", "label", lambda v: v.__setitem__(0, 10**6), "code"),
    ("code_trie", "leaves", "tid", lambda v: v.__setitem__(0, -1), "code"),
    ("step_means", "metrics", "node_id", None, "op"),  # a row short
]


@pytest.mark.parametrize(("index", "part", "column", "damage", "view"), INDEX_DAMAGE,
                         ids=[f"{i}-{c}" for i, _, c, _, _ in INDEX_DAMAGE])
def test_index_values_out_of_range_are_damage(tmp_path, index, part, column, damage, view):
    import shutil

    import pyarrow as pa

    from tfprof.api import run_view
    from tfprof.errors import ProfileFormatError
    from tfprof.profile import Profile
    from tfprof.store import MANIFEST

    template, _ = contract.store_template()
    store = tmp_path / "store"
    shutil.copytree(template, store)
    rel = f"indexes/{index}/{part}.arrow"
    with pa.memory_map(str(store / rel)) as source:
        table = pa.ipc.open_file(source).read_all()
    if damage is None:
        table = table.slice(1)
    else:
        values = table.column(column).to_numpy().copy()
        damage(values)
        table = table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.int64()))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    (store / rel).write_bytes(data)
    contract._match_manifest(store / MANIFEST, rel, data)
    with pytest.raises(ProfileFormatError, match=rf"indexes/{index}` is damaged \("):
        run_view(Profile.open(store), view, {"max_depth": 4})


def test_table_pages_that_do_not_decode_name_the_file(tmp_path):
    """A table file whose pages are damaged but whose size and checksum the manifest agrees
    with: the view's reader (polars) fails deep inside a query; the store's full check then
    names the file, instead of the query's own error."""
    import shutil

    from tfprof.api import run_view
    from tfprof.errors import ProfileFormatError
    from tfprof.profile import Profile
    from tfprof.store import MANIFEST

    template, _ = contract.store_template()
    store = tmp_path / "store"
    shutil.copytree(template, store)
    data = bytearray((store / "nodes.parquet").read_bytes())
    data[4:40] = b"\xff" * 36  # the first page header, right after the leading magic
    (store / "nodes.parquet").write_bytes(bytes(data))
    contract._match_manifest(store / MANIFEST, "nodes.parquet", bytes(data))
    with pytest.raises(ProfileFormatError, match=r"nodes\.parquet` is damaged \("):
        run_view(Profile.open(store), "scope", {"max_depth": 4})
