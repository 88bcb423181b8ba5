"""tfprof's advisor (docs/TFPROF_BEHAVIOUR.md, 'Advisor'): each check is one query returning evidence rows.

A check is a ``Check``: a name (tfprof's checker name) and ``run(profile, options) ->
Evidence | None``. ``Evidence.rows`` is a polars frame of structured rows (numbers, names,
severities; never report sentences: ``tfprof.views.advice`` writes those), and
``Evidence.missing`` names inputs the check needed but the profile lacks (the view turns them
into tfprof's stderr notes). ``None`` means the checker produces no entry at all (JobChecker).

``CHECKS`` lists the built-in checks in tfprof's own order, which is also the order the
advisor prints them in (docs/TFPROF_BEHAVIOUR.md, 'Advisor driver': tfprof prints in protobuf-map order, which changes
from run
to run; we use the fixed order the spec recommends). User checks are SQL files
(``tfprof.queries.advisor.custom.sql_check``), run after the built-in ones.

>>> import tfprof
>>> [c.name for c in CHECKS]
['AcceleratorUtilizationChecker', 'OperationChecker', 'ExpensiveOperationChecker', 'JobChecker']
>>> by_name("OperationChecker").run(tfprof.load(tfprof.sample_path()), {}).rows.columns
['finding', 'nodes', 'example']
"""

from __future__ import annotations

from tfprof.errors import OptionError
from tfprof.queries.advisor.accelerator_utilization import utilization
from tfprof.queries.advisor.base import Check, CheckOptions, Evidence
from tfprof.queries.advisor.expensive_operation import expensive_operations
from tfprof.queries.advisor.job import job
from tfprof.queries.advisor.operation import operation_findings
from tfprof.queries.options import unknown_value

CHECKS: tuple[Check, ...] = (
    Check("AcceleratorUtilizationChecker", utilization, "Busy share of each GPU in its last profiled step."),
    Check("OperationChecker", operation_findings, "Ops with a faster alternative (fused batch norm, NCHW on GPU)."),
    Check("ExpensiveOperationChecker", expensive_operations, "The most expensive op types, graph nodes and code paths."),
    Check("JobChecker", job, "Google-internal in tfprof: never reports in open source."),
)

# tfprof's ALL_ADVICE: every built-in checker, no options (docs/TFPROF_BEHAVIOUR.md, 'profile and advise').
DEFAULT_CHECKERS: dict[str, dict[str, str]] = {c.name: {} for c in CHECKS}


def by_name(name: str) -> Check:
    """The built-in check called ``name``; an ``OptionError`` listing the valid names otherwise."""
    for check in CHECKS:
        if check.name == name:
            return check
    raise OptionError(unknown_value("checker", name, [c.name for c in CHECKS]) + "; or give a path to a .sql checker file")


__all__ = ["CHECKS", "Check", "CheckOptions", "DEFAULT_CHECKERS", "Evidence", "by_name"]
