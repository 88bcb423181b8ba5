"""Every file and store directory tfprof writes goes through here, so that no one's data is lost.

What this module promises (docs/SECURITY.md):

* An existing path is replaced only when the caller says ``force=True`` (the CLI's ``--force``);
  otherwise ``OutputError`` names the path and ``--force``, and nothing is written.
* An input of the command is never written over, not even with ``force``: the target is
  compared with every input by resolved path and by ``os.path.samefile`` (symbolic and hard
  links included); a path inside an input directory (a store) counts as an input, and so does a
  directory that holds an input; a checkpoint prefix stands for its ``.index`` and ``.data-*``.
* Data is written to a temporary sibling (``.<name>.<random>``, same directory, so the same file
  system) and renamed into place: a reader sees the old file or the new one, never half of one.
  Without ``force`` the file is placed by a hard link, which fails if the name was taken after
  the check. On any failure, ``KeyboardInterrupt`` and the CLI's termination signal included,
  the temporary is removed and the old file is untouched (the cleanup runs to its end even if
  the signal's exception is raised a second time meanwhile, see ``_undo``).
* A written file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask),
  a directory the mode of ``mkdir`` (0777 less the umask), not ``mkstemp``'s private 0600.
* Several files written together (a timeline's ``<outfile>_<step>``) are all checked before
  any is written, and renamed into place only once every one is complete.
* A directory (a store) is built in a temporary sibling directory and swapped in when complete.
  An existing directory is replaced only with ``force`` and only if the caller recognises every
  file in it as its own (``owned``); then only those files are deleted, never anything else.

This is a leaf: it imports nothing of tfprof but its errors.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Union

from tfprof.errors import OutputError

PathLike = Union[str, os.PathLike]
Data = Union[bytes, bytearray, memoryview, str]

_SHARD = re.compile(r"\.data-\d{5}-of-\d{5}$")


# --------------------------------------------------------------------------- inputs


class Inputs:
    """The paths an output must never land on: input files, input directories (a path inside
    one is an input too) and checkpoint prefixes (``P``, ``P.index``, ``P.data-*``)."""

    def __init__(self, paths: Iterable[PathLike] = (), prefixes: Iterable[PathLike] = ()) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self.prefixes = tuple(Path(p) for p in prefixes)

    def __add__(self, other: Inputs | None) -> Inputs:
        if other is None:
            return self
        return Inputs(self.paths + other.paths, self.prefixes + other.prefixes)

    def __bool__(self) -> bool:
        return bool(self.paths or self.prefixes)

    def __repr__(self) -> str:
        return f"Inputs({[str(p) for p in self.paths]}, prefixes={[str(p) for p in self.prefixes]})"

    def clash(self, target: PathLike, *, directory: bool = False) -> str | None:
        """Why ``target`` would overwrite an input (a phrase naming it), or None. With
        ``directory``, a target that contains an input clashes too."""
        t = _resolve(Path(target))
        for p in self.paths:
            r = _resolve(p)
            if t == r or _same_file(t, r):
                return f"is the input `{p}`" if str(p) != str(target) else "is an input of this command"
            if r.is_dir() and r in t.parents:
                return f"is inside the input directory `{p}`"
            if directory and t in r.parents:
                return f"holds the input `{p}`"
        for prefix in self.prefixes:
            r = _resolve(prefix)
            rest = t.name[len(r.name):] if t.name.startswith(r.name) else None
            if t.parent == r.parent and rest is not None and (rest in ("", ".index") or _SHARD.fullmatch(rest)):
                return f"is a file of the input checkpoint `{prefix}`"
            if directory and t in r.parents:
                return f"holds the input checkpoint `{prefix}`"
        return None


def input_paths(
    *,
    graph_path: object = None,
    run_meta_path: object = None,
    op_log_path: object = None,
    checkpoint_path: object = None,
    profile_path: object = None,
) -> Inputs:
    """The ``Inputs`` of a command given tfprof's input options (a run_meta_path may be a
    comma-separated string or a list; values that are not paths, such as protobuf messages or
    bytes given to the Python API, are skipped)."""
    paths: list[PathLike] = []
    for value in (graph_path, op_log_path, profile_path):
        if isinstance(value, (str, os.PathLike)) and str(value):
            paths.append(value)
    metas = run_meta_path
    if isinstance(metas, str):
        metas = [m for m in metas.split(",") if m]
    if isinstance(metas, os.PathLike):
        metas = [metas]
    if isinstance(metas, (list, tuple)):
        paths += [m for m in metas if isinstance(m, (str, os.PathLike)) and str(m)]
    prefixes = []
    if isinstance(checkpoint_path, (str, os.PathLike)) and str(checkpoint_path):
        prefixes.append(_checkpoint_prefix(str(checkpoint_path)))
    return Inputs(paths, prefixes)


def _checkpoint_prefix(path: str) -> str:
    """The prefix of a checkpoint given as the prefix, its ``.index`` or one ``.data-*`` shard."""
    if path.endswith(".index"):
        return path[: -len(".index")]
    match = _SHARD.search(path)
    return path[: match.start()] if match else path


def _resolve(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare as given
        return p.absolute()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


# --------------------------------------------------------------------------- checks


def check_target(
    path: PathLike, *, force: bool = False, inputs: Inputs | None = None, what: str = "output", directory: bool = False
) -> Path:
    """Raise ``OutputError`` unless ``path`` may be written: never an input; not an existing
    path unless ``force``; its directory must exist; a file target must not be a directory
    (a directory target must not be a file). Returns ``path`` as a ``Path``."""
    dest = Path(path)
    why = (inputs or Inputs()).clash(dest, directory=directory)
    if why:
        raise OutputError(f"`{dest}` {why}; tfprof never writes over its inputs: choose another {what}")
    parent = dest.absolute().parent
    if not parent.is_dir():
        raise OutputError(f"`{parent}` does not exist; create it first or choose another {what}")
    if directory:
        if dest.exists() and not dest.is_dir():
            raise OutputError(f"`{dest}` exists and is not a directory; choose another {what}")
    elif dest.is_dir():
        raise OutputError(f"`{dest}` is a directory; choose a file name for the {what}")
    if not force and (dest.exists() or dest.is_symlink()):
        raise OutputError(f"`{dest}` already exists; pass --force to replace it (Python: force=True)")
    return dest


# --------------------------------------------------------------------------- files


def _new_name(dest: Path) -> Path:
    """A fresh temporary name beside ``dest``: ``.<name>.<random>``."""
    return dest.absolute().parent / f".{dest.name}.{secrets.token_hex(4)}"


def _temp_file(dest: Path, temps: list[str]) -> None:
    """Create an empty temporary file beside ``dest`` and add its name to ``temps``. The name
    is listed before the file exists, so a signal that arrives while it is created cannot leave
    an unlisted file behind. Created with mode 0666 less the umask, as ``open()`` would."""
    parent = dest.absolute().parent
    while True:
        name = str(_new_name(dest))
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
    if isinstance(data, str):
        data = data.encode()
    with open(tmp, "wb") as f:
        f.write(data)


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
    """Write ``data`` (bytes, text as UTF-8, or a function returning either, called once the
    target is known to be writable) to ``path`` atomically; see the module docstring."""
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


# --------------------------------------------------------------------------- directories


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
    tmp = _new_name(dest)  # named first: removed below whenever it came to exist
    try:
        _mkdir(tmp)
        yield tmp
        if dest.exists():
            files = _owned_files(dest, owned, kind)  # again: something may have been added meanwhile
            old = _new_name(dest.with_name(dest.name + ".old"))
            try:
                _mkdir(old)
                os.replace(dest, old / "previous")
                try:
                    os.replace(tmp, dest)
                except BaseException:
                    os.replace(old / "previous", dest)  # put the old one back
                    raise
            finally:
                while True:  # to the end, whatever signal arrives meanwhile (see _undo)
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
        while True:  # to the end, whatever signal arrives meanwhile (see _undo)
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
