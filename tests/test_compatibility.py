"""Each documented divergence from the real tfprof (docs/COMPATIBILITY.md) holds."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIXTURES, golden_totals

import tfprof
from tfprof.api import run_view
from tfprof.errors import OptionError

CNN = FIXTURES / "cnn" / "profile.pb"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfprof", *args], capture_output=True, text=True, timeout=120)


def test_cli_account_type_regexes_accounts():
    """#1: the flag accounts by op type (the real CLI would use it as a start-name regex)."""
    proc = _cli("scope", str(CNN), "--account_type_regexes", "_trainable_variables", "--select", "params", "--max_depth", "3")
    assert proc.returncode == 0, proc.stderr
    api = run_view(tfprof.load(profile_path=CNN), "scope", {"account_type_regexes": ["_trainable_variables"], "select": ["params"], "max_depth": 3})
    assert proc.stdout == api.text
    assert api.proto.total_parameters == golden_totals("cnn")["trainable"]["total_parameters"]
    start = _cli("scope", str(CNN), "--start_name_regexes", "resnet/block1.*", "--max_depth", "2")
    assert start.returncode == 0 and "  resnet/block1 (" in start.stdout


def test_node_counted_once():
    """#2: a variable matching two account regexes counts once in the op view."""
    prof = tfprof.load(profile_path=CNN)
    both = run_view(prof, "op", {"account_type_regexes": ["VariableV2", "_trainable_variables"], "select": ["params"], "max_depth": 100})
    one = run_view(prof, "op", {"account_type_regexes": ["VariableV2"], "select": ["params"], "max_depth": 100})
    assert both.root["total_parameters"] == one.root["total_parameters"]


def test_code_view_without_traces():
    prof = tfprof.load(profile_path=FIXTURES / "gpu_tiny" / "profile.pb")
    with pytest.raises(OptionError, match="code traces"):
        run_view(prof, "code", {})


def test_several_profiles_at_once():
    a = tfprof.load(profile_path=CNN)
    b = tfprof.load(profile_path=FIXTURES / "rnn" / "profile.pb")
    assert run_view(a, "op", {}).text != run_view(b, "op", {}).text
    assert run_view(a, "op", {}).text == run_view(tfprof.load(profile_path=CNN), "op", {}).text
