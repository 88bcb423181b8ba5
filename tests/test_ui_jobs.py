"""The web UI's Ranks page only for a job (``Profiles.is_job``, ``GET /api/profiles``'s ``job``):
profiles given as one job's traces (their directory, a glob pattern of them, a catalog's job
run), or saying so themselves (each records its rank, or each file name carries one); never
any profiles opened together, whose steps the page would compare as ranks and whose slowest it
would call a straggler."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import FIXTURES
from test_ui_api import MULTISTEP, SAMPLE, page_client

from tfprof.ui.app import make_app
from tfprof.ui.profiles import Profiles

GLOO = FIXTURES / "ranks" / "gloo4"
TRACES = [str(GLOO / f"rank-{r}.pt.trace.json.gz") for r in range(4)]
NCCL = str(FIXTURES / "foreign" / "kineto_ddp_nccl_step5.pt.trace.json.gz")  # rank 0 of a job of 2
NOT_A_JOB = "do not look like one job's ranks"


def _answers(profiles: Profiles) -> tuple[bool, dict]:
    """(``/api/profiles``'s ``job``, ``/api/ranks``'s answer)."""
    client = page_client(make_app(profiles))
    return client.get("/api/profiles").json()["job"], client.get("/api/ranks").json()


def _unranked(rank: int, dest: Path) -> str:
    """Rank ``rank``'s gloo trace without the rank it records."""
    data = json.loads(gzip.decompress(Path(TRACES[rank]).read_bytes()))
    data.pop("distributedInfo")
    dest.write_text(json.dumps(data))
    return str(dest)


@pytest.mark.parametrize("given", [
    [str(GLOO)],  # the job's directory
    [str(GLOO / "rank-*.pt.trace.json.gz")],  # a glob pattern, quoted
    TRACES[::-1],  # the files (a shell glob): they record their ranks
])
def test_a_jobs_traces_are_a_job_however_given(given):
    job, ranks = _answers(Profiles.load(given))
    assert job is True and [s["rank"] for s in ranks["sources"]] == [0, 1, 2, 3]
    assert [r["rank"] for r in ranks["ranks"] if r["straggler"]] == [2]


@pytest.mark.parametrize("given", [
    [SAMPLE, MULTISTEP],  # no rank recorded or named
    [TRACES[1], NCCL],  # ranks 1 and 0, of jobs of 4 and of 2 ranks
    [TRACES[0], str(FIXTURES / "foreign" / "torch_cnn.pt.trace.json")],  # one records a rank, the other none
])
def test_profiles_opened_together_are_no_job(given):
    """The measured failure: the Ranks tab showed for any two profiles, and for two ranks of
    different jobs the page named a straggler."""
    job, ranks = _answers(Profiles.load(given))
    assert job is False and ranks["job"] is None and NOT_A_JOB in ranks["why"]


def test_traces_without_ranks_are_a_job_by_their_names_or_as_a_directory(tmp_path):
    named = [_unranked(r, tmp_path / f"trace_rank{r}.json") for r in (1, 0)]
    job, ranks = _answers(Profiles.load(named))
    assert job is True and [(s["rank"], s["how"], Path(s["path"]).name) for s in ranks["sources"]] == [
        (0, "file name", "trace_rank0.json"), (1, "file name", "trace_rank1.json")]
    folder = tmp_path / "job"
    folder.mkdir()
    plain = [_unranked(r, folder / f"{name}.json") for r, name in ((0, "b"), (1, "a"))]
    assert _answers(Profiles.load(plain))[0] is False  # two files, nothing says they are one job
    job, ranks = _answers(Profiles.load([str(folder)]))  # their directory: given as one job, ranked in name order
    assert job is True and [(s["rank"], s["how"], Path(s["path"]).name) for s in ranks["sources"]] == [
        (0, "file order", "a.json"), (1, "file order", "b.json")]


def test_loaded_profiles_are_a_job_when_said_so():
    """``tfprof ui --catalog DIR --run JOB`` hands the server loaded profiles, labelled
    ``JOB/rank-N``: it says they are one job's (``job=True``)."""
    import tfprof

    loaded = [tfprof.load(NCCL), tfprof.load(SAMPLE)]
    assert _answers(Profiles.load(loaded, ["a", "b"]))[0] is False
    assert _answers(Profiles.load(loaded, ["a", "b"], job=True))[0] is True


def test_a_job_with_a_rank_deleted_still_lists_its_profiles(tmp_path):
    """A store deleted since the server opened it: the listing says so (as for any profile) and
    shows no Ranks page, rather than failing on the deleted store's recorded rank."""
    import shutil

    import tfprof

    stores = [tfprof.save(tfprof.load(t), tmp_path / f"rank-{r}.tfprof") for r, t in enumerate(TRACES[:2])]
    client = page_client(make_app(Profiles.load([str(s) for s in stores])))
    assert client.get("/api/profiles").json()["job"] is True  # each records its rank
    shutil.rmtree(stores[1])
    answer = client.get("/api/profiles")
    assert answer.status_code == 200 and answer.json()["job"] is False
    assert "was deleted since the UI opened it" in answer.json()["profiles"][1]["error"]
