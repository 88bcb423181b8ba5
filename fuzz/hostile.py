"""Readers for crafted surroundings rather than crafted profiles: a catalog whose run list names
places outside it, and a store with bytes changed behind its manifest's back.

* ``catalog``: the input's first byte picks a twist of the catalog's directory (none, ``.staging``
  a symlink out, a partition directory a symlink out, ``.lock`` a symlink out); the rest is text,
  one partition path a line (``@OUT@`` names the outside folder), written into the run list in place of the real paths (cycling). Then
  everything a user does to a catalog runs on it: list, read a run, check it, add a run, replace
  one with ``force``, remove one. Each may succeed or raise a one-line ``TfprofError``; the
  contract is that nothing outside the catalog changes (a sibling folder of files, hashed before
  and after), and that a run whose listed paths leave the catalog is never read.
* ``store_flip``: like ``store`` (the input is a file's path in the store, a newline, and its new
  bytes) but the manifest is left as it was: a changed file must be rejected or never read, so
  whatever loads gives every view's text and every table exactly as the unchanged store does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa

TWISTS = ("none", "staging_out", "partition_out", "lock_out")
_catalog: Path | None = None


def _template_catalog(c) -> Path:
    """A catalog of one small run (``r1``, with a host tag) written once per process."""
    global _catalog
    if _catalog is None or not _catalog.exists():
        from tfprof.catalog import add_run

        _catalog = c.workdir() / "catalog_template"
        source = c._write("catalog_source.pb", c.cut_profile(c.STORE_SOURCE, 12))
        add_run(_catalog, "r1", tags={"host": "h1"}, profile_path=source)
    return _catalog


def _digest(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` (links not followed): ``tests/damage.py``'s ``tree``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tfprof_tests_damage", Path(__file__).resolve().parent.parent /
                                                  "tests" / "damage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tree(folder)


def _craft(root: Path, outside: Path, data: bytes) -> list[str]:
    """Apply the input to the copied catalog at ``root``; the paths now listed for run r1."""
    from tfprof.catalog.layout import RUNS_SCHEMA, read_runs, write_runs

    twist = TWISTS[data[0] % len(TWISTS)] if data else "none"
    lines = [_aim(root, outside, line) for line in data[1:].decode("utf-8", "replace").split("\n") if line]
    runs = read_runs(root).to_pylist()
    if lines:
        k = 0
        for row in runs:
            for entry in row["files"]:
                entry["path"] = lines[k % len(lines)]
                k += 1
        write_runs(root, pa.Table.from_pylist(runs, RUNS_SCHEMA))
    if twist == "staging_out":
        shutil.rmtree(root / ".staging", ignore_errors=True)
        os.symlink(os.path.relpath(outside, root), root / ".staging")
    elif twist == "partition_out":
        victim = root / "nodes" / "run=r1"
        shutil.rmtree(victim)
        os.symlink(os.path.relpath(outside, victim.parent), victim)
    elif twist == "lock_out":
        (root / ".lock").unlink(missing_ok=True)
        os.symlink(os.path.relpath(outside / "victim.txt", root), root / ".lock")
    return [e["path"] for row in runs if row["run"] == "r1" for e in row["files"]]


def _aim(root: Path, outside: Path, line: str) -> str:
    """A listed path as the input gives it, with ``@OUT@`` standing for the outside folder's
    absolute path; one that would lead beyond the fuzzer's own folder (``root``'s parent) is
    pointed into the outside folder instead, so a broken containment check can only ever damage
    what this reader watches."""
    line = line.replace("@OUT@", str(outside)).replace("\0", "")
    base = os.path.normpath(root.parent)
    if not os.path.normpath(os.path.join(root, line)).startswith(base + os.sep):
        return str(outside / "victim.txt")
    return line


def _escapes(root: Path, rel: str) -> bool:
    real = os.path.realpath(root / rel)
    return not real.startswith(os.path.realpath(root) + os.sep)


def catalog(data: bytes, c) -> None:
    """The ``catalog`` reader; ``c`` is the contract module (its scratch folder and helpers)."""
    from tfprof.catalog import add_run, remove_run, run_profile, runs

    template = _template_catalog(c)
    base = c.workdir() / "hostile"
    shutil.rmtree(base, ignore_errors=True)
    root, outside = base / "cat", base / "outside"
    shutil.copytree(template, root, symlinks=True)
    # Outside: a victim file, and a copy of the run's files (so a path that escapes would read).
    outside.mkdir()
    (outside / "victim.txt").write_text("do not touch\n")
    for part in template.rglob("part-*.parquet"):
        shutil.copy(part, outside / part.name)
    (outside / "sub").mkdir()
    (outside / "sub" / "keep.txt").write_text("nor this\n")
    listed = _craft(root, outside, data)
    before = _digest(outside)
    source = c._write("catalog_add.pb", c.cut_profile(c.STORE_SOURCE, 6))

    def read_r1(_):
        prof = run_profile(root, "r1")
        for name in prof.table_names:
            prof.table(name)
        # It read: then nothing it lists may lie outside the catalog.
        bad = [p for p in listed if _escapes(root, p)]
        assert not bad, f"run r1 was read though its paths leave the catalog: {bad}"

    steps = (
        lambda _: runs(root),
        read_r1,
        lambda _: add_run(root, "r2", profile_path=source),
        lambda _: add_run(root, "r1", force=True, profile_path=source),
        lambda _: remove_run(root, "r1"),
    )
    for step in steps:
        c._guard(step, b"")
    after = _digest(outside)
    assert after == before, f"files outside the catalog changed: {sorted(set(before.items()) ^ set(after.items()))}"


_answers: dict | None = None


def _answers_of(prof, c) -> dict:
    """What a store answers: every view's text and every table."""
    from tfprof.api import run_view
    from tfprof.errors import OptionError

    out = {}
    for cmd, options in c.VIEWS.items():
        try:
            out[cmd] = run_view(prof, cmd, options).text
        except OptionError as exc:  # no code traces: said as an error, the same each time
            out[cmd] = str(exc)
    out.update({name: prof.table(name) for name in prof.table_names})
    return out


def store_flip(data: bytes, c) -> None:
    """The ``store_flip`` reader; ``c`` is the contract module. A changed file must be rejected
    or never read: whatever loads answers exactly as the unchanged store does."""
    import zlib

    from tfprof.profile import Profile
    from tfprof.store import MANIFEST

    global _answers
    template, files = c.store_template()
    if _answers is None:
        _answers = _answers_of(Profile.open(template), c)
    target, _, content = data.partition(b"\n")
    name = target.decode("utf-8", "replace")
    if name not in files:
        name = files[zlib.crc32(target) % len(files)]
    if name == MANIFEST:
        name = files[(files.index(name) + 1) % len(files)]
    dest = c.workdir() / "store_flip"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(template, dest)
    (dest / name).write_bytes(content)
    answers = _answers_of(Profile.open(dest), c)
    wrong = [key for key, value in _answers.items()
             if not (value.equals(answers[key]) if hasattr(value, "equals") else value == answers[key])]
    assert not wrong, f"`{name}` was changed behind the manifest and the store answered otherwise: {wrong}"


# --------------------------------------------------------------------------- kineto_memory

PIB = 1 << 50


def memory_trace(data: bytes) -> bytes:
    """A Kineto trace of one step marker, one op and ``[memory]`` instants read from ``data``:
    the first line is the step marker's number (``ProfilerStep#<it>``), each further line an
    instant, ``TS BYTES TOTAL_ALLOCATED [DEVICE_TYPE DEVICE_ID]``, each token a JSON literal as
    written (``9223372036854775808``, ``-1e400``, ``NaN``, ``"abc"``, ``null``; ``-``: left out;
    any other text: a string). So the fuzzer mutates the numbers the memory curves are made of."""
    import json

    lines = data.decode("utf-8", "replace").split("\n")
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{lines[0][:40]}", "pid": 1, "tid": 1,
               "ts": 1000, "dur": 100, "args": {}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1010, "dur": 50, "args": {}}]
    for k, line in enumerate(lines[1:200]):
        tokens = line.split()
        values = [_literal(t) for t in tokens[:5]]
        values += [None] * (5 - len(values))
        ts, size, total, kind, device = values
        args = {"Bytes": size, "Total Allocated": total, "Total Reserved": 0, "Device Type": kind if kind is not None
                else 1, "Device Id": device if device is not None else 0, "Addr": 4096 + k}
        args = {key: v for key, v in args.items() if v is not _ABSENT}
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1,
                       "ts": 1020 + k if ts in (None, _ABSENT) else ts, "args": args})
    text = json.dumps({"schemaVersion": 1, "traceEvents": events}, allow_nan=True)
    return text.replace('"@RAW@', "").replace('@RAW@"', "").encode()


_ABSENT = object()


def _literal(token: str):
    """A token of ``memory_trace``'s input as the value to write (module docstring)."""
    import json

    if token == "-":
        return _ABSENT
    try:
        json.loads(token)
    except ValueError:
        if token in ("NaN", "Infinity", "-Infinity") or token.lstrip("-").replace(".", "", 1).replace("e", "", 1).isdigit():
            return f"@RAW@{token}@RAW@"  # written bare, as a writer of such JSON would
        return token
    return f"@RAW@{token}@RAW@"


def kineto_memory(data: bytes, c) -> None:
    """The ``kineto_memory`` reader; ``c`` is the contract module. The trace loads or is refused
    in one line (``contract._guard``); when it loads, no memory number is shown as if true that
    cannot be: a sound row of ``tfprof memory`` has its levels within ±1 PiB, its peak at least
    its start and its end, and no negative level where the trace records levels; a damaged row
    is marked and the validation table says why; the ops' memory records hold no value below 0
    or beyond 1 PiB."""
    import polars as pl

    import tfprof
    from tfprof.api.memory import memory, memory_page, memory_report

    path = c._write("memory.pt.trace.json", memory_trace(data))
    prof = tfprof.load(path)
    c.run_views(prof)
    rows = memory(prof)
    if rows.height == 0:
        return
    text = memory_report(prof)
    page = memory_page(prof, None, None)
    levels = ("start_bytes", "peak_bytes", "end_bytes", "allocated", "freed")
    sound = rows.filter(pl.col("damage").is_null())
    for r in sound.iter_rows(named=True):
        assert all(r[k] is not None and abs(r[k]) <= PIB for k in levels), f"a sound row beyond 1 PiB: {r}"
        assert r["peak_bytes"] >= r["start_bytes"] and r["peak_bytes"] >= r["end_bytes"], f"a peak below a level: {r}"
        assert not r["exact"] or min(r["start_bytes"], r["end_bytes"]) >= 0, f"a recorded level below 0 unmarked: {r}"
    damaged = rows.filter(pl.col("damage").is_not_null())
    if damaged.height:
        assert "! damaged" in text, "damaged rows shown without their mark"
        codes = set(prof.table("validation").column("code").to_pylist())
        assert codes & {"negative_memory_level", "memory_level_beyond"}, f"damage not in the validation table: {codes}"
    beyond = damaged.filter(pl.col("damage").str.contains("beyond"))
    assert all(beyond[k].is_null().all() for k in levels), "a level beyond 1 PiB shown as a number"
    assert all(v is None or abs(v) <= PIB for _, v in page["curve"]), "the page draws a level beyond 1 PiB"
    if page["shown"]["damage"]:
        assert page["damage"], "the page shows a damaged row without saying so"
    stored = prof.sql("select min(least(requested_bytes, peak_bytes, residual_bytes)) lo, "
                      "max(greatest(requested_bytes, peak_bytes, residual_bytes)) hi from memory").row(0)
    assert stored[0] is None or (stored[0] >= 0 and stored[1] <= PIB), f"a memory record out of range: {stored}"
