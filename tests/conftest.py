"""Shared test helpers: the fixture profiles made by tools/make_fixtures.py with real TensorFlow."""

from __future__ import annotations

import json
import os
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
PROFILE_FIXTURES = sorted(
    p.name for p in FIXTURES.iterdir() if (p / "graph.pb").is_file() and (p / "golden" / "totals.json").is_file()
)
GOLDEN = Path(__file__).parent / "golden"
GOLDEN_FIXTURES = sorted(p.parent.name for p in GOLDEN.glob("*/cases.json"))


def golden_cases():
    """Every golden case with a report, as ``pytest.param(fixture, case)``."""
    for name in GOLDEN_FIXTURES:
        for case in json.loads((GOLDEN / name / "cases.json").read_text()):
            if (GOLDEN / name / f"{case['id']}.txt").read_text():
                yield pytest.param(name, case, id=f"{name}-{case['id']}")


_ALONE: dict = {}  # each fixture's profile, loaded once


def member_catalog(root: Path) -> Path:
    """A catalog of runs to aggregate: tfprof's own profiles (whole µs: n-1, n-2, n-3), a Kineto
    trace (ns, a capture of steps: k-1) and a job of four ranks (job)."""
    from tfprof.catalog import add_job, add_run

    for run, path in (("n-1", FIXTURES / "cnn/profile.pb"), ("n-2", FIXTURES / "multistep/profile.pb"),
                      ("n-3", FIXTURES / "rnn/profile.pb"), ("k-1", FIXTURES / "foreign/torch_cnn.pt.trace.json")):
        add_run(root, run, profile_path=path)
    add_job(root, "job", sorted((FIXTURES / "ranks/gloo4").glob("rank-*")))
    return root


def golden_case_on(prof, fixture: str, case: dict) -> str | None:
    """Golden case ``case`` of ``fixture`` on ``prof`` (its profile read back from a catalog): the
    report, asserted equal byte for byte to the one of the fixture's profile alone; None where
    both refuse the case's options."""
    import tfprof
    from tfprof.api import run_view
    from tfprof.errors import OptionError

    if fixture not in _ALONE:
        _ALONE[fixture] = tfprof.load(FIXTURES / fixture / "profile.pb")
    options = {k: v for k, v in case["options"].items() if k != "output"}
    try:
        alone = run_view(_ALONE[fixture], case["cmd"], options).text
    except OptionError:
        with pytest.raises(OptionError):
            run_view(prof, case["cmd"], options)
        return None
    got = run_view(prof, case["cmd"], options).text
    assert got == alone
    return got


# The tests run on the compiled kernels (tfprof.kernels): the reference paths have their own
# tests, and no test run should start a background compilation. Child processes inherit it.
os.environ.setdefault("TFPROF_ENGINE", "kernels")
# Commands run in their own processes, not through a resident server (tests/test_server.py
# turns it on for its own tests).
os.environ["TFPROF_SERVER"] = "0"


# ----------------------------------------------------------------------------- the fast tier
# `python -m pytest -m "not slow"` is the tier to run while working (under 2 minutes); the full
# `python -m pytest` (CI's) runs everything. The `slow` marker is put here, in one place, so that no
# test file needs it:
# - SLOW_MODULES: every test of the module;
# - SLOW_TESTS: single tests, by function name (every parameter) or by id (`name[rnn]`, where `*`
#   stands for any text: `name[rnn-*]`);
# - SAMPLED: the large case tables (a test over every golden case, every hostile query, ...): the
#   fast tier runs N of their cases, spread evenly over the table (so over every fixture and view
#   it names), and the full run all of them.
# Slow is: starts a Python process (each pays the imports, 1-2 s), a server, a browser or a
# notebook kernel; sends signals; or takes a second or more by itself (`python -m pytest
# --durations=60` gives the times). Tests marked `tensorflow` or `spark` are slow too. A name here
# whose test function is gone (renamed) is reported as a warning, not silently dropped.

SLOW_MODULES = {
    "test_bad_input.py": "every test runs `python -m tfprof` on a damaged input",
    "test_cli.py": "the CLI as a user runs it: every test starts `python -m tfprof`",
    "test_interactive.py": "drives the interactive shell in child processes, on a pty",
    "test_notebooks.py": "executes the notebooks in a Jupyter kernel (nbclient), ~30 s",
    "test_plugins.py": "runs `python -m tfprof` with plugins, in its own process and through the server",
    "test_server.py": "starts the resident server and runs commands through it",
    "test_server_trust.py": "the resident server under limits: a server and commands in processes",
    "test_signals.py": "sends SIGINT/SIGTERM to running tfprof processes",
    "test_spark.py": "starts a Spark JVM (skipped without pyspark)",
    "test_sql_cli.py": "`tfprof sql` and --format as a user runs them: `python -m tfprof` per case",
    "test_ui_browser.py": "starts the web UI and drives chromium through playwright",
}

SLOW_TESTS = {
    "test_advisor.py": {
        "test_cli_advise_errors_are_one_line": "`python -m tfprof advise` per case",
        "test_cli_advise_prints_the_advice": "`python -m tfprof advise`",
        "test_cli_advise_raw_inputs_and_checker_options": "`python -m tfprof advise`",
    },
    "test_bad_input_env.py": {
        "test_a_reader_that_stops_early_ends_the_command_quietly": "`python -m tfprof` in a pipe",
        "test_stdout_that_cannot_be_written_is_one_line_and_exit_2": "`python -m tfprof` through a shell",
        "test_with_stderr_closed_too_the_exit_code_still_tells": "`python -m tfprof` through a shell",
    },
    "test_capture.py": {
        "test_capture_without_tensorflow_says_how_to_install": "a fresh Python without TensorFlow",
        "test_tfprof_never_imports_tensorflow": "a fresh Python that imports tfprof",
    },
    "test_catalog.py": {
        "test_concurrent_adds_from_two_processes": "two `python` processes adding runs at once (~8 s)",
    },
    "test_catalog_s3.py": {
        "test_cli_on_a_catalog_in_s3": "`python -m tfprof` against a moto server (~14 s)",
        "test_concurrent_adds_from_two_processes": "two `python` processes adding runs to S3 at once (~14 s)",
        "test_a_writer_killed_mid_add_leaves_nothing_visible": "kills a writer, waits out its lock (~7 s)",
        "test_a_live_writers_lock_is_waited_for_then_refused": "waits for a lock twice (~4 s)",
        "test_a_dead_writers_lock_is_broken_and_its_leftovers_deleted": "waits out a dead lock (~2.5 s)",
        "test_sql_and_aggregate_equal_a_local_catalog": "six adds, two catalogs (~2.5 s)",
        "test_two_writers_breaking_one_dead_lock_get_it_once": "waits out a dead lock (~3 s)",
    },
    "test_compatibility.py": {
        "test_cli_account_type_regexes_accounts": "`python -m tfprof`",
    },
    "test_diff.py": {
        "test_code_paths_follow_the_displayed_tree": "~4 s",
    },
    "test_view_recipe.py": {
        "test_the_command_line_and_the_shell_offer_a_registered_view": "three `python` processes with a view registered",
    },
    "test_diff_samples.py": {
        "test_the_reference_backend_bands_by_a_run_per_step": "the reference paths, a view per step (~8 s)",
    },
    "test_engines.py": {
        "test_the_reference_paths_compile_no_kernel": "two `tfprof demo` processes, one compiling numba's cache",
        "test_reference_paths_print_what_the_kernels_print[cnn]": "~2 s each; gpu_tiny's stays",
        "test_reference_paths_print_what_the_kernels_print[multistep]": "~2 s each; gpu_tiny's stays",
        "test_reference_paths_print_what_the_kernels_print[rnn]": "~2 s each; gpu_tiny's stays",
    },
    "test_follow_files.py": {
        "test_served_commands_follow_a_replaced_or_deleted_store": "starts the resident server, `python -m tfprof` per case",
        "test_served_commands_follow_a_trace_rewritten_in_place": "`python -m tfprof` through the server and alone",
        "test_served_commands_read_a_manifest_rewritten_in_place_anew": "`python -m tfprof` through the server and alone",
    },
    "test_foreign_advise.py": {
        "test_advise_runs_and_the_accelerator_check_is_silent_on_cpu": "`python -m tfprof advise` per capture",
        "test_pprof_of_the_code_view_holds_the_python_stacks": "`python -m tfprof code` per capture",
        "test_pprof_without_python_stacks_is_one_line": "`python -m tfprof code` per capture",
    },
    "test_foreign_exact.py": {
        "test_the_cli_prints_the_same_exact_numbers": "`python -m tfprof op`",
    },
    "test_foreign_gpu.py": {
        "test_order_by_accelerator_micros_on_the_command_line": "`python -m tfprof op`",
        "test_unlinked_gpu_events_are_kept_counted_and_reported": "`python -m tfprof check`",
        "test_kernels_table_survives_a_store": "`python -m tfprof ingest`",
    },
    "test_foreign_kineto_rules.py": {
        "test_bytes_beyond_int64_are_an_error": "`python -m tfprof`",
    },
    "test_foreign_flops.py": {
        "test_header_says_estimated_and_names_op_types_without_a_rule": "`python -m tfprof`",
    },
    "test_foreign_ingest.py": {
        "test_views_run_on_every_foreign_profile_and_say_what_has_no_source": "`python -m tfprof` per case (16)",
        "test_code_view_walks_the_python_stacks": "`python -m tfprof code`",
        "test_tfprof_profiles_have_no_foreign_line": "`python -m tfprof`",
        "test_sql_over_the_new_tables_and_a_timeline": "`python -m tfprof sql/graph`",
        "test_store_round_trip_keeps_the_source": "`python -m tfprof ingest` and views",
        "test_truncated_json_is_one_line": "`python -m tfprof`",
        "test_truncated_gzip_is_one_line": "`python -m tfprof`",
        "test_json_that_is_not_a_trace_is_one_line": "`python -m tfprof`",
        "test_garbage_xspace_is_one_line": "`python -m tfprof`",
    },
    "test_fuzz_regressions.py": {
        "test_every_reader_has_a_harness_and_seeds": "builds the whole fuzz corpus (~11 s)",
    },
    "test_macs.py": {
        "test_select_macs_text_and_json": "`python -m tfprof`",
    },
    "test_parse_errors.py": {
        "test_truncated_through_a_subprocess": "`python -m tfprof` per input",
    },
    "test_profile_proto_ref.py": {
        "test_encoder_bytes_are_the_runtimes_bytes": "a child Python with the protobuf runtime",
    },
    "test_project.py": {
        "test_generated_proto_modules_are_current": "runs tools/gen_protos.py (grpc_tools)",
        "test_schema_doc_is_current": "runs tools/gen_schema_doc.py",
    },
    "test_properties.py": {
        "test_store_round_trip_is_identical": "hypothesis: a store written and read per example (~1 s)",
    },
    "test_reference_backend.py": {
        "test_random_profiles": "hypothesis: random profiles through both backends (~35 s)",
    },
    "test_sql_portable.py": {
        "test_round_tripped_sql_prints_the_same_rows": "every query transpiled and run twice (~20 s)",
    },
    "test_sql_sandbox.py": {
        "test_a_signal_stops_a_long_query_in_python": "a child Python, signalled",
        "test_a_signal_stops_a_long_query_in_the_cli": "`python -m tfprof sql`, signalled",
    },
    "test_synth.py": {
        "test_output_unchanged[three_towers]": "generates a multi-tower profile (~1.5 s)",
    },
    "test_ui_api.py": {
        "test_ui_command_prints_the_url_and_stops_on_ctrl_c": "`python -m tfprof ui`, signalled",
        "test_flame_boxes_nest_inside_their_parents": "~1 s",
    },
    "test_ui_security.py": {
        "test_a_query_whose_client_went_away_is_interrupted": "waits out a runaway query (~4 s)",
        "test_a_query_past_the_time_limit_answers_a_clear_error": "waits out the 1 s query limit",
    },
    "test_view_files.py": {
        "test_html_report_loads_in_chromium": "starts chromium",
    },
    "test_wire.py": {
        "test_bit_flips": "decodes hundreds of damaged files (~1 s)",
    },
}

# module -> {function: how many of its cases the fast tier runs}
SAMPLED = {
    "test_catalog.py": {"test_every_golden_case_through_a_run_of_the_catalog": 12},
    "test_catalog_s3.py": {"test_every_golden_case_through_a_run_in_s3": 8},
    # each case adds two runs to moto's S3 and runs a dozen commands (~3 s)
    "test_catalog_remote_damage.py": {"test_one_damaged_run_in_s3_leaves_the_others_readable": 3,
                                      "test_writers_keep_a_damaged_run_and_never_delete_what_another_row_lists": 2},
    "test_diff_samples.py": {"test_one_pass_samples_equal_a_view_run_per_step": 8},
    "test_diff_text.py": {"test_text_equals_the_row_by_row_report": 12},
    "test_golden.py": {"test_golden": 32},
    "test_lines.py": {"test_random_frames_match_the_polars_lines": 6},
    "test_misuse.py": {"test_misuse": 24},
    "test_parse_errors.py": {"test_truncated": 10},
    "test_pprof.py": {"test_golden_pprof": 16},
    "test_python_api.py": {"test_profiler_matches_golden": 16},
    "test_reference_backend.py": {"test_golden_case": 16, "test_op_and_code_reports_through_the_reference_backend": 12},
    "test_sql_sandbox.py": {"test_hostile_sql_checker_is_refused": 16,
                            "test_hostile_sql_in_python_raises_query_error_and_changes_nothing": 8,
                            "test_hostile_sql_in_the_cli_is_one_error_line_and_changes_nothing": 8},
    "test_timeline.py": {"test_golden_timeline": 16},
}


def _id_pattern(pattern: str) -> re.Pattern:
    """``name[rnn-*]``: ``*`` is any text, everything else literal (brackets included)."""
    return re.compile(".*".join(map(re.escape, pattern.split("*"))))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    slow = pytest.mark.slow
    modules: dict[str, object] = {}
    cases: dict[tuple[str, str], list] = {}
    for item in items:
        module = item.path.name
        modules.setdefault(module, getattr(item, "module", None))
        name = getattr(item, "originalname", item.name)
        hit = any(n == name or ("[" in n and _id_pattern(n).fullmatch(item.name)) for n in SLOW_TESTS.get(module, ()))
        if module in SLOW_MODULES or hit or item.get_closest_marker("tensorflow") or item.get_closest_marker("spark"):
            item.add_marker(slow)
        elif name in SAMPLED.get(module, {}):
            cases.setdefault((module, name), []).append(item)
    for (module, name), table in cases.items():
        keep = SAMPLED[module][name]
        kept = {round(i * len(table) / keep) for i in range(keep)}
        for i, item in enumerate(sorted(table, key=lambda it: it.nodeid)):  # the same sample in any order
            if i not in kept:
                item.add_marker(slow)
    # A renamed test would silently join the fast tier: name the entries whose function is gone.
    for module, mod in modules.items():
        gone = sorted(n for n in (*SLOW_TESTS.get(module, ()), *SAMPLED.get(module, ()))
                      if mod is not None and not hasattr(mod, n.split("[")[0]))
        if gone:
            warnings.warn(f"tests/conftest.py names tests that {module} no longer has: {', '.join(gone)}",
                          pytest.PytestConfigWarning, stacklevel=1)


def run_metas(name: str) -> list[str]:
    """The fixture's RunMetadata files in step order."""
    files = sorted((FIXTURES / name).glob("run_meta_*.pb"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    return [str(p) for p in files]


def raw_inputs(name: str, graph: str = "graph.pb") -> dict:
    """The raw tfprof inputs of fixture ``name`` (graph, every step, op log)."""
    d = FIXTURES / name
    return {"graph_path": str(d / graph), "run_meta_path": run_metas(name), "op_log_path": str(d / "op_log.pb")}


def golden_totals(name: str) -> dict:
    return json.loads((FIXTURES / name / "golden" / "totals.json").read_text())


def plain(table: pa.Table) -> pa.Table:
    """``table`` with dictionary columns decoded, so tables compare by value."""
    cols = []
    for col in table.columns:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


# Columns a ProfileProto has no field for (ExecProfile's AllocationRecord holds time and bytes only):
# equal tables across a ProfileProto compare without them.
NOT_IN_PROFILE_PROTO = {"allocations": ("allocator", "bytes_in_use", "bytes_reserved")}


def proto_comparable(table: pa.Table, name: str) -> pa.Table:
    """``table`` (of table ``name``) without the columns a ProfileProto cannot carry."""
    return table.drop_columns(list(NOT_IN_PROFILE_PROTO.get(name, ())))


def assert_tables_equal(a: pa.Table, b: pa.Table, name: str = "") -> None:
    """Equal schemas and equal values row by row; on failure, show the first differing row."""
    assert a.schema.equals(b.schema), f"{name}: schemas differ\n{a.schema}\n---\n{b.schema}"
    pa_, pb = plain(a), plain(b)
    if pa_.equals(pb):
        return
    assert pa_.num_rows == pb.num_rows, f"{name}: {pa_.num_rows} rows vs {pb.num_rows}"
    ra, rb = pa_.to_pylist(), pb.to_pylist()
    first = next(i for i, (x, y) in enumerate(zip(ra, rb)) if x != y)
    raise AssertionError(f"{name}: row {first} differs:\n{ra[first]}\n{rb[first]}")


@pytest.fixture(params=PROFILE_FIXTURES)
def fixture_name(request) -> str:
    return request.param


# Each node's time at step -1, as SQL over a profile's tables: per step the accelerator and cpu
# records summed, then each divided (integer) by the number of steps the node ran in. Columns
# node_id, acc, cpu; a query goes on after it (`NODE_TIMES_SQL + "select ... from per_node"`).
NODE_TIMES_SQL = """
with per_step as (
  select node_id, step,
         sum(case when kind = 'accelerator' then duration_micros else 0 end) as acc,
         sum(case when kind = 'cpu' then duration_micros else 0 end) as cpu
  from execs group by node_id, step),
runs as (select node_id, count(*) as n from node_steps group by node_id),
per_node as (
  select node_id, sum(acc) // any_value(n) as acc, sum(cpu) // any_value(n) as cpu
  from per_step join runs using (node_id) group by node_id)
"""



def read_columns(body: bytes) -> dict:
    """An answer of the UI's binary columns (``TFCL``, the JSON's length, the JSON, then each array
    it lists at a multiple of 8 bytes) read with ``struct`` and numpy, as plain lists."""
    assert body[:4] == b"TFCL"
    (n,) = struct.unpack_from("<I", body, 4)
    data = json.loads(body[8:8 + n])
    at = 8 + n
    for name, kind, length in data["arrays"]:
        at += -at % 8
        dtype = {"f8": "<f8", "i4": "<i4"}[kind]
        data[name] = np.frombuffer(body, dtype, length, at).tolist()
        at += length * np.dtype(dtype).itemsize
    assert at == len(body)
    return data
