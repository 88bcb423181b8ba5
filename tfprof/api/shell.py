"""What the command line needs from the core besides views and options: the advisor's default
checkers, the table export formats, the validation report. The CLI imports these from here,
never from the layers below."""

from __future__ import annotations

from tfprof.queries.advisor import DEFAULT_CHECKERS
from tfprof.views.export import BINARY, FORMATS
from tfprof.views.export import render as export
from tfprof.views.table import view_table
from tfprof.views.validation import render_json, render_text, report, warning_line

__all__ = ["BINARY", "DEFAULT_CHECKERS", "FORMATS", "export", "render_json", "render_text", "report", "view_table",
           "warning_line"]
