"""Compile every numba kernel into numba's cache, then mark the cache complete (``tfprof.kernels``).

Run as ``python -m tfprof.api.warm``: the background process a command starts on a fresh
install. It does the work a user's commands do, on the bundled samples — ingest into a store
(decoder and index kernels), every view with options that take every branch, a timeline, a
pprof file, a ProfileProto — so each kernel is compiled once and saved. The marker file is
written last; until then commands on small profiles use the reference paths.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path


def compile_all(work: Path) -> None:
    """Every kernel a command can run, called once on the samples (compiled where not cached)."""
    import io

    import pyarrow as pa

    from tfprof.api.inputs import load, save, warm_up
    from tfprof.api.run import VIEWS, run_view
    from tfprof.api.sinks import write_output
    from tfprof.ingest.name_set import NameSet
    from tfprof.profile import Profile
    from tfprof.samples import sample_path

    warm_up(ingest=True)
    NameSet().add(pa.array(["a", "b", "a"]))
    for name in ("cnn", "multistep"):
        store = save(load(sample_path(name)), work / name)
        prof = Profile.open(store)
        for cmd in VIEWS:
            for options in ({}, {"max_depth": 3, "order_by": "micros", "select": ["micros", "bytes", "params",
                                                                              "float_ops", "occurrence"],
                                 "account_displayed_op_only": True, "min_micros": 1}):
                with contextlib.redirect_stdout(io.StringIO()):
                    result = run_view(prof, cmd, options, full_rows=True)
                    _ = result.proto
        for cmd, output in (("graph", "timeline"), ("scope", "timeline"), ("code", "pprof")):
            opts = {"output": f"{output}:outfile={work / (name + cmd + output)}", "step": 0}
            if output == "pprof":
                opts = {**opts, "select": ["micros"]}
            write_output(prof, run_view(prof, cmd, opts, full_rows=True))
    for name in ("torch", "jax", "tf2"):  # the foreign readers' kernels (docs/FOREIGN.md)
        prof = load(sample_path(name))
        for cmd in ("scope", "op"):
            with contextlib.redirect_stdout(io.StringIO()):
                run_view(prof, cmd, {})
    from tfprof.views.profile_proto import profile_proto_bytes

    profile_proto_bytes(load(sample_path()).tables())


def main() -> int:
    from tfprof.kernels import marker

    lock = os.environ.get("TFPROF_WARM_LOCK")
    if lock:  # started by a command, in the background: the user's commands come first
        with contextlib.suppress(OSError, AttributeError):
            os.nice(10)
    try:
        with tempfile.TemporaryDirectory(prefix="tfprof-warm-") as work:
            compile_all(Path(work))
        done = marker()
        tmp = done.with_name(done.name + f".{os.getpid()}.tmp")
        tmp.write_text("numba's cache holds every tfprof kernel for these sources\n")
        os.replace(tmp, done)
        return 0
    finally:
        if lock:
            with contextlib.suppress(OSError):
                os.unlink(lock)


if __name__ == "__main__":
    sys.exit(main())
