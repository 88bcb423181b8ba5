"""The notebooks in notebooks/ run top to bottom on the bundled samples, and are committed clean.

Each is executed by nbclient in a fresh kernel under a time limit; any cell error fails the test
(nbclient raises ``CellExecutionError`` with the cell and the traceback).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import tfprof

# nbformat and nbclient are in the dev (and notebooks) extras; without them this module is
# skipped, not a collection error that stops the whole run.
nbformat = pytest.importorskip("nbformat", reason="needs nbformat and nbclient: pip install -e '.[dev]'")
NotebookClient = pytest.importorskip("nbclient", reason="needs nbclient: pip install -e '.[dev]'").NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
FIXTURES = Path(__file__).parent / "fixtures"


def test_the_notebooks_are_there():
    assert {p.name for p in NOTEBOOKS} >= {"model_architecture.ipynb", "time_and_memory.ipynb", "foreign_profiles.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path):
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: strip the outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path):
    book = nbformat.read(path, as_version=4)
    client = NotebookClient(
        book, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    # the kernel imports the tfprof these tests import, installed or not
    path_var = os.pathsep.join(filter(None, [str(Path(tfprof.__file__).parent.parent), os.environ.get("PYTHONPATH")]))
    client.execute(env={**os.environ, "PYTHONPATH": path_var})  # raises on the first failing cell
    outputs = [o for cell in book.cells if cell.cell_type == "code" for o in cell.outputs]
    kinds = {k for o in outputs for k in o.get("data", {})}
    assert {"text/html", "image/png"} <= kinds, f"{path.name}: expected tables and at least one chart"
    assert not [o for o in outputs if o.get("name") == "stderr" and "Warning" in o.get("text", "")]


def test_bundled_samples_are_the_fixture_profiles():
    """The samples are copies of fixtures made by tools/make_fixtures.py; regenerating a fixture
    means copying it again."""
    assert tfprof.sample_path().read_bytes() == (FIXTURES / "cnn" / "profile.pb").read_bytes()
    assert tfprof.sample_path("multistep").read_bytes() == (FIXTURES / "multistep" / "profile.pb").read_bytes()
    job = sorted(p.name for p in tfprof.sample_path("job").iterdir())
    assert job == [f"rank-{r}.pt.trace.json.gz" for r in range(4)]
    assert all((tfprof.sample_path("job") / n).read_bytes() == (FIXTURES / "ranks" / "gloo4" / n).read_bytes() for n in job)
    with pytest.raises(tfprof.OptionError, match="multistep"):
        tfprof.sample_path("mnist")
