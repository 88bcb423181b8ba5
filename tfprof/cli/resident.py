"""Where this user's resident tfprof server listens and how to talk to it: whether it is on, its
key and socket, the private folder check, one request, status and stop. Standard library only:
the thin client (``tfprof.cli.client``) imports it before anything heavy."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import stat
import struct
import sys
from pathlib import Path

# The commands a server runs: one-shot, reading their inputs and writing their outputs.
# Anything else (the interactive shell, help, --debug tracebacks) runs in the client's process.
SERVED = frozenset({"scope", "graph", "op", "code", "advise", "sql", "check", "tables", "diff", "steps", "overview", "memory"})
# The commands that never go to a server. With plugins (``TFPROF_PLUGINS``), a command in neither
# set may be a view a plugin registers: the server, which imported them, lists its commands.
LOCAL = frozenset({"demo", "ingest", "runs", "server", "ui"})
PLUGINS_ENV = "TFPROF_PLUGINS"
# The environment read once in a process: when modules are imported (numba, polars, thread pools),
# by Python as it starts (PYTHON*, the locale) and the temporary folder, which native libraries
# cache (polars' spill folder). A server serves only commands whose values match; tfprof's own
# TFPROF_* are read per call.
_IMPORT_ENV = ("NUMBA_", "POLARS_", "PYTHON", "OMP_", "MKL_", "OPENBLAS_", "RAYON_", "TMP", "TEMP", "LANG",
               "LC_ALL", "LC_CTYPE", PLUGINS_ENV)
# Limits on what a process uses over its life or in all (CPU seconds, address space, data): a
# server's use is not a fresh process's, so a client with a finite one runs its command itself.
_WHOLE_PROCESS_LIMITS = ("RLIMIT_CPU", "RLIMIT_RTTIME", "RLIMIT_AS", "RLIMIT_VMEM", "RLIMIT_DATA")
# From /proc/self/status: the rights and the CPUs and memory nodes a process has.
_STATUS = ("Uid:", "Gid:", "Groups:", "Cap", "NoNewPrivs:", "Seccomp", "Cpus_allowed_list:", "Mems_allowed_list:")
_PACKAGE = Path(__file__).resolve().parent.parent
ACCEPT_WAIT_S = 0.25  # a busy server does not answer in time: the command runs in its own process
CODE = struct.Struct("!i")
LENGTH = struct.Struct("!I")


def enabled() -> bool:
    """Whether this process may use (and start) a server: ``TFPROF_SERVER`` 1/0, else on unless
    ``CI`` is set."""
    value = os.environ.get("TFPROF_SERVER", "").strip().lower()
    if value:
        return value not in {"0", "off", "no", "false"}
    return os.environ.get("CI", "").strip().lower() in {"", "0", "false"}


def served(args: list[str]) -> bool:
    """Whether ``tfprof ARGS`` goes to the server: a one-shot command, no help, no --debug."""
    if not args or not enabled() or not hasattr(socket, "AF_UNIX"):
        return False
    if args[0] not in SERVED and not _plugin_command(args[0]):
        return False
    if any(a in {"--help", "-h", "-help", "--debug", "-debug"} for a in args):
        return False
    import resource

    return all(resource.getrlimit(getattr(resource, name))[0] == resource.RLIM_INFINITY
               for name in _WHOLE_PROCESS_LIMITS if hasattr(resource, name))


def _plugin_command(name: str) -> bool:
    """Whether ``name`` may be a command a plugin added (a view): asked only with plugins, for a
    word that is no command of tfprof's own and no option. The running server lists its
    commands; with none running, the command runs here and then starts one (``served``)."""
    if not os.environ.get(PLUGINS_ENV, "").strip() or name in LOCAL or not name.isidentifier():
        return False
    facts = status()
    return facts is None or name in facts.get("commands", ())


def cwd_error() -> str | None:
    """The ``Error:`` line for a working directory that no longer exists (or cannot be read), else
    None: relative paths cannot be resolved, nor can a server run the command there."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return "Error: the current directory no longer exists; cd to one that does and run the command again"
    except OSError as exc:
        return f"Error: cannot read the current directory ({exc.strerror}); cd to another and run the command again"
    return None


def server_dir() -> Path:
    """The folder of this user's server sockets (``TFPROF_SERVER_DIR``, else in the runtime dir)."""
    explicit = os.environ.get("TFPROF_SERVER_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(base) / f"tfprof-{os.getuid()}"


def server_key() -> str:
    """Names the server that may run this process's commands: same Python, same tfprof files
    (paths, sizes, modification times), same libraries installed, the same environment read
    once per process, and the same rights, view of the system and resource limits (which a
    server inherits from the client that starts it: see ``_process``)."""
    h = hashlib.sha256()
    h.update(f"{os.path.realpath(sys.executable)}\0{sys.version}\0{_PACKAGE}\0".encode())
    for name in sorted(k for k in os.environ if k.startswith(_IMPORT_ENV)):
        h.update(f"{name}={os.environ[name]}\0".encode())
    for line in (*_libraries(), *_process(), *_plugin_files()):
        h.update(f"{line}\0".encode())
    stack = [_PACKAGE]
    entries = []
    while stack:
        with os.scandir(stack.pop()) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith((".py", ".sql", ".pb", ".proto")):
                    st = entry.stat()
                    entries.append(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\0")
    for line in sorted(entries):
        h.update(line.encode())
    return h.hexdigest()[:16]


def _plugin_files() -> list[str]:
    """The plugins' files (``TFPROF_PLUGINS``; each module's file, or its package's ``.py``
    files) with their sizes and modification times: an edited plugin names a fresh server.
    Found on ``sys.path`` by name, nothing imported."""
    lines = []
    for name in (n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()):
        rel = Path(*name.split("."))
        for folder in (Path(p or ".") for p in sys.path):
            hits = [folder / rel.with_suffix(".py"), folder / rel]
            found = next((h for h in hits if h.exists()), None)
            if found is None:
                continue
            files = sorted(found.rglob("*.py")) if found.is_dir() else [found]
            for f in files:
                with contextlib.suppress(OSError):
                    st = f.stat()
                    lines.append(f"{name} {f} {st.st_size} {st.st_mtime_ns}")
            break
    return lines


def _libraries() -> list[str]:
    """The distributions installed where this Python finds libraries (site-packages, the user's,
    PYTHONPATH): each folder's modification time (an install, upgrade or removal changes its
    listing) and its dist-info names (they hold the versions), so an upgraded pyarrow, polars,
    duckdb, numba ... names a fresh server. Read from the folders: nothing is imported."""
    import site

    folders = [*site.getsitepackages(), site.getusersitepackages(),
               *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    lines = []
    for folder in dict.fromkeys(f for f in folders if f):
        try:
            lines.append(f"{folder} {os.stat(folder).st_mtime_ns}")
            with os.scandir(folder) as it:
                lines += sorted(e.name for e in it if e.name.endswith((".dist-info", ".egg-info", ".egg-link", ".pth")))
        except OSError:
            lines.append(f"{folder} -")
    return lines


def _process() -> list[str]:
    """What a command's own process would have that a request does not carry: its ids, groups,
    capabilities and confinement (seccomp, no_new_privs, LSM label), its view of the system
    (namespaces, cgroup), its CPUs, priority and resource limits. A server started by the client
    inherits them all, so a client whose differ finds no server of its key and starts its own."""
    import resource

    lines = [f"{os.geteuid()} {os.getegid()} {sorted(os.getgroups())}"]
    lines += [f"{n} {resource.getrlimit(getattr(resource, n))}" for n in sorted(dir(resource))
              if n.startswith("RLIMIT_")]
    with contextlib.suppress(OSError, AttributeError):
        lines.append(f"nice {os.getpriority(os.PRIO_PROCESS, 0)} {os.sched_getscheduler(0)}")
    for name in ("status", "cgroup", "attr/current"):
        with contextlib.suppress(OSError):
            text = Path("/proc/self", name).read_text(errors="replace")
            lines += [line for line in text.splitlines() if name != "status" or line.startswith(_STATUS)]
    with contextlib.suppress(OSError):
        lines += [os.readlink(f"/proc/self/ns/{n}") for n in sorted(os.listdir("/proc/self/ns"))
                  if not n.endswith("_for_children")]
    return lines


def socket_path(key: str | None = None) -> Path:
    return server_dir() / f"{key or server_key()}.sock"


def private_dir(path: Path, create: bool) -> bool:
    """Whether ``path`` is a directory owned by this user that nobody else can enter (made so
    when ``create``). Anything else is not used: another user could be listening there."""
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0


def request(message: dict, timeout: float = ACCEPT_WAIT_S) -> socket.socket | None:
    """Connect to the server and send ``message``; the connected socket once the server has
    taken the request (answered ``A``), else None: no server, busy past ``timeout``, or refused.

    Nothing but the message is sent before that answer: a request waiting in a busy server's
    queue must hold none of the client's descriptors (a pipe it holds would never end)."""
    path = socket_path()
    if not private_dir(path.parent, create=False):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        payload = json.dumps(message).encode()
        sock.sendall(LENGTH.pack(len(payload)) + payload)
        if sock.recv(1) != b"A":
            raise OSError("refused")
        sock.settimeout(None)
        return sock
    except OSError:
        sock.close()
        return None


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``sock``, or fewer when the other side closes first."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 20))
        if not chunk:
            break
        data += chunk
    return data


def status() -> dict | None:
    """The running server's facts (pid, socket, uptime, commands served), or None."""
    sock = request({"status": True}, timeout=1.0)
    if sock is None:
        return None
    with sock:
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return json.loads(data or b"{}")


def stop() -> bool:
    """Stop the running server; whether there was one."""
    sock = request({"stop": True}, timeout=1.0)
    if sock is None:
        return False
    with sock:
        sock.recv(1)
    return True
