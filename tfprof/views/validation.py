"""The validation table as ``tfprof check`` prints it (text or JSON), and the one-line warning
other commands print on stderr when it holds warnings or errors."""

from __future__ import annotations

import json

import pyarrow as pa

from tfprof.schema.checks import CHECKS, INFO, SEVERITIES

_PLURAL = {"error": "errors", "warning": "warnings", "info": "info"}


def report(table: pa.Table, profile: str, without_flops_rule=None) -> dict:
    """The report as data: ``{"profile", "counts", "entries"}``. ``counts`` adds up each
    severity's findings (a counting row stands for several); ``entries`` are the table's rows.
    With ``without_flops_rule`` (a frame of ``op``, ``nodes``: ``queries.flops.ops_without_formula``)
    also ``ops_without_flops_rule``: the graph's op types no shape rule covers, most nodes first."""
    entries = [
        {k: row[k] for k in ("severity", "code", "node", "step", "count", "detail")} for row in table.to_pylist()
    ]
    counts = dict.fromkeys(SEVERITIES, 0)
    for e in entries:
        counts[e["severity"]] += e["count"]
    data = {"profile": profile, "counts": counts, "entries": entries}
    if without_flops_rule is not None:
        data["ops_without_flops_rule"] = [{"op": op, "nodes": n} for op, n in without_flops_rule.iter_rows()]
    return data


def render_json(data: dict) -> str:
    """``report`` as JSON: keys in a fixed order, one entry per line of the table."""
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def render_text(data: dict) -> str:
    """A summary line per severity (with each check's count), then each check's rows."""
    by_code: dict[str, list[dict]] = {}
    for e in data["entries"]:
        by_code.setdefault(e["code"], []).append(e)
    lines = [f"Validation of {data['profile']}"]
    for severity in SEVERITIES:
        parts = [f"{code} {sum(e['count'] for e in rows):,}" for code, rows in by_code.items()
                 if rows[0]["severity"] == severity]
        lines.append(f"{_PLURAL[severity]}: {data['counts'][severity]:,}" + (f" ({', '.join(parts)})" if parts else ""))
    if not by_code:
        lines.append("No problems found.")
    for code, rows in by_code.items():
        total = sum(e["count"] for e in rows)
        what = CHECKS[code].what if code in CHECKS else ""
        lines += ["", f"{code} ({rows[0]['severity']}, {total:,}): {what}"]
        for e in rows:
            where = ", ".join(w for w in (e["node"], None if e["step"] is None else f"step {e['step']}") if w)
            lines.append(f"  {where}: {e['detail']}" if where else f"  {e['detail']}")
    missing = data.get("ops_without_flops_rule")
    if missing:
        nodes = sum(m["nodes"] for m in missing)
        lines += ["", f"op types with no FLOPs rule ({len(missing):,} types, {nodes:,} nodes): float_ops and macs "
                      "from shapes (tfprof.queries.flops) leave them at 0"]
        lines += [f"  {m['op']}: {m['nodes']:,} node{'s' if m['nodes'] != 1 else ''}" for m in missing]
    return "\n".join(lines) + "\n"


def warning_line(data: dict, check_command: str) -> str | None:
    """``Warning: N validation problems (...) in PROFILE; see tfprof check PROFILE``, or None
    when the report has nothing above info."""
    serious = [(s, data["counts"][s]) for s in SEVERITIES if s != INFO and data["counts"][s]]
    if not serious:
        return None
    total = sum(n for _, n in serious)
    kinds = ", ".join(f"{n:,} {_PLURAL[s] if n != 1 else s}" for s, n in serious)
    noun = "problem" if total == 1 else "problems"
    return f"Warning: {total:,} validation {noun} ({kinds}) in {data['profile']}; see {check_command}"
