"""The real tfprof's side of ``compare.py``: load a ProfileProto, run views, time them.

    tfprof-reference python benchmarks/compare_reference.py PROFILE OUTDIR VIEWS_JSON

Runs in the reference environment (TensorFlow's own tfprof, the C++ profiler inside the
tensorflow-cpu wheel), so it imports nothing from this project. ``VIEWS_JSON`` is a JSON list of
``[cmd, options]``, each options dict complete (every key ``model_analyzer._build_options``
reads). Each view's report is written by tfprof itself to ``OUTDIR/<cmd>.txt``
(``-output file:outfile=...``, the bytes it would print). Prints one line
``COMPARE_JSON {...}`` with the seconds of the import, the load and each view, and the
process's peak RSS after each (``ru_maxrss``).
"""

import json
import resource
import sys
import time


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    profile, outdir, views = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    t0 = time.perf_counter()
    from tensorflow.python.profiler import model_analyzer
    from tensorflow.python.util import _pywrap_tfprof as tfprof

    try:
        from tensorflow import __version__ as tf_version
    except ImportError:  # pragma: no cover - only the version string is lost
        tf_version = "?"
    t1 = time.perf_counter()
    result = {"import": t1 - t0, "tf_version": tf_version, "rss_import_mb": _rss_mb()}
    tfprof.ProfilerFromFile(profile.encode())
    result["load"] = time.perf_counter() - t1
    result["rss_load_mb"] = _rss_mb()
    for cmd, opts in views:
        opts = dict(opts, output=f"file:outfile={outdir}/{cmd}.txt")
        t = time.perf_counter()
        tfprof.Profile(cmd.encode(), model_analyzer._build_options(opts).SerializeToString())
        result[cmd] = time.perf_counter() - t
        result[f"rss_{cmd}_mb"] = _rss_mb()
    result["rss_mb"] = _rss_mb()
    sys.stdout.flush()
    print("COMPARE_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
