"""What the command line needs from the core besides views and options: the advisor's default
checkers, the table export formats, the validation report. The CLI imports these from here,
never from the layers below; each name loads its module on first use (the validation report,
which every command prints, does not pull in the advisor or the exporters)."""

from __future__ import annotations

from tfprof.api import lazy_names

_WHERE = {
    "DEFAULT_CHECKERS": ("tfprof.queries.advisor", "DEFAULT_CHECKERS"),
    "BINARY": ("tfprof.views.export", "BINARY"),
    "FORMATS": ("tfprof.views.export", "FORMATS"),
    "export": ("tfprof.views.export", "render"),
    "view_table": ("tfprof.views.table", "view_table"),
    "ops_without_flops_rule": ("tfprof.queries.flops", "ops_without_formula"),
    "render_json": ("tfprof.views.validation", "render_json"),
    "render_text": ("tfprof.views.validation", "render_text"),
    "report": ("tfprof.views.validation", "report"),
    "warning_line": ("tfprof.views.validation", "warning_line"),
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, globals(), _WHERE)
