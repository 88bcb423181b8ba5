"""What the command line needs from the core besides views and options: the advisor's default
checkers, the table export formats, the validation report. The CLI imports these from here,
never from the layers below; each name loads its module on first use (the validation report,
which every command prints, does not pull in the advisor or the exporters)."""

from __future__ import annotations

import importlib

_WHERE = {
    "DEFAULT_CHECKERS": ("tfprof.queries.advisor", "DEFAULT_CHECKERS"),
    "BINARY": ("tfprof.views.export", "BINARY"),
    "FORMATS": ("tfprof.views.export", "FORMATS"),
    "export": ("tfprof.views.export", "render"),
    "view_table": ("tfprof.views.table", "view_table"),
    "render_json": ("tfprof.views.validation", "render_json"),
    "render_text": ("tfprof.views.validation", "render_text"),
    "report": ("tfprof.views.validation", "report"),
    "warning_line": ("tfprof.views.validation", "warning_line"),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'tfprof.api.shell' has no attribute '{name}'")
    module, attr = _WHERE[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
