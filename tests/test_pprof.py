"""-output pprof: the code view as a gzipped pprof Profile, against the real tool's files.

Every case of tests/golden/pprof/<fixture>/cases.json (made by tools/make_timeline_golden.py
with the real tfprof) runs through the public API into a temporary directory. The file is
gunzipped and decoded with our pprof proto; first the *meaning* is compared (each sample's
graph node, stack of (function name, file, start line, line), values; the sample types and
comment as strings), then the exact message: ids, string-table order and the order of every
repeated field. gzip headers differ (we write mtime 0), so the payloads are compared, not the
compressed bytes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tfprof
from tfprof.api import check_output, run_view, write_output
from tfprof.cli.main import main
from tfprof.errors import OptionError, TfprofError
from tfprof.queries.options import Options
from tfprof.schema.proto import pprof_pb2

ROOT = Path(__file__).parent
GOLDEN = ROOT / "golden" / "pprof"
FIXTURES = ROOT / "fixtures"
OUT = "{OUT}"

_PROFILES: dict[str, tfprof.Profile] = {}


def _profile(fixture: str) -> tfprof.Profile:
    if fixture not in _PROFILES:
        path = ROOT / "golden" / "timeline" / "gpu_lanes" / "profile.pb" if fixture == "gpu_lanes" else FIXTURES / fixture / "profile.pb"
        _PROFILES[fixture] = tfprof.load(path)
    return _PROFILES[fixture]


def _cases():
    for case_file in sorted(GOLDEN.glob("*/cases.json")):
        for case in json.loads(case_file.read_text()):
            yield pytest.param(case_file.parent.name, case, id=f"{case_file.parent.name}-{case['id']}")


def decode(data: bytes) -> pprof_pb2.Profile:
    assert data[:2] == b"\x1f\x8b", "not gzip"
    return pprof_pb2.Profile.FromString(gzip.decompress(data))


def meaning(p: pprof_pb2.Profile) -> dict:
    """The profile with every index resolved: what pprof shows, whatever the numbering."""
    s = list(p.string_table)
    functions = {f.id: (s[f.name], s[f.filename], f.start_line) for f in p.function}
    locations = {loc.id: [(functions[ln.function_id], ln.line) for ln in loc.line] for loc in p.location}
    return {
        "sample_type": [(s[t.type], s[t.unit]) for t in p.sample_type],
        "comment": [s[c] for c in p.comment],
        "samples": [
            ([(s[lb.key], s[lb.str]) for lb in x.label], [locations[i] for i in x.location_id], list(x.value))
            for x in p.sample
        ],
        "functions": sorted(functions.values()),
        "locations": sorted(map(str, locations.values())),
    }


def check_structure(p: pprof_pb2.Profile) -> None:
    """What pprof needs: string 0 is empty, every index and id resolves, one value per type."""
    n = len(p.string_table)
    assert n and p.string_table[0] == ""
    assert len(set(p.string_table)) == n
    function_ids = {f.id for f in p.function}
    location_ids = {loc.id for loc in p.location}
    assert 0 not in function_ids | location_ids
    assert all(0 <= f.name < n and 0 <= f.filename < n for f in p.function)
    assert all(ln.function_id in function_ids for loc in p.location for ln in loc.line)
    for x in p.sample:
        assert len(x.value) == len(p.sample_type)
        assert set(x.location_id) <= location_ids
        assert all(0 <= lb.key < n and 0 <= lb.str < n for lb in x.label)
    assert all(0 <= t.type < n and 0 <= t.unit < n for t in p.sample_type)


@pytest.mark.parametrize("fixture, case", list(_cases()))
def test_golden_pprof(fixture, case, tmp_path):
    folder = GOLDEN / fixture
    real_path = folder / case["id"] / "profile.pb.gz"
    real_stderr = (folder / f"{case['id']}.stderr").read_text() if (folder / f"{case['id']}.stderr").exists() else ""
    real_stdout = (folder / f"{case['id']}.stdout").read_text() if (folder / f"{case['id']}.stdout").exists() else ""
    opts = Options.from_tfprof(dict(case["options"], output=case["options"]["output"].replace(OUT, str(tmp_path))))
    prof = _profile(fixture)
    if not real_path.exists():
        # The real tool wrote nothing and said why on stderr; we raise that (docs/COMPATIBILITY.md).
        with pytest.raises(TfprofError) as err:
            check_output(case["cmd"], opts)
            write_output(prof, run_view(prof, case["cmd"], opts))
        if "No code trace information" not in real_stderr:  # our wording differs there (COMPATIBILITY #5)
            assert str(err.value).split(" (got")[0].split(";")[0] in real_stderr
        assert list(tmp_path.iterdir()) == []
        return
    written = write_output(prof, run_view(prof, case["cmd"], opts))
    assert [p.name for p in written.paths] == ["profile.pb.gz"]
    ours, real = decode(written.paths[0].read_bytes()), decode(real_path.read_bytes())
    check_structure(ours)
    mine, theirs = meaning(ours), meaning(real)
    for key in theirs:
        assert mine[key] == theirs[key], key
    for field in ("string_table", "sample", "function", "location", "sample_type", "comment"):
        assert list(getattr(ours, field)) == list(getattr(real, field)), field
    assert ours.SerializeToString() == real.SerializeToString()
    assert written.stdout.replace(str(tmp_path), OUT) == real_stdout


def test_every_fixture_with_traces_has_files():
    have = {p.parent.parent.name for p in GOLDEN.glob("*/*/profile.pb.gz")}
    assert {"cnn", "rnn", "multistep", "gpu_lanes"} <= have


def test_structure_check_can_fail():
    p = pprof_pb2.Profile(string_table=["", "a"])
    p.sample.add(location_id=[3], value=[1])
    with pytest.raises(AssertionError):
        check_structure(p)


def test_gradient_and_shared_frames_resolve(tmp_path):
    """gpu_lanes: a call-tree node shared by two frames keeps its creator's function (`add`
    sorts before `conv`), and gradient paths carry the forward op's frames + ` (gradient)`."""
    prof = _profile("gpu_lanes")
    opts = Options(select=("micros",), output=f"pprof:outfile={tmp_path}/p.gz")
    p = decode(write_output(prof, run_view(prof, "code", opts)).paths[0].read_bytes())
    names = {p.string_table[f.name] for f in p.function}
    assert "nn_ops:conv2d_with_a_very_long_name_v2" in names
    assert "nn_ops:conv2d_with_a_very_long_name (gradient)" in names
    labels = [p.string_table[x.label[0].str] for x in p.sample]
    assert "input" not in labels  # a node on an inner frame is no true leaf: tfprof leaves it out
    assert labels == sorted(labels, key=lambda s: s.encode())


@pytest.mark.parametrize(
    "cmd, select, message",
    [
        ("scope", "micros", "Only 'code' view supports pprof output now."),
        ("code", "micros,bytes", "Can only select 1 attribute for pprof output"),
        ("code", "occurrence", "pprof doesn't support -select=occurrence"),
    ],
)
def test_cli_bad_pprof_is_one_line(cmd, select, message, tmp_path, capsys):
    rc = main([cmd, str(FIXTURES / "cnn" / "profile.pb"), "-select", select, "-output", f"pprof:outfile={tmp_path}/p"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("Error: ") and err.count("\n") == 1 and message in err
    assert list(tmp_path.iterdir()) == []


def test_cli_pprof_writes_the_file(tmp_path, capsys):
    rc = main(["code", str(FIXTURES / "rnn" / "profile.pb"), "-select", "bytes", "-output", f"pprof:outfile={tmp_path}/p.gz"])
    assert rc == 0
    assert capsys.readouterr().out == f"\nRun pprof -png --nodecount=100 --sample_index=1 <{tmp_path}/p.gz>\n"
    real = decode((GOLDEN / "rnn" / "code_bytes" / "profile.pb.gz").read_bytes())
    assert decode((tmp_path / "p.gz").read_bytes()) == real


def test_pprof_into_a_directory_is_refused(tmp_path):
    (tmp_path / "p.gz").mkdir()
    prof = _profile("cnn")
    opts = Options(select=("micros",), output=f"pprof:outfile={tmp_path}/p.gz")
    with pytest.raises(TfprofError, match="is a directory"):
        write_output(prof, run_view(prof, "code", opts))
    with pytest.raises(OptionError):
        check_output("op", opts)
