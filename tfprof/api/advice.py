"""The advisor as one call: built-in checkers and users' SQL checkers, run in tfprof's order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tfprof.errors import InputError, InputNotFoundError, OptionError
from tfprof.profile import Profile


@dataclass
class AdviceResult:
    """The advice: ``text`` (what tfprof prints), ``proto`` (the AdviceProto it returns),
    each checker's reports (the text's lines under its name) and evidence rows, and tfprof's
    stderr notes (missing inputs)."""

    text: str
    proto: Any
    evidence: dict[str, pl.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    reports: dict[str, list[str]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


def advise(prof: Profile, checkers: Any = None, *, checker_dir: str | Path | None = None) -> AdviceResult:
    """Run the advisor on ``prof``, as tfprof's ``advise`` (docs/TFPROF_BEHAVIOUR.md, 'Advisor').

    ``checkers``: None for every built-in checker (tfprof's ALL_ADVICE), or a dict
    ``{checker: {option: value}}`` as tfprof's API takes (a list of names also works); a dict
    runs the checkers it names. A checker is a built-in name, the path of a ``.sql`` checker
    file, or the name (file stem) of a checker in ``checker_dir``, whose ``*.sql`` files all
    run. Built-in checkers run in tfprof's order, then SQL checkers (docs/ADVISOR.md). A foreign
    trace (Kineto, XSpace) also gets the GPU checks by default. A check meant for another
    framework's profiles (OperationChecker: TensorFlow) is left out of the default set; asked
    for by name, it prints one line saying it was skipped.

    >>> import tfprof
    >>> advise(tfprof.load(tfprof.sample_path()), {"OperationChecker": {}}).text
    '\\nOperationChecker:\\n'
    """
    from tfprof.queries.advisor.framework import framework
    from tfprof.views.advice import advice_proto, missing_notes, render_text, reports
    from tfprof.views.advice_gpu import skipped_report, status_report

    advice: dict[str, list[str]] = {}
    evidence: dict[str, pl.DataFrame] = {}
    notes: list[str] = []
    made_by = None  # the profile's framework, found once a check needs it
    for check, options in _advice_plan(checkers, checker_dir, prof):
        if check.frameworks is not None:
            made_by = made_by or framework(prof)
            if made_by not in check.frameworks and checkers is None:  # another framework's advice
                continue
            if made_by not in check.frameworks:  # asked for by name: say it is skipped
                evidence[check.name] = pl.DataFrame()
                advice[check.name] = [skipped_report(check.frameworks, made_by)]
                continue
        found = check.run(prof, options)
        if found is None:  # JobChecker: no entry at all, as in open-source tfprof
            continue
        evidence[check.name] = found.rows
        notes += missing_notes(check.name, found.missing)
        advice[check.name] = [status_report(found.status)] if found.status else reports(check.name, found.rows)
    return AdviceResult(text=render_text(advice), proto=advice_proto(advice), evidence=evidence, notes=notes,
                        reports=advice)


def _advice_plan(checkers: Any, checker_dir: str | Path | None, prof: Profile) -> list[tuple[Any, dict]]:
    """(check, options) pairs to run: built-in ones in tfprof's order, then SQL checkers."""
    from tfprof.queries.advisor import CHECKS, DEFAULT_CHECKERS, TRACE_CHECKERS, TRACE_CHECKS, by_name
    from tfprof.queries.advisor.trace import has_trace

    in_dir: dict[str, Any] = {}
    if checker_dir is not None:
        folder = Path(checker_dir)
        if not folder.is_dir():
            raise InputNotFoundError(f"Checker directory `{folder}` not found")
        files = sorted(folder.glob("*.sql"))
        if not files:
            raise OptionError(f"No .sql checker files in `{folder}`")
        in_dir = {c.name: c for c in map(_sql_checker, files)}
    if checkers is None:
        checkers = TRACE_CHECKERS if has_trace(prof) else DEFAULT_CHECKERS
    elif isinstance(checkers, (str, Path)):
        checkers = {checkers: {}}
    elif not isinstance(checkers, Mapping):
        checkers = {c: {} for c in checkers}
    builtin: dict[str, dict] = {}
    custom: dict[str, tuple[Any, dict]] = {name: (check, {}) for name, check in in_dir.items()}
    for key, options in checkers.items():
        options = {} if options is None else options
        if not isinstance(options, Mapping):
            raise OptionError(f"Options of checker `{key}` must be a dict of option -> value, not `{options!r}`")
        if isinstance(key, Path) or str(key).lower().endswith(".sql"):
            check = _sql_checker(Path(key))
            if check.name in custom or check.name in TRACE_CHECKERS:
                raise OptionError(f"Two checkers are named `{check.name}` ({check.source}); rename the .sql file")
            custom[check.name] = (check, dict(options))
        elif key in in_dir:
            custom[key] = (in_dir[key], dict(options))
        else:
            builtin[by_name(str(key)).name] = dict(options)
    clash = sorted(set(in_dir) & set(TRACE_CHECKERS))
    if clash:
        raise OptionError(f"Checker file `{in_dir[clash[0]].source}` takes the built-in name `{clash[0]}`; rename it")
    return [(c, builtin[c.name]) for c in (*CHECKS, *TRACE_CHECKS) if c.name in builtin] + list(custom.values())


def _sql_checker(path: Path):
    """A user checker from a .sql file, named by the file's stem."""
    from tfprof.queries.advisor.custom import sql_check

    if not path.is_file():
        raise InputNotFoundError(f"Checker file `{path}` not found")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"Cannot read checker file `{path}`: {exc}") from None
    return sql_check(path.stem, text, source=str(path))


def evidence_table(rows: pl.DataFrame) -> tuple[list[str], list[dict]]:
    """A check's evidence as a page shows it: the columns but points in time, each cell's text
    formatted as the reports format it (``tfprof.views.advice_gpu.evidence_cells``)."""
    from tfprof.views.advice_gpu import evidence_cells

    return evidence_cells(rows)


def advice_output(result: AdviceResult, fmt: str = "text") -> str:
    """What ``tfprof advise --format FMT`` prints: tfprof's text, or with ``json`` the document of
    ``tfprof.views.advice_json`` (docs/schemas/advise.schema.json)."""
    from tfprof.views.advice_json import render_json

    if fmt not in ("text", "json"):
        raise OptionError(f"unknown --format `{fmt}`; valid: text, json")
    if fmt == "text":
        return result.text
    # the checkers in the order they ran: the evidence's (the proto's map has no order)
    reports = {name: list(result.proto.checkers[name].reports) for name in result.evidence}
    return render_json(reports, result.evidence, result.notes)
