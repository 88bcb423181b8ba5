"""The profiles a UI server was given, by id, and the views it has built on them.

Ids are the profiles' positions (``0``, ``1``, ...): a request names a profile only by its id,
so no request can make the server open a path of its choosing. Built views (``Tree``) are kept
in a small least-recently-used cache keyed by profile, view and options: unfolding a node or
drawing a flame graph reuses the view the page already asked for. One lock serialises the work
on the profiles (DuckDB connections and the view engines are not shared between threads).

The server follows its files. Each profile read from a path keeps that path's identity as it was
read (``tfprof.manifest.identity``: a store's directory and manifest, a trace file's device,
inode, size and times), compared on each request that names the profile (a few ``stat`` calls).
A profile replaced on disk (a store ingested again with ``--force``, another put in its place, a
trace rewritten) is read again whole, and every view cached from it is dropped; one deleted is
answered 410 with the reason. A request reads the profiles within ``reading()``: when one of
them changed while it ran, its answer is thrown away (``ProfileChangedError``) and the endpoint
asks again, so an answer never mixes two generations of a profile.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfprof.api.browse import Tree, browse
from tfprof.api.options import VIEWS, Options
from tfprof.errors import ProfileChangedError, TfprofError
from tfprof.manifest import identity
from tfprof.profile import Profile
from tfprof.ui.params import BadRequest

CACHED_VIEWS = 8
LOAD_TRIES = 3  # a file that changes while it is read this many times running is refused


class ProfileGone(LookupError):
    """A profile's store or file was deleted since the server read it (answered 410)."""



def check_view(cmd: str) -> None:
    """A ``LookupError`` (404) for a view name the registry does not hold."""
    if cmd not in VIEWS:
        raise LookupError(f"unknown view `{cmd[:40]}`; valid: {', '.join(VIEWS)}")

@dataclass
class Entry:
    """One profile of the server: its id, the path it was given as, the loaded profile, and the
    file or store it was read from (absolute; None for a profile in memory) with that source's
    identity as read (``tfprof.manifest.identity``) and how many times it was read again."""

    id: str
    label: str
    path: str
    profile: Profile
    source: Path | None = None
    identity: tuple | None = None
    generation: int = 0


def read_source(source: Path, loader: Callable[[str], Profile]) -> tuple[Profile, tuple | None]:
    """The profile at ``source`` and the identity of what was read: a store's as it was opened
    (``Profile.open`` checks that it did not change meanwhile), a file's taken before and after
    it was read, read again while they differ."""
    for _ in range(LOAD_TRIES):
        before = identity(source)
        prof = loader(str(source))
        if prof.identity is not None:
            return prof, prof.identity
        if identity(source) == before:
            return prof, before
    raise ProfileChangedError(f"`{source}` kept changing while it was read")


class Profiles:
    """The server's profiles (module docstring)."""

    def __init__(self, entries: Iterable[Entry], loader: Callable[[str], Profile] | None = None,
                 job_given: bool = False):
        self.entries = {e.id: e for e in entries}
        self.job_given = job_given  # given as one job's traces (a directory or glob of them, a catalog's job run)
        self.lock = threading.RLock()
        self._views: OrderedDict[tuple, Tree] = OrderedDict()
        self._job: dict[str, Any] | None = None
        self._loader = loader
        # within ``reading()``: the profiles the request read, with the generation it read
        self._touched: dict[str, int] | None = None

    @classmethod
    def load(cls, items: Iterable[str | Path | Profile], labels: list[str] | None = None,
             loader: Callable[[str], Profile] | None = None, job: bool | None = None) -> Profiles:
        """Profiles from paths (loaded with ``loader``, ``tfprof.api.load`` by default) or
        loaded ``Profile`` objects; ``labels``: the paths as the user gave them (the command
        lines the page shows use them); ``job``: whether they were given as one job's traces
        (None: when each item is a directory of traces or a glob pattern, ``given_as_job``)."""
        if loader is None:
            from tfprof.api import load as loader
        entries = []
        items = list(items)
        job = given_as_job(items) if job is None else job
        items, labels = expand_jobs(items, labels)
        for k, item in enumerate(items):
            if isinstance(item, Profile):  # followed when it was opened from a store
                path = str(item.store) if item.store is not None else f"profile{k}"
                prof, ident = item, item.identity
                source = Path(item.store).absolute() if ident is not None else None
            else:
                path, source = str(item), Path(item).absolute()
                prof, ident = read_source(source, loader)
            path = labels[k] if labels else path
            entries.append(Entry(str(k), Path(path).name, path, prof, source, ident))
        if not entries:
            raise BadRequest("give at least one profile")
        return cls(entries, loader, job_given=job and len(entries) > 1)

    def is_job(self) -> bool:
        """Whether the profiles are one distributed job's ranks, so that the page shows them as
        such: given as one job, or saying so themselves (``tfprof.ingest.job.looks_like_one_job``:
        each records its rank, or each file name carries one), not any profiles opened together."""
        from tfprof.api.ranks import is_one_job

        if self.job_given or len(self.entries) < 2:
            return self.job_given
        try:
            return is_one_job([(e.path, e.profile) for e in self.entries.values()])
        except (TfprofError, OSError):  # one deleted or damaged since (the listing says so): no job shown
            return False

    def job(self) -> dict[str, Any]:
        """The profiles seen as the ranks of one job (``tfprof.api.ranks``), made once: the report's
        tables as rows and its findings as sentences, each rank with its profile's id; or
        ``{"job": None, "why": ...}`` where they are no job (one profile, no step)."""
        with self.lock:
            for pid in self.entries:
                self.get(pid)  # each as it is now on disk (a change drops the page)
            if self._job is None:
                self._job = _job_page(list(self.entries.values()), self.is_job())
            return self._job

    def get(self, pid: str) -> Entry:
        """Profile ``pid`` as its source is now: read again if it was replaced, ``ProfileGone``
        if it was deleted; within ``reading()``, ``ProfileChangedError`` if it was read again
        after the request read it."""
        entry = self.entries.get(pid)
        if entry is None:
            raise LookupError(f"no profile `{pid[:40]}`; this server has ids {', '.join(self.entries)}")
        with self.lock:
            self._follow(entry)
            if self._touched is not None and self._touched.setdefault(pid, entry.generation) != entry.generation:
                raise ProfileChangedError(f"`{entry.path}` changed while the UI read it")
        return entry

    def _follow(self, entry: Entry) -> None:
        """Read ``entry`` again if its source is no longer what was read (dropping all that was
        built from it first, whether or not it reads); ``ProfileGone`` if it is not there."""
        if entry.source is None:
            return
        now = identity(entry.source)
        if now is not None and now == entry.identity:
            return
        self._forget(entry.id)
        entry.identity = None  # until read whole again: nothing of it is used meanwhile
        if now is None:
            raise ProfileGone(f"`{entry.path}` was deleted since the UI opened it; put it back (it is read "
                              "again then) or start the UI on another profile")
        entry.profile, entry.identity = read_source(entry.source, self._loader or _default_loader())
        entry.generation += 1

    def _forget(self, pid: str) -> None:
        """Drop every view built from profile ``pid``, and the ranks page (built from all)."""
        for key in [k for k in self._views if k[0] == pid]:
            del self._views[key]
        self._job = None

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """One request's reads: at its end (or when it fails), ``ProfileChangedError`` if a
        profile it read was replaced or deleted meanwhile, so that its answer is not given."""
        with self.lock:
            self._touched = {}
            try:
                yield
            except ProfileChangedError:
                raise
            except Exception:  # e.g. a file gone under a scan: the change is the reason
                self._check_touched()
                raise
            else:
                self._check_touched()
            finally:
                self._touched = None

    def _check_touched(self) -> None:
        for pid, generation in (self._touched or {}).items():
            entry = self.entries[pid]
            if entry.generation != generation or (entry.source is not None and identity(entry.source) != entry.identity):
                raise ProfileChangedError(f"`{entry.path}` changed while the UI read it",
                                          deleted=entry.source is not None and identity(entry.source) is None)

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for pid in self.entries:
            try:
                e = self.get(pid)
            except ProfileGone as exc:  # listed, with why it cannot be shown
                e = self.entries[pid]
                out.append({"id": e.id, "label": e.label, "path": e.path, "source": "", "nodes": 0, "steps": [],
                            "error": str(exc.args[0]) if exc.args else str(exc)})
                continue
            except ProfileChangedError:
                raise
            except TfprofError as exc:  # read again, and no longer loads (damaged, half-written)
                e = self.entries[pid]
                out.append({"id": e.id, "label": e.label, "path": e.path, "source": "", "nodes": 0, "steps": [],
                            "error": str(exc)})
                continue
            counts = e.profile.row_counts()
            steps = e.profile.frame("steps")["step"].to_list()
            out.append({"id": e.id, "label": e.label, "path": e.path, "source": e.profile.source,
                        "nodes": counts["nodes"], "steps": steps})
        return out

    def tree(self, pid: str, cmd: str, options: Options) -> Tree:
        """View ``cmd`` of profile ``pid`` (built, or from the cache)."""
        entry = self.get(pid)
        check_view(cmd)
        key = (pid, entry.generation, cmd, options)
        with self.lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
            tree = browse(entry.profile, cmd, options)
            self._views[key] = tree
            while len(self._views) > CACHED_VIEWS:
                self._views.popitem(last=False)
            return tree


def _default_loader() -> Callable[[str], Profile]:
    from tfprof.api import load

    return load


def _names_traces(item) -> bool:
    """Whether ``item`` stands for a job's traces: a glob pattern, or a directory that is not a store."""
    import glob

    from tfprof.manifest import MANIFEST

    if isinstance(item, Profile):
        return False
    return glob.has_magic(str(item)) or (Path(item).is_dir() and not (Path(item) / MANIFEST).exists())


def given_as_job(items: list) -> bool:
    """Whether ``items`` were given as one job's traces: each a directory of them or a glob pattern."""
    return bool(items) and all(_names_traces(item) for item in items)


def expand_jobs(items: list, labels: list[str] | None) -> tuple[list, list[str] | None]:
    """A directory that is not a store, or a glob pattern, stands for the traces it names (a
    distributed job's, one per rank: ``tfprof.api.ranks.job_paths``); files, stores and
    profiles stay as they are."""
    from tfprof.api.ranks import job_paths

    out, out_labels = [], []
    for k, item in enumerate(items):
        label = labels[k] if labels else None
        if _names_traces(item):
            found = job_paths([item])
            out += found
            out_labels += [str(f) for f in found]
        else:
            out.append(item)
            out_labels.append(label if label is not None else (None if isinstance(item, Profile) else str(item)))
    return out, (out_labels if labels else None)


def _job_page(entries: list[Entry], is_job: bool) -> dict[str, Any]:
    import json

    from tfprof.api.ranks import job_members, job_report
    from tfprof.api.shell import export
    from tfprof.errors import TfprofError

    if len(entries) < 2:
        return {"job": None, "why": "one profile is open: give the server a distributed job's traces, one per rank "
                                    "(tfprof ui traces/ or tfprof ui rank-*.pt.trace.json.gz)"}
    if not is_job:
        return {"job": None, "why": "these profiles record no rank and their file names carry none (rank-N): they "
                                    "do not look like one job's ranks; tfprof ranks compares them as given"}
    pids = {Path(e.path): e.id for e in entries}
    # ranks that cannot be (two files claiming one, one beyond the job) raise: the request's 400, naming the files
    members = job_members([(Path(e.path), e.profile) for e in entries])
    try:
        report = job_report(members)
    except TfprofError as exc:
        return {"job": None, "why": str(exc).splitlines()[0]}

    def rows(frame):
        return json.loads(export(frame, "json"))

    return {"job": True,
            "sources": [{"rank": s.rank, "how": s.how, "path": str(s.path), "pid": pids.get(s.path)} for s in report.sources],
            "ranks": rows(report.ranks), "steps": rows(report.steps), "ops": rows(report.ops.head(20)),
            "findings": report.finding_lines(), "text": report.text()}
