"""User checkers written as SQL: one ``SELECT`` over the profile's tables whose rows are reports.

A checker file holds one DuckDB ``SELECT`` (``WITH`` allowed) over the tables of
docs/SCHEMA.md; it runs in the SQL sandbox (``tfprof.sqlbox``), as ``tfprof sql`` does, so a
checker from elsewhere cannot write, read files or reach the network. Each result row is one
report; the text is the ``report`` column, other columns are evidence kept in
``AdviceResult.evidence``. Options are named parameters
(``$min_share``); a comment line ``-- option NAME = DEFAULT`` declares one with its default,
and the checker's options (tfprof's CheckerOption map) override the defaults. The checker's
name is the file's stem. See docs/ADVISOR.md.

>>> import tfprof
>>> check = sql_check("busiest", "select name as report from nodes order by node_id limit 1")
>>> check.run(tfprof.load(tfprof.sample_path()), {}).rows.columns
['report']
"""

from __future__ import annotations

import re

import polars as pl

from tfprof import sqlbox
from tfprof.errors import OptionError, QueryError
from tfprof.profile import Profile
from tfprof.queries.advisor.base import Check, CheckOptions, Evidence

REPORT_COLUMN = "report"
_OPTION_LINE = re.compile(r"^\s*--\s*option\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$", re.MULTILINE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def declared_options(sql: str) -> dict[str, str]:
    """The ``-- option NAME = DEFAULT`` lines of a checker, in order."""
    return {m.group(1): m.group(2) for m in _OPTION_LINE.finditer(sql)}


def sql_check(name: str, sql: str, *, source: str | None = None) -> Check:
    """A ``Check`` running ``sql``; ``source`` (the file) is named in error messages."""
    where = f"checker `{name}`" + (f" ({source})" if source else "")
    if not _NAME.match(name):
        raise OptionError(f"Bad checker name `{name}` for {where}: use letters, digits, _ . -")
    defaults = declared_options(sql)

    def run(prof: Profile, options: CheckOptions) -> Evidence:
        con = prof.connection()
        try:  # the SQL sandbox's checks: one read-only query, nothing that reaches out
            statement = sqlbox.check(con, sql)
        except QueryError as exc:
            raise QueryError(f"SQL error in {where}: {exc}") from None
        if statement.type.name != "SELECT":
            raise OptionError(f"{where} must hold exactly one SELECT statement, not {statement.type.name}")
        used = set(statement.named_parameters)
        unknown = sorted(set(options) - used - set(defaults))
        if unknown:
            raise OptionError(
                f"Unknown option `{unknown[0]}` for {where}; its options: {', '.join(sorted(used | set(defaults))) or 'none'}"
            )
        values = {**defaults, **{k: v for k, v in options.items()}}
        absent = sorted(used - set(values))
        if absent:
            raise OptionError(
                f"{where} needs option `{absent[0]}`: give it, or declare a default with `-- option {absent[0]} = VALUE`"
            )
        try:
            rows = pl.from_arrow(sqlbox.query(con, sql, params={k: values[k] for k in used}))
        except QueryError as exc:
            raise QueryError(f"SQL error in {where}: {exc}") from None
        if REPORT_COLUMN not in rows.columns:
            raise OptionError(
                f"{where} returned no `{REPORT_COLUMN}` column (columns: {', '.join(rows.columns) or 'none'}); "
                f"name the report text `AS {REPORT_COLUMN}`"
            )
        if rows[REPORT_COLUMN].null_count():
            raise OptionError(f"{where} returned a NULL `{REPORT_COLUMN}` (a concatenation with NULL?)")
        return Evidence(rows.with_columns(pl.col(REPORT_COLUMN).cast(pl.String)))

    return Check(name, run, doc=f"SQL checker {source or name}", source=source)

