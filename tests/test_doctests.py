"""Every example in the package's docstrings (``>>>``) runs and prints what it says, with
``tfprof`` imported: the examples are part of the docs, so they are tested like them."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import tfprof

PACKAGE = Path(tfprof.__file__).resolve().parent
MODULES = sorted(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
                 for p in PACKAGE.rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))


def test_the_package_has_examples():
    assert len(MODULES) >= 30


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, extraglobs={"tfprof": tfprof}, report=False,
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert not result.failed, f"{name}: {result.failed} of {result.attempted} examples failed"
