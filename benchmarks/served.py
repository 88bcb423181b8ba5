"""Whole ``tfprof`` commands as a user types them, timed from launch to exit, through the
resident server (``tfprof.cli.server``) or each in its own process.

    with Commands(served=True) as run:
        seconds, out = run(["scope", "run.tfprof", "--max_depth", "3"])

``served=True`` gives the commands a private socket folder, starts the server with a first
command and waits until it answers (its warm-up included), and stops it at the end; the
timed commands then pay only the thin client's start. ``served=False`` sets TFPROF_SERVER=0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def executable() -> list[str]:
    """The installed ``tfprof`` script beside this Python, else ``python -m tfprof``."""
    script = Path(sys.executable).parent / "tfprof"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "tfprof"]


def flags(options: dict) -> list[str]:
    """tfprof options as command-line flags (lists comma-joined, booleans spelled out)."""
    out = []
    for key, value in options.items():
        if isinstance(value, bool):
            value = str(value).lower()
        elif isinstance(value, (list, tuple)):
            if not value:
                continue
            value = ",".join(map(str, value))
        out += [f"--{key}", str(value)]
    return out


class Commands:
    def __init__(self, served: bool, timeout: float = 600):
        self.served, self.timeout = served, timeout
        self.folder = Path(tempfile.mkdtemp(prefix="tfprof-served-"))
        self.folder.chmod(0o700)
        self.env = {**os.environ, "TFPROF_SERVER": "1" if served else "0", "TFPROF_SERVER_DIR": str(self.folder)}

    def __call__(self, args: list[str]) -> tuple[float, str]:
        t = time.perf_counter()
        proc = subprocess.run([*executable(), *args], env=self.env, capture_output=True, text=True,
                              timeout=self.timeout)
        seconds = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"tfprof {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
        return seconds, proc.stdout

    def __enter__(self) -> Commands:
        if self.served:
            self(["tables", str(_sample())])  # runs alone, then starts the server
            deadline = time.monotonic() + self.timeout
            while self._served() is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("the tfprof server did not start")
                time.sleep(0.2)
        return self

    def _served(self) -> int | None:
        code = "from tfprof.cli import resident; s = resident.status(); print('' if s is None else s['served'])"
        out = subprocess.run([sys.executable, "-c", code], env=self.env, capture_output=True, text=True).stdout.strip()
        return int(out) if out else None

    def __exit__(self, *exc) -> None:
        if self.served:
            subprocess.run([*executable(), "server", "stop"], env=self.env, capture_output=True, timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


def _sample() -> Path:
    from tfprof.samples import sample_path

    return sample_path()
