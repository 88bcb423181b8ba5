"""Ingest: every tfprof input turned into the tables of ``tfprof.schema``.

``iter_inputs`` is the one entry point. It takes the inputs as tfprof's command line names them
(``graph_path``, ``run_meta_path``, ``op_log_path``, ``checkpoint_path``, ``profile_path``) and
yields the tables (``dict[str, pyarrow.Table]``) in batches of nodes, so that a writer can stream
them to disk; ``merge_batches`` joins the batches into whole tables.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tfprof import kernels
from tfprof.errors import OptionError, ProfileFormatError
from tfprof.ingest import foreign, profile_proto, raw, sources, validate
from tfprof.ingest.sources import in_memory, said_if_rewritten
from tfprof.output.scratch import scratch_file
from tfprof.schema import NODE_TABLES, TABLES
from tfprof.schema.conform import conform

Progress = Callable[[int, int, str], None]
"""Progress callback: (done, total, what)."""

PathLike = str | os.PathLike



def split_paths(value: PathLike | list[PathLike] | tuple[PathLike, ...] | None) -> list:
    """``a,b,c`` (tfprof's spelling of several run_meta files) or a list, as a list of paths;
    inputs given in memory (bytes, messages) are kept as they are."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v if in_memory(v) else os.fspath(v) for v in value]
    if in_memory(value):
        return [value]
    return [p for p in os.fspath(value).split(",") if p]


def check_combination(*, graph_path, run_meta_path, op_log_path, profile_path) -> None:
    """tfprof's rule: a profile file already holds graph and run metadata."""
    if profile_path and (graph_path or run_meta_path or op_log_path):
        raise OptionError(
            "--profile_path is set, do not set --graph_path, --run_meta_path or --op_log_path "
            "(a ProfileProto already holds them)"
        )
    if not (profile_path or graph_path or run_meta_path):
        raise OptionError(
            "no input given: pass --profile_path FILE, or --graph_path FILE with optional "
            "--run_meta_path a,b,c and --op_log_path FILE"
        )


def merge_batches(batches: list[dict[str, pa.Table]]) -> dict[str, pa.Table]:
    """Concatenate batches from ``iter_inputs`` into one table each."""
    out: dict[str, pa.Table] = {}
    for name in TABLES:
        parts = [b[name] for b in batches if name in b]
        if not parts:  # a table no batch carries (e.g. a foreign profile's tables, for tfprof's inputs)
            out[name] = TABLES[name].schema.empty_table()
            continue
        out[name] = pa.concat_tables(parts).combine_chunks() if len(parts) > 1 else parts[0]
    return out


def iter_inputs(
    *,
    graph_path: PathLike | None = None,
    run_meta_path: PathLike | list[PathLike] | None = None,
    op_log_path: PathLike | None = None,
    checkpoint_path: PathLike | None = None,
    profile_path: PathLike | None = None,
    progress: Progress | None = None,
) -> Iterator[dict[str, pa.Table]]:
    """The profile's tables in batches: per-node tables in node-id ranges, then the rest.

    Every batch is a dict of conforming tables; concatenating the batches of each table in
    order gives the whole, sorted table. The last batch holds the whole-profile tables
    (steps, devices, info, checkpoint_tensors).
    """
    run_metas = split_paths(run_meta_path)
    check_combination(
        graph_path=graph_path, run_meta_path=run_metas, op_log_path=op_log_path, profile_path=profile_path
    )
    try:
        ckpt = _read_checkpoint(checkpoint_path) if checkpoint_path else None
        ckpt_names = ckpt.column("name") if ckpt is not None else None
        if profile_path:
            yield from _iter_profile(profile_path, ckpt, progress)
            return
        tables = _raw_tables(graph_path, run_metas, op_log_path, ckpt_names, progress)
    except ProfileFormatError as exc:
        raise said_if_rewritten(exc, [profile_path, graph_path, *run_metas, op_log_path]) from None
    if ckpt is not None:
        tables["checkpoint_tensors"] = ckpt
    yield tables


def _read_checkpoint(path: PathLike) -> pa.Table:
    from tfprof.ingest.checkpoint import read_checkpoint

    return read_checkpoint(path)


def _raw_tables(graph_path, run_metas, op_log_path, ckpt_names, progress) -> dict[str, pa.Table]:
    total = 1 + len(run_metas)
    prof = raw.RawProfile()
    # tfprof's order
    # (docs/TFPROF_BEHAVIOUR.md, 'Command-line flags'): graph, op log, checkpoint names, then one step per file.
    if graph_path:
        prof.add_graph(raw.read_graph(graph_path))
    if op_log_path:
        prof.add_op_log(raw.read_op_log(op_log_path))
    if ckpt_names is not None:
        prof.add_checkpoint_names(ckpt_names.to_pylist())
    if progress:
        progress(1, total, "graph")
    for step, path in enumerate(run_metas):
        prof.add_run_meta(step, raw.read_run_meta(path))
        if progress:
            progress(step + 2, total, f"step {step}")
    return validate.validated(prof.tables(), prof.findings, unique_names=True)


def _iter_profile(path, ckpt, progress) -> Iterator[dict[str, pa.Table]]:
    what = None if in_memory(path) else foreign.kind(path)
    if what is not None:  # a Kineto trace or an XSpace: read whole (docs/FOREIGN.md)
        tables = foreign.read(path, what, progress)
        yield {**tables, "checkpoint_tensors": ckpt} if ckpt is not None else tables
        return
    checks = validate.Validator()  # checks and clamps each batch; the validation table comes last
    batches = _profile_batches(path if in_memory(path) else Path(path), progress, checks)
    final: dict[str, pa.Table] | None = None
    for batch in batches:
        if "info" in batch:
            final = batch
            continue
        # No `_checkpoint_variables` types here: tfprof adds them only when it builds the
        # profile from a graph; opened from a ProfileProto with a checkpoint, it keeps the
        # values for `tensor_value` but never marks the nodes.
        yield checks.batch(batch)
    assert final is not None
    final = checks.batch(final)
    final["validation"] = checks.finish(final)
    if ckpt is not None:
        final = {**final, "checkpoint_tensors": ckpt}
    yield final


def _profile_batches(path: Path, progress, checks: validate.Validator | None = None) -> Iterator[dict[str, pa.Table]]:
    """Per-node batches then one batch of whole-profile tables, from the fastest decoder
    (which gives ``checks`` every node name at once)."""
    wire = None  # the reference decoder: without kernels (tfprof.kernels), or without the compiled one
    if kernels.enabled():
        with contextlib.suppress(ImportError):
            from tfprof.ingest import wire
    if wire is not None and in_memory(path):
        batches = _memory_profile_batches(path, progress, checks)
        if batches is not None:
            yield from batches
            return
    if wire is None or in_memory(path):
        tables = profile_proto.tables_from_message(profile_proto.parse_profile(path))
        yield {k: tables[k] for k in NODE_TABLES if k != "allocator_memory"}
        yield {k: v for k, v in tables.items() if k not in NODE_TABLES or k == "allocator_memory"}
        return
    reader = wire.ProfileReader(path)
    if checks is not None and reader.index is not None:
        checks.all_names(reader.index.names, reader.index.keys)  # once, before the decoding threads start
    # No index when the top level needs protobuf (the reader falls back to the reference decoder).
    total, done = max(reader.index.num_nodes if reader.index is not None else 1, 1), 0
    for batch in reader.batches():
        done += batch["nodes"].num_rows
        if progress:
            progress(min(done, total), total, "nodes")
        yield batch
    yield reader.profile_tables()


def _memory_profile_batches(source, progress, checks=None) -> list[dict[str, pa.Table]] | None:
    """A ProfileProto given in memory, through the compiled decoder (which reads files: the
    bytes go to a temporary file; 50x faster than the reference decoder on large profiles).
    None when the bytes are damaged: the reference decoder then says how, naming the input as
    given in memory rather than the temporary file."""
    data = sources.read_bytes(source, "profile")
    with scratch_file("profile.pb", data) as path:
        try:
            return list(_profile_batches(path, progress, checks))
        except ProfileFormatError:
            return None


def _with_checkpoint_types(nodes: pa.Table, node_types: pa.Table, ckpt_names: pa.Array) -> pa.Table:
    """node_types plus `_checkpoint_variables` for nodes named like a checkpoint tensor
    (docs/TFPROF_BEHAVIOUR.md, 'Ingesting a checkpoint')."""
    hit = nodes.filter(pc.is_in(nodes.column("name"), value_set=pc.cast(ckpt_names, pa.string())))
    if hit.num_rows == 0:
        return node_types
    extra = pa.table(
        {
            "node_id": hit.column("node_id"),
            "op_type": pa.array(["_checkpoint_variables"] * hit.num_rows, pa.string()),
        }
    )
    both = pa.concat_tables([node_types.cast(pa.schema([("node_id", pa.int64()), ("op_type", pa.string())])), extra])
    both = both.group_by(["node_id", "op_type"], use_threads=False).aggregate([])
    return conform("node_types", both)


def add_checkpoint(tables: dict[str, pa.Table], ckpt: pa.Table, *, mark_types: bool = True) -> dict[str, pa.Table]:
    """Tables with a checkpoint's tensors, and with ``mark_types`` their `_checkpoint_variables`
    types (tfprof marks them only for profiles it builds from a graph)."""
    out = dict(tables)
    if mark_types:
        out["node_types"] = _with_checkpoint_types(tables["nodes"], tables["node_types"], ckpt.column("name"))
    out["checkpoint_tensors"] = ckpt
    return out
