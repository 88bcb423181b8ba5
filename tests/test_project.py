"""Project hygiene: generated files are current, the layering holds, every column is documented."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tfprof.schema import TABLES

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "tfprof" / "schema" / "proto"


def test_generated_proto_modules_are_current(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_protos.py"), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    fresh = sorted((tmp_path / "tfprof" / "schema" / "proto").glob("*_pb2.py"))
    committed = sorted(PROTO_DIR.glob("*_pb2.py"))
    assert [p.name for p in fresh] == [p.name for p in committed]
    assert len(committed) == len(list(PROTO_DIR.glob("*.proto")))
    for a, b in zip(fresh, committed):
        assert a.read_bytes() == b.read_bytes(), f"{b.name} is stale: run python tools/gen_protos.py"


def test_schema_doc_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schema_doc.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_column_has_a_doc():
    for t in TABLES.values():
        assert t.doc and t.grain
        for f in t.schema:
            assert f.metadata and f.metadata.get(b"doc"), f"{t.name}.{f.name} has no doc"
        assert set(t.sort_key) <= set(t.schema.names)


# Allowed import edges between the package's layers (STYLE.md): data flows one way.
ALLOWED = {
    "schema": set(),
    "ingest": {"schema", "errors"},
    "queries": {"schema", "errors", "profile"},
    "views": {"schema", "errors"},
    "cli": {"schema", "errors", "queries", "views", "profile", "store", "ingest", "api", "output"},
    # tf.profiler's Python API: a shell like the CLI, over the same core.
    "tf_api": {"schema", "errors", "queries", "views", "profile", "store", "ingest", "api", "output"},
}
# Leaf modules at the package's top that anything may import: they import only these.
LEAVES = {"output": {"errors"}, "manifest": {"errors", "schema"}, "sqlbox": {"errors", "schema"}}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tfprof."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("tfprof.")}
    return found


def test_layering():
    for layer, allowed in ALLOWED.items():
        for path in (ROOT / "tfprof" / layer).rglob("*.py"):
            bad = _imports(path) - allowed - {layer}
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_leaf_modules_stay_leaves():
    for name, allowed in LEAVES.items():
        bad = _imports(ROOT / "tfprof" / f"{name}.py") - allowed
        assert not bad, f"tfprof/{name}.py imports {bad}"


def test_only_ingest_parses_protobuf_inputs():
    for path in (ROOT / "tfprof").rglob("*.py"):
        rel = path.relative_to(ROOT / "tfprof").parts
        if rel[0] in ("ingest", "schema"):
            continue
        assert "google.protobuf" not in path.read_text() or rel[0] == "schema", path
