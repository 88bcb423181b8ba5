"""Plugins: Python modules the command line imports before it builds its commands, named in
``TFPROF_PLUGINS`` (comma-separated module names, found on ``sys.path``/``PYTHONPATH``).

A plugin registers what it adds when imported: a view (``tfprof.api.VIEWS[name] = TreeSpec(...)``),
a metric (``tfprof.api.options.register_metric``), an output kind (``tfprof.api.sinks.register``).
The command line then offers it as its own: a view's command, a metric's select name, order and
threshold options, in the help too, in ``tfprof>`` and in the UI it starts; the resident server
imports the same plugins and serves their commands.

>>> names({"TFPROF_PLUGINS": " my_metrics, team.views ,"})
['my_metrics', 'team.views']
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping

from tfprof.errors import TfprofError

ENV = "TFPROF_PLUGINS"
_loaded: list[str] = []


def names(environ: Mapping[str, str] | None = None) -> list[str]:
    """The plugin modules ``TFPROF_PLUGINS`` names, in order."""
    raw = (os.environ if environ is None else environ).get(ENV, "")
    return [n.strip() for n in raw.split(",") if n.strip()]


def load() -> list[str]:
    """Import the plugins (each once per process); the names imported. A plugin that cannot be
    imported is a ``TfprofError`` naming it and what it raised."""
    for name in names():
        if name in _loaded:
            continue
        if not all(part.isidentifier() for part in name.split(".")):
            raise TfprofError(f"{ENV}: `{name}` is no module name; give comma-separated module names")
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - whatever a plugin raises, said in one line
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TfprofError(f"{ENV}: cannot import `{name}`: {type(exc).__name__}"
                              f"{': ' + detail if detail else ''}; fix the plugin or unset {ENV}") from None
        _loaded.append(name)
    return list(_loaded)
