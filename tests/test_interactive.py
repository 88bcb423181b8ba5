"""The interactive shell as a user drives it: the console script on a pseudo-terminal, and from a pipe.

Every wait on the terminal has a deadline, so a shell that hangs fails the test instead of blocking.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

import tfprof.api
from tfprof.api import run_view
from tfprof.cli.interactive import completions, options_listing, split_root_args
from tfprof.queries.options import SELECT_FIELDS, Options

ROOT = Path(__file__).resolve().parent.parent
PROFILE = FIXTURES / "cnn" / "profile.pb"
PROMPT = "tfprof> "
TIMEOUT = 90  # seconds for any one wait (the first includes starting Python and loading the profile)
UP = "\x1b[A"


def _command() -> list[str]:
    """The installed console script when there is one, else the module."""
    script = Path(sys.executable).parent / "tfprof"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tfprof"]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, TERM="dumb", TFPROF_HISTORY="")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


# A session leader that opens its terminal makes it its controlling terminal, so Ctrl-C typed
# there becomes SIGINT; then it becomes the console script.
_LAUNCH = "import os, sys; os.close(os.open(os.ttyname(0), os.O_RDWR)); os.execv(sys.argv[1], sys.argv[1:])"


class Terminal:
    """``tfprof ARGS`` on a pseudo-terminal: type keys, read what the screen shows."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.fd, child = os.openpty()
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))  # no wrapping
        cmd = _command()
        if cmd[0] == sys.executable:
            cmd = [sys.executable, *cmd]  # execv needs the program path first
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, *cmd, *args],
            stdin=child, stdout=child, stderr=child, env=env or _env(), start_new_session=True, cwd=ROOT,
        )
        os.close(child)
        self.buffer = ""

    def send(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def expect(self, text: str) -> str:
        """Everything up to and including ``text`` (consumed), with the terminal's CR LF as LF."""
        deadline = time.monotonic() + TIMEOUT
        while text not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no {text!r} on the terminal after {TIMEOUT}s; it shows:\n{self.buffer[-2000:]}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    pytest.fail(f"the shell ended before showing {text!r}; it shows:\n{self.buffer[-2000:]}")
                self.buffer += chunk.decode(errors="replace").replace("\r\n", "\n")
        head, _, self.buffer = self.buffer.partition(text)
        return head + text

    def command(self, line: str) -> str:
        """Type ``line`` and Enter; what it printed before the next prompt."""
        self.send(line + "\r")
        self.expect("\n")  # the echoed line
        return self.expect(PROMPT)[: -len(PROMPT)]

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the shell did not exit; it shows:\n{self.buffer[-2000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.fd)


@pytest.fixture
def term():
    t = Terminal(str(PROFILE))
    t.expect(PROMPT)
    yield t
    t.close()


@pytest.fixture(scope="module")
def prof():
    return tfprof.load(profile_path=PROFILE)


def _listing(**changes) -> str:
    return options_listing(Options().with_(**changes))


def test_set_persists_and_views_print_what_run_view_prints(term, prof):
    assert term.command("set -max_depth 3 -account_type_regexes VariableV2") == ""
    out = term.command("scope -select params --order_by=params")
    expected = run_view(prof, "scope", {"max_depth": 3, "account_type_regexes": ["VariableV2"], "select": ["params"],
                                        "order_by": "params"})
    assert out == expected.text
    assert "node name | # parameters" in out
    out = term.command("op -select micros,occurrence -order_by micros -max_depth 5")
    opts = {"max_depth": 5, "account_type_regexes": ["VariableV2"], "select": ["micros", "occurrence"], "order_by": "micros"}
    assert out == run_view(prof, "op", opts).text
    # the view's own options were for that command only
    assert term.command("") == _listing(max_depth=3, account_type_regexes=["VariableV2"])
    term.send("\x04")
    assert term.wait() == 0


def test_empty_line_prints_the_options_as_tfprof_lays_them_out(term):
    term.command("set -select params,bytes -hide_name_regexes save.*,init.* -account_displayed_op_only")
    assert term.command("") == (
        "-max_depth                  10\n"
        "-min_bytes                  0\n"
        "-min_peak_bytes             0\n"
        "-min_residual_bytes         0\n"
        "-min_output_bytes           0\n"
        "-min_micros                 0\n"
        "-min_accelerator_micros     0\n"
        "-min_cpu_micros             0\n"
        "-min_params                 0\n"
        "-min_float_ops              0\n"
        "-min_occurrence             0\n"
        "-step                       -1\n"
        "-order_by                   name\n"
        "-account_type_regexes       .*\n"
        "-start_name_regexes         .*\n"
        "-trim_name_regexes          \n"
        "-show_name_regexes          .*\n"
        "-hide_name_regexes          save.*,init.*\n"
        "-account_displayed_op_only  true\n"
        "-select                     bytes,params\n"
        "-output                     stdout:\n"
    )


def test_help_lists_every_command_and_option_with_its_value(term):
    term.command("set -max_depth 7 -order_by micros")
    out = term.command("help")
    for cmd in ("scope", "graph", "op", "code", "advise", "set", "help", "quit"):
        assert f"\n  {cmd} " in out, cmd
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  -")}
    assert list(lines) == ["-" + name for name in Options().to_tfprof()]
    assert lines["-max_depth"].endswith("(now: 7)")
    assert lines["-order_by"].endswith("(now: micros)")
    assert lines["-trim_name_regexes"].endswith("(now: empty)")


def test_tab_completes_commands_and_option_names(term, prof):
    term.send("sc\t")
    term.expect("scope ")
    term.send("-max_d\t")
    term.expect("-max_depth ")
    term.send("2 -sel\t")
    term.expect("-select ")
    out = term.command("par\t")
    assert out == run_view(prof, "scope", {"max_depth": 2, "select": ["params"]}).text


def test_bad_lines_print_one_error_and_the_prompt_returns(term, prof):
    for line, needle in [
        ("scpoe -max_depth 3", "Unknown command `scpoe`"),
        ("scope -max_dpth 3", "(did you mean `max_depth`?)"),
        ("set -hide_name_regexes (", "Bad regex `(`"),
        ("scope -max_depth x", "takes an integer"),
        ("set -step 5", "available steps: 0"),
        ("op -select microsecs", "did you mean `micros`"),
        ("scope -output nowhere", "Unknown -output type `nowhere`"),
        ("graph -max_depth", "needs a value"),
    ]:
        out = term.command(line)
        assert out.startswith("Error: ") and out.count("\n") == 1 and needle in out, (line, out)
    # nothing above changed the options, and the shell still runs views
    assert term.command("") == _listing()
    assert term.command("graph -max_depth 2") == run_view(prof, "graph", {"max_depth": 2}).text


def test_errors_use_the_one_shot_commands_words(tmp_path):
    lines = ["scope -max_dpth 3", "scope -step 5", "scope -hide_name_regexes (", "scope -output file:outfile=/no/such/x"]
    shell = subprocess.run([*_command(), str(PROFILE)], input="\n".join(lines), capture_output=True, text=True,
                           env=_env(), timeout=TIMEOUT)
    assert shell.returncode == 0 and shell.stdout == ""
    errors = shell.stderr.splitlines()
    assert len(errors) == len(lines)
    for line, error in zip(lines, errors):
        one_shot = subprocess.run([*_command(), *line.split(), str(PROFILE)], capture_output=True, text=True,
                                  env=_env(), timeout=TIMEOUT)
        assert one_shot.returncode == 2
        assert one_shot.stderr == error + "\n"


def test_ctrl_c_abandons_the_line_and_ctrl_d_leaves_with_0():
    t = Terminal("--profile_path", str(PROFILE))
    try:
        t.expect(PROMPT)
        t.send("scope -max_depth 1")
        t.expect("-max_depth 1")
        # CPython's readline notices a signal only while it waits in select(); one that lands while
        # it is still redrawing the echo waits for the next key. A user never types that fast.
        time.sleep(0.5)
        t.send("\x03")
        t.expect(PROMPT)
        assert t.command("") == _listing()  # the abandoned line did not run, the shell goes on
        t.send("\x04")
        assert t.wait() == 0
    finally:
        t.close()


def test_history_recalls_lines_and_is_kept_in_a_file(tmp_path, prof):
    history = tmp_path / "history"
    t = Terminal(str(PROFILE), env=_env(TFPROF_HISTORY=str(history)))
    try:
        t.expect(PROMPT)
        first = t.command("scope -max_depth 1 -select params")
        assert first == run_view(prof, "scope", {"max_depth": 1, "select": ["params"]}).text
        assert t.command(UP) == first
        t.send("quit\r")
        assert t.wait() == 0
    finally:
        t.close()
    assert history.read_text().splitlines()[-2:] == ["scope -max_depth 1 -select params", "quit"]


def test_an_unwritable_history_file_is_no_error(tmp_path):
    t = Terminal(str(PROFILE), env=_env(TFPROF_HISTORY=str(tmp_path / "no" / "such" / "dir" / "history")))
    try:
        t.expect(PROMPT)
        assert t.command("set -max_depth 2") == ""
        t.send("exit\r")
        assert t.wait() == 0
        assert "rror" not in t.buffer
    finally:
        t.close()


def test_piped_commands_run_line_by_line(tmp_path, prof):
    out_file = tmp_path / "scope.txt"
    script = "\n".join([
        "# a comment",
        "set -max_depth 4 -select params",
        "",
        "   ",
        f"scope -output file:outfile={out_file}",
        "op -order_by params",
        "bogus",
        "code",
        "quit",
        "scope",  # after quit: not run
    ]) + "\n"
    proc = subprocess.run([*_command(), str(PROFILE), "-max_depth", "2"], input=script, capture_output=True,
                          text=True, env=_env(), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    opts = {"max_depth": 4, "select": ["params"]}
    code = run_view(prof, "code", opts).text
    assert proc.stdout == _listing(**opts) + run_view(prof, "op", {**opts, "order_by": "params"}).text + code
    assert out_file.read_text() == run_view(prof, "scope", opts).text
    assert proc.stderr.splitlines() == [
        "Error: Unknown command `bogus`; valid: scope, graph, op, code, advise, set, help, quit, exit"
    ]


def test_shell_starts_with_the_options_given_beside_the_inputs():
    proc = subprocess.run([*_command(), "--profile_path", str(PROFILE), "--max_depth=3", "-select", "bytes",
                           "--account_displayed_op_only"], input="\n", capture_output=True, text=True, env=_env(),
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == _listing(max_depth=3, select=["bytes"], account_displayed_op_only=True)


def test_empty_input_ends_the_shell_cleanly():
    proc = subprocess.run([*_command(), str(PROFILE)], input="", capture_output=True, text=True, env=_env(),
                          timeout=TIMEOUT)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_advise_prints_what_the_advisor_returns(prof):
    proc = subprocess.run([*_command(), str(PROFILE)], input="advise\nadvise -checkers x\n", capture_output=True,
                          text=True, env=_env(), timeout=TIMEOUT)
    assert proc.returncode == 0
    result = tfprof.api.advise(prof)
    assert "ExpensiveOperationChecker:" in result.text
    assert proc.stdout == result.text
    errors = proc.stderr.splitlines()
    assert errors[:-1] == result.notes
    assert errors[-1].startswith("Error: advise takes no options in the shell")


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        ([], 0, "Usage"),  # nothing: help
        (["--max_depth", "3"], 2, "view options need a profile"),
        (["--profile_path", str(PROFILE), "scope"], 2, "give the inputs after the command"),
        (["no_such_file.pb"], 2, "no_such_file.pb"),
        (["scpoe", str(PROFILE)], 2, "No such command"),
    ],
)
def test_command_line_without_a_view(args, code, needle):
    proc = subprocess.run([*_command(), *args], input="", capture_output=True, text=True, env=_env(), timeout=TIMEOUT)
    assert proc.returncode == code, proc.stderr
    assert needle in proc.stdout + proc.stderr


def test_completions():
    assert completions("", "sc") == ["scope "]
    assert completions("", "") == [c + " " for c in ("scope", "graph", "op", "code", "advise", "set", "help",
                                                     "quit", "exit")]
    assert completions("scope ", "-min_p") == ["-min_peak_bytes ", "-min_params "]
    assert completions("set -max_depth 3 ", "--acc") == ["--account_type_regexes ", "--account_displayed_op_only "]
    assert completions("op -order_by ", "mi") == ["micros "]
    assert completions("op -select ", "params,mi") == ["params,micros"]
    assert completions("op -select ", "micros,") == ["micros," + f for f in SELECT_FIELDS if f != "micros"]
    assert completions("code -output ", "f") == ["file:outfile=", "folded:outfile="]
    assert completions("scope -account_displayed_op_only ", "") == ["true ", "false "]
    assert completions("help ", "-") == []


def test_split_root_args():
    commands = {"scope", "tables"}
    assert split_root_args(["scope", "p.pb", "--max_depth", "3"], commands) == (["scope", "p.pb", "--max_depth", "3"], [])
    assert split_root_args(["p.pb", "--max_depth", "3", "--debug"], commands) == (
        ["--profile_path", "p.pb", "--debug"], ["--max_depth", "3"])
    assert split_root_args(["--graph_path", "g", "--account_displayed_op_only", "--select=params"], commands) == (
        ["--graph_path", "g"], ["--account_displayed_op_only", "--select=params"])
    assert split_root_args(["--account_displayed_op_only", "false", "run"], commands) == (
        ["run"], ["--account_displayed_op_only", "false"])  # not a path: typer says no such command
    assert split_root_args(["--profile_path", "a.pb", "b.pb"], commands) == (["--profile_path", "a.pb", "b.pb"], [])
