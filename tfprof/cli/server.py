"""This user's resident tfprof server: runs the one-shot commands ``tfprof.cli.client`` sends it,
one at a time, in one process that imported tfprof and loaded its kernels once.

``python -m tfprof.cli.server SOCKET`` (the client starts it). Each command runs as it would in
its own process: the client's working directory, environment, umask and arguments, and its
stdin/stdout/stderr descriptors moved onto 0, 1 and 2, through ``tfprof.cli.main.main``, which
keeps no state between calls; Python's cached temporary folder is forgotten before and after.
What a request cannot carry (ids, resource limits, namespaces, libraries ...) is in the key that
names this server, and it inherited them from the client that started it, so they are the
client's too (``tfprof.cli.resident.server_key``). Afterwards the descriptors are let go (a
reader of the client's pipe sees its end) and the server's own state is put back. A signal the
client forwards is raised in this process's main thread, where the command runs, as a real one
would be; a client that goes away mid-command interrupts it (nobody is left to read its output).

Only this user's processes are answered (the socket's directory is private and the peer's uid
is checked). The server exits after ``TFPROF_SERVER_IDLE`` seconds without a command, when its
key changes (tfprof's files or an installed library changed), or on ``tfprof server stop``.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import io
import json
import os
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

from tfprof.cli.resident import CODE, LENGTH, recv_exactly, server_key

_TICK_S = 30.0
_MAX_MESSAGE = 16 << 20


class _State:
    busy = False  # a command is running: a SIGINT is its Ctrl-C
    forwarded_term = False  # the SIGTERM that arrives is a client's, for its command


def _on_sigint(signum, frame) -> None:
    if _State.busy:
        raise KeyboardInterrupt


def _on_sigterm(signum, frame) -> None:
    """Outside a command (whose own handler raises tfprof's ``Terminated``), a SIGTERM stops the
    server, unless it is a client's that came too late for its command."""
    if _State.forwarded_term:
        _State.forwarded_term = False
        return
    raise SystemExit(0)


def serve(path: Path) -> int:
    """Listen on ``path`` until idle, stale or stopped."""
    key = path.stem
    lock = open(path.with_suffix(".lock"), "a")  # noqa: SIM115 - held while the server lives
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has this key
    idle_s = float(os.environ.get("TFPROF_SERVER_IDLE", "600"))
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _warm()
    except Exception as exc:  # noqa: BLE001 - commands still run, only the first one slower
        print(f"warm-up failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    if server_key() != key:  # tfprof or a library changed meanwhile, or an import changed a limit
        print(f"not serving: this process's key is now {server_key()}, not {key}", file=sys.stderr, flush=True)
        with contextlib.suppress(OSError):
            path.with_suffix(".lock").unlink()
        return 0
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # left by a server that died; the lock says none is alive
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    listener.settimeout(min(_TICK_S, max(idle_s, 0.1)))
    facts = {"pid": os.getpid(), "socket": str(path), "started": time.time(), "served": 0, "idle_s": idle_s,
             "commands": _commands()}
    last = time.monotonic()
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if time.monotonic() - last > idle_s or server_key() != key:
                    return 0
                continue
            with conn:
                try:
                    outcome = _handle(conn, facts)
                except (OSError, ValueError, KeyError, TypeError):  # a client gone, or a malformed request
                    continue
            last = time.monotonic()
            if outcome == "stop":
                return 0
    finally:
        with contextlib.suppress(OSError):
            if path.exists() and path.is_socket():
                path.unlink()
        listener.close()
        log = path.with_suffix(".log")
        with contextlib.suppress(OSError):
            if log.stat().st_size == 0:  # a log that says something is kept to be read
                log.unlink()
        with contextlib.suppress(OSError):
            path.with_suffix(".lock").unlink()


def _commands() -> list[str]:
    """The commands this server runs: tfprof's own one-shot commands and the views of its
    registry (a plugin's included)."""
    from tfprof.api.options import VIEWS
    from tfprof.cli.resident import SERVED

    return sorted(SERVED | set(VIEWS))


def _warm() -> None:
    """Import what commands use and run each view once on the bundled sample, so that the first
    command served already finds the kernels loaded (or, before they are compiled, the
    reference paths imported)."""
    from tfprof.api.inputs import load
    from tfprof.api.run import VIEWS, run_view
    from tfprof.cli import main as _  # noqa: F401 - the commands' module graph
    from tfprof.samples import sample_path

    prof = load(sample_path())
    with contextlib.redirect_stdout(io.StringIO()):
        for cmd in VIEWS:
            run_view(prof, cmd, {})


def _receive(conn: socket.socket) -> dict:
    """The request's message (a length, then JSON)."""
    conn.settimeout(5.0)
    head = recv_exactly(conn, LENGTH.size)
    if len(head) < LENGTH.size:
        raise OSError("short request")
    (length,) = LENGTH.unpack(head)
    if length > _MAX_MESSAGE:
        raise OSError("request too large")
    body = recv_exactly(conn, length)
    if len(body) < length:
        raise OSError("short request")
    return json.loads(body)


def _descriptors(conn: socket.socket) -> list[int]:
    """The client's stdin, stdout and stderr, sent once the request was taken."""
    fds = array.array("i")
    _, ancillary, _, _ = conn.recvmsg(1, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    conn.settimeout(None)
    return list(fds)


def _handle(conn: socket.socket, facts: dict) -> str | None:
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    if uid != os.getuid():
        return None
    message = _receive(conn)
    if message.get("ping"):
        conn.sendall(b"A")
    elif message.get("status"):
        conn.sendall(b"A" + json.dumps({**facts, "key": server_key()}).encode())
    elif message.get("stop"):
        conn.sendall(b"AS")
        return "stop"
    elif "argv" in message:
        try:
            saved_cwd = os.getcwd()
            os.chdir(message["cwd"])
            os.chdir(saved_cwd)
        except OSError:
            conn.sendall(b"R")  # the client runs it itself, and reports the folder as it would
            return None
        conn.sendall(b"A")
        fds = _descriptors(conn)
        try:
            if len(fds) == 3:
                facts["served"] += 1
                conn.sendall(CODE.pack(_run(conn, message, fds)))
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
    return None


def _run(conn: socket.socket, message: dict, fds: list[int]) -> int:
    """Run one command as the client's process would; its exit code. Everything it changes in
    this process (folder, umask, environment, descriptors 0-2, sys streams, argv) is put back."""
    from tfprof.cli.main import main

    saved_env, saved_cwd, saved_umask = dict(os.environ), os.getcwd(), os.umask(0o022)
    saved_io = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__, sys.argv)
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(conn, done), daemon=True)
    _State.forwarded_term = False
    try:
        os.chdir(message["cwd"])
        os.umask(int(message["umask"]))
        os.environ.clear()
        os.environ.update(message["env"])
        tempfile.tempdir = None  # found again from the client's TMPDIR, as in a process of its own
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        sys.stdin, sys.stdout, sys.stderr = (_stream(fd, spec, fd == 0) for fd, spec in enumerate(message["stdio"]))
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
        sys.argv = ["tfprof", *message["argv"]]
        watcher.start()
        _State.busy = True
        try:
            code = main(list(message["argv"]))
        except KeyboardInterrupt:  # between main's own handlers and its return
            code = 130
        finally:
            _State.busy = False
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        return code
    finally:
        done.set()
        if watcher.is_alive():
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)  # wakes the watcher's recv
            watcher.join()
        _State.forwarded_term = False
        sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__, sys.argv = saved_io
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)  # the client's descriptors are let go here
        os.close(null)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = None
        os.umask(saved_umask)
        os.chdir(saved_cwd)


def _stream(fd: int, spec: list | None, reading: bool) -> io.TextIOWrapper:
    """A text stream on descriptor ``fd`` configured as the client's (encoding, errors;
    line-buffered where Python's own would be)."""
    encoding, errors = spec if spec else ("utf-8", "strict")
    buffering = fd == 2 or (fd == 1 and os.isatty(1))
    raw = io.open(fd, "rb" if reading else "wb", closefd=False)  # noqa: UP020 - a descriptor, not a path
    return io.TextIOWrapper(raw, encoding=encoding, errors=errors, line_buffering=buffering, write_through=fd == 2)


def _watch(conn: socket.socket, done: threading.Event) -> None:
    """Raise what the client forwards in the main thread: ``I`` a SIGINT, ``T`` a SIGTERM; a
    client gone (EOF) counts as SIGINT."""
    while not done.is_set():
        try:
            byte = conn.recv(1)
        except OSError:
            byte = b""
        if done.is_set():
            return
        signum = signal.SIGTERM if byte == b"T" else signal.SIGINT
        if signum == signal.SIGTERM:
            _State.forwarded_term = True
        signal.pthread_kill(threading.main_thread().ident, signum)
        if not byte:
            return


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tfprof.cli.server SOCKET", file=sys.stderr)
        return 2
    return serve(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
