"""Profiles in: load tfprof's inputs into a ``Profile``, ingest them into a store (with the
indexes views read), and warm numba's cache for either.
"""

from __future__ import annotations

import os
from pathlib import Path

from tfprof import kernels
from tfprof.ingest import Progress, add_checkpoint, iter_inputs, merge_batches
from tfprof.ingest.foreign import kind as foreign_kind
from tfprof.output import Inputs, PathLike, check_directory, input_paths
from tfprof.profile import Profile
from tfprof.store import INDEX_SUFFIX, INDEXES_DIR, read_manifest, store_files, trim_memory, write_ipc, write_store


def load(
    profile_path: PathLike | None = None,
    *,
    graph_path: PathLike | None = None,
    run_meta_path: PathLike | list[PathLike] | None = None,
    op_log_path: PathLike | None = None,
    checkpoint_path: PathLike | None = None,
    progress: Progress | None = None,
) -> Profile:
    """A profile from tfprof's inputs: a ProfileProto file or a store directory
    (``profile_path``), or a GraphDef, RunMetadata files, an op log and a checkpoint; a store
    may take a checkpoint too.

    >>> import tfprof
    >>> tfprof.load(tfprof.sample_path()).row_counts()["steps"]
    1
    """
    given = input_paths(graph_path=graph_path, run_meta_path=run_meta_path, op_log_path=op_log_path,
                        checkpoint_path=checkpoint_path, profile_path=profile_path)
    if isinstance(profile_path, (str, os.PathLike)) and profile_path and Path(profile_path).is_dir():
        prof = Profile.open(profile_path)
        if checkpoint_path:
            from tfprof.ingest.checkpoint import read_checkpoint

            # marked as variables only if the store was built from a graph, as tfprof does
            tables = add_checkpoint(
                prof.tables(), read_checkpoint(checkpoint_path), mark_types=prof.source == "run_metadata"
            )
            prof = Profile(tables, source=prof.source)
        prof.inputs = given
        return prof
    batches = iter_inputs(
        graph_path=graph_path,
        run_meta_path=run_meta_path,
        op_log_path=op_log_path,
        checkpoint_path=checkpoint_path,
        profile_path=profile_path,
        progress=progress,
    )
    with kernels.using(kernels.use_kernels(file_bytes=_input_bytes(profile_path))):
        tables = merge_batches(list(batches))
    prof = Profile(tables, source=profile_source(profile_path))
    prof.inputs = given
    return prof


def profile_source(profile_path) -> str:
    """What the profile was read from: ``run_metadata`` (a graph and step stats), ``profile`` (a
    ProfileProto), or a foreign format (``kineto``, ``xspace``: tfprof.ingest.foreign)."""
    if not profile_path:
        return "run_metadata"
    return foreign_kind(profile_path) or "profile"


def _input_bytes(profile_path) -> int | None:
    """The size of a ProfileProto input (None: not a file; bytes in memory count as small)."""
    if isinstance(profile_path, (bytes, bytearray, memoryview)):
        return len(profile_path)
    if isinstance(profile_path, (str, os.PathLike)) and profile_path:
        try:
            return os.path.getsize(profile_path)
        except OSError:
            return None  # ingest says what is wrong with it
    return None


def save(prof: Profile, path: PathLike, *, force: bool = False) -> Path:
    """Write ``prof`` as a store at ``path``, with its indexes. An existing ``path`` is replaced
    (atomically) only with ``force``, and only if it is a tfprof store holding nothing else;
    the files the profile was read from are never written over."""
    return write_store(path, [prof.tables()], source=prof.source, indexes=write_indexes, force=force,
                       inputs=prof.inputs)


def ingest_to_store(
    out: PathLike, *, progress: Progress | None = None, force: bool = False, inputs: Inputs | None = None, **given
) -> tuple[Path, dict[str, int]]:
    """Ingest tfprof inputs (``given``: graph_path=..., profile_path=...) straight into a store,
    batch by batch; returns (path, row counts). ``force`` and ``inputs`` (more paths never to
    write over; the given inputs always are) as in ``write_store``."""
    protect = input_paths(**given) + inputs
    # refused before any input is read
    check_directory(out, force=force, inputs=protect, owned=store_files, what="--out", kind="tfprof store")
    src = given.get("profile_path")
    if src and Path(src).is_dir():
        prof = load(**given)
        batches, source = [prof.tables()], prof.source
    else:
        batches = iter_inputs(**given, progress=progress)
        source = profile_source(src)
    dest = write_store(out, batches, source=source, indexes=write_indexes, force=force, inputs=protect)
    return dest, read_manifest(dest)["tables"]


# Below this many rows of the tables the indexes read most, they are built on two threads at
# once; above, one after the other (each then has all the memory: a 7M-node profile's code trie
# alone needs a few GB).
_PARALLEL_INDEX_ROWS = 20_000_000


def write_indexes(
    folder: Path, source: str, counts: dict[str, int], written_file=lambda path: None
) -> dict[str, list[str]]:
    """Build the indexes of the tables just written to ``folder`` and save them under
    ``indexes/<name>/<part>.arrow`` (Arrow IPC), calling ``written_file`` with each file as it
    is closed; returns the manifest entry (index name → parts).

    Each index is written and let go as soon as it is built. A small profile's are built on two
    threads (their kernels release the GIL): the code trie on one, the others on the other.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tfprof.queries.indexes import INDEXES

    prof = Profile(store=folder, source=source)

    def build(names: list[str]) -> dict[str, list[str]]:
        written = {}
        for name in names:
            parts = INDEXES[name](prof)
            if parts is None:
                continue
            (folder / INDEXES_DIR / name).mkdir(parents=True)
            for part, table in parts.items():
                write_ipc(folder / INDEXES_DIR / name / f"{part}{INDEX_SUFFIX}", table)
                written_file(folder / INDEXES_DIR / name / f"{part}{INDEX_SUFFIX}")
            written[name] = list(parts)
            del parts, table  # one index per thread in memory at a time
            trim_memory()
        return written

    if sum(counts.get(t, 0) for t in ("nodes", "execs", "memory", "code_frames")) > _PARALLEL_INDEX_ROWS:
        done = build(list(INDEXES))
    else:
        with ThreadPoolExecutor(2, thread_name_prefix="tfprof-index") as pool:
            jobs = [pool.submit(build, ["code_trie"]), pool.submit(build, [n for n in INDEXES if n != "code_trie"])]
            done = {}
            for job in jobs:
                done.update(job.result())
    return {name: done[name] for name in INDEXES if name in done}


def warm_up(*, ingest: bool = False) -> None:
    """Load the views' compiled kernels from numba's cache: numba's start in a process (about
    0.3 s, then a few milliseconds per kernel), paid here once instead of by the first view.
    With ``ingest``, also the decoder's and the indexes' kernels (``_warm_up_ingest``)."""
    import polars as pl

    from tfprof.queries import code, forest, graph
    from tfprof.schema import METRICS
    from tfprof.views.columns import tree_text

    if ingest:
        _warm_up_ingest()
    forest.warm_up()
    graph.warm_up()
    code.warm_up()
    one = pl.DataFrame(
        {"name": ["x"], "level": [0], "accounted": [True], **{c: [1] for m in METRICS for c in (m, "total_" + m)}}
    )
    tree_text(one, ["micros"], code=True)


def _warm_up_ingest() -> None:
    """Load the compiled kernels an ingest runs (the decoder's and the indexes') from numba's
    cache, by ingesting the bundled sample profile in memory: numba's start in a process takes
    about 0.3 s, then a few milliseconds per kernel."""
    from tfprof.queries.indexes import INDEXES
    from tfprof.samples import sample_path

    prof = load(profile_path=sample_path())
    for build in INDEXES.values():
        build(prof)
