"""Write files atomically: each to a temporary sibling, renamed into place once every file of the
output is complete; on any failure (signals included) no temporary and no new target is left."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from tfprof import stopping
from tfprof.errors import OutputError
from tfprof.output.targets import Data, Inputs, PathLike, check_target, temp_name


def _temp_file(dest: Path, temps: list[str]) -> None:
    """Create an empty temporary file beside ``dest`` and add its name to ``temps``. The name
    is listed before the file exists, so a signal that arrives while it is created cannot leave
    an unlisted file behind. Created with mode 0666 less the umask, as ``open()`` would."""
    parent = dest.absolute().parent
    while True:
        name = str(temp_name(dest))
        temps.append(name)
        try:
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return
        except FileExistsError:
            temps.pop()
        except OSError as exc:
            temps.pop()
            raise OutputError(f"cannot write in `{parent}`: {exc.strerror or exc}") from None


def _fill(tmp: str, data: Data | Callable[[], Data]) -> None:
    if callable(data):
        data = data()
    pieces = [data] if isinstance(data, (bytes, bytearray, memoryview, str)) else data
    with open(tmp, "wb") as f:
        for piece in pieces:  # a long text as it is made, one piece in memory at a time
            f.write(piece.encode() if isinstance(piece, str) else piece)


def _place(tmp: str, dest: Path, force: bool) -> None:
    """Rename ``tmp`` to ``dest``. Without ``force`` a hard link makes the file, which fails if
    ``dest`` appeared since it was checked (a rename would replace it silently); where links are
    not supported, the check is repeated just before the rename."""
    if not force:
        try:
            os.link(tmp, dest)
        except FileExistsError:
            raise OutputError(f"`{dest}` already exists; pass --force to replace it (Python: force=True)") from None
        except OSError:  # no hard links on this file system
            if dest.exists() or dest.is_symlink():
                raise OutputError(
                    f"`{dest}` already exists; pass --force to replace it (Python: force=True)"
                ) from None
        else:
            os.unlink(tmp)
            return
    os.replace(tmp, dest)


def write_file(
    path: PathLike, data: Data | Callable[[], Data], *, force: bool = False, inputs: Inputs | None = None,
    what: str = "output",
) -> Path:
    """Write ``data`` (bytes, text as UTF-8, an iterable of such pieces, or a function returning
    any of them, called once the target is known to be writable) to ``path`` atomically; see the
    module docstring."""
    return write_files({path: data}, force=force, inputs=inputs, what=what)[0]


def write_files(
    files: Mapping[PathLike, Data | Callable[[], Data]], *, force: bool = False, inputs: Inputs | None = None,
    what: str = "output",
) -> list[Path]:
    """Write several files as one output: every target is checked before anything is written,
    each is written to its temporary (a function value is called only then, so one file's data
    can be made while the previous one is on disk), and they are renamed into place once all
    are complete. On failure no temporary is left, and no target that did not exist before."""
    dests = [check_target(p, force=force, inputs=inputs, what=what) for p in files]
    temps: list[str] = []
    placed: list[tuple[Path, bool]] = []
    try:
        for dest, data in zip(dests, files.values()):
            _temp_file(dest, temps)
            _fill(temps[-1], data)
        stopping.check()  # a Ctrl-C or SIGTERM that native code swallowed: nothing is placed
        for dest, tmp in zip(dests, temps):
            existed = dest.exists() or dest.is_symlink()
            _place(tmp, dest, force)
            placed.append((dest, existed))
    except BaseException as exc:
        while True:  # to the end, whatever signal arrives meanwhile (see _undo)
            try:
                _undo(temps, placed)
                break
            except Exception:
                raise
            except BaseException:
                continue
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            failed = dests[len(placed)] if len(placed) < len(dests) else dests[-1]
            raise OutputError(f"cannot write `{failed}`: {exc.strerror or exc}") from None
        raise
    return dests


def _undo(temps: list[str], placed: list[tuple[Path, bool]]) -> None:
    """Remove the temporaries, and the targets placed that did not exist before.

    Callers run this in a loop that starts it again on KeyboardInterrupt (or the CLI's
    ``Terminated``), written out in the ``except`` block itself: any function call there could
    be where the exception arrives. One Ctrl-C can raise twice: a polars query raises it, then
    Python's own handler raises it again at the next call, which would otherwise cut the
    cleanup short and leave temporaries behind. Every step is idempotent.
    """
    for tmp in temps:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    for dest, existed in placed:  # every file or none, as far as it can be undone
        if not existed:
            with contextlib.suppress(OSError):
                dest.unlink()

