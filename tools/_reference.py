"""What the tools/make_*_golden.py scripts share to run the REAL tfprof and record what it does.

Paths of the repository, the option dicts the real tool is given (every key
``model_analyzer._build_options`` reads, at the ``tfprof`` command line's defaults), the capture
of file descriptors 1 and 2 around a native call, the parent loop that reruns a child process
without each case that kills it, and the layout of ``cases.json``.

Standard library only: the scripts import it both under the project's Python (``--help``, the
parent process) and under ``tfprof-reference python`` (the children, TensorFlow importable).
Running a script as ``python tools/<script>.py`` puts tools/ on ``sys.path``.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN = ROOT / "tests" / "golden"
REFERENCE = os.environ.get("TFPROF_REFERENCE", "/work/shared/tools/tfprof-reference")

# Every key _build_options reads (dump_to_file aside: deprecated, stays '' = unset).
OPTION_KEYS = (
    "max_depth", "min_bytes", "min_peak_bytes", "min_residual_bytes", "min_output_bytes",
    "min_micros", "min_accelerator_micros", "min_cpu_micros", "min_params", "min_float_ops",
    "min_occurrence", "step", "order_by", "account_type_regexes", "start_name_regexes",
    "trim_name_regexes", "show_name_regexes", "hide_name_regexes", "account_displayed_op_only",
    "select", "output",
)
# Defaults of the `tfprof` command-line binary (docs/TFPROF_BEHAVIOUR.md, 'Options', "CLI default" column).
CLI_DEFAULTS = {
    "max_depth": 10, "min_bytes": 0, "min_peak_bytes": 0, "min_residual_bytes": 0,
    "min_output_bytes": 0, "min_micros": 0, "min_accelerator_micros": 0, "min_cpu_micros": 0,
    "min_params": 0, "min_float_ops": 0, "min_occurrence": 0, "step": -1, "order_by": "name",
    "account_type_regexes": [".*"], "start_name_regexes": [".*"], "trim_name_regexes": [],
    "show_name_regexes": [".*"], "hide_name_regexes": [], "account_displayed_op_only": False,
    "select": ["micros"], "output": "stdout",
}


def options(**over) -> dict:
    """A full option dict: the CLI defaults with ``over`` applied, in OPTION_KEYS order."""
    unknown = set(over) - set(OPTION_KEYS)
    if unknown:
        raise KeyError(f"unknown option(s) {sorted(unknown)}")
    full = {k: over.get(k, CLI_DEFAULTS[k]) for k in OPTION_KEYS}
    return json.loads(json.dumps(full))  # deep copy, JSON types only


def write_cases(path: Path, cases: list[dict]) -> None:
    """``cases.json``: one case per line, compact, so that a diff shows which cases changed."""
    path.write_text("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")


# --------------------------------------------------------------------------------------
# Child process: fds 1 and 2 around a native call
# --------------------------------------------------------------------------------------

def _libc_fflush() -> None:
    ctypes.CDLL(None).fflush(None)


def captured(fn, err_path: Path | None = None):
    """Run fn() with fds 1 and 2 sent to files; return (result, stdout, stderr, python error).

    fd 2 goes to ``err_path`` when given (a named file, so that the parent can still read what
    the native code printed when it killed the process), else to a temporary file. A Python
    exception is returned as ``"Type: message"`` with result None.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    _libc_fflush()
    err_file = open(err_path, "w+b") if err_path else tempfile.TemporaryFile()
    with tempfile.TemporaryFile() as out, err_file as err:
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        result, error = None, None
        try:
            result = fn()
        except Exception as e:  # noqa: BLE001  (recorded by the caller)
            error = f"{type(e).__name__}: {e}"
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            _libc_fflush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        err.seek(0)
        so, se = (f.read().decode(errors="replace") for f in (out, err))
        return result, so, se, error


# --------------------------------------------------------------------------------------
# Parent: one child per fixture, crash handling
# --------------------------------------------------------------------------------------

def reference_env(script_rel: str, only: list[str] | None) -> dict:
    """The children's environment; MAKE_GOLDEN_COMMAND is the command meta.json records."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # as tfprof-reference sets it
    env["MAKE_GOLDEN_COMMAND"] = " ".join([REFERENCE, "python", script_rel, *(f"--only {n}" for n in only or [])])
    return env


def run_surviving_crashes(script_rel: str, name: str, stage: Path, progress: Path, env: dict) -> list[dict]:
    """Run ``<script> --child NAME --out STAGE --progress PROGRESS`` until it exits 0.

    The child writes the case it is running to ``progress`` (and its fd 2 to
    ``progress.stderr``); when the native code kills it, that case is recorded and left out
    (``--skip``) of the next run. Returns the crashed cases: ``{"id", "returncode", "stderr"}``.
    """
    crashed: list[dict] = []
    for _attempt in range(20):
        shutil.rmtree(stage, ignore_errors=True)
        progress.write_text("")
        cmd = [sys.executable, script_rel, "--child", name, "--out", str(stage), "--progress", str(progress)]
        for c in crashed:
            cmd += ["--skip", c["id"]]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode == 0:
            return crashed
        running = progress.read_text().strip()
        if not running:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"{name}: child failed outside a case (rc {proc.returncode})")
        during = progress.with_suffix(".stderr")
        crashed.append({"id": running, "returncode": proc.returncode,
                        "stderr": during.read_text(errors="replace")[-2000:] if during.exists() else ""})
        print(f"  {name}: case {running} crashed the real tool (rc {proc.returncode}); left out", flush=True)
    raise SystemExit(f"{name}: too many crashes")
