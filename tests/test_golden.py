"""Every golden case of tests/golden/<fixture>/ (made by tools/make_golden.py with the real tfprof)
rendered through the public API, compared line by line from the ``node name |`` header to the end.

Deliberate divergences (docs/COMPATIBILITY.md) are listed in ``DIVERGENT`` with their reason
and asserted to differ (strict xfail), so a change that accidentally "fixes" them is noticed.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
from google.protobuf import text_format

import tfprof
from tfprof import Profile
from tfprof.api import run_view
from tfprof.errors import OptionError
from tfprof.schema.proto.tfprof_output_pb2 import GraphNodeProto, MultiGraphNodeProto

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"

# case id -> reason. Only divergences listed in docs/COMPATIBILITY.md belong here.
DIVERGENT = {
    "op_account_double": "tfprof counts a node once per matching account regex; we count it once",
    "code_account_double": "tfprof counts a node once per matching account regex; we count it once",
}


def _rejected(options: dict) -> bool:
    """Values tfprof's Python API lets through but our API rejects (a bad order_by value is an
    error naming it; docs/COMPATIBILITY.md). Unknown select names are not: tfprof prints
    `Unknown select: NAME` in the report and carries on, and so do we."""
    from tfprof.queries.options import ORDER_BY

    return options["order_by"] not in (*ORDER_BY, "")


def _cases():
    for case_file in sorted(GOLDEN.glob("*/cases.json")):
        fixture = case_file.parent.name
        for case in json.loads(case_file.read_text()):
            marks = []
            if case["id"] in DIVERGENT:
                marks.append(pytest.mark.xfail(strict=True, reason=DIVERGENT[case["id"]]))
            yield pytest.param(fixture, case, id=f"{fixture}-{case['id']}", marks=marks)


_PROFILES: dict[str, Profile] = {}


def _profile(fixture: str) -> Profile:
    if fixture not in _PROFILES:
        _PROFILES[fixture] = tfprof.load(profile_path=FIXTURES / fixture / "profile.pb")
    return _PROFILES[fixture]


def _body(text: str) -> list[str]:
    start = text.find("node name |")
    return text[start:].splitlines(keepends=True) if start >= 0 else []


@pytest.mark.parametrize("fixture,case", list(_cases()))
def test_golden(fixture, case):
    expected_text = (GOLDEN / fixture / f"{case['id']}.txt").read_text()
    options = {k: v for k, v in case["options"].items() if k != "output"}
    if not expected_text or _rejected(options):  # no report from the real tool, or one we refuse
        with pytest.raises(OptionError):
            run_view(_profile(fixture), case["cmd"], options)
        return
    result = run_view(_profile(fixture), case["cmd"], options)
    expected, actual = _body(expected_text), _body(result.text)
    if expected != actual:
        diff = "".join(list(difflib.unified_diff(expected, actual, "tfprof", "ours", n=1))[:40])
        pytest.fail(f"{fixture} {case['id']} differs from the real tool:\n{diff}")
    # The returned proto, field by field (parsed from the real tool's text format).
    cls = GraphNodeProto if case["cmd"] in ("scope", "graph") else MultiGraphNodeProto
    want = text_format.Parse((GOLDEN / fixture / f"{case['id']}.pbtxt").read_text(), cls())
    if want != result.proto:
        a = text_format.MessageToString(want).splitlines(keepends=True)
        b = text_format.MessageToString(result.proto).splitlines(keepends=True)
        diff = "".join(list(difflib.unified_diff(a, b, "tfprof", "ours", n=2))[:40])
        pytest.fail(f"{fixture} {case['id']}: returned proto differs from the real tool's:\n{diff}")
