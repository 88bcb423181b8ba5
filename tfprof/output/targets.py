"""Whether a path may be written: never an input of the command (a file, a directory holding one, a
checkpoint's files), never an existing path without ``force``; and the temporary names beside it."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Union

from tfprof.errors import OutputError

PathLike = Union[str, os.PathLike]
Data = Union[bytes, bytearray, memoryview, str, Iterable[Union[bytes, str]]]  # an iterable: pieces written in turn

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
        ``directory``, a target that contains an input clashes too. Both sides are compared in
        each of their forms (``_forms``): as written, with the links on the way resolved, and
        with the link at the end followed, so neither a link to an input nor a link inside an
        input directory (``job/rank-1.json`` leading to a trace elsewhere) gets written."""
        targets = _forms(Path(target))
        for p in self.paths:
            for t in targets:
                for r in _forms(p):
                    if t == r or _same_file(t, r):
                        return f"is the input `{p}`" if str(p) != str(target) else "is an input of this command"
                    if r in t.parents and r.is_dir():
                        return f"is inside the input directory `{p}`"
                    if directory and t in r.parents:
                        return f"holds the input `{p}`"
        for prefix in self.prefixes:
            for t in targets:
                for r in _forms(prefix):
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


def _forms(p: Path) -> list[Path]:
    """``p`` as the file system may reach it: absolute as written (``..`` folded), with the links
    of its directories resolved (the entry a rename would replace, a link itself), and resolved
    whole (where a link at its end leads)."""
    written = Path(os.path.abspath(p))
    forms = [written, _resolve(written.parent) / written.name, _resolve(p)]
    return list(dict.fromkeys(forms))


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


def temp_name(dest: Path) -> Path:
    """A fresh temporary name beside ``dest``: ``.<name>.<random>``."""
    return dest.absolute().parent / f".{dest.name}.{secrets.token_hex(4)}"

