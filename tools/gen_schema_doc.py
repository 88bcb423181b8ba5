"""Write docs/SCHEMA.md from the table contract in tfprof/schema/tables.py.

Usage: python tools/gen_schema_doc.py [--check]

With --check nothing is written; the exit code is 1 when docs/SCHEMA.md is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tfprof.schema.tables import TABLES  # noqa: E402

INTRO = """# Table schema

Every input tfprof reads (GraphDef, RunMetadata, OpLogProto, checkpoint, ProfileProto) is
flattened into the tables below; every view and SQL query reads them. The Arrow schemas are
defined once, in `tfprof/schema/tables.py`; this page is generated from it by
`python tools/gen_schema_doc.py` (a test fails when it is out of date).

Conventions: `node_id`, `step` and `device` are the join keys everywhere. `node_id` is tfprof's
node id (insertion order: GraphDef nodes in file order, then nodes first seen in RunMetadata).
Devices are lower-cased, as tfprof stores them. `dict<string>` columns are Arrow dictionaries
(polars `Categorical`). Times are microseconds; "us since epoch" columns are the raw
timestamps of the step stats. Rows are sorted by the listed key; rows that tie on it keep the
order of the source records.

Where the two kinds of input differ: only RunMetadata carries the per-allocator entries
(`allocator_memory` is empty for a ProfileProto); everything else is identical whichever way a
profile was ingested (tested on every fixture).

In SQL (`tfprof sql`, `Profile.sql`) each table is a view of the same name; in Python,
`Profile.table(name)` gives Arrow, `Profile.lazy(name)` a polars LazyFrame.
"""


def _type(t) -> str:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return f"dict<{t.value_type}>"
    if pa.types.is_list(t):
        return f"list<{t.value_type}>"
    return str(t)


def render() -> str:
    out = [INTRO]
    for t in TABLES.values():
        out.append(f"## `{t.name}`\n")
        out.append(f"One row: {t.grain}. {t.doc}\n")
        if t.sort_key:
            out.append(f"Sorted by: {', '.join(f'`{k}`' for k in t.sort_key)}.\n")
        out.append("| column | type | unit | null | meaning |")
        out.append("|---|---|---|---|---|")
        for f in t.schema:
            meta = {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
            unit = meta.get("unit", "")
            doc = meta["doc"].replace("|", "\\|")
            out.append(f"| `{f.name}` | {_type(f.type)} | {unit} | {'yes' if f.nullable else 'no'} | {doc} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check that docs/SCHEMA.md is current")
    args = ap.parse_args(argv)
    path = ROOT / "docs" / "SCHEMA.md"
    text = render()
    if args.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is out of date; run python tools/gen_schema_doc.py", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
