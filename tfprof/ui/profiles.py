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

    @classmethod
    def load(cls, items: Iterable[str | Path | Profile], labels: list[str] | None = None,
             loader: Callable[[str], Profile] | None = None) -> Profiles:
        """Profiles from paths (loaded with ``loader``, ``tfprof.api.load`` by default) or
        loaded ``Profile`` objects; ``labels``: the paths as the user gave them (the command
        lines the page shows use them)."""
        if loader is None:
            from tfprof.api import load as loader
        entries = []
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
