"""Scratch files in the temporary directory (``TMPDIR``): a reader's intermediate bytes, removed
when it is done, a signal included. A temporary directory that is full, missing or not writable
is one ``OutputError`` naming it and saying what to do, not an ``OSError`` from deep inside."""

from __future__ import annotations

import contextlib
import errno
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tfprof.errors import OutputError


def _unusable(exc: OSError, folder: str) -> OutputError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutputError(f"the temporary directory `{folder}` is full ({exc.strerror}); free space there or set "
                           "TMPDIR to a directory with room")
    return OutputError(f"cannot write in the temporary directory `{folder}` ({exc.strerror or exc}); set TMPDIR "
                       "to a writable directory")


@contextlib.contextmanager
def scratch_file(name: str, data, *, prefix: str = "tfprof-") -> Iterator[Path]:
    """``data`` (bytes or a buffer) written to ``name`` in a new directory under the temporary
    directory, for the block; the directory is removed afterwards."""
    folder = tempfile.gettempdir()
    try:
        made = tempfile.TemporaryDirectory(prefix=prefix)
    except OSError as exc:
        raise _unusable(exc, folder) from None
    with made as tmp:
        path = Path(tmp) / name
        try:
            with open(path, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise _unusable(exc, folder) from None
        yield path
