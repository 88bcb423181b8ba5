"""Names a package loads with the submodule that holds them, on first use (PEP 562): what keeps
``import tfprof.schema.metrics`` or ``tfprof.catalog.uri`` from importing pyarrow and polars for
the command line's help (tfprof/cli/__init__.py)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` (name -> submodule) is
    looked up in ``package.<submodule>``, imported then; any other name is an AttributeError."""

    def getattr_(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return getattr_
