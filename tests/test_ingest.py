"""Every reader fills the same tables; stores round-trip; the Profile object's access paths agree."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from conftest import FIXTURES, assert_tables_equal, raw_inputs

import tfprof
from tfprof import Profile
from tfprof.schema import TABLES

# Carried only by RunMetadata: a ProfileProto keeps the per-allocator sums, not the entries.
RAW_ONLY = {"allocator_memory"}


def _with_profile(name: str) -> bool:
    return (FIXTURES / name / "profile.pb").is_file()


def test_profile_proto_equals_raw_files(fixture_name):
    """The real tool's ProfileProto and the files it was built from give the same rows."""
    if not _with_profile(fixture_name):
        pytest.fail(f"fixture {fixture_name} has no profile.pb; regenerate it with tools/make_fixtures.py")
    raw = tfprof.load(**raw_inputs(fixture_name)).tables()
    prof = tfprof.load(profile_path=FIXTURES / fixture_name / "profile.pb").tables()
    for name in TABLES:
        if name in RAW_ONLY:
            assert prof[name].num_rows == 0
            continue
        assert_tables_equal(raw[name], prof[name], name)


def test_text_and_binary_graph_agree(fixture_name):
    a = tfprof.load(**raw_inputs(fixture_name)).tables()
    b = tfprof.load(**raw_inputs(fixture_name, graph="graph.pbtxt")).tables()
    for name in TABLES:
        assert_tables_equal(a[name], b[name], name)


def test_every_table_conforms_to_its_schema(fixture_name):
    for prof in (tfprof.load(**raw_inputs(fixture_name)),):
        for name, table in prof.tables().items():
            assert table.schema.equals(TABLES[name].schema), name


def test_parquet_round_trip_is_identical(fixture_name, tmp_path):
    prof = tfprof.load(**raw_inputs(fixture_name), checkpoint_path=FIXTURES / fixture_name / "model.ckpt")
    tfprof.save(prof, tmp_path / "store")
    again = Profile.open(tmp_path / "store")
    assert again.row_counts() == prof.row_counts()
    for name in TABLES:
        assert_tables_equal(prof.table(name), again.table(name), name)


def test_open_store_reads_nothing_until_used(tmp_path):
    tfprof.save(tfprof.load(**raw_inputs("cnn")), tmp_path / "s")
    prof = Profile.open(tmp_path / "s")
    assert prof._tables == {}
    assert prof.row_counts()["nodes"] > 0
    assert prof._tables == {}
    lf = prof.lazy("execs").select(pl.col("duration_micros").sum())
    assert lf.collect().item() > 0
    assert prof._tables == {}


def test_sql_and_polars_agree():
    prof = tfprof.load(**raw_inputs("multistep"))
    by_sql = prof.sql(
        "select step, sum(duration_micros) as us from execs group by step order by step", output="polars"
    )
    by_polars = prof.frame("execs").group_by("step").agg(pl.col("duration_micros").sum().alias("us")).sort("step")
    assert by_sql.to_dicts() == by_polars.to_dicts()
    assert isinstance(prof.sql("select count(*) as n from nodes"), pl.DataFrame)
    assert isinstance(prof.sql("select count(*) as n from nodes", output="arrow"), pa.Table)


def test_sql_over_store_matches_memory(tmp_path):
    prof = tfprof.load(**raw_inputs("rnn"))
    tfprof.save(prof, tmp_path / "s")
    q = "select n.op, count(*) as k, sum(e.duration_micros) as us from execs e join nodes n using (node_id) group by 1 order by 1"
    assert prof.sql(q, output="arrow").to_pylist() == Profile.open(tmp_path / "s").sql(q, output="arrow").to_pylist()


def test_checkpoint_marks_variables():
    """Nodes named like a checkpoint tensor get the `_checkpoint_variables` type (docs/TFPROF_BEHAVIOUR.md, 'Ingesting a checkpoint')."""
    d = FIXTURES / "cnn"
    prof = tfprof.load(**raw_inputs("cnn"), checkpoint_path=d / "model.ckpt")
    ckpt = set(prof.frame("checkpoint_tensors")["name"].to_list())
    marked = prof.sql(
        "select n.name from node_types t join nodes n using (node_id) where t.op_type = '_checkpoint_variables'",
        output="polars",
    )["name"].to_list()
    names = set(prof.frame("nodes")["name"].to_list())
    assert set(marked) == ckpt & names and marked
    # tfprof marks checkpoint variables only when it builds the profile from a graph
    via_profile = tfprof.load(profile_path=d / "profile.pb", checkpoint_path=d / "model.ckpt")
    plain = tfprof.load(profile_path=d / "profile.pb")
    assert_tables_equal(plain.table("node_types"), via_profile.table("node_types"), "node_types")
    assert via_profile.table("checkpoint_tensors").num_rows == len(ckpt)


def test_multistep_has_each_step():
    prof = tfprof.load(**raw_inputs("multistep"))
    steps = prof.frame("node_steps").group_by("step").len().sort("step")
    assert steps["step"].to_list() == [0, 1, 2]
    assert min(steps["len"].to_list()) > 0


def test_rnn_loop_nodes_run_several_times():
    prof = tfprof.load(**raw_inputs("rnn"))
    assert prof.frame("node_steps")["run_count"].max() > 1


def test_progress_is_reported(tmp_path):
    """Long ingests report progress (the CLI draws it as a bar on a terminal)."""
    from tfprof.api import ingest_to_store

    calls = []
    ingest_to_store(tmp_path / "s", profile_path=FIXTURES / "rnn" / "profile.pb", progress=lambda *a: calls.append(a))
    assert calls and calls[-1][0] == calls[-1][1]  # ends at done == total
    raw = []
    tfprof.load(**raw_inputs("multistep"), progress=lambda *a: raw.append(a))
    assert [c[0] for c in raw] == [1, 2, 3, 4] and raw[-1][1] == 4


def test_overflowing_shape_wraps_like_tfprof():
    """A shape whose product overflows int64 wraps (as tfprof's C++ arithmetic), never crashes."""
    from tfprof.ingest.derive import params

    assert params([3, 4]) == 12 and params([]) == 0 and params([-1, 4]) == 0
    assert params([2**40, 2**30]) == (2**70 + 2**63) % 2**64 - 2**63


@pytest.mark.parametrize("fixture_name", ["cnn", "rnn", "multistep"])
def test_store_indexes_give_the_same_views(fixture_name, tmp_path):
    """A store keeps the option-free derived frames (code trie, per-node step means) built at
    ingest; views read from them equal views computed from the tables, with or without them."""
    from tfprof.api import run_view
    from tfprof.store import read_manifest

    memory = tfprof.load(**raw_inputs(fixture_name))
    with_idx = Profile.open(tfprof.save(memory, tmp_path / "a"))
    assert set(read_manifest(tmp_path / "a")["indexes"]) == {"step_means", "scope_layout", "graph_structure", "code_trie"}
    from tfprof.store import write_store

    plain_store = Profile.open(write_store(tmp_path / "b", [memory.tables()], source=memory.source))
    assert "indexes" not in read_manifest(tmp_path / "b")
    for cmd, opts in [("code", {"max_depth": 6, "select": ["micros", "params"]}), ("scope", {"order_by": "micros"}),
                      ("op", {"select": ["bytes", "occurrence"]}), ("code", {"step": 0, "order_by": "name"}),
                      ("graph", {"max_depth": 5, "select": ["micros"]}), ("scope", {"step": 0, "max_depth": 3})]:
        want = run_view(memory, cmd, opts).text
        assert run_view(with_idx, cmd, opts).text == want, (cmd, opts)
        assert run_view(plain_store, cmd, opts).text == want, (cmd, opts)
    # the stored index is what the store's views read
    stored = Profile.open(tmp_path / "a").index("code_trie", lambda p: pytest.fail("rebuilt an index the store has"))
    assert stored["trie"].height > 0


def test_indexes_built_one_after_the_other_equal_those_built_at_once(tmp_path, monkeypatch):
    """A large profile's indexes are built on one thread, a small one's on two: same files."""
    import tfprof.api.inputs as inputs
    import tfprof.store as store

    memory = tfprof.load(**raw_inputs("cnn"))
    tfprof.save(memory, tmp_path / "two")
    monkeypatch.setattr(inputs, "_PARALLEL_INDEX_ROWS", 0)
    tfprof.save(memory, tmp_path / "one")
    one, two = (store.read_manifest(tmp_path / k)["indexes"] for k in ("one", "two"))
    assert one == two and set(one) == {"step_means", "scope_layout", "graph_structure", "code_trie"}
    for name, parts in one.items():
        for part in parts:
            a, b = (pa.ipc.open_file(tmp_path / k / "indexes" / name / f"{part}.arrow").read_all() for k in ("one", "two"))
            assert a.equals(b), (name, part)


def test_indexes_of_an_older_layout_are_rebuilt(tmp_path):
    """A store whose manifest records another index layout (or none: stores written before the
    layout was versioned) still opens; its indexes are rebuilt on use, not misread."""
    import json

    from tfprof.api import run_view
    from tfprof.store import INDEX_FORMAT, MANIFEST, read_index

    memory = tfprof.load(**raw_inputs("rnn"))
    store = tfprof.save(memory, tmp_path / "s")
    assert read_index(store, "code_trie") is not None
    manifest = json.loads((store / MANIFEST).read_text())
    assert manifest["index_format"] == INDEX_FORMAT
    for stale in (INDEX_FORMAT - 1, None):
        if stale is None:
            del manifest["index_format"]
        else:
            manifest["index_format"] = stale
        (store / MANIFEST).write_text(json.dumps(manifest))
        assert read_index(store, "code_trie") is None
        rebuilt = []
        prof = Profile.open(store)
        from tfprof.queries.indexes.code_trie import static_trie

        prof.index("code_trie", lambda p: rebuilt.append(1) or static_trie(p))
        assert rebuilt == [1]
        opts = {"max_depth": 4, "select": ["micros"]}
        assert run_view(Profile.open(store), "code", opts).text == run_view(memory, "code", opts).text
