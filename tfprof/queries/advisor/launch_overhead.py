"""KernelLaunchChecker (docs/ADVISOR.md, 'GPU checks'): kernels that ran shorter than launching them took.

Each kernel is joined to the host call that queued it on its correlation id; the kernel is
short when that call is a kernel launch (``LAUNCH_CALLS``, or for XSpace, which names a launch
after its kernel, a call of the kernel's name) and the kernel's duration is less than the call's. Such kernels cost the host more than they give the device: fusing them
(``torch.compile``, fused optimizers) or capturing them in a CUDA graph removes launches.

Columns, one row per kernel name with at least one short kernel, most short kernels first:
``name``, ``short_kernels``, ``launched`` (kernels of that name joined to a launch call),
``short_share`` (short / launched), ``kernel_ns`` and ``launch_ns`` (summed over the short
ones), ``runtime`` (``HIP`` when the kernels were launched through HIP's calls, else ``CUDA``:
whose graphs would capture them), ``example_event`` / ``example_launch_event`` (``trace_events.event_id`` of the short
kernel whose launch outlasted it most, and of that launch).
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence
from tfprof.queries.advisor.trace import device_events, gpu_status, host_calls

LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
                "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "hipLaunchKernel", "hipExtLaunchKernel",
                "hipLaunchCooperativeKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel")
"""Runtime and driver calls that launch one kernel (CUDA's, and HIP's on ROCm, where hipBLASLt's
GEMM kernels go through ``hipExtModuleLaunchKernel``). Not MTIA's ``runFunction -
job_prep_and_submit_for_execution``: in the captures seen it mostly returns only after its kernel
ends (2,285 of 3,453 kernels of HTA's MTIA trace run inside their call), so every kernel would be
"shorter than its launch"."""

SCHEMA = {
    "name": pl.String, "short_kernels": pl.Int64, "launched": pl.Int64, "short_share": pl.Float64,
    "kernel_ns": pl.Int64, "launch_ns": pl.Int64, "runtime": pl.String, "example_event": pl.Int64, "example_launch_event": pl.Int64,
}


def launched_kernels(prof: Profile) -> pl.DataFrame:
    """Kernels joined to their launch call: the ``device_events`` columns plus ``host_calls``'."""
    kernels = device_events(prof).filter(pl.col("kind") == "kernel")
    launches = pl.col("call").is_in(list(LAUNCH_CALLS)) | (pl.col("call") == pl.col("name"))  # XSpace: the kernel's name
    return kernels.join(host_calls(prof), on="correlation").filter(launches)


def short_kernels(prof: Profile) -> pl.DataFrame:
    """The check's rows (module doc)."""
    joined = launched_kernels(prof).with_columns(
        (pl.col("duration_ns") < pl.col("call_ns")).alias("short"),
        (pl.col("call_ns") - pl.col("duration_ns")).alias("_excess"),
    )
    short = pl.col("short")
    rows = joined.group_by("name").agg(
        short.sum().cast(pl.Int64).alias("short_kernels"),
        pl.len().cast(pl.Int64).alias("launched"),
        pl.col("duration_ns").filter(short).sum().alias("kernel_ns"),
        pl.col("call_ns").filter(short).sum().alias("launch_ns"),
        pl.when(pl.col("call").str.starts_with("hip").all()).then(pl.lit("HIP")).otherwise(pl.lit("CUDA"))
        .alias("runtime"),
        pl.col("event_id").filter(short).sort_by(pl.col("_excess").filter(short), descending=True).first()
        .alias("example_event"),
        pl.col("call_event").filter(short).sort_by(pl.col("_excess").filter(short), descending=True).first()
        .alias("example_launch_event"),
    ).filter(pl.col("short_kernels") > 0)
    rows = rows.with_columns((pl.col("short_kernels") / pl.col("launched")).alias("short_share"))
    return rows.sort(["short_kernels", "launch_ns", "name"], descending=[True, True, False]).select(
        list(SCHEMA)).cast(SCHEMA)


def kernel_launch(prof: Profile, options: CheckOptions) -> Evidence:
    """The check (options unused)."""
    status = gpu_status(prof, device_events(prof))
    return Evidence(pl.DataFrame(schema=SCHEMA) if status else short_kernels(prof), status=status)
