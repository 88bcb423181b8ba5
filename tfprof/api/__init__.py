"""The one core every shell calls: the CLI, the tf.profiler-compatible API, notebooks and SQL.

* ``tfprof.api.inputs`` — ``load`` a profile, ``save`` it or ``ingest_to_store`` straight
  from its files (with the indexes views read), ``warm_up`` numba's cache.
* ``tfprof.api.run`` — ``run_view(prof, cmd, options)``: a view's rows, report and proto;
  ``view(prof, cmd, **options)``: its rows as a table.
* ``tfprof.api.sinks`` — ``SINKS``: where ``-output`` sends a result (stdout, file, timeline,
  pprof, none); ``check_output`` before the work, ``emit_output`` after it.
* ``tfprof.api.advice`` — ``advise(prof, checkers)``.
* ``tfprof.api.summary`` — ``summarize(prof)``: facts, per-step totals, table sizes.
* ``tfprof.api.breakdown`` — ``steps(prof)``: each step's time per accelerator, in parts.
* ``tfprof.api.shell`` — what the command line needs besides: option names, export formats,
  the validation report.

Names are imported from their module on first use (``from tfprof.api import run_view`` loads
``tfprof.api.run`` and what it needs, nothing else): a command pays only for what it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_names(module: str, namespace: dict, where: dict[str, tuple[str, str]]) -> tuple[Callable, Callable]:
    """A module's ``__getattr__`` and ``__dir__`` that import each name of ``where`` (name ->
    (module, attribute)) on first use and keep it in ``namespace`` (the module's globals)."""

    def getattr_(name: str):
        if name not in where:
            raise AttributeError(f"module '{module}' has no attribute '{name}'")
        source, attr = where[name]
        namespace[name] = value = getattr(importlib.import_module(source), attr)
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *where})

    return getattr_, dir_


_WHERE = {
    "inputs": ("load", "save", "ingest_to_store", "write_indexes", "warm_up"),
    "run": ("VIEWS", "ViewResult", "run_view", "view", "check_step", "report_metrics", "print_notes"),
    "sinks": ("SINKS", "Written", "output_paths", "check_output", "write_output", "emit_output"),
    "advice": ("AdviceResult", "advise"),
    "summary": ("Summary", "summarize"),
    "breakdown": ("steps", "steps_report"),
}
_NAMES = {name: (f"tfprof.api.{module}", name) for module, names in _WHERE.items() for name in names}

__all__ = sorted(_NAMES)
__getattr__, __dir__ = lazy_names(__name__, globals(), _NAMES)
