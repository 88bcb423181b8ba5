"""Project hygiene: generated files are current, the layering holds, every column is documented,
the repository refers to no document outside it."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


# What each part of the package may import (besides itself): data flows one way,
# ingest -> tables (schema) -> queries -> views -> api -> shells, and the imports go the other way.
# The base is the leaf modules everything may import: errors, schema, the file helpers, and
# the Profile with its store, which import nothing above them.
BASE = {
    "errors": set(),
    "stopping": set(),
    "varint": set(),
    "samples": {"errors"},
    "kernels": {"errors"},
    "tf_names": set(),
    "malloc": set(),
    "lazy": set(),
    "plugins": {"errors"},
    "schema": {"errors", "lazy"},
    "output": {"errors", "stopping"},
    "manifest": {"errors", "schema"},
    "sqlbox": {"errors", "schema"},
    "store": {"errors", "schema", "manifest", "output", "stopping", "malloc"},
    "profile": {"errors", "schema", "manifest", "output", "store", "sqlbox", "stopping"},
}
ALL_BASE = set(BASE)
LAYERS = {
    **BASE,
    "ingest": ALL_BASE,
    "queries": ALL_BASE,
    "views": ALL_BASE | {"queries"},
    "api": ALL_BASE | {"ingest", "queries", "views"},
    # The web UI: a shell like the CLI (an ASGI app over the api); the CLI starts it.
    "ui": ALL_BASE | {"api"},
    # Many runs: a catalog of them, views and SQL across them, the reference backend on Spark.
    "catalog": ALL_BASE | {"ingest", "queries", "views", "api"},
    "cli": ALL_BASE | {"api", "ui", "catalog"},
    # tf.profiler's Python API: a shell like the CLI, which also turns a tf.Graph into inputs.
    "tf_api": ALL_BASE | {"api", "ingest", "queries", "views"},
}
# The package's own entry points: `import tfprof` (lazy names) and `python -m tfprof`.
TOP = {"__init__": set(LAYERS), "__main__": {"cli"}}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """The tfprof modules ``path`` imports, anywhere in it (functions too), as dotted names."""
    found = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            if module == "tfprof" or module.startswith("tfprof."):
                found.add(module)
                found |= {f"{module}.{a.name}" for a in node.names}  # a submodule imported by name
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name == "tfprof" or a.name.startswith("tfprof.")}
    return found


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / "tfprof").rglob("*.py")) if "_pb2" not in p.name}


def test_layering_covers_every_module():
    mods = _modules()
    parts = {_part(m) for m in mods if m != "tfprof"} | {"__init__"}
    assert parts <= set(LAYERS) | set(TOP), f"parts with no layer: {parts - set(LAYERS) - set(TOP)}"
    bad = []
    for module, path in mods.items():
        part = _part(module) if module != "tfprof" else "__init__"
        allowed = {**LAYERS, **TOP}[part] | {part}
        for target in _imports(path):
            if target == "tfprof" and part != "__init__":
                continue  # `from tfprof import x` is checked as tfprof.x
            other = _part(target)
            if other not in allowed and not (target in mods and _part(target) in allowed):
                bad.append(f"{path.relative_to(ROOT)} imports {target} ({part} -> {other})")
    assert not bad, "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    edges = {}
    for module, path in mods.items():
        targets = set()
        for t in _imports(path):
            while t and t not in mods:  # `from tfprof.x import name`: the module tfprof.x
                t = t.rpartition(".")[0]
            if t and t != module:
                targets.add(t)
        edges[module] = targets
    return edges


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of the import graph, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    found.append(sorted(comp))
    return found


def test_no_import_cycles():
    """Package ``__init__`` modules that re-export their submodules are left out (a package
    importing its own children is not a cycle of meaning)."""
    edges = _graph()
    for module in list(edges):
        edges[module] = {t for t in edges[module] if not t.startswith(module + ".")}
    edges.pop("tfprof", None)
    for targets in edges.values():
        targets.discard("tfprof")
    cycles = [c for c in _strongly_connected(edges) if len(c) > 1]
    assert not cycles, cycles


def test_cycle_finder_finds_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]


def test_only_ingest_parses_protobuf_inputs():
    for path in (ROOT / "tfprof").rglob("*.py"):
        rel = path.relative_to(ROOT / "tfprof").parts
        if rel[0] in ("ingest", "schema"):
            continue
        assert "google.protobuf" not in path.read_text() or rel[0] == "schema", path


def test_tf_api_exports_every_listed_name():
    import tfprof
    import tfprof.tf_api

    for name in tfprof.tf_names.TF_API_NAMES:
        assert getattr(tfprof.tf_api, name) is not None
        assert name == "ALL_ADVICE" or getattr(tfprof, name) is getattr(tfprof.tf_api, name) or name in (
            "profile", "advise")  # tfprof.profile / tfprof.advise: wrappers, the module name is taken


def test_no_module_imports_another_modules_private_names():
    """A name another module needs is public: ``from tfprof.x import _name`` couples the two
    through what ``x`` says is its own business."""
    bad = []
    for module, path in _modules().items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, source] if source else base)
            if source == "tfprof" or source.startswith("tfprof."):
                bad += [f"{path.relative_to(ROOT)}: from {source} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, "\n".join(bad)


def test_every_module_says_its_job_in_at_most_400_lines():
    long, silent = [], []
    for path in sorted((ROOT / "tfprof").rglob("*.py")):
        if path.name.endswith("_pb2.py"):
            continue  # generated by protoc
        text = path.read_text()
        if text.count("\n") > 400:
            long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
        if not ast.get_docstring(ast.parse(text)):
            silent.append(str(path.relative_to(ROOT)))
    assert not long, long
    assert not silent, silent


# References a reader of the repository cannot follow: the decisions list, the issue tracker and
# the specification documents, all kept outside it. Each pattern is written so that it does not
# match its own source line. Say the fact itself, or point to the document in the repository
# that says it (docs/COMPATIBILITY.md row N, docs/TFPROF_BEHAVIOUR.md section X).
_EXTERNAL_REFERENCE = re.compile(
    r"DECISIONS[ ]#"          # the decisions list, by number
    r"|\b[Ii]ssue\s*#?\d"     # the issue tracker: the word issue followed by a number
    r"|TFPROF_SPE[C]"         # the specification
    r"|shared/seed[s]"        # its seed documents
    r"|\.\./shared/"           # anything in the directory beside the checkout
    r"|(?i:\bspe[c](?:ification)?[ ]?(?:section[ ]?|§[ ]?)?\d)"  # its sections, by number
)
_SELF_CONTAINED = ("tfprof/", "tests/", "docs/", "benchmarks/", "tools/", "notebooks/", "fuzz/", ".ci/", "README.md")


def test_no_references_outside_the_repository():
    proc = subprocess.run(["git", "ls-files", "-z", "--", *_SELF_CONTAINED], cwd=ROOT, capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.decode(errors='replace').strip()}")
    hits = []
    for name in sorted(set(proc.stdout.decode().split("\0")) - {""}):
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the working tree
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if _EXTERNAL_REFERENCE.search(line):
                hits.append(f"{name}:{number}: {line.strip()[:160]}")
    assert not hits, "references to documents outside the repository:\n" + "\n".join(hits)
