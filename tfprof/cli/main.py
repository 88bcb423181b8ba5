"""The ``tfprof`` command line's entry point: runs a command of ``tfprof.cli.commands`` and maps
what ends it to an exit code and one line on stderr.

Errors the user can fix (``TfprofError``, bad usage) print one ``Error: ...`` line and exit with
code 2; ``--debug`` shows the traceback instead. Ctrl-C exits with 130, SIGTERM with 143, each
after what was being written is removed. Anything else is a bug: exit code 1.

While a command runs, stdout and stderr are guarded (``tfprof.cli.streams``): output that
cannot be written (a full disk, a closed stdout) is an error, exit code 2, never a success with
the output lost; a broken pipe (``| head``) ends the command quietly.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

import typer

import tfprof.cli.commands  # noqa: F401 - registers the commands on the app
import tfprof.cli.diff_command  # noqa: F401 - and `tfprof diff`
import tfprof.cli.memory_command  # noqa: F401 - and `tfprof memory`
import tfprof.cli.overview_command  # noqa: F401 - and `tfprof overview`
import tfprof.cli.ranks_command  # noqa: F401 - and `tfprof ranks`
import tfprof.cli.server_command  # noqa: F401 - and `tfprof server`
import tfprof.cli.steps_command  # noqa: F401 - and `tfprof steps`
import tfprof.cli.ui_command  # noqa: F401 - and `tfprof ui`
from tfprof import stopping
from tfprof.cli.app import PLUGIN_ERRORS, STORES, app
from tfprof.cli.streams import StdoutError, drop_stdout, guarded_streams
from tfprof.errors import TfprofError, printable


def _normalise_args(args: list[str]) -> list[str]:
    """tfprof spells options with one dash (-max_depth); typer wants two.

    Any one-dash word of two letters or more is taken as an option name, so that a misspelt
    one (-max_dpth) is reported as unknown instead of being read as short flags (-m -a ... -h).
    """
    import re

    out = []
    for a in args:
        if a.startswith("-") and not a.startswith("--") and re.fullmatch(r"[A-Za-z]\w+", a[1:].partition("=")[0]):
            a = "-" + a
        out.append(a)
    return out



class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives, so that what is being written is removed
    (``finally`` blocks and ``except BaseException`` cleanups run) before the exit with 143. Not
    an ``Exception``: nothing that handles errors may swallow it."""



@contextlib.contextmanager
def _signals() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` meanwhile (SIGINT already raises KeyboardInterrupt, which
    the interactive shell uses to abandon a line). A second SIGTERM ends the process at once.
    The previous handler is restored afterwards (``main`` is also called in-process by tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        stopping.request(Terminated)  # raised again where outputs commit, if native code swallows it
        raise Terminated

    def interrupt(signum, frame):
        stopping.request(KeyboardInterrupt)
        raise KeyboardInterrupt

    def unraisable(info):
        # A stop raised where native code calls back into Python (polars asking a dtype class,
        # a ctypes callback) cannot propagate: Python would print "Exception ignored in ..."
        # with a traceback. The handler noted the stop, and it is raised again where outputs
        # commit, so it is not news to the user.
        if not (isinstance(info.exc_value, (KeyboardInterrupt, Terminated)) and stopping.pending()):
            hook(info)

    previous = signal.signal(signal.SIGTERM, terminate), signal.signal(signal.SIGINT, interrupt)
    hook, sys.unraisablehook = sys.unraisablehook, unraisable
    stopping.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
        sys.unraisablehook = hook



@contextlib.contextmanager
def _warning_lines() -> Iterator[None]:
    """tfprof's own warnings (``TfprofWarning``: a catalog's run skipped) as one ``Warning:`` line
    each on stderr, the same line said once per command; other warnings as Python shows them."""
    import warnings

    from tfprof.errors import TfprofWarning

    said: set[str] = set()
    show = warnings.showwarning

    def one_line(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, TfprofWarning):
            return show(message, category, filename, lineno, file, line)
        text = f"Warning: {printable(str(message))}"
        if text not in said:
            said.add(text)
            print(text, file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always", TfprofWarning)
        warnings.showwarning = one_line
        yield


def _invoke(args: list[str], shell_options: list[str]) -> int:
    """Run the command. Not through ``app(...)``: typer's main loop turns KeyboardInterrupt
    into ``Exit(130)`` and, with standalone_mode=False, returns 130 as the command's value, so
    an interrupted command looked like a success (exit status 0, no message). Here the
    interrupt reaches ``main``, and an explicit ``typer.Exit`` gives its own code."""
    from tfprof.schema.bounds import bound_command

    command = bound_command(typer.main.get_command(app))  # every integer option within its range
    try:
        with command.make_context("tfprof", list(args), obj={"shell_options": shell_options}) as ctx:
            command.invoke(ctx)
    except typer.Exit as exc:
        return exc.exit_code
    return 0



def main(argv: list[str] | None = None) -> int:
    """Console entry point: runs the app and maps errors to exit codes (2: an error the user
    can fix; 130: interrupted, SIGINT; 143: terminated, SIGTERM; 1: a bug)."""
    args = _normalise_args(sys.argv[1:] if argv is None else argv)
    from tfprof.cli.resident import cwd_error

    if problem := cwd_error():  # relative paths, and temporaries beside outputs, would fail later
        print(printable(problem), file=sys.stderr)
        return 2
    if PLUGIN_ERRORS:  # TFPROF_PLUGINS names a module that does not import: nothing runs without it
        print(f"Error: {printable(PLUGIN_ERRORS[0])}", file=sys.stderr)
        return 2
    STORES.clear()
    from tfprof.malloc import tune_malloc

    tune_malloc()  # process-wide: only here, in a process that is tfprof's own
    said: list[str] = []
    with _signals(), guarded_streams(), _warning_lines():
        try:
            code = _main(args, said)
            stopping.check()  # a stop that native code swallowed: the command did not end as asked
            return code
        # One Ctrl-C can raise twice (tfprof.output.files._undo): the second may come while the
        # first is being reported.
        except KeyboardInterrupt:
            stopping.clear()
            return _stopped("Interrupted.", 130, said)
        except Terminated:
            stopping.clear()
            return _stopped("Terminated.", 143, said)


def _stopped(message: str, code: int, said: list[str]) -> int:
    """Say ``message`` on stderr unless it was said already; returns ``code``."""
    if not said:
        print(message, file=sys.stderr, flush=True)
        said.append(message)
    return code



def _main(args: list[str], said: list[str]) -> int:
    debug = "--debug" in args
    try:
        from tfprof.cli.interactive import split_root_args

        args, shell_options = split_root_args(args, set(typer.main.get_command(app).commands))
        code = _invoke(args, shell_options)
        sys.stdout.flush()  # here, so that output that cannot be written is an error, not exit 0
        return code
    except StdoutError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        drop_stdout()
        return 2
    except TfprofError as exc:
        if debug:
            return _traceback(2)
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    except typer.Abort:  # a prompt's EOF
        print("Aborted.", file=sys.stderr)
        return 130
    except typer.TyperException as exc:  # typer's (vendored click) usage errors
        if debug:
            return _traceback(2)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        print(f"Error: {printable(message)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return _stopped("Interrupted.", 130, said)
    except Terminated:
        return _stopped("Terminated.", 143, said)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        drop_stdout()
        return 0
    except Exception as exc:  # a bug, or a damaged store that only failed when decoded
        # a Ctrl-C (or SIGTERM) that landed while a compiled kernel returned comes out as a
        # SystemError with the stop inside: it is the stop, not a bug
        stopping.check()
        if debug:
            return _traceback(1)
        damage = _damaged_store()
        if damage is not None:
            print(f"Error: {damage}", file=sys.stderr)
            return 2
        print(f"Internal error: {type(exc).__name__}: {printable(str(exc))} (run with --debug for the traceback)",
              file=sys.stderr)
        return 1



def _traceback(code: int) -> int:
    """``--debug``: the traceback of the error being handled, on stderr while it is still the
    guarded stream (``tfprof.cli.streams``: credentials in a URL masked), then ``code``."""
    import traceback

    print(traceback.format_exc(), end="", file=sys.stderr)
    return code


def _damaged_store() -> TfprofError | None:
    """After an unexpected failure: the damage found in a store the command read (checksums
    and decoding, ``verify_store``), if any. Opening a store checks only its files' sizes, so
    bytes changed in place surface as a decoding error somewhere inside a query."""
    from tfprof.store import verify_store

    for store in STORES:
        try:
            verify_store(store, checksums=True)
        except TfprofError as exc:
            return exc
        except Exception:  # a check that cannot run says nothing about the store
            continue
    return None



if __name__ == "__main__":
    sys.exit(main())

