"""The reference backend's SQL files (``tfprof/queries/sql/*.sql``) are portable: sqlglot reads
each as DuckDB SQL and writes it as Spark SQL with nothing unsupported, the file spells its
functions the way Spark does, recursive CTEs use ``UNION ALL`` (the only recursion Spark runs),
and the ``$name`` parameters come out as Spark's ``:name`` markers. The real check: with every
file taken DuckDB -> Spark -> DuckDB by sqlglot, the whole reference backend prints the same
rows on the golden fixtures as with the files themselves.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

import tfprof
from tfprof.errors import OptionError, TfprofError
from tfprof.queries import reference
from tfprof.queries.options import Options
from tfprof.queries.reference.sql import SQL_DIR, Sql, sql_text
from tfprof.queries.spec import BUILTIN, tree_spec

# sqlglot is in the dev and spark extras (the package never imports it); without it this module
# is skipped, not a collection error that stops the whole run.
sqlglot = pytest.importorskip("sqlglot", reason="needs sqlglot: pip install -e '.[dev]'")
from sqlglot import ErrorLevel, exp  # noqa: E402
from sqlglot.tokens import TokenType  # noqa: E402

FILES = sorted(p.stem for p in SQL_DIR.glob("*.sql"))
GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"
VIEWS = ("scope", "graph", "op", "code")
STRIDE = 6  # every STRIDE-th golden case of a fixture and view keeps the test near 15 s
# Cases beside the golden ones, so that each truth-valued parameter runs both ways.
MEMBER_FILES = ("aggregate_nodes", "step_means", "code_members", "code_paths", "code_level")
EXTRA = (("cnn", "scope", {"max_depth": 0}), ("rnn", "graph", {"max_depth": 0, "trim_name_regexes": ["gradients"]}))


def to_spark(text: str) -> str:
    """``text`` (DuckDB SQL) as Spark SQL; raises on anything Spark cannot say."""
    [out] = sqlglot.transpile(text, read="duckdb", write="spark", unsupported_level=ErrorLevel.RAISE, pretty=True)
    return out


def round_trip(text: str) -> str:
    """``text`` taken to Spark SQL and back to DuckDB SQL by sqlglot."""
    [out] = sqlglot.transpile(to_spark(text), read="spark", write="duckdb", unsupported_level=ErrorLevel.RAISE,
                              pretty=True)
    return out


def called(text: str, dialect: str) -> set[str]:
    """The words that ``text`` writes before a `(`: its functions (and a few keywords)."""
    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
    return {a.text.upper() for a, b in itertools.pairwise(tokens) if b.token_type == TokenType.L_PAREN
            and re.fullmatch(r"\w+", a.text)}


def dialect_only(text: str) -> list[str]:
    """Functions that ``text`` (DuckDB SQL) spells otherwise than Spark SQL does (sqlglot
    renames them: ``string_split`` is Spark's ``split``), or that sqlglot does not know at all
    (so that it would hand them to Spark unchanged: ``list_sum``)."""
    unknown = {f.name.upper() for f in sqlglot.parse_one(text, read="duckdb").find_all(exp.Anonymous)}
    renamed = called(text, "duckdb") - called(to_spark(text), "spark")
    return sorted(unknown | renamed)


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_spark_sql_with_standard_functions(name):
    text = sql_text(name)
    to_spark(text)  # raises on a construct Spark lacks
    assert dialect_only(text) == [], f"{name}.sql: DuckDB spellings of functions with a portable form"


@pytest.mark.parametrize("name", FILES)
def test_recursion_is_union_all(name):
    for with_ in sqlglot.parse_one(sql_text(name), read="duckdb").find_all(exp.With):
        if with_.args.get("recursive"):
            for cte in with_.expressions:
                union = cte.this
                assert not isinstance(union, exp.Union) or not union.args.get("distinct"), \
                    f"{name}.sql: CTE {cte.alias} recurses with UNION; Spark recurses with UNION ALL only"


@pytest.mark.parametrize("name", FILES)
def test_parameters_become_spark_markers(name):
    text = sql_text(name)
    wanted = set(re.findall(r"\$(\w+)", text))  # what Sql.run asks of its caller
    placeholders = {p.name for p in sqlglot.parse_one(text, read="duckdb").find_all(exp.Placeholder)}
    assert placeholders == wanted, f"{name}.sql: a comment names a parameter the SQL does not take"
    spark = to_spark(text)
    assert {p.name for p in sqlglot.parse_one(spark, read="spark").find_all(exp.Placeholder)} == wanted
    assert set(re.findall(r"(?<![:\w]):(\w+)", spark)) == wanted, spark


def test_the_checks_catch_duckdb_spellings():
    """The checks above can fail: DuckDB-only spellings and a recursive UNION are caught."""
    assert dialect_only("SELECT string_split(a, ',') FROM t") == ["STRING_SPLIT"]
    assert dialect_only("SELECT list_sum(a), struct_pack(b := 1) FROM t") == ["LIST_SUM", "STRUCT_PACK"]
    assert dialect_only("SELECT lpad(CAST(a AS VARCHAR), 3, '0'), regexp_extract(b, 'x(.)', 1) FROM t") == []
    union = sqlglot.parse_one("WITH RECURSIVE r(n) AS (SELECT 1 UNION SELECT n + 1 FROM r) SELECT n FROM r",
                              read="duckdb").find(exp.With).expressions[0].this
    assert union.args.get("distinct")


def _cases():
    """Every STRIDE-th golden case of each fixture and view, then EXTRA: (profile path, view, options)."""
    for case_file in sorted(GOLDEN.glob("*/cases.json")):
        profile = FIXTURES / case_file.parent.name / "profile.pb"
        by_view: dict[str, list] = {}
        for case in json.loads(case_file.read_text()):
            if case["cmd"] in VIEWS and profile.exists():
                by_view.setdefault(case["cmd"], []).append(case)
        for cmd, cases in by_view.items():
            for case in cases[::STRIDE]:
                options = {k: v for k, v in case["options"].items() if k != "output"}
                try:
                    opts = Options.from_tfprof(options)
                except OptionError:  # options our API refuses: nothing to run
                    continue
                yield profile, cmd, opts
    for fixture, cmd, options in EXTRA:
        yield FIXTURES / fixture / "profile.pb", cmd, Options.from_tfprof(options)


SEEN: dict[str, set] = {}  # per file run: the (parameter, value) pairs of its truth-valued parameters


class _Recording(Sql):
    """``Sql`` that notes in SEEN each file it runs and its truth-valued parameters' values."""

    def run(self, name, params=None, **frames):
        flags = {(k, v) for k, v in (params or {}).items() if isinstance(v, bool) and f"${k}" in sql_text(name)}
        SEEN.setdefault(name, set()).update(flags)
        return super().run(name, params, **frames)


def _run_all(monkeypatch, text) -> list:
    """The reference backend's result (or error type) for every case, reading SQL from ``text``."""
    monkeypatch.setattr(reference, "Sql", lambda: _Recording(text=text))
    out, profiles = [], {}
    for profile, cmd, opts in _cases():
        if profile not in profiles:
            profiles[profile] = tfprof.load(profile_path=profile)
        try:
            result = reference.run(profiles[profile], tree_spec(BUILTIN[cmd], opts))
        except TfprofError as error:  # e.g. a code view without code traces: both must agree
            out.append((profile.parent.name, cmd, type(error).__name__))
        else:
            out.append((profile.parent.name, cmd, result.rows, result.root))
    return out


def test_round_tripped_sql_prints_the_same_rows(monkeypatch):
    """Every file taken DuckDB -> Spark -> DuckDB runs, and the backend's rows are unchanged."""
    tripped = {name: round_trip(sql_text(name)) for name in FILES}
    SEEN.clear()
    want = _run_all(monkeypatch, sql_text)
    got = _run_all(monkeypatch, tripped.__getitem__)
    # (the files of runs aggregated over a catalog and of their code trie: tests/test_member_sql.py)
    assert sorted(SEEN) == [f for f in FILES if f not in MEMBER_FILES], \
        "a SQL file that the cases never ran"
    for name, flags in SEEN.items():
        for key, value in flags:
            assert (key, not value) in flags, f"{name}.sql ran with ${key} {value} only"
    assert len(want) == len(got) > 50
    for a, b in zip(want, got):
        assert a[:2] == b[:2] and len(a) == len(b), (a[:3], b[:3])
        if len(a) == 3:
            assert a == b
            continue
        assert a[2].equals(b[2]), f"{a[0]} {a[1]}: rows differ\noriginal SQL:\n{a[2]}\nround trip:\n{b[2]}"
        assert a[3] == b[3], f"{a[0]} {a[1]}: root totals differ"
