"""The ``tfprof`` executable's entry point: hands a one-shot command to this user's resident
tfprof server when one is running, and runs it in this process otherwise.

A command's own work on a large store takes a tenth of a second; starting Python with pyarrow,
polars and numba's kernels takes a second. The server (``tfprof.cli.server``) has paid that once:
this module, which imports only the standard library, sends it the arguments, the working
directory, the environment and this process's stdin, stdout and stderr themselves (file
descriptors passed over a Unix socket), so the server's command reads and writes exactly where
this one would. Ctrl-C and SIGTERM are forwarded; the exit code comes back. What cannot be sent
(resource limits, ids, installed libraries ...) picks the server: it is in the server's key
(``resident.server_key``), and a server inherits it from the client that starts it.

After a command that ran here, a server is started in the background for the next ones
(``tfprof.cli.resident`` says where it listens and when it is on; ``tfprof server`` shows it).
"""

from __future__ import annotations

import array
import os
import signal
import socket
import sys

from tfprof.cli import resident

# polars' own allocator (a jemalloc of its own) hands the pages a step freed back to the system
# lazily (MADV_FREE: still counted in the process's RSS) and only a second later returns them for
# good. With no lazy stage its background thread returns them for good half a second after they
# are freed: a 312 MB Kineto trace's read peaks lower at the same speed (docs/PERFORMANCE.md).
# jemalloc reads this once, as polars loads (polars puts it after its own defaults): it is set
# before anything imports polars, for this process and the server it starts; a user's own setting
# wins. Not in the server's key (``resident``): polars rewrites the variable as it loads.
POLARS_MALLOC_CONF = ("_RJEM_MALLOC_CONF", "muzzy_decay_ms:0")


def main(argv: list[str] | None = None) -> int:
    """Run ``tfprof ARGS``: through the server when one is up, else here (then start one)."""
    os.environ.setdefault(*POLARS_MALLOC_CONF)
    args = sys.argv[1:] if argv is None else list(argv)
    problem = resident.cwd_error()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    wanted = resident.served(args)
    if wanted:
        code = _through_server(args)
        if code is not None:
            return code
    try:  # a second of imports (pyarrow, polars, numba) before main's own handlers are in place
        from tfprof.cli.main import main as run
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    code = run(args)
    storage = sys.modules.get("tfprof.catalog.storage")
    if wanted and (storage is None or not storage.abandoned()):
        start_server()
    if storage is not None and storage.reached():
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """Exit with ``code`` at once, streams flushed, when this command reached object storage.
    pyarrow's S3 client, shut down at the interpreter's exit, can abort the process ("terminate
    called without an active exception", SIGABRT) after the command succeeded, and a call that
    the command gave up on (a stop, a time limit) would hold the exit on its thread
    (``tfprof.catalog.storage.abandoned``). Everything the command wrote is finished by now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(code)


def _through_server(args: list[str]) -> int | None:
    """Run the command in the server; its exit code, or None when no server took it."""
    if not all(_is_open(fd) for fd in (0, 1, 2)):
        return None
    message = {
        "argv": args,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "umask": _umask(),
        "stdio": [[s.encoding, s.errors] if s is not None else None for s in (sys.stdin, sys.stdout, sys.stderr)],
    }
    sock = resident.request(message)
    if sock is None:
        return None

    def forward(signum, frame):  # the server's command gets the signal; the code still comes back
        try:
            sock.send(b"I" if signum == signal.SIGINT else b"T")
        except OSError:
            pass

    forwarded = {signum: signal.signal(signum, forward) for signum in (signal.SIGINT, signal.SIGTERM)}
    data = b""
    try:
        sock.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        data = resident.recv_exactly(sock, resident.CODE.size)
    except OSError:
        pass
    finally:
        for signum, handler in forwarded.items():
            signal.signal(signum, handler)
        sock.close()
    if len(data) < resident.CODE.size:
        print("Error: the tfprof server stopped during the command; run it again "
              "(TFPROF_SERVER=0 runs it without the server)", file=sys.stderr)
        return 1
    return resident.CODE.unpack(data)[0]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def start_server() -> None:
    """Start this user's server in the background unless one is running; never fails the command."""
    try:
        path = resident.socket_path()
        if not resident.private_dir(path.parent, create=True):
            return
        probe = resident.request({"ping": True}, timeout=0.1)
        if probe is not None:
            probe.close()
            return
        import subprocess

        with open(path.with_suffix(".log"), "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "tfprof.cli.server", str(path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True, start_new_session=True,
                cwd="/",
            )
    except Exception:  # noqa: BLE001 - the command has run; a server is only a speed-up
        pass
