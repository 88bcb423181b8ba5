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

``TRACE_CHECKS`` are the GPU checks of foreign traces (docs/ADVISOR.md, 'GPU checks'): they run
by default on Kineto and XSpace profiles only, after tfprof's, so the advice on tfprof's own
profiles stays what tfprof prints. A check's ``frameworks`` restricts it to profiles of those
frameworks (``framework.framework``): OperationChecker's advice is about TensorFlow ops.

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
from tfprof.queries.advisor.comm_overlap import comm_overlap
from tfprof.queries.advisor.expensive_operation import expensive_operations
from tfprof.queries.advisor.framework import TENSORFLOW
from tfprof.queries.advisor.gpu_idle import gpu_idle
from tfprof.queries.advisor.host_sync import host_sync
from tfprof.queries.advisor.job import job
from tfprof.queries.advisor.launch_overhead import kernel_launch
from tfprof.queries.advisor.launch_queue import launch_queue
from tfprof.queries.advisor.operation import operation_findings
from tfprof.queries.advisor.pageable_copy import pageable_copy
from tfprof.queries.options import unknown_value

CHECKS: tuple[Check, ...] = (
    Check("AcceleratorUtilizationChecker", utilization,
          "Busy share of each GPU in its last profiled step (a foreign trace: over its profiled steps)."),
    Check("OperationChecker", operation_findings, "Ops with a faster alternative (fused batch norm, NCHW on GPU).",
          frameworks=(TENSORFLOW,)),
    Check("ExpensiveOperationChecker", expensive_operations, "The most expensive op types, graph nodes and code paths."),
    Check("JobChecker", job, "Google-internal in tfprof: never reports in open source."),
)

TRACE_CHECKS: tuple[Check, ...] = (
    Check("GpuIdleChecker", gpu_idle, "Share of each step in which a GPU ran no kernel, copy or memset."),
    Check("KernelLaunchChecker", kernel_launch, "Kernels that ran shorter than the call that launched them."),
    Check("HostSyncChecker", host_sync, "Host-device synchronizations per step: count and time."),
    Check("PageableCopyChecker", pageable_copy, "Host-to-device copies from pageable (unpinned) memory."),
    Check("CommOverlapChecker", comm_overlap, "NCCL/RCCL kernel time with no compute kernel on the device."),
    Check("LaunchQueueChecker", launch_queue, "Steps whose GPU waited for the CPU to launch work."),
)

# tfprof's ALL_ADVICE: every built-in checker, no options (docs/TFPROF_BEHAVIOUR.md, 'profile and advise').
DEFAULT_CHECKERS: dict[str, dict[str, str]] = {c.name: {} for c in CHECKS}
# What a foreign trace gets by default: those, then the GPU checks.
TRACE_CHECKERS: dict[str, dict[str, str]] = {c.name: {} for c in (*CHECKS, *TRACE_CHECKS)}


def by_name(name: str) -> Check:
    """The built-in check called ``name``; an ``OptionError`` listing the valid names otherwise."""
    for check in (*CHECKS, *TRACE_CHECKS):
        if check.name == name:
            return check
    valid = [c.name for c in (*CHECKS, *TRACE_CHECKS)]
    raise OptionError(unknown_value("checker", name, valid) + "; or give a path to a .sql checker file")


__all__ = ["CHECKS", "Check", "CheckOptions", "DEFAULT_CHECKERS", "Evidence", "TRACE_CHECKERS", "TRACE_CHECKS",
           "by_name"]
