"""Bad input and careless use, as a table of command lines (the acceptance suite of the bad-input rules).

Every case runs ``tfprof`` in-process in a fresh working directory holding copies of the cnn
fixture's inputs and a store ingested from them. Whatever the case, the run must end with exit
code 0 or 2, never print a traceback, and when it fails say so in one ``Error:`` line that names
the file or option at fault. Afterwards every file that was in the directory has the bytes it
had, and no file has appeared, except the outputs a case names (written only with ``--force``,
or new). Cases are generated deterministically: truncations at several points and bit flips of
every input kind, giant length prefixes, each input given as the wrong kind, damaged stores,
hostile SQL, outputs aimed at existing files and at the inputs, and bad options.

Other files test each behaviour in depth (test_parse_errors, test_clobber, test_store_integrity,
test_sql_sandbox, test_signals, test_cli_polish); this one holds the whole surface to the same
few rules.
"""

from __future__ import annotations

import hashlib
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES

from tfprof.cli.main import main

CNN = FIXTURES / "cnn"
INPUT_FILES = ("graph.pb", "graph.pbtxt", "run_meta_0.pb", "op_log.pb", "profile.pb",
               "model.ckpt.index", "model.ckpt.data-00000-of-00001")


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    codes: tuple[int, ...] = (2,)  # acceptable exit codes
    needle: str | None = None  # must appear in the error line when the exit code is 2
    setup: tuple = ()  # (action, path, arg) steps applied to the working directory first
    outputs: tuple[str, ...] = ()  # files the case may write or replace
    stdout_empty: bool = False


# --------------------------------------------------------------------------- the cases

# how each input kind is given, with the other inputs it needs; {f} is the damaged file
KINDS = {
    "profile": ("scope", "--profile_path", "{f}"),
    "graph_pb": ("scope", "--graph_path", "{f}"),
    "graph_pbtxt": ("scope", "--graph_path", "{f}"),
    "run_meta": ("scope", "--graph_path", "graph.pb", "--run_meta_path", "{f}"),
    "op_log": ("code", "--graph_path", "graph.pb", "--op_log_path", "{f}"),
    "ckpt_index": ("scope", "--graph_path", "graph.pb", "--checkpoint_path", "{f}", "--select", "tensor_value",
                   "--max_depth", "2"),
}
SOURCE = {"profile": "profile.pb", "graph_pb": "graph.pb", "graph_pbtxt": "graph.pbtxt", "run_meta": "run_meta_0.pb",
          "op_log": "op_log.pb", "ckpt_index": "model.ckpt.index"}


def _argv(kind: str, name: str) -> tuple[str, ...]:
    """The command line reading ``name`` as input ``kind`` (a checkpoint is given by prefix)."""
    target = name.removesuffix(".index") if kind == "ckpt_index" else name
    return tuple(a.replace("{f}", target) for a in KINDS[kind])


def _damaged_name(kind: str, tag: str) -> str:
    return f"bad_{tag}.ckpt.index" if kind == "ckpt_index" else f"bad_{tag}_{SOURCE[kind]}"


def _damage_cases() -> list[Case]:
    """Truncations, bit flips and giant length prefixes of every input kind. A damaged file may
    still be a valid message (protobuf has no end marker), so exit 0 is allowed; an error must
    name the damaged file."""
    out = []
    rng = random.Random(17)
    for kind, src in SOURCE.items():
        size = (CNN / src).stat().st_size
        cuts = sorted({1, 7, size // 10, size // 2, size * 9 // 10, size - 1})
        for cut in cuts:
            name = _damaged_name(kind, f"cut{cut}")
            out.append(Case(f"truncated-{kind}-{cut}", _argv(kind, name), (0, 2), name,
                            setup=(("truncate", name, (src, cut)),)))
        for i in range(5):
            name = _damaged_name(kind, f"flip{i}")
            flips = tuple(rng.randrange(size * 8) for _ in range(1 + i * 3))
            out.append(Case(f"bitflip-{kind}-{i}", _argv(kind, name), (0, 2), name,
                            setup=(("flip", name, (src, flips)),)))
        for huge in (1 << 31, 1 << 62):
            name = _damaged_name(kind, f"len{huge.bit_length()}")
            out.append(Case(f"giant-length-{kind}-{huge.bit_length()}", _argv(kind, name), (0, 2), name,
                            setup=(("giant", name, (src, huge)),)))
    return out


def _wrong_kind_cases() -> list[Case]:
    """Each input given where another kind is expected, and files that are no proto at all."""
    out = []
    for kind in SOURCE:
        for other, src in SOURCE.items():
            if other == kind or {kind, other} == {"graph_pb", "graph_pbtxt"}:
                continue
            name = _damaged_name(kind, f"as_{other}")
            out.append(Case(f"wrong-kind-{other}-as-{kind}", _argv(kind, name), (0, 2), name,
                            setup=(("copy", name, src),)))
        for tag, content in (("empty", b""), ("json", b'{"traceEvents": []}\n'), ("text", b"hello world\n" * 50),
                             ("zeros", b"\0" * 4096)):
            name = _damaged_name(kind, tag)
            out.append(Case(f"not-a-proto-{tag}-as-{kind}", _argv(kind, name), (0, 2), name,
                            setup=(("write", name, content),)))
        name = _damaged_name(kind, "dir")
        out.append(Case(f"directory-as-{kind}", _argv(kind, name), (2,), name, setup=(("mkdir", name, None),)))
        name = _damaged_name(kind, "missing")
        out.append(Case(f"missing-{kind}", _argv(kind, name), (2,), name))
    return out


STORE_TABLES = ("nodes", "node_inputs", "steps", "execs", "memory", "code_frames", "devices")


def _store_cases() -> list[Case]:
    out = []
    for table in STORE_TABLES:
        f = f"store/{table}.parquet"
        for how in ("truncate_half", "delete", "garbage_same_size", "empty"):
            out.append(Case(f"store-{how}-{table}", ("scope", "store", "--max_depth", "3"), (2,), f"{table}.parquet",
                            setup=((how, f, None),)))
    for how in ("garbage_same_size", "delete", "empty", "truncate_half"):
        out.append(Case(f"store-manifest-{how}", ("op", "store"), (2,), "store", setup=((how, "store/tfprof_store.json", None),)))
    out.append(Case("store-index-part-deleted", ("code", "store", "--max_depth", "3"), (2,), "store",
                    setup=(("delete_first", "store/indexes", None),)))
    out.append(Case("store-not-a-store", ("scope", "notastore"), (2,), "notastore",
                    setup=(("mkdir", "notastore", None),)))
    for table in ("nodes", "execs"):
        out.append(Case(f"store-sql-damaged-{table}", ("sql", f"select count(*) from {table}", "store"), (2,),
                        f"{table}.parquet", setup=(("garbage_same_size", f"store/{table}.parquet", None),)))
    return out


HOSTILE_SQL = (
    "COPY (select 1) TO 'copied.csv'",
    "COPY nodes TO 'store/nodes.parquet' (FORMAT parquet)",
    "ATTACH 'other.db' AS o",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET memory_limit = '1GB'",
    "PRAGMA threads=1",
    "CREATE TABLE t AS SELECT 1",
    "DROP VIEW nodes",
    "INSERT INTO nodes SELECT * FROM nodes",
    "DELETE FROM nodes",
    "EXPORT DATABASE 'exported'",
    "select 1; drop view nodes",
    "select * from read_csv('/etc/passwd')",
    "select * from read_text('graph.pbtxt')",
    "select * from read_parquet('store/nodes.parquet')",
    "select * from glob('*')",
    "with x as (select * from read_csv_auto('/etc/hostname')) select * from x",
    "select * from 'graph.pbtxt'",
    "select * from '/etc/passwd'",
    "",
    "   ",
    "selec nodes",
)


def _sql_cases() -> list[Case]:
    return [Case(f"hostile-sql-{i}", ("sql", q, "store"), (2,)) for i, q in enumerate(HOSTILE_SQL)]


def _clobber_cases() -> list[Case]:
    """Outputs aimed at existing files and at the inputs, with and without --force."""
    out = []
    view_inputs = ("--graph_path", "graph.pb", "--run_meta_path", "run_meta_0.pb", "--op_log_path", "op_log.pb")
    for target in ("graph.pb", "run_meta_0.pb", "op_log.pb"):
        for force in ((), ("--force",)):
            tag = "force-" if force else ""
            out += [
                Case(f"clobber-{tag}file-over-input-{target}",
                     ("scope", *view_inputs, "--output", f"file:outfile={target}", *force), (2,), target),
                Case(f"clobber-{tag}pprof-over-input-{target}",
                     ("code", *view_inputs, "--select", "micros", "--output", f"pprof:outfile={target}", *force),
                     (2,), target),
            ]
    for force in ((), ("--force",)):
        tag = "force-" if force else ""
        out += [
            Case(f"clobber-{tag}file-over-profile", ("scope", "--profile_path", "profile.pb", "--output",
                                                     "file:outfile=profile.pb", *force), (2,), "profile.pb"),
            Case(f"clobber-{tag}csv-over-profile", ("op", "profile.pb", "--format", "csv", "--output",
                                                    "file:outfile=profile.pb", *force), (2,), "profile.pb"),
            Case(f"clobber-{tag}timeline-over-store-file", ("scope", "store", "--output",
                                                            "timeline:outfile=store/nodes.parquet", *force), (2,),
                 "store"),
            Case(f"clobber-{tag}sql-out-over-input", ("sql", "select 1", "profile.pb", "--out", "profile.pb", *force),
                 (2,), "profile.pb"),
            Case(f"clobber-{tag}sql-out-into-store", ("sql", "select 1", "store", "--out", "store/steps.parquet",
                                                      "--format", "parquet", *force), (2,), "store"),
            Case(f"clobber-{tag}ingest-out-is-input-store", ("ingest", "--profile_path", "store", "--out", "store",
                                                             *force), (2,), "store"),
            Case(f"clobber-{tag}ingest-out-is-input-file", ("ingest", "--profile_path", "profile.pb", "--out",
                                                            "profile.pb", *force), (2,), "profile.pb"),
            Case(f"clobber-{tag}ingest-onto-foreign-dir", ("ingest", "profile.pb", "--out", "mine", *force), (2,),
                 "mine", setup=(("mkdir", "mine", None), ("write", "mine/notes.txt", b"my notes\n"))),
            Case(f"clobber-{tag}ingest-onto-store-with-notes", ("ingest", "profile.pb", "--out", "store", *force),
                 (2,), "notes.txt", setup=(("write", "store/notes.txt", b"my notes\n"),)),
        ]
    out += [
        Case("clobber-existing-report", ("scope", "profile.pb", "--output", "file:outfile=report.txt"), (2,),
             "--force", setup=(("write", "report.txt", b"keep me\n"),)),
        Case("clobber-existing-csv", ("sql", "select 1", "profile.pb", "--out", "result.csv", "-f", "csv"), (2,),
             "--force", setup=(("write", "result.csv", b"keep me\n"),)),
        Case("clobber-existing-pprof", ("code", "profile.pb", "--select", "micros", "--output",
                                        "pprof:outfile=code.pb.gz"), (2,), "--force",
             setup=(("write", "code.pb.gz", b"keep me\n"),)),
        Case("clobber-existing-timeline", ("graph", "profile.pb", "--step", "0", "--output",
                                           "timeline:outfile=trace.json"), (2,), "--force",
             setup=(("write", "trace.json_0", b"keep me\n"),)),
        Case("clobber-existing-store", ("ingest", "profile.pb", "--out", "store"), (2,), "--force"),
        Case("clobber-ingest-onto-file", ("ingest", "profile.pb", "--out", "graph.pb", "--force"), (2,), "graph.pb"),
        # with --force the named outputs are replaced, and only they
        Case("force-replaces-report", ("scope", "profile.pb", "--output", "file:outfile=report.txt", "--force"),
             (0,), setup=(("write", "report.txt", b"old\n"),), outputs=("report.txt",)),
        Case("force-replaces-csv", ("sql", "select 1 as x", "profile.pb", "--out", "result.csv", "-f", "csv",
                                    "--force"), (0,), setup=(("write", "result.csv", b"old\n"),), outputs=("result.csv",)),
        Case("new-output-needs-no-force", ("sql", "select 1 as x", "store", "--out", "fresh.csv", "-f", "csv"), (0,),
             outputs=("fresh.csv",)),
    ]
    return out


def _option_cases() -> list[Case]:
    p = ("profile.pb",)
    bad = [
        ("unknown-option", ("scope", *p, "--max_dpth", "3"), "max_dpth"),
        ("bad-regex", ("scope", *p, "--show_name_regexes", "("), "show_name_regexes"),
        ("bad-int", ("scope", *p, "--max_depth", "three"), "max_depth"),
        ("negative-depth", ("scope", *p, "-max_depth", "-1"), "max_depth"),
        ("negative-min", ("op", *p, "--min_micros", "-3"), "min_micros"),
        ("bad-order", ("op", *p, "--order_by", "speed"), "order_by"),
        ("bad-step", ("scope", *p, "--step", "9"), "step"),
        ("bad-output-kind", ("scope", *p, "--output", "screen"), "screen"),
        ("output-missing-outfile", ("scope", *p, "--output", "file"), "outfile"),
        ("output-missing-dir", ("scope", *p, "--output", "file:outfile=nodir/x.txt"), "nodir"),
        ("timeline-op-view", ("op", *p, "--output", "timeline:outfile=t.json"), "timeline"),
        ("pprof-scope-view", ("scope", *p, "--output", "pprof:outfile=p.gz"), "pprof"),
        ("bad-format", ("scope", *p, "--format", "yaml"), "yaml"),
        ("sql-bad-format", ("sql", "select 1", *p, "--format", "yaml"), "yaml"),
        ("missing-value", ("scope", *p, "--max_depth"), "max_depth"),
        ("two-profiles", ("scope", *p, "--profile_path", "profile.pb"), "profile"),
        ("profile-and-graph", ("scope", "--profile_path", "profile.pb", "--graph_path", "graph.pb"), "profile_path"),
        ("no-inputs", ("scope", "--max_depth", "2"), None),
        ("unknown-command", ("scoop", *p), "scoop"),
        ("run-meta-without-graph-step", ("scope", "--graph_path", "graph.pb", "--run_meta_path", "run_meta_0.pb",
                                         "--step", "3"), "step"),
        ("advise-unknown-checker", ("advise", *p, "--checkers", "NoSuchChecker"), "NoSuchChecker"),
        ("advise-bad-checker-option", ("advise", *p, "--checker_option", "nonsense"), "checker_option"),
        ("code-without-traces", ("code", "--graph_path", "graph.pb"), "op log"),
        ("checkpoint-missing", ("scope", "--graph_path", "graph.pb", "--checkpoint_path", "nock"), "nock"),
    ]
    return [Case(f"option-{cid}", argv, (2,), needle) for cid, argv, needle in bad]


CASES = _damage_cases() + _wrong_kind_cases() + _store_cases() + _sql_cases() + _clobber_cases() + _option_cases()


def test_the_suite_is_large_enough():
    assert len(CASES) >= 150, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES)


# --------------------------------------------------------------------------- running a case


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The working directory every case starts from: the cnn inputs and a store of them."""
    folder = tmp_path_factory.mktemp("misuse")
    for name in INPUT_FILES:
        shutil.copy(CNN / name, folder / name)
    assert main(["ingest", "--profile_path", str(folder / "profile.pb"), "--out", str(folder / "store")]) == 0
    return folder


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
        for p in sorted(folder.rglob("*"))
    }


def _apply(folder: Path, action: str, rel: str, arg) -> None:
    path = folder / rel
    if action == "truncate":
        src, cut = arg
        path.write_bytes((folder / src).read_bytes()[:cut])
    elif action == "flip":
        src, bits = arg
        data = bytearray((folder / src).read_bytes())
        for b in bits:
            data[b // 8] ^= 1 << (b % 8)
        path.write_bytes(bytes(data))
    elif action == "giant":  # field 1, wire type 2, a length far past the end of the file
        src, huge = arg
        varint = bytearray()
        while True:
            byte, huge = huge & 0x7F, huge >> 7
            varint.append(byte | (0x80 if huge else 0))
            if not huge:
                break
        path.write_bytes(b"\x0a" + bytes(varint) + (folder / src).read_bytes()[:64])
    elif action == "copy":
        shutil.copy(folder / arg, path)
    elif action == "write":
        path.write_bytes(arg)
    elif action == "mkdir":
        path.mkdir()
    elif action == "delete":
        path.unlink()
    elif action == "delete_first":
        first = sorted(p for p in path.rglob("*") if p.is_file())[0]
        first.unlink()
    elif action == "empty":
        path.write_bytes(b"")
    elif action == "truncate_half":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif action == "garbage_same_size":
        path.write_bytes(bytes(random.Random(rel).randrange(256) for _ in range(path.stat().st_size)))
    else:
        raise AssertionError(action)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_misuse(case: Case, template: Path, tmp_path: Path, monkeypatch, capsys):
    work = tmp_path / "work"
    shutil.copytree(template, work)
    for action, rel, arg in case.setup:
        _apply(work, action, rel, arg)
    monkeypatch.chdir(work)
    before = _snapshot(work)

    code = main(list(case.argv))
    out, err = capsys.readouterr()

    assert "Traceback" not in out + err, err
    assert code in case.codes, (code, err[-2000:])
    if code == 2:
        lines = err.strip().splitlines()
        errors = [line for line in lines if line.startswith("Error: ")]
        assert len(errors) == 1, err
        assert all(line.startswith(("Error: ", "Warning: ")) for line in lines), err
        if case.needle:
            assert case.needle in errors[0], (case.needle, errors[0])
    after = _snapshot(work)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed <= set(case.outputs), f"files changed or left behind: {sorted(changed - set(case.outputs))}"
    if code == 0:
        for name in case.outputs:
            assert (work / name).is_file(), name
