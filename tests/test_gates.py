"""``--fail-if`` gates: the grammar (parsed by hand, linear in base), exit codes 0/2/3 on views and on
``tfprof diff``, the offending rows on stderr; ``advise --format json`` against its schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import polars as pl
import pytest

import tfprof
from tfprof.api.diff import run_diff
from tfprof.cli.main import main
from tfprof.queries.gates import parse, tripped

PAIRS = Path(__file__).parent / "fixtures" / "diff"
BASE, WIDE, AGAIN = (str(PAIRS / n / "profile.pb") for n in ("base", "wide", "again"))
SCHEMAS = Path(__file__).parent.parent / "docs" / "schemas"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("text, expect", [
    ("total_exec_micros > 1.1 * base", (None, None, "total_exec_micros", ">", 0.0, 1.1)),
    ("scope:/model/encoder micros +5%", ("scope", "model/encoder", "micros", ">", 0.0, 1.05)),
    ("op:MatMul micros > 2ms", ("op", "MatMul", "micros", ">", 2000.0, 0.0)),
    ("bytes <= base*2 - 1KB", (None, None, "bytes", "<=", -1000.0, 2.0)),
    ("micros -10%", (None, None, "micros", "<", 0.0, 0.9)),
    ("micros +2ms", (None, None, "micros", ">", 2000.0, 1.0)),
    ("params != 3m", (None, None, "params", "!=", 3e6, 0.0)),
    ("micros>-1", (None, None, "micros", ">", -1.0, 0.0)),
])
def test_grammar(text, expect):
    g = parse(text)
    assert (g.view, g.path, g.metric, g.op, g.const, pytest.approx(g.coef)) == expect


@pytest.mark.parametrize("text, why", [
    ("micros >> 3", "expected a number or `base`"),
    ("micros > base * base", "linear"),
    ("micros > 3 parsecs", "unknown unit `parsecs`"),
    ("nope:x micros > 1", "unknown view `nope`"),
    ("micros", "must follow the metric"),
    ("> 3", "must start with a metric"),
    ("micros > 5%", "belongs to a change"),
    ("scope:a( micros > 1", "not a valid regex"),
    ("micros > 3 +", "ends with an operator"),
])
def test_bad_expressions(text, why):
    with pytest.raises(tfprof.OptionError, match="--fail-if") as info:
        parse(text)
    assert why in str(info.value)


@pytest.mark.parametrize("text, why", [
    ("micros > 1e99999999999ms", "overflows to infinity"),
    ("micros +1e99999%", "overflows to infinity"),
    ("micros < 0 * 1e400 * base", "overflows to infinity"),
    ("micros > 1e30", "beyond any value a profile holds"),
    ("bytes > -10000000000GB", "beyond any value a profile holds"),
])
def test_a_gate_whose_numbers_decide_it_for_every_profile_is_refused(text, why):
    with pytest.raises(tfprof.OptionError, match="--fail-if") as info:
        parse(text)
    assert why in str(info.value) and f"`{text}`" in str(info.value)


@pytest.mark.parametrize("args, gate", [
    (("scope", BASE), "scope:no/such/scope micros > 0"),
    (("op", BASE, "--max_depth", "100"), "op:NoSuchOp micros > 1us"),
    (("scope", BASE, "--max_depth", "1"), "scope:mlp/fc2/weights params > 1"),  # there, but not shown
    (("op", BASE, "--show_name_regexes", "nothing"), "micros > 1us"),  # no row at all
    (("diff", BASE, WIDE), "scope:no/such/scope micros +0%"),
    (("scope", BASE), "micros > 1e99999999999ms"),
])
def test_a_gate_that_could_never_trip_is_one_error_line(capsys, args, gate):
    code, _, err = run(capsys, *args, "--fail-if", gate)
    assert code == 2 and err.startswith(f"Error: Bad --fail-if `{gate}`") and err.count("\n") == 1, err
    assert "never trip" in err or "every row or on none" in err


def test_gate_rows_on_a_diff_frame():
    frame = pl.DataFrame({"path": ["a", "b", "c"], "v_a": [100, 100, None], "v_b": [104, 120, 50],
                          "v_significant": [True, False, None]})
    assert tripped(parse("v +5%"), frame, "v", "time", diff=True)["path"].to_list() == ["b", "c"]
    assert tripped(parse("v +5% significant"), frame, "v", "time", diff=True)["path"].to_list() == ["c"]
    assert tripped(parse("scope:a v > base"), frame, "v", "time", diff=True)["path"].to_list() == ["a"]
    with pytest.raises(tfprof.OptionError, match="memory values"):
        tripped(parse("v > 1KB"), frame, "v", "time", diff=True)


def test_view_gates_exit_codes(capsys):
    code, out, err = run(capsys, "op", BASE, "--max_depth", "100", "--fail-if", "op:MatMul micros > 1us")
    assert code == 3 and "node name |" in out  # the report is printed, then the gate trips
    assert "tripped on 1 row" in err and "MatMul: exec_micros" in err
    code, out, err = run(capsys, "op", BASE, "--max_depth", "100", "--fail-if", "op:MatMul micros > 10s")
    assert code == 0 and err == ""
    code, out, err = run(capsys, "scope", BASE, "--fail-if", "micros > 1.1 * base")
    assert code == 2 and out == "" and err.startswith("Error: Bad --fail-if `micros > 1.1 * base`")
    code, _, err = run(capsys, "scope", BASE, "--fail-if", "scope:train bogus > 1")
    assert code == 2 and "no metric `bogus`" in err


def test_diff_gates_exit_codes(capsys):
    gate = "scope:mlp/fc2/weights params +10%"
    code, out, err = run(capsys, "diff", BASE, WIDE, "--max_depth", "100", "--select", "params,micros", "--fail-if", gate)
    assert code == 3 and "mlp/fc2/weights: total_params 65.54k -> 262.14k (+300.0%)" in err
    assert out.startswith("tfprof diff, scope view")
    code, _, err = run(capsys, "diff", BASE, AGAIN, "--max_depth", "100", "--fail-if", "micros +20% significant")
    assert code == 0, err
    code, _, err = run(capsys, "diff", BASE, WIDE, "op", "--fail-if", "op:MatMul micros +20% significant")
    assert code == 3 and "MatMul" in err
    code, out, err = run(capsys, "diff", BASE, WIDE, "--fail-if", "micros > base * base")
    assert code == 2 and out == "" and "--fail-if" in err
    code, _, err = run(capsys, "diff", BASE, WIDE, "--fail-if", "op:MatMul micros > 1")
    assert code == 2 and "op view" in err
    code, _, err = run(capsys, "diff", BASE, WIDE, "--order_by", "sideways")
    assert code == 2 and "order_by" in err


def test_diff_formats(capsys, tmp_path):
    code, out, _ = run(capsys, "diff", BASE, WIDE, "op", "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, json.loads((SCHEMAS / "diff.schema.json").read_text()))
    assert doc["rows"][0]["path"] == "MatMul"
    code, out, _ = run(capsys, "diff", BASE, WIDE, "op", "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("path,occurrence,name,depth,status,exec_micros_a")
    target = tmp_path / "d.parquet"
    code, _, _ = run(capsys, "diff", BASE, WIDE, "op", "--format", "parquet", "--out", str(target))
    assert code == 0 and pl.read_parquet(target)["path"][0] == "MatMul"
    code, out, _ = run(capsys, "diff", BASE, WIDE, "op", "--sql", "select count(*) as n from diff where significant")
    assert code == 0 and out.splitlines()[0].strip() == "n"
    code, out, _ = run(capsys, "diff", BASE, "--step", "1", "--against", "4", "--order_by", "tree")
    assert code == 0 and "step 4 against A" in out and "\n  _TFProfRoot" in out
    # the text goes out a block of rows at a time, to stdout and to --out alike; JSON whole
    d = run_diff(tfprof.load(BASE), tfprof.load(WIDE), "scope", {"max_depth": 100}, labels=(BASE, WIDE))
    code, out, _ = run(capsys, "diff", BASE, WIDE, "--max_depth", "100")
    assert code == 0 and out == d.text and out.count("\n") > 10
    code, _, _ = run(capsys, "diff", BASE, WIDE, "--max_depth", "100", "--out", str(tmp_path / "d.txt"))
    assert code == 0 and (tmp_path / "d.txt").read_text() == d.text
    code, _, _ = run(capsys, "diff", BASE, WIDE, "op", "--format", "json", "--out", str(tmp_path / "d.json"))
    assert code == 0 and json.loads((tmp_path / "d.json").read_text())["rows"][0]["path"] == "MatMul"


def test_advise_json_follows_its_schema(capsys):
    code, out, _ = run(capsys, "advise", str(tfprof.sample_path()), "--format", "json")
    doc = json.loads(out)
    jsonschema.validate(doc, json.loads((SCHEMAS / "advise.schema.json").read_text()))
    names = [c["name"] for c in doc["checkers"]]
    assert names == ["AcceleratorUtilizationChecker", "OperationChecker", "ExpensiveOperationChecker"]
    text = run(capsys, "advise", str(tfprof.sample_path()))[1]
    for c in doc["checkers"]:  # the same reports as the text
        assert all(r in text for r in c["reports"])
    assert any(c["evidence"] for c in doc["checkers"])
    code, _, err = run(capsys, "advise", str(tfprof.sample_path()), "--format", "yaml")
    assert code == 2 and "--format" in err
