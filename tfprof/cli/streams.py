"""stdout and stderr while a command runs (``guarded_streams``).

stdout: a write or flush that fails (a full disk, a closed descriptor) raises ``StdoutError``, one
line and exit code 2, never a success with the output lost; a broken pipe (``| head``) passes as
it is, and the command ends quietly. stderr: a URL's credentials are masked (no secret given in a
URL is shown) and control characters escaped, so a file name holding an escape sequence or a
newline cannot reach the terminal raw or split an ``Error:`` line; what cannot be written is
dropped (the exit code still tells). A progress bar, which
draws with escape sequences on purpose, writes to ``unguarded(sys.stderr)``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator

from tfprof.errors import OutputError, TfprofError, masked, printable


class StdoutError(OutputError):
    """stdout cannot be written (a full disk, a closed descriptor); not a broken pipe."""


class _Stdout:
    """``sys.stdout`` (or its ``buffer``) during a command: a write or flush that fails raises
    ``StdoutError`` (a ``TfprofError``: one line, exit code 2); ``BrokenPipeError`` passes as it is."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def _do(self, method: str, *args):
        try:
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            if isinstance(exc, TfprofError):
                raise
            why = "it is closed" if exc.errno == errno.EBADF else exc.strerror or str(exc)
            raise StdoutError(f"cannot write the output to stdout: {why}; send it to a file or device that "
                              "can take it (or use the command's output file option)") from None

    def write(self, data):
        return self._do("write", data)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._do("flush")

    @property
    def buffer(self):
        return _Stdout(self._stream.buffer)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _Closed:
    """A standard stream whose descriptor was closed (Python then makes ``sys.stdout`` None, and
    ``print`` would drop the output silently): writing anything fails as a closed descriptor does."""

    encoding, errors, closed = "utf-8", "strict", False

    def write(self, data) -> int:
        if data:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        return 0

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    @property
    def buffer(self):
        return self


class _Stderr:
    """``sys.stderr`` during a command: control characters are escaped (an ``Error:`` or
    ``Warning:`` line is kept on one line: its newlines too), and what cannot be written is
    dropped, as when stderr is closed: the exit code still tells."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        shown = masked(text)  # a URL's credentials: never shown (tfprof.errors.masked)
        if shown.startswith(("Error:", "Warning:", "Internal error:")):
            shown = printable(shown.removesuffix("\n")) + "\n" * shown.endswith("\n")
        else:
            shown = "\n".join(printable(part) for part in shown.split("\n"))
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self._stream.write(shown)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self._stream.flush()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_streams() -> Iterator[None]:
    """stdout and stderr guarded as ``_Stdout`` and ``_Stderr`` meanwhile (a closed one as
    ``_Closed``); afterwards what stdout still holds is flushed, or dropped if it cannot be, so
    that Python's own flush at exit cannot fail after the exit code is decided."""
    stdout, stderr = sys.stdout, sys.stderr
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stdout.flush()
    sys.stdout = _Stdout(stdout if stdout is not None else _Closed())
    sys.stderr = _Stderr(stderr if stderr is not None else _Closed())
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
        except OSError:
            drop_stdout()
        sys.stdout, sys.stderr = stdout, stderr


def drop_stdout() -> None:
    """Point stdout's descriptor at /dev/null, so that what its buffer holds goes nowhere (a
    broken pipe, a full disk) instead of failing again when Python flushes it at exit."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's capture): nothing to flush at exit
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


def unguarded(stream):
    """The stream under a guard of ``guarded_streams`` (``stream`` itself when not guarded)."""
    return getattr(stream, "_stream", stream)
