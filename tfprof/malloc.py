"""The C library's malloc, tuned for a process that is tfprof's own and trimmed after large
batches. Standard library only: the command line tunes it before it knows whether the command
needs pyarrow at all (tfprof/cli/__init__.py)."""

from __future__ import annotations

import sys


def _libc():
    """glibc (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - both must exist
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number
_MMAP_THRESHOLD = 4 << 20


_TUNED = False  # whether this process's malloc is tuned


def tune_malloc() -> None:
    """Have malloc serve every block of 4 MiB or more with its own mapping, unmapped when freed.
    By default glibc raises that threshold to the size of the largest block freed so far (up to
    32 MiB), after which a batch's columns come from the heap, and their memory stays with the
    process when they are dropped (about 15 MB more peak RSS for a 70k-node profile). A lower
    threshold saves a little more memory but costs more time in page faults.

    It changes malloc for the whole process, for good (glibc has no way back to its sliding
    threshold), so only a process that is tfprof's own calls it: the command line's ``main``
    (and so the resident server). A library user's process (a notebook, a script calling
    ``tfprof.save``) keeps its malloc as it was."""
    global _TUNED
    if _LIBC is not None and not _TUNED:
        _LIBC.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        _TUNED = True


def trim_memory() -> None:
    """Return the free memory malloc holds (in every thread's arena) to the system: batches
    decoded on several threads leave tens of MB there otherwise."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
