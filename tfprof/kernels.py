"""Which engine a command runs on: numba's compiled kernels, or the reference paths that need none.

A fresh install has no compiled kernels: numba compiles each one on its first call, 20 to 30
seconds for all of them, before the first answer. So until they are in numba's cache, a command
on a small profile runs on the reference paths (protobuf's decoder, the polars/DuckDB reference
backend, the polars line writer: the same bytes, tests hold them equal) and starts one
background process that compiles every kernel into the cache (``tfprof.api.warm``). Large
profiles always run on the kernels: there they pay for their compilation many times over.

``TFPROF_ENGINE`` overrides the choice: ``kernels`` or ``reference`` for every command, ``auto``
(the default) as above. The cache is known to be complete by a marker file that the background
process writes last, named after everything that invalidates numba's cache: the numba and
Python versions and the package's source files (size and modification time). What the
background process prints (nothing, unless it fails) is in ``tfprof-kernels.log`` beside it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

ENGINES = ("auto", "kernels", "reference")
# Profiles up to this many nodes run on the reference paths while the kernels are not compiled:
# a view of a 20k-node, 5-step ProfileProto (23 MB) takes 2.3-3.5 s there as a whole process,
# against 40-90 s for compiling the kernels first (2 cores).
SMALL_NODES = 20_000
# A ProfileProto file up to this size is decoded by protobuf meanwhile: such a profile's size.
SMALL_FILE_BYTES = 32 << 20
_PACKAGE = Path(__file__).resolve().parent
_STALE_LOCK_S = 900  # a warming process older than this is taken for dead


_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("tfprof_kernels", default=True)


def enabled() -> bool:
    """Whether code that has a kernel and a kernel-free way should take the kernel (the api
    decides per command with ``using``; the default is yes)."""
    return _ENABLED.get()


@contextlib.contextmanager
def using(kernels: bool):
    """Within the block, ``enabled()`` is ``kernels``."""
    token = _ENABLED.set(kernels)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def engine_setting() -> str:
    value = os.environ.get("TFPROF_ENGINE", "auto").strip().lower() or "auto"
    if value not in ENGINES:
        from tfprof.errors import OptionError

        raise OptionError(f"TFPROF_ENGINE=`{value}` is not an engine; valid: {', '.join(ENGINES)}")
    return value


def cache_dir() -> Path:
    """Where the marker lives: numba's own cache directory when one is set, else beside the
    package's compiled files when writable, else the user's cache."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    here = _PACKAGE / "__pycache__"
    if os.access(_PACKAGE, os.W_OK) and (not here.exists() or os.access(here, os.W_OK)):
        return here
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tfprof"


@functools.cache
def _versions() -> str:
    from importlib.metadata import version  # ~10 ms: once per process

    return f"{version('numba')} {sys.version} {sys.platform}"


def _key() -> str:
    digest = hashlib.sha256(_versions().encode())
    for path in sorted(_PACKAGE.rglob("*.py")):
        st = path.stat()
        digest.update(f"{path.relative_to(_PACKAGE)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def marker() -> Path:
    return cache_dir() / f"tfprof-kernels-{_key()}.ready"


_READY = False  # the marker was seen: it stays so for the rest of the process


def kernels_ready() -> bool:
    """Whether the background compilation finished for this install (the marker exists)."""
    global _READY
    _READY = _READY or marker().exists()
    return _READY


def use_kernels(nodes: int | None = None, file_bytes: int | None = None) -> bool:
    """Whether to run on the kernels, for a profile of ``nodes`` nodes (or a file of
    ``file_bytes`` bytes). In ``auto`` with a cold cache and a small profile: no, and the
    background compilation is started."""
    setting = engine_setting()
    if setting != "auto":
        return setting == "kernels"
    large = (nodes is not None and nodes > SMALL_NODES) or (file_bytes is not None and file_bytes > SMALL_FILE_BYTES)
    if large or kernels_ready():
        return True
    compile_in_background()
    return False


def compile_in_background() -> bool:
    """Start ``python -m tfprof.api.warm`` detached, unless one is running; True if started."""
    lock = cache_dir() / "tfprof-kernels.warming"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        if lock.exists() and time.time() - lock.stat().st_mtime < _STALE_LOCK_S:
            return False
        lock.write_text(str(os.getpid()))
    except OSError:
        return False  # no place for the marker: the kernels compile where they are first used
    env = {**os.environ, "TFPROF_ENGINE": "kernels", "TFPROF_WARM_LOCK": str(lock)}
    # What it prints (nothing, unless it fails) goes to a log of its own beside the marker.
    with open(lock.with_name("tfprof-kernels.log"), "wb") as log:
        subprocess.Popen(  # noqa: S603 - our own module, by the running interpreter
            [sys.executable, "-m", "tfprof.api.warm"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env=env, close_fds=True,
        )
    return True


def compiled(fn):
    """``fn`` compiled by numba (cached on disk, no GIL), the first time it is asked for: a plain
    Python function stays importable without numba's start, and its reference run is ``fn``
    itself. Use as ``compiled(fn)(...)``."""
    done = _COMPILED.get(fn)
    if done is None:
        from numba import njit

        done = _COMPILED[fn] = njit(cache=True, nogil=True)(fn)
    return done


_COMPILED: dict = {}
