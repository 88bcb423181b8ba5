"""A stop the user asked for (Ctrl-C, SIGTERM) that must not be lost.

The command line's signal handlers raise ``KeyboardInterrupt`` or ``Terminated`` in the main
thread. When the signal lands while native code is calling back into Python (numba writing its
cache through an llvmlite ctypes callback, polars' Rust asking a dtype class), the exception
is swallowed there (the command line keeps Python's "Exception ignored" report quiet for it),
and the command would go on to finish and replace its output as if nothing happened. So the
handlers also note the stop here, and the places that commit an output (``tfprof.output``'s
renames) and the command line's end call ``check``: a noted stop is raised again there, its
cleanups run, and the exit status is the signal's. Whoever handles the stop ``clear``s it.
"""

from __future__ import annotations

_PENDING: list[type[BaseException]] = []


def request(stop: type[BaseException]) -> None:
    """Note that ``stop`` (``KeyboardInterrupt``, the CLI's ``Terminated``) was asked for."""
    _PENDING[:] = [stop]


def clear() -> None:
    """The stop was handled (reported, or a shell abandoned its line)."""
    _PENDING.clear()


def pending() -> bool:
    """Whether a stop was asked for and not yet handled."""
    return bool(_PENDING)


def check() -> None:
    """Raise the stop asked for and not yet handled, if any."""
    if _PENDING:
        raise _PENDING[0]()
