"""tfprof: TensorFlow's profiler re-implemented over Arrow tables, polars and DuckDB.

>>> import tfprof
>>> prof = tfprof.load(tfprof.sample_path())
>>> prof.row_counts()["nodes"] > 0
True
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING

from tfprof.errors import (
    InputError,
    InputNotFoundError,
    MissingDependencyError,
    OptionError,
    OutputError,
    ProfileFormatError,
    QueryError,
    TfprofError,
)
from tfprof.samples import SAMPLES, sample_path  # noqa: F401 - re-exported
from tfprof.tf_names import TF_API_NAMES

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "InputNotFoundError",
    "MissingDependencyError",
    "OptionError",
    "OutputError",
    "QueryError",
    "Profile",
    "ProfileFormatError",
    "TfprofError",
    "diff",
    "load",
    "memory",
    "overview",
    "ranks",
    "sample_path",
    "save",
    "steps",
    "summarize",
    "ui",
    "view",
]

# tf.profiler's Python API (tfprof.tf_api), exported lazily: importing it pulls in every view.
_TF_API_NAMES = TF_API_NAMES
__all__ += [name for name in _TF_API_NAMES if name != "ALL_ADVICE"]
# Imported from tfprof.tf_api on first use; profile and advise are defined below.
_TF_API = set(_TF_API_NAMES) - {"advise", "profile"}

if TYPE_CHECKING:
    from tfprof.profile import Profile


def __getattr__(name: str):
    # Profile loads on first use: importing it pulls in pyarrow, which the command line's thin
    # client (tfprof.cli.client) must not pay for.
    if name == "Profile":
        from tfprof.profile import Profile

        return Profile
    if name in _TF_API:
        from tfprof import tf_api

        return getattr(tf_api, name)
    raise AttributeError(f"module 'tfprof' has no attribute '{name}'")


def profile(graph=None, run_meta=None, op_log=None, cmd: str = "scope", options=None):
    """tf.profiler.profile: one view (scope, graph, op, code) of a graph and a RunMetadata.

    Returns a GraphNodeProto (scope, graph) or MultiGraphNodeProto (op, code); see
    ``tfprof.tf_api.profiler.profile``. (Defined here, not imported lazily: `tfprof.profile`
    is also the name of the module that holds ``Profile``.)
    """
    from tfprof.tf_api.profiler import profile as run

    return run(graph, run_meta, op_log, cmd, options)


def advise(graph=None, run_meta=None, options=None):
    """tf.profiler.advise: the advisor's checkers on a graph and a RunMetadata; returns an AdviceProto."""
    from tfprof.tf_api.profiler import advise as run

    return run(graph, run_meta, options)


def load(
    profile_path: str | Path | None = None,
    *,
    graph_path: str | Path | None = None,
    run_meta_path: str | Path | list | None = None,
    op_log_path: str | Path | None = None,
    checkpoint_path: str | Path | None = None,
    progress=None,
) -> Profile:
    """Load a profile: a ProfileProto file, a store directory, or raw tfprof inputs
    (``tfprof.api.inputs.load``; ``progress(stage, done, total)`` hears how ingest goes).

    >>> tfprof.load(tfprof.sample_path()).row_counts()["steps"]
    1
    """
    from tfprof.api.inputs import load as run

    return run(profile_path, graph_path=graph_path, run_meta_path=run_meta_path, op_log_path=op_log_path,
               checkpoint_path=checkpoint_path, progress=progress)


def view(prof: Profile, cmd: str, **options: object):
    """The rows view ``cmd`` (scope, graph, op, code) of ``prof`` shows, one per printed line, as a
    polars DataFrame (``tfprof.api.run.view``).

    >>> tfprof.view(tfprof.load(tfprof.sample_path()), "scope", max_depth=0)["name"].to_list()
    ['_TFProfRoot']
    """
    from tfprof.api.run import view as run

    return run(prof, cmd, **options)


def diff(a: Profile, b: Profile | None = None, cmd: str = "scope", *, against: int | None = None,
         order_by: str = "delta", **options: object):
    """View ``cmd`` of ``b`` against ``a`` as a polars DataFrame, one row per path: per selected
    field its A, B, Δ and Δ% columns, ``status`` and the noise band's ``significant``
    (``tfprof.api.diff.run_diff``; docs/DIFF.md). Options take tfprof's names.

    >>> prof = tfprof.load(tfprof.sample_path())
    >>> tfprof.diff(prof, prof, "op")["exec_micros_delta"].abs().max()
    0
    """
    from tfprof.api.diff import run_diff

    return run_diff(a, b, cmd, options, against=against, order_by=order_by).frame


def save(prof: Profile, path: str | Path, *, force: bool = False) -> Path:
    """Write ``prof`` as a store directory at ``path`` (``tfprof.api.inputs.save``); an existing
    store is replaced only with ``force``."""
    from tfprof.api.inputs import save as run

    return run(prof, path, force=force)


def summarize(prof: Profile):
    """``prof`` at a glance: model facts, per-step totals, table sizes; a notebook shows it as a
    card (``tfprof.api.summary.summarize``)."""
    from tfprof.api.summary import summarize as run

    return run(prof)


def memory(prof: Profile):
    """Memory in use over time: one row per allocator and step with the bytes in use before,
    at the peak (and when) and after, what was allocated and freed (``tfprof.api.memory``;
    ``tfprof.api.memory.peak_ops`` and ``curve`` give the ops at a peak and the whole curve)."""
    from tfprof.api.memory import memory as run

    return run(prof)


def overview(prof: Profile):
    """What to look at first: the profile's facts, the op types that take the time (share of the
    total) and each step's time and accelerator utilization, as a dict (``tfprof.api.overview``;
    the UI's landing page)."""
    from tfprof.api.overview import overview as run

    return run(prof)


def steps(prof: Profile, window: str = "next", drop_last_step: bool = False, total: bool = False,
          unlinked: bool = False):
    """Where each step's time goes on each accelerator: one row per (step, device) with the step's
    time and its compute, communication, copy and idle parts; the peers' step windows
    (``window="marker"``: the marker's own span, ``"kernels"``: HTA's and XProf's GPU step), HTA's
    ``drop_last_step``, a whole-trace row (``total``) and the unlinked GPU time per reason on
    request (``tfprof.api.breakdown.steps``)."""
    from tfprof.api.breakdown import steps as run

    return run(prof, window, drop_last_step, total, unlinked)


def ranks(job, *, threshold: float = 0.05, workers: int | None = None):
    """A distributed job across its ranks: its per-rank traces (paths, a directory or a glob
    pattern) or ``{rank: Profile}``; each rank's steps, the stragglers and by how much, the
    communication each waits in, the ops whose time differs between ranks and what the checks
    found (``tfprof.api.ranks``). ``print()`` it for ``tfprof ranks``'s report. A job of many
    traces is read on a thread per core (``workers``: say how many).

    >>> import tfprof
    >>> job = tfprof.ranks(tfprof.sample_path("job"))
    >>> job.ranks.filter("straggler")["rank"].to_list()
    [2]
    """
    from tfprof.api.ranks import ranks as run

    return run(job, threshold=threshold, workers=workers)


def ui(profile_or_paths, *, host: str = "127.0.0.1", port: int = 0, query_timeout: float | None = 30.0,
       allow_hosts: tuple[str, ...] = ()):
    """Serve the web UI on a profile, a path, or a list of them, in a background thread
    (``tfprof.ui.start``); returns the running server: ``str()`` is its URL, ``.stop()`` ends
    it, and a notebook shows the page in an IFrame. ``port`` 0 picks a free port; a SQL query
    stops after ``query_timeout`` seconds (0 or None: no limit); ``allow_hosts``: more host
    names it answers to, as ``tfprof ui --allow-host``."""
    from tfprof.ui import start

    return start(profile_or_paths, host=host, port=port, query_timeout=query_timeout, allow_hosts=allow_hosts)


class _Package(types.ModuleType):
    """The package's module type. ``tfprof.profile`` and ``tfprof.ui`` are the functions above,
    and stay so: importing the submodule of the same name (which Python records as an attribute
    of its package) must not replace them. The modules themselves are ``sys.modules["tfprof.profile"]``
    and ``sys.modules["tfprof.ui"]``."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("profile", "ui") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
