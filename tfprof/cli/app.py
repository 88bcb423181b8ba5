"""The ``tfprof`` application and what its commands share: tfprof's input options, loading a
profile (with the validation warning), the inputs no output may overwrite, and writing rows.

The commands are in ``tfprof.cli.commands``; ``tfprof.cli.main`` runs them and maps errors to
exit codes.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="tfprof",
    help="Analyse TensorFlow profiles (tfprof's inputs and views, over Arrow tables, polars and DuckDB).",
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


GraphPath = Annotated[
    Optional[Path], typer.Option("--graph_path", "--graph-path", help="GraphDef file, text (.pbtxt) or binary.")
]


RunMetaPath = Annotated[
    Optional[str],
    typer.Option("--run_meta_path", "--run-meta-path", help="RunMetadata files, comma-separated: file i is step i."),
]


OpLogPath = Annotated[
    Optional[Path],
    typer.Option("--op_log_path", "--op-log-path", help="OpLogProto file (op types, float_ops, code traces)."),
]


CheckpointPath = Annotated[
    Optional[str], typer.Option("--checkpoint_path", "--checkpoint-path", help="Checkpoint prefix (V2 bundle).")
]


ProfilePath = Annotated[
    Optional[Path],
    typer.Option("--profile_path", "--profile-path", help="ProfileProto file, or a store directory made by `ingest`."),
]


PathArgument = Annotated[
    Optional[Path],
    typer.Argument(metavar="PROFILE", help="Store directory or ProfileProto file (same as --profile_path)."),
]


INPUT_OPTIONS = {
    "graph_path": GraphPath,
    "run_meta_path": RunMetaPath,
    "op_log_path": OpLogPath,
    "checkpoint_path": CheckpointPath,
    "profile_path": ProfilePath,
}


JobArgument = Annotated[
    Optional[list[str]],
    typer.Argument(metavar="PROFILE...", help="Store directory or ProfileProto file (same as --profile_path); with "
                   "--catalog also a distributed job's traces, a rank each: their directory, the files (a shell "
                   "glob) or a glob pattern (quoted).", show_default=False),
]


def takes_inputs(path: bool = True, job: bool = False):
    """Give a command tfprof's input options (and, with ``path``, a positional PROFILE) and
    pass them to it merged into one ``inputs`` dict, ready for ``load_profile(**inputs)``. With
    ``job`` the positional takes several paths too, and the command a ``job`` argument: the
    paths where they name a job's traces (more than one, or a glob pattern), else None."""

    def wrap(fn):
        sig = inspect.signature(fn, eval_str=True)  # typer reads the Annotated options off the signature
        own = [p for p in sig.parameters.values() if p.name not in ("inputs", "job")]
        kw = inspect.Parameter.KEYWORD_ONLY
        positional = JobArgument if job else PathArgument
        added = [inspect.Parameter("path", kw, default=None, annotation=positional)] if path else []
        added += [inspect.Parameter(name, kw, default=None, annotation=a) for name, a in INPUT_OPTIONS.items()]

        @functools.wraps(fn)
        def command(*args, **kwargs):
            given = {name: kwargs.pop(name) for name in INPUT_OPTIONS}
            given_path = kwargs.pop("path", None)
            if job:
                kwargs["job"], given_path = job_paths(given_path or [], given)
            return fn(*args, inputs=cli_inputs(given_path, **given), **kwargs)

        command.__signature__ = sig.replace(parameters=own + added)
        return command

    return wrap


def progress_bar():
    """A progress callback drawing a bar on stderr when it is a terminal, else None."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import Progress

    from tfprof.cli.streams import unguarded

    # the bar draws with escape sequences: on the terminal itself, not through the guard that escapes them
    bar = Progress(transient=True, console=Console(file=unguarded(sys.stderr), stderr=True))
    state: dict = {}

    def update(done: int, total: int, what: str) -> None:
        if "task" not in state:
            bar.start()
            state["task"] = bar.add_task("ingesting", total=total)
        bar.update(state["task"], completed=done, total=total, description=f"ingesting {what}")
        if done >= total:
            bar.stop()

    return update


_SQL_WORDS = ("select", "with", "from", "describe", "show", "summarize", "explain", "pivot", "table")


def job_paths(paths: list[str], given: dict) -> tuple[list[str] | None, Path | None]:
    """(a job's traces, or None; the one profile path, or None) of the positional paths
    ``paths``: several paths, or one glob pattern, are a job's traces, which go alone (no input
    option beside them) and must exist (``require_paths``)."""
    import glob

    if len(paths) <= 1 and not any(glob.has_magic(p) for p in paths):
        return None, Path(paths[0]) if paths else None
    if any(v is not None for v in given.values()):
        raise typer.BadParameter("several PROFILE paths (or a glob pattern) are a job's traces: give them without "
                                 "--profile_path, --graph_path and the other input options")
    require_paths(paths)
    return paths, None


def cli_inputs(path, graph_path, run_meta_path, op_log_path, checkpoint_path, profile_path) -> dict:
    if path is not None:
        if profile_path is not None:
            raise typer.BadParameter("give the profile either as PATH or as --profile_path, not both")
        from tfprof.catalog.uri import object_uri

        if object_uri(path):  # a catalog in object storage (tfprof check s3://BUCKET/PREFIX)
            path = object_uri(path)
        elif not Path(path).exists():
            from tfprof.errors import InputNotFoundError

            words = str(path).split()
            if len(words) > 1 and words[0].lower() in _SQL_WORDS:  # `tfprof sql PROFILE QUERY`
                raise InputNotFoundError(f"`{' '.join(words)[:60]}` is not a profile but reads like a SQL query: "
                                         "the query comes first, `tfprof sql \"QUERY\" PROFILE`")
            raise InputNotFoundError(f"`{path}` does not exist (the PROFILE argument); check the path")
        profile_path = path
    return dict(
        graph_path=graph_path,
        run_meta_path=run_meta_path,
        op_log_path=op_log_path,
        checkpoint_path=checkpoint_path,
        profile_path=profile_path,
    )


_INPUT_FLAGS = {"profile_path": "--profile_path", "graph_path": "--graph_path", "run_meta_path": "--run_meta_path",
                "op_log_path": "--op_log_path"}


def require_inputs(**inputs) -> None:
    """The reader's own error for an input file that does not exist, raised before the readers
    are imported: a mistyped path is answered at once (tfprof/cli/__init__.py). Object-store URIs
    and glob patterns are left to the readers."""
    import glob

    from tfprof.catalog.uri import object_uri
    from tfprof.errors import InputNotFoundError

    for name, flag in _INPUT_FLAGS.items():
        value = inputs.get(name)
        if value is None or object_uri(value):
            continue
        for path in (str(value).split(",") if name == "run_meta_path" else [str(value)]):
            if path and not glob.has_magic(path) and not os.path.lexists(path):
                raise InputNotFoundError.given_as(Path(path), flag)


def require_paths(paths: list) -> None:
    """Each of a job's ``paths`` (its traces: files, directories, glob patterns) that is no glob
    pattern must exist: the error for one that does not, raised before the readers are imported,
    as ``require_inputs`` does for one profile (a glob that matches nothing is the job reader's)."""
    import glob

    from tfprof.errors import InputNotFoundError

    for path in paths:
        if not glob.has_magic(str(path)) and not os.path.lexists(path):
            raise InputNotFoundError(f"`{path}` does not exist (one of the job's traces given); check the path")


def load_profile(*, warn: bool = True, **inputs):

    profile_path = inputs.get("profile_path")
    require_inputs(**inputs)
    from tfprof.catalog.uri import object_uri

    if object_uri(profile_path):
        from tfprof.errors import OptionError

        uri = object_uri(profile_path)
        raise OptionError(f"`{uri}` is a catalog in object storage, not a profile: give --catalog {uri} --run NAME")
    if profile_path is not None and Path(profile_path).is_dir():
        STORES.append(Path(profile_path))  # to find a damaged file if a query fails (main)
    from tfprof.api import load

    started = time.monotonic()
    prof = load(**inputs, progress=progress_bar())
    if warn:
        warn_if_invalid(prof, inputs)
    suggest_store(profile_path, time.monotonic() - started)
    return prof


SLOW_READ_S = 3.0
"""A profile file read for longer than this gets ``suggest_store``'s line."""


def suggest_store(profile_path, seconds: float) -> None:
    """On a terminal, after a profile file (a Kineto trace, an XSpace, a ProfileProto; not a
    store) took ``SLOW_READ_S`` or more to read: one stderr line saying how to read it once (a
    store opens in a fraction of a second)."""
    if profile_path is None or Path(profile_path).is_dir() or seconds < SLOW_READ_S or not sys.stderr.isatty():
        return
    import shlex

    store = (Path(profile_path).name.split(".")[0] or "profile") + ".tfprof"
    print(f"Note: reading {shlex.quote(str(profile_path))} took {seconds:.1f} s; `tfprof ingest "
          f"{shlex.quote(str(profile_path))} --out {shlex.quote(store)}` reads it once into a store that "
          "later commands open in a fraction of a second", file=sys.stderr)


# Stores opened by this command: when it fails unexpectedly, main() checks them for damage.
STORES: list[Path] = []


Force = Annotated[
    bool, typer.Option("--force", help="Replace an existing output (never an input of the command).")
]


def protected(inputs: dict):
    """The command's inputs, which no output may overwrite (tfprof.output)."""
    from tfprof.output import input_paths

    return input_paths(**inputs)


FORMAT_HELP = "Output format: table (aligned text), csv, json (array of row objects) or parquet."


def emit(data, fmt: str, out: Optional[Path], out_hint: str = "give --out FILE", *, force: bool = False,
          inputs=None) -> None:
    """Write a tabular result in ``fmt`` to ``out`` (atomically; an existing file only with
    ``force``, never one of ``inputs``) or stdout."""
    from tfprof.api.shell import BINARY
    from tfprof.api.shell import export as render
    from tfprof.errors import OptionError
    from tfprof.output import write_file

    body = render(data, fmt)
    if out is not None:
        write_file(out, body, force=force, inputs=inputs, what="output file")
    elif fmt in BINARY and sys.stdout.isatty():
        raise OptionError(f"--format {fmt} is binary: {out_hint} (or redirect stdout to a file)")
    else:
        sys.stdout.buffer.write(body)
        sys.stdout.flush()


def spelled(inputs: dict) -> str:
    """The inputs as a command line would give them: the profile's path, or its input options."""
    import shlex

    if inputs.get("profile_path") is not None:
        return shlex.quote(str(inputs["profile_path"]))
    return " ".join(f"--{k} {shlex.quote(str(v))}" for k, v in inputs.items() if v is not None)


def warn_if_invalid(prof, inputs: dict) -> None:
    """One stderr line when the profile's validation table holds warnings or errors (stdout
    stays as it is: reports and pipes are unchanged)."""
    from tfprof.api.shell import report, warning_line

    label = spelled(inputs)
    line = warning_line(report(prof.table("validation"), label), f"tfprof check {label}")
    if line:
        print(line, file=sys.stderr)


# What importing the plugins raised (``tfprof.plugins``): ``main`` says it and exits with 2.
PLUGIN_ERRORS: list[str] = []


def load_plugins() -> None:
    """Import the plugins (``TFPROF_PLUGINS``) before the commands are built from the registries;
    a failure is kept for ``main`` to say, so that importing the command line never raises."""
    from tfprof import plugins
    from tfprof.errors import TfprofError

    try:
        plugins.load()
    except TfprofError as exc:
        PLUGIN_ERRORS.append(str(exc))
