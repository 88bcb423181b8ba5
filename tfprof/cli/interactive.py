"""tfprof's interactive shell: ``tfprof <inputs>`` with no view command opens a ``tfprof>`` prompt.

The profile is loaded once; each line is a command (docs/TFPROF_BEHAVIOUR.md, 'Interactive shell'):

    scope|graph|op|code [-name value ...]   run a view; the options apply to this command only
                                            (-force: its -output may replace an existing file)
    set -name value ...                     change the options later commands start from
    advise                                  run the advisor
    help                                    commands and options with their current values
    quit | exit | Ctrl-D                    leave (exit code 0)
    (empty line)                            print the current options (tfprof's Options listing)

Options are spelled as on the command line (``-max_depth 3``, ``--max_depth=3``) and parsed by
the same ``parse_view_args``; a view prints exactly what the one-shot command prints. A bad line
prints one ``Error: ...`` line and the prompt comes back. On a terminal the stdlib ``readline``
gives line editing, history and tab completion; from a pipe, lines are read one by one with no
prompt (as tfprof's linenoise does), so scripts can drive the shell.

Where we differ from tfprof (docs/COMPATIBILITY.md row 8): a line of spaces is ignored (tfprof crashes), and
``quit``/``exit`` leave (tfprof has no such command).
"""

from __future__ import annotations

import os
import shlex
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from tfprof import stopping
from tfprof.api.options import ORDER_BY, OUTPUT_KINDS, SELECT_FIELDS, VIEWS, Options, unknown_value, view_help
from tfprof.cli.viewopts import BOOL_OPTIONS, FALSE, NAMES, TRUE, option_help, parse_view_args
from tfprof.errors import OptionError, TfprofError

PROMPT = "tfprof> "
# The shell's own commands; each view of the registry (``tfprof.api.options.VIEWS``) is one too.
OTHER_HELP = {
    "advise": "run the advisor's checks",
    "set": "set options for the commands that follow, e.g. set -max_depth 4 -select params",
    "help": "this text",
    "quit": "leave the shell (also exit, or Ctrl-D)",
}


def commands() -> tuple[str, ...]:
    """Every command: the views (registered ones included), then the shell's own."""
    return (*VIEWS, "advise", "set", "help", "quit", "exit")


def command_help() -> dict[str, str]:
    """Each command's line of ``help``: a view's own help (the first says what ``-force`` does)."""
    views = {cmd: view_help(spec) for cmd, spec in VIEWS.items()}
    if views:
        first = next(iter(views))
        views[first] += " (any view: -force lets -output replace a file)"
    return {**views, **OTHER_HELP}


# Where history is kept between sessions; TFPROF_HISTORY overrides it, and an empty value turns it off.
HISTORY_FILE = "~/.tfprof_history"
HISTORY_LENGTH = 1000

ViewRunner = Callable[..., None]  # (cmd, profile, options, *, force) -> None
FORCE_WORDS = ("-force", "--force")


# ------------------------------------------------------------------------------ rendering


def options_listing(opts: Options) -> str:
    """tfprof's Options listing (docs/TFPROF_BEHAVIOUR.md, 'Options listing'): one ``%-28s`` name
    column and the value, per option."""
    values = opts.to_tfprof()
    lines = []
    for name in NAMES:
        value = getattr(opts, name)
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif name == "output":
            text = str(value)  # tfprof prints `<type>:<k=v,...>`, so plain stdout is `stdout:`
        elif isinstance(values[name], list):
            text = ",".join(values[name])
        else:
            text = str(value)
        lines.append(f"{'-' + name:<28}{text}")
    return "\n".join(lines) + "\n"


def help_text(opts: Options) -> str:
    """The ``help`` command: every command and every option with its meaning and current value."""
    lines = ["Commands (options after a view command apply to that command only):"]
    lines += [f"  {cmd:<8}{text}" for cmd, text in command_help().items()]
    lines += ["  (empty line) print the current options", ""]
    lines.append("Options (-name value; lists comma-separated), with their current values:")
    current = options_listing(opts).splitlines()
    for name, line in zip(NAMES, current):
        value = line[28:] or "empty"
        lines.append(f"  -{name:<27}{option_help(name)} (now: {value})")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ completion


def completions(before: str, word: str) -> list[str]:
    """What tab completes ``word`` to, given the line ``before`` it.

    The first word is a command; a word starting with ``-`` is an option name; after
    ``-select``, ``-order_by``, ``-output`` and ``-account_displayed_op_only`` come their values.
    A finished word ends with a space, as Python's readline does not add one.
    """
    tokens = before.split()
    if not tokens:
        return [c + " " for c in commands() if c.startswith(word)]
    if tokens[0] not in (*VIEWS, "set"):
        return []
    if word.startswith("-"):
        dashes = "--" if word.startswith("--") else "-"
        return [dashes + n + " " for n in NAMES if (dashes + n).startswith(word)]
    previous = tokens[-1].lstrip("-") if tokens[-1].startswith("-") and "=" not in tokens[-1] else None
    if previous == "select":  # a comma-separated list: complete its last item, leave room for more
        head, comma, piece = word.rpartition(",")
        chosen = set(head.split(","))
        return [head + comma + f for f in SELECT_FIELDS if f.startswith(piece) and f not in chosen]
    if previous == "output":
        kinds = [k + ":" + ",".join(f"{key}=" for key in o.keys) if o.keys else k + " " for k, o in OUTPUT_KINDS.items()]
        return [k for k in kinds if k.startswith(word)]
    values = {"order_by": ORDER_BY, **{b: ("true", "false") for b in BOOL_OPTIONS}}.get(previous or "", ())
    return [v + " " for v in values if v.startswith(word)]


class _Completer:
    """readline's completer protocol (called with state 0, 1, ... until it returns None)."""

    def __init__(self, readline: Any) -> None:
        self.readline = readline
        self.matches: list[str] = []

    def __call__(self, text: str, state: int) -> str | None:
        if state == 0:
            before = self.readline.get_line_buffer()[: self.readline.get_begidx()]
            self.matches = completions(before, text)
        return self.matches[state] if state < len(self.matches) else None


# ------------------------------------------------------------------------------ the shell


class Shell:
    """The state of one session: the loaded profile and the persisted options."""

    def __init__(self, prof: Any, options: Options, run_view: ViewRunner, *, debug: bool = False) -> None:
        self.prof = prof
        self.options = options
        self.run_view = run_view
        self.debug = debug

    def execute(self, line: str) -> bool:
        """Run one line; False when the session should end. Errors propagate (``onecmd`` prints them)."""
        if line == "":
            _out(options_listing(self.options))
            return True
        try:
            tokens = _split(line)
        except ValueError as exc:  # shlex: an unclosed quote
            raise OptionError(f"Cannot read the line: {exc}") from None
        if not tokens:  # only spaces (tfprof crashes here; we ignore the line)
            return True
        cmd, args = tokens[0], tokens[1:]
        if cmd not in commands():
            raise OptionError(unknown_value("command", cmd, commands()))
        if cmd in ("quit", "exit"):
            return False
        if cmd == "help":
            _out(help_text(self.options))
        elif cmd == "advise":
            self.advise(args)
        else:
            # -force (or --force) after a view command lets its -output replace an existing file
            force = cmd != "set" and any(a in FORCE_WORDS for a in args)
            if force:
                args = [a for a in args if a not in FORCE_WORDS]
            opts, rest = parse_view_args(args, base=self.options)
            if rest:
                raise OptionError(f"Unexpected argument `{rest[0]}`; options look like -max_depth 3")
            if opts.unknown_select:  # tfprof's shell refuses what its one-shot report only notes
                from tfprof.api.options import SELECT_FIELDS

                raise OptionError(unknown_value("select field", opts.unknown_select[0], SELECT_FIELDS))
            if cmd == "set":
                from tfprof.api import check_step

                check_step(self.prof, opts.step)
                self.options = opts
            else:
                self.run_view(cmd, self.prof, opts, force=force)
        return True

    def advise(self, args: list[str]) -> None:
        if args:
            raise OptionError(f"advise takes no options in the shell, not `{args[0]}`; "
                              "for --checkers and --checker_dir run `tfprof advise` from the command line")
        from tfprof.api import advise, print_notes

        result = advise(self.prof)  # every built-in checker with its defaults, as tfprof's shell
        print_notes(result)
        _out(result.text)

    def onecmd(self, line: str) -> bool:
        """``execute`` with errors printed as one line; the shell goes on after any error."""
        try:
            return self.execute(line)
        except TfprofError as exc:
            _err(f"Error: {exc}")
        except BrokenPipeError:  # the reader went away (| head): the command line ends quietly
            raise
        except Exception as exc:  # a bug in tfprof: report it and keep the session
            stopping.check()  # a Ctrl-C that landed in compiled code comes out as its SystemError: a stop
            if self.debug:
                traceback.print_exc()
            else:
                _err(f"Internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)")
        return True

    def loop(self, stdin: TextIO | None = None) -> int:
        """Read and run lines until quit, exit or end of input; returns the exit code (0)."""
        stdin = stdin or sys.stdin
        tty = stdin.isatty() and stdin is sys.stdin
        if tty:
            history = _setup_readline()
            _out("tfprof interactive shell: `help` lists the commands and options, Ctrl-D leaves.\n")
        try:
            while True:
                try:
                    line = _read_line(stdin, tty)
                    if line is None:
                        if tty:
                            _out("\n")
                        return 0
                    if line.lstrip().startswith("#"):  # a comment, for scripts
                        continue
                    if not self.onecmd(line):
                        return 0
                except KeyboardInterrupt:  # Ctrl-C abandons the line (or the running command)
                    stopping.clear()
                    # One Ctrl-C during a polars query raises twice (tfprof.output.files._undo): the
                    # second must not end the session.
                    while True:
                        try:
                            _out("\n")
                            break
                        except KeyboardInterrupt:
                            continue
        finally:
            if tty:
                _save_history(history)


def _split(line: str) -> list[str]:
    """Words of a line: spaces separate, quotes group; backslashes stay (they belong to regexes)."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    return list(lexer)


def _read_line(stdin: TextIO, tty: bool) -> str | None:
    """The next line without its newline, or None at end of input."""
    if tty:
        try:
            return input(PROMPT)
        except EOFError:
            return None
    line = stdin.readline()
    if not line:
        return None
    return line.rstrip("\r\n")


def _setup_readline() -> Path | None:
    """Line editing, completion and history through the stdlib readline; the history file if usable."""
    try:
        import readline
    except ImportError:  # e.g. Windows without pyreadline: plain input() still works
        return None
    readline.set_completer(_Completer(readline))
    readline.set_completer_delims(" \t\n")
    if "libedit" in (readline.__doc__ or ""):
        readline.parse_and_bind("bind ^I rl_complete")
    else:
        readline.parse_and_bind("tab: complete")
    readline.set_history_length(HISTORY_LENGTH)
    name = os.environ.get("TFPROF_HISTORY", HISTORY_FILE)
    if not name:
        return None
    path = Path(name).expanduser()
    try:
        readline.read_history_file(path)
    except (OSError, ValueError):  # absent, unreadable or not a history file: start empty
        pass
    return path


def _save_history(path: Path | None) -> None:
    if path is None:
        return
    try:
        import readline

        readline.write_history_file(path)
    except (ImportError, OSError):  # a read-only home must not break leaving the shell
        pass


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _err(text: str) -> None:
    sys.stdout.flush()
    print(text, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ command line


def split_root_args(args: list[str], commands: set[str]) -> tuple[list[str], list[str]]:
    """Prepare ``tfprof`` arguments that name no command (the shell) for typer.

    Returns the arguments for typer and the view options to start the shell with. A lone
    positional that is not a command and looks like a path becomes ``--profile_path PATH``
    (``tfprof run.pb``); view options (``--max_depth 4``) are taken out, as tfprof's flags set
    the shell's first options. When a command is named, the arguments are returned unchanged.
    """
    takes_value = {"--graph_path", "--run_meta_path", "--op_log_path", "--checkpoint_path", "--profile_path"}
    takes_value |= {a.replace("_", "-") for a in takes_value}
    out: list[str] = []
    view: list[str] = []
    positional: list[int] = []  # where the positionals are in `out`
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--" or a in commands:
            return args, []
        if not a.startswith("-"):
            positional.append(len(out))
            out.append(a)
            i += 1
            continue
        name = a.lstrip("-").partition("=")[0].replace("-", "_")
        if a in takes_value and i + 1 < len(args):
            out += args[i : i + 2]
            i += 2
        elif name in NAMES:
            end = i + 1
            if "=" not in a:
                nxt = args[end] if end < len(args) else None
                if name not in BOOL_OPTIONS or (nxt is not None and nxt.lower() in TRUE | FALSE):
                    end += 1
            view += args[i:end]
            i = end
        else:
            out.append(a)
            i += 1
    given = any(a.partition("=")[0] in ("--profile_path", "--profile-path") for a in out)
    if len(positional) == 1 and not given:
        j = positional[0]
        p = out[j]
        if os.path.exists(p) or os.sep in p or "." in p:
            out[j : j + 1] = ["--profile_path", p]
    return out, view


def initial_options(tokens: list[str]) -> Options:
    """The shell's first options: view options given with the inputs, on top of the CLI defaults."""
    options, rest = parse_view_args(tokens)
    if rest:
        raise OptionError(f"Unexpected argument `{rest[0]}`; options look like --max_depth 3")
    return options


def run_shell(prof: Any, options: Options, run_view: ViewRunner, *, debug: bool = False) -> int:
    """Run the shell on ``prof`` starting from ``options``; returns the exit code."""
    from tfprof.api import check_step

    check_step(prof, options.step)
    return Shell(prof, options, run_view, debug=debug).loop()
