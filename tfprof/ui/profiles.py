"""The profiles a UI server was given, by id, and the views it has built on them.

Ids are the profiles' positions (``0``, ``1``, ...): a request names a profile only by its id,
so no request can make the server open a path of its choosing. Built views (``Tree``) are kept
in a small least-recently-used cache keyed by profile, view and options: unfolding a node or
drawing a flame graph reuses the view the page already asked for. One lock serialises the work
on the profiles (DuckDB connections and the view engines are not shared between threads).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfprof.api.browse import Tree, browse
from tfprof.api.options import VIEWS, Options
from tfprof.profile import Profile
from tfprof.ui.params import BadRequest

CACHED_VIEWS = 8



def check_view(cmd: str) -> None:
    """A ``LookupError`` (404) for a view name the registry does not hold."""
    if cmd not in VIEWS:
        raise LookupError(f"unknown view `{cmd[:40]}`; valid: {', '.join(VIEWS)}")

@dataclass
class Entry:
    """One profile of the server: its id, the path it was given as, and the loaded profile."""

    id: str
    label: str
    path: str
    profile: Profile


class Profiles:
    """The server's profiles (module docstring)."""

    def __init__(self, entries: Iterable[Entry]):
        self.entries = {e.id: e for e in entries}
        self.lock = threading.RLock()
        self._views: OrderedDict[tuple, Tree] = OrderedDict()
        self._job: dict[str, Any] | None = None

    @classmethod
    def load(cls, items: Iterable[str | Path | Profile], labels: list[str] | None = None,
             loader: Callable[[str], Profile] | None = None) -> Profiles:
        """Profiles from paths (loaded with ``loader``, ``tfprof.api.load`` by default) or
        loaded ``Profile`` objects; ``labels``: the paths as the user gave them (the command
        lines the page shows use them)."""
        if loader is None:
            from tfprof.api import load as loader
        entries = []
        items, labels = expand_jobs(list(items), labels)
        for k, item in enumerate(items):
            if isinstance(item, Profile):
                path = str(item.store) if item.store is not None else f"profile{k}"
                prof = item
            else:
                path, prof = str(item), loader(str(item))
            path = labels[k] if labels else path
            entries.append(Entry(str(k), Path(path).name, path, prof))
        if not entries:
            raise BadRequest("give at least one profile")
        return cls(entries)

    def job(self) -> dict[str, Any]:
        """The profiles seen as the ranks of one job (``tfprof.api.ranks``), made once: the report's
        tables as rows and its findings as sentences, each rank with its profile's id; or
        ``{"job": None, "why": ...}`` where they are no job (one profile, no step)."""
        with self.lock:
            if self._job is None:
                self._job = _job_page(list(self.entries.values()))
            return self._job

    def get(self, pid: str) -> Entry:
        entry = self.entries.get(pid)
        if entry is None:
            raise LookupError(f"no profile `{pid[:40]}`; this server has ids {', '.join(self.entries)}")
        return entry

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for e in self.entries.values():
            counts = e.profile.row_counts()
            steps = e.profile.frame("steps")["step"].to_list()
            out.append({"id": e.id, "label": e.label, "path": e.path, "source": e.profile.source,
                        "nodes": counts["nodes"], "steps": steps})
        return out

    def tree(self, pid: str, cmd: str, options: Options) -> Tree:
        """View ``cmd`` of profile ``pid`` (built, or from the cache)."""
        entry = self.get(pid)
        check_view(cmd)
        key = (pid, cmd, options)
        with self.lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
            tree = browse(entry.profile, cmd, options)
            self._views[key] = tree
            while len(self._views) > CACHED_VIEWS:
                self._views.popitem(last=False)
            return tree


def expand_jobs(items: list, labels: list[str] | None) -> tuple[list, list[str] | None]:
    """A directory that is not a store stands for the traces below it (a distributed job's, one
    per rank: ``tfprof.api.ranks.job_paths``); files, stores and profiles stay as they are."""
    from tfprof.api.ranks import job_paths
    from tfprof.manifest import MANIFEST

    out, out_labels = [], []
    for k, item in enumerate(items):
        label = labels[k] if labels else None
        if not isinstance(item, Profile) and Path(item).is_dir() and not (Path(item) / MANIFEST).exists():
            found = job_paths([item])
            out += found
            out_labels += [str(f) for f in found]
        else:
            out.append(item)
            out_labels.append(label if label is not None else (None if isinstance(item, Profile) else str(item)))
    return out, (out_labels if labels else None)


def _job_page(entries: list[Entry]) -> dict[str, Any]:
    import json

    from tfprof.api.ranks import ranks
    from tfprof.api.shell import export
    from tfprof.errors import TfprofError

    if len(entries) < 2:
        return {"job": None, "why": "one profile is open: give the server a distributed job's traces, one per rank "
                                    "(tfprof ui traces/ or tfprof ui rank-*.pt.trace.json.gz)"}
    pids = {Path(e.path): e.id for e in entries}
    try:
        report = ranks([(Path(e.path), e.profile) for e in entries])
    except TfprofError as exc:
        return {"job": None, "why": str(exc).splitlines()[0]}
    if all(s.how == "file order" for s in report.sources):
        return {"job": None, "why": "these profiles record no rank and their file names carry none (rank-N): they "
                                    "do not look like one job's ranks; tfprof ranks compares them as given"}

    def rows(frame):
        return json.loads(export(frame, "json"))

    return {"job": True,
            "sources": [{"rank": s.rank, "how": s.how, "path": str(s.path), "pid": pids.get(s.path)} for s in report.sources],
            "ranks": rows(report.ranks), "steps": rows(report.steps), "ops": rows(report.ops.head(20)),
            "findings": report.finding_lines(), "text": report.text()}
