"""``tfprof ranks``'s report: the job's ranks side by side, then what the cross-rank checks found
and the ops that differ most between ranks (``tfprof.queries.ranks``). Times as tfprof formats
them."""

from __future__ import annotations

import polars as pl

from tfprof.views.units import aligned, fmt_time_ns

_HOW = {"recorded": "as each trace records it", "file name": "from the file names",
        "host order": "by host name", "file order": "by file name order (the traces record no rank)",
        "given": "as given: a catalog's rank partitions, or the Python API's keys"}


NAME_WIDTH = 80  # the op column's widest name: a longer path keeps levels from both ends, `…` between


def _tail(name: str) -> str:
    """``name``, or its first levels (up to half the width), ``…`` and as many of its last levels as
    fit (the op itself cut to its end if alone too long)."""
    if len(name) <= NAME_WIDTH:
        return name
    levels = name.split("/")
    tail = levels[-1][-(NAME_WIDTH - 2):]
    rest = levels[:-1]
    while rest and len(rest[-1]) + 1 + len(tail) <= NAME_WIDTH // 2:
        tail = f"{rest.pop()}/{tail}"
    head = ""
    while rest and len(head) + len(rest[0]) + 3 + len(tail) <= NAME_WIDTH:
        head += rest.pop(0) + "/"
    while rest and len(head) + len(rest[-1]) + 3 + len(tail) <= NAME_WIDTH:
        tail = f"{rest.pop()}/{tail}"
    return f"{head}…/{tail}" if rest else f"{head}{tail}"


def _t(ns) -> str:
    return "--" if ns is None else fmt_time_ns(int(ns))


def _signed(ns) -> str:
    return "--" if ns is None else ("-" if ns < 0 else "+") + fmt_time_ns(abs(int(ns)))


def _pct(part, whole) -> str:
    return "" if part is None or not whole else f" ({100 * part / whole:.1f}%)"


def finding_lines(findings: pl.DataFrame, summary: pl.DataFrame, spread: pl.DataFrame, step_ns: int,
                  basis: str) -> list[str]:
    """One sentence per finding (``tfprof.queries.ranks.job_findings``)."""
    lines = []
    by_rank = {r["rank"]: r for r in summary.iter_rows(named=True)}
    ops = {(r["name"], r["metric"]): r for r in spread.iter_rows(named=True)}  # an op's cpu and accelerator rows apart
    for f in findings.iter_rows(named=True):
        if f["check"] == "straggler":
            what = ("joins the collectives {t} after the median rank" if basis == "collective_ns"
                    else "takes {t} longer than the median rank")
            lines.append(f"straggler: rank {f['rank']} {what.format(t=_t(f['value_ns']))} in a median step "
                         f"({100 * f['share']:.1f}% of the {_t(step_ns)} step); the other ranks wait for it")
        elif f["check"] == "imbalance":
            op = ops[(f["name"], f["metric"])]
            lines.append(f"imbalance: {f['name']} ({op['metric']} time) runs {_t(op['max_ns'])} on rank {op['max_rank']} "
                         f"against {_t(op['min_ns'])} on rank {op['min_rank']} (cv {f['share']:.2f})")
        else:
            r = by_rank[f["rank"]]
            lines.append(f"communication wait: the ranks spend a median {100 * f['share']:.1f}% of each step in "
                         f"collectives; rank {f['rank']} the most ({_t(r['collective_ns'])} in a median step)")
    return lines


def render_job(sources, per: pl.DataFrame, summary: pl.DataFrame, spread: pl.DataFrame, findings: pl.DataFrame,
               top: int = 10) -> str:
    """The report (module docstring)."""
    step_ns = per["window_ns"].median()
    hows = {s.how for s in sources}
    how = _HOW[hows.pop()] if len(hows) == 1 else "as each file says"
    steps = per["step"].n_unique()
    out = [f"Job: {len(sources)} ranks (numbered {how}), {steps} step{'s' if steps != 1 else ''}; "
           f"median step {_t(step_ns)}", ""]
    gpu = summary["compute_ns"].null_count() < summary.height
    head = ("rank", "steps", "step time", *(("compute", "communication", "memcpy", "idle") if gpu else ()),
            "in collectives", "late", "")
    rows = [head]
    for r in summary.iter_rows(named=True):
        parts = tuple(f"{_t(r[c])}{_pct(r[c], r['window_ns'])}" for c in ("compute_ns", "communication_ns", "memcpy_ns",
                                                                           "idle_ns")) if gpu else ()
        rows.append((str(r["rank"]), str(r["steps"]), _t(r["window_ns"]), *parts,
                     f"{_t(r['collective_ns'])}{_pct(r['collective_ns'], r['window_ns'])}",
                     f"{_signed(r['late_ns'])}{_pct(r['late_ns'], step_ns)}", "straggler" if r["straggler"] else ""))
    out += aligned(rows).splitlines()
    basis = "collective_ns" if per["collective_ns"].fill_null(0).sum() > 0 else "window_ns"
    out += ["", "late: " + ("how much later than the median rank it joins the step's collectives (median over steps)"
                            if basis == "collective_ns" else "its step time less the step's median (median over steps)")]
    lines = finding_lines(findings, summary, spread, step_ns, basis)
    out += ["", "Findings:", *(f"  {line}" for line in lines)] if lines else ["", "Findings: none"]
    if spread.height:
        out += ["", "Ops that differ most across ranks (cpu: self time; accelerator: the GPU work they launched):"]
        table = [("op", "time", "least", "most", "spread", "cv")]
        for r in spread.head(top).iter_rows(named=True):
            table.append((_tail(r["name"]), r["metric"], f"{_t(r['min_ns'])} (rank {r['min_rank']})",
                          f"{_t(r['max_ns'])} (rank {r['max_rank']})", _t(r["spread_ns"]),
                          "--" if r["cv"] is None else f"{r['cv']:.2f}"))
        out += aligned(table).splitlines()
    return "\n".join(out) + "\n"
