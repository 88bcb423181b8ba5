"""Build a directory (a store) in a temporary sibling and swap it in when complete; replace an
existing one only with ``force`` and only when the caller owns every file in it."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from tfprof import stopping
from tfprof.errors import OutputError
from tfprof.output.targets import Inputs, PathLike, check_target, temp_name


@contextlib.contextmanager
def new_directory(
    path: PathLike,
    *,
    force: bool = False,
    inputs: Inputs | None = None,
    owned: Callable[[Path], set[str] | None] = lambda p: None,
    what: str = "output directory",
    kind: str = "directory",
) -> Iterator[Path]:
    """Build a directory in a temporary sibling (yielded) and put it at ``path`` when the block
    ends normally; on any exception the temporary is removed and ``path`` is left as it was.

    An existing ``path`` needs ``force``, and then ``owned(path)`` must return the relative
    POSIX paths of the files in it that the caller wrote (None: it did not write that directory
    at all; ``kind`` names what it writes, e.g. "tfprof store"). Anything else in it is refused
    by name; only the owned files are deleted once the new directory is in place.
    """
    dest = check_directory(path, force=force, inputs=inputs, owned=owned, what=what, kind=kind)
    tmp = temp_name(dest)  # named first: removed below whenever it came to exist
    try:
        _mkdir(tmp)
        yield tmp
        stopping.check()  # a Ctrl-C or SIGTERM that native code swallowed: the old directory stays
        if dest.exists():
            files = _owned_files(dest, owned, kind)  # again: something may have been added meanwhile
            old = temp_name(dest.with_name(dest.name + ".old"))
            try:
                _mkdir(old)
                os.replace(dest, old / "previous")
                try:
                    os.replace(tmp, dest)
                except BaseException:
                    os.replace(old / "previous", dest)  # put the old one back
                    raise
            finally:
                while True:  # to the end, whatever signal arrives meanwhile (see files._undo)
                    try:
                        _remove_owned(old / "previous", files)
                        with contextlib.suppress(OSError):
                            old.rmdir()
                        break
                    except Exception:
                        raise
                    except BaseException:
                        continue
        else:
            os.replace(tmp, dest)
    except BaseException:
        while True:  # to the end, whatever signal arrives meanwhile (see files._undo)
            try:
                shutil.rmtree(tmp, ignore_errors=True)
                break
            except Exception:
                raise
            except BaseException:
                continue
        raise


def check_directory(
    path: PathLike,
    *,
    force: bool = False,
    inputs: Inputs | None = None,
    owned: Callable[[Path], set[str] | None] = lambda p: None,
    what: str = "output directory",
    kind: str = "directory",
) -> Path:
    """Raise ``OutputError`` unless ``new_directory`` may put a directory at ``path`` (the same
    arguments); callers use it to refuse before any work. Returns ``path`` as a ``Path``."""
    dest = check_target(path, force=True, inputs=inputs, what=what, directory=True)
    if dest.exists():
        _owned_files(dest, owned, kind)  # what --force could not replace either: said first
        check_target(dest, force=force, inputs=inputs, what=what, directory=True)
    return dest


def _mkdir(path: Path) -> None:
    """A new directory with the mode ``mkdir`` gives (0777 less the umask)."""
    try:
        os.mkdir(path, 0o777)
    except OSError as exc:
        raise OutputError(f"cannot write in `{path.parent}`: {exc.strerror or exc}") from None


def _owned_files(dest: Path, owned: Callable[[Path], set[str] | None], kind: str) -> set[str]:
    """The files of existing directory ``dest`` that may be deleted; OutputError naming the
    first that may not."""
    entries = sorted(_walk(dest))
    if not entries:
        return set()
    ours = owned(dest)
    if ours is None:
        raise OutputError(
            f"`{dest}` is a non-empty directory that is not a {kind}; tfprof will not delete its files: "
            "choose another output path"
        )
    dirs = {str(Path(f).parent.as_posix()) for f in ours}
    dirs |= {str(p.as_posix()) for f in ours for p in Path(f).parents}
    for rel, is_dir in entries:
        if (is_dir and rel not in dirs) or (not is_dir and rel not in ours):
            raise OutputError(
                f"`{dest / rel}` is not part of the {kind} `{dest}`; tfprof will not delete it: "
                "move it away or choose another output path"
            )
    return ours


def _walk(root: Path) -> Iterator[tuple[str, bool]]:
    """(relative POSIX path, is a directory) of everything below ``root``; a symbolic link is
    an entry of its own, never followed."""
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root)
        for d in list(dirs):
            full = Path(folder) / d
            if full.is_symlink():
                dirs.remove(d)
                yield (base / d).as_posix(), False
            else:
                yield (base / d).as_posix(), True
        for f in files:
            yield (base / f).as_posix(), False


def _remove_owned(root: Path, files: set[str]) -> None:
    """Delete ``files`` (relative paths) under ``root``, then the directories left empty."""
    if not root.exists():
        return
    for rel in files:
        with contextlib.suppress(OSError):
            (root / rel).unlink()
    for folder, _dirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):
            os.rmdir(folder)  # only if empty: anything we did not write stays
