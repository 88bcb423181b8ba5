"""docs/ARCHITECTURE.md's recipe "A sink", as a test: one ``Sink`` record registered with
``api.sinks.register`` is an ``-output`` kind everywhere: the option's parser, the command line
(its file written atomically, never clobbered without --force, its check made before any work),
the Python API, and the help and completion of the shells."""

from __future__ import annotations

import csv
import io

import pytest
from conftest import FIXTURES

import tfprof
from tfprof.api import run_view, write_output
from tfprof.api import sinks as api_sinks
from tfprof.api.sinks import Sink, file_sink, register
from tfprof.cli.interactive import completions, help_text
from tfprof.cli.main import main
from tfprof.cli.viewopts import options_help
from tfprof.errors import OptionError
from tfprof.queries.options import OUTPUT_KINDS, Options, OutputKind
from tfprof.views.table import view_table

PROFILE = FIXTURES / "cnn" / "profile.pb"


def _rows_csv(prof, result) -> bytes:
    out = io.StringIO()
    table = view_table(result.layout, result.frame, result.options.select)
    writer = csv.writer(out)
    writer.writerow(table.columns)
    writer.writerows(table.rows())
    return out.getvalue().encode()


def _trees_only(cmd: str, opts: Options) -> None:
    if cmd == "op":
        raise OptionError("csv_rows writes trees: use the scope, graph or code view")


@pytest.fixture
def csv_rows():
    kind = OutputKind("csv_rows", ("outfile",), True, "the rows as CSV")
    register(file_sink(kind, _rows_csv, "the rows as CSV", "open it in a spreadsheet", _trees_only))
    yield kind
    del api_sinks.SINKS["csv_rows"], OUTPUT_KINDS["csv_rows"]


def test_a_registered_sink_writes_from_the_command_line(csv_rows, tmp_path, capsys):
    out = tmp_path / "rows.csv"
    assert main(["scope", str(PROFILE), "--max_depth", "2", "--output", f"csv_rows:outfile={out}"]) == 0
    err = capsys.readouterr().err
    assert f"Wrote the rows as CSV to {out}" in err and "open it in a spreadsheet" in err
    rows = list(csv.reader(out.read_text().splitlines()))
    want = tfprof.view(tfprof.load(PROFILE), "scope", max_depth=2)
    assert rows[0] == want.columns and [r[0] for r in rows[1:]] == want["name"].to_list()
    before = out.read_bytes()
    # never over an existing file without --force; the check runs before any work
    assert main(["scope", str(PROFILE), "--max_depth", "3", "--output", f"csv_rows:outfile={out}"]) == 2
    assert out.read_bytes() == before and "exists" in capsys.readouterr().err
    assert main(["scope", str(PROFILE), "--max_depth", "3", "--output", f"csv_rows:outfile={out}", "--force"]) == 0
    assert out.read_bytes() != before
    refused = tmp_path / "op.csv"
    assert main(["op", str(PROFILE), "--output", f"csv_rows:outfile={refused}"]) == 2
    assert "csv_rows writes trees" in capsys.readouterr().err and not refused.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv"]  # no temporary file left


def test_a_registered_sink_parses_writes_and_is_offered(csv_rows, tmp_path):
    opts = Options.from_tfprof({"output": f"csv_rows:outfile={tmp_path / 'a.csv'}"})
    assert opts.output.kind == "csv_rows"
    with pytest.raises(OptionError, match="csv_rows needs outfile"):
        Options.from_tfprof({"output": "csv_rows"})
    prof = tfprof.load(PROFILE)
    written = write_output(prof, run_view(prof, "code", opts, full_rows=True))
    assert written.paths == [tmp_path / "a.csv"] and (tmp_path / "a.csv").read_text().startswith("name,")
    assert "csv_rows:outfile=FILE (the rows as CSV)" in options_help()
    assert "csv_rows:outfile=FILE (the rows as CSV)" in help_text(Options())
    assert "csv_rows:outfile=" in completions("scope -output ", "csv")


def test_every_kind_of_the_grammar_has_its_sink():
    assert set(OUTPUT_KINDS) == set(api_sinks.SINKS)
    for name, sink in api_sinks.SINKS.items():
        assert isinstance(sink, Sink) and sink.kind is OUTPUT_KINDS[name]
        assert sink.kind.writes_file == ("outfile" in sink.kind.keys)
