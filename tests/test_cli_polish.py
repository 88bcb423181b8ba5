"""The command line says what it does: usage lines, help text, option checks and warnings
(docs/COMPATIBILITY.md rows 3 and 19). In-process through ``tfprof.cli.main.main``."""

from __future__ import annotations

import csv
import io

import pytest
from conftest import FIXTURES

from tfprof.cli.main import main
from tfprof.queries.options import SELECT_FIELDS

PB = str(FIXTURES / "cnn" / "profile.pb")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_unknown_select_is_reported_in_the_doc_and_the_view_goes_on(capsys):
    """As the real tool: `Unknown select: NAME` in the doc block, the report printed; plus one
    warning on stderr naming the closest valid field."""
    code, out, err = run(capsys, "op", PB, "--select", "micros,microsecs", "--max_depth", "3")
    assert code == 0
    assert "Unknown select: microsecs\n" in out
    assert "node name | total execution time" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Warning: ")
    assert "`microsecs`" in lines[0] and "did you mean `micros`" in lines[0]


def test_known_select_prints_no_warning(capsys):
    code, _, err = run(capsys, "op", PB, "--select", "micros,occurrence", "--max_depth", "3")
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    "option,value,needle",
    [
        ("max_depth", "-1", "0 or more"),
        ("min_micros", "-5", "0 or more"),
        ("min_bytes", "-1", "0 or more"),
        ("min_occurrence", "-2", "0 or more"),
        ("step", "-2", "-1 for the mean"),
    ],
)
@pytest.mark.parametrize("spelling", ["--{o}", "-{o}"])
def test_negative_depths_and_thresholds_are_errors(capsys, option, value, needle, spelling):
    code, out, err = run(capsys, "scope", PB, spelling.format(o=option), value)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert f"`{option}`" in lines[0] and needle in lines[0] and value in lines[0]


@pytest.mark.parametrize("view", ["scope", "graph", "op", "code"])
def test_format_csv_shows_the_selected_fields_only(capsys, view):
    code, out, _ = run(capsys, view, PB, "--format", "csv", "--select", "params", "--max_depth", "3")
    assert code == 0
    header = next(csv.reader(io.StringIO(out)))
    metrics = [c for c in header if c not in ("name", "depth", "node_id", "accounted")]
    assert metrics == ["params", "total_params"], header


def test_format_table_with_micros_shows_the_three_times(capsys):
    code, out, _ = run(capsys, "scope", PB, "--format", "csv", "--select", "micros", "--max_depth", "2")
    assert code == 0
    header = out.splitlines()[0].split(",")
    assert [c for c in header if "micros" in c] == [
        "exec_micros", "total_exec_micros", "accelerator_exec_micros", "total_accelerator_exec_micros",
        "cpu_exec_micros", "total_cpu_exec_micros",
    ]


def test_view_usage_line_names_the_profile_and_output_help_names_every_kind(capsys):
    code, out, _ = run(capsys, "scope", "--help")
    assert code == 0
    assert out.splitlines()[0].startswith("Usage: tfprof scope [PROFILE]")
    output_help = " ".join(line.strip() for line in out.splitlines() if "--output" in line)
    for kind in ("stdout", "none", "file:outfile=", "timeline:outfile=", "pprof:outfile="):
        assert kind in output_help, kind


@pytest.mark.parametrize("command", ["ingest", "tables", "sql", "advise"])
def test_usage_lines_name_the_profile(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert "PROFILE" in out.splitlines()[0], out.splitlines()[0]


def test_binary_format_on_a_terminal_points_at_the_views_own_option(capsys, monkeypatch):
    """A view has no --out: the hint names -output file:outfile=."""
    import sys

    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, _, err = run(capsys, "scope", PB, "--format", "parquet")
    assert code == 2
    assert "--output file:outfile=" in err and "--out " not in err


def test_every_select_field_is_known_to_the_help():
    from tfprof.cli.viewopts import OPTION_HELP

    for name in SELECT_FIELDS:
        assert name in OPTION_HELP["select"], name
