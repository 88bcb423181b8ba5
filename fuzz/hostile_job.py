"""The ``job`` reader: a distributed job's folder of traces, crafted, read by ``tfprof ranks``
and added to a catalog that already holds another run.

The input is sections separated by ``\\n--\\n``, up to ``MAX_FILES`` of them; each is one file
of the job folder: its name (the bytes up to the first newline, any bytes a file system allows:
ranks beyond int64, names that are not UTF-8, two names claiming one rank) and its body (a Kineto
trace's JSON, plain, whose ``distributedInfo`` may claim any rank and world size). Every step a
user takes then runs under the contract (it succeeds or raises one one-line ``TfprofError``):

* ``tfprof.api.ranks.ranks`` on the folder, and its report's text;
* ``add_job`` of the folder to a catalog holding run ``r0``;
* ``runs`` of that catalog, and ``run_profile(r0)``, which must still read whatever the add did:
  one run never makes another unreadable.
"""

from __future__ import annotations

import os
import shutil

MAX_FILES = 6
SEPARATOR = b"\n--\n"


def _files(data: bytes) -> list[tuple[bytes, bytes]]:
    """The (name, body) of each section; a name made a valid single path component."""
    out = []
    for section in data.split(SEPARATOR)[:MAX_FILES]:
        name, _, body = section.partition(b"\n")
        name = name.replace(b"/", b"_").replace(b"\x00", b"_")[:200] or b"rank-x.pt.trace.json"
        if name in (b".", b".."):
            name = b"rank-dot.pt.trace.json"
        out.append((name, body))
    return out


def _base_catalog(c):
    """A catalog with one run, ``r0`` (made once per process, copied for each input)."""
    template = c.workdir() / "job_template"
    if not template.exists():
        from tfprof.catalog import add_run

        add_run(template / "cat", "r0", profile_path=c._write("job_r0.pb", c.cut_profile(c.STORE_SOURCE, 6)))
    return template / "cat"


def job(data: bytes, c) -> None:
    """The ``job`` reader; ``c`` is the contract module (its scratch folder and helpers)."""
    from tfprof.api.ranks import ranks
    from tfprof.catalog import add_job, run_profile, runs

    base = c.workdir() / "hostile_job"
    shutil.rmtree(base, ignore_errors=True)
    folder = base / "job"
    folder.mkdir(parents=True)
    for name, body in _files(data):
        path = os.path.join(os.fsencode(folder), name)
        if not os.path.lexists(path):
            with open(path, "wb") as f:
                f.write(body)
    catalog = base / "cat"
    shutil.copytree(_base_catalog(c), catalog)

    def report(_):
        assert isinstance(ranks([folder]).text(10), str)

    c._guard(report, b"")
    c._guard(lambda _: add_job(catalog, "job", [folder]), b"")
    c._guard(lambda _: runs(catalog), b"")
    prof = run_profile(catalog, "r0")  # never refused: nothing done to the job may reach r0
    assert prof.row_counts()["nodes"] > 0
