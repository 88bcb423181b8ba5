"""Stacks of names (``tfprof.queries.stacks``) as files: folded stacks and a name-stack pprof profile.

* **folded** (``-output folded:outfile=F``): one line per stack with a non-zero value,
  ``top;child;leaf value``, the format Brendan Gregg's ``flamegraph.pl`` reads and speedscope
  imports. The value is the first selected metric's. A name's own ``;`` would split it into two
  frames, so it is written as ``:``; line breaks as spaces.
* **pprof_tree** (``-output pprof_tree:outfile=F``): a gzipped ``perftools.profiles.Profile``,
  one sample type per selected metric, one function (and one location) per distinct name, one
  sample per displayed row with a non-zero value, its stack leaf first. tfprof's own ``pprof``
  (the code view's call stacks, its exact bytes) is ``tfprof.views.pprof``.
"""

from __future__ import annotations

import gzip

from tfprof.queries.stacks import Stacks
from tfprof.schema.proto import pprof_pb2


def _frame_name(name: str) -> str:
    return name.replace(";", ":").replace("\r", " ").replace("\n", " ")


def render_folded(stacks: Stacks, select: str) -> bytes:
    """The folded-stack lines of ``stacks`` for metric ``select`` (rows with value 0 left out)."""
    values = stacks.values[select]
    prefix: list[str] = []
    lines: list[str] = []
    for i, name in enumerate(stacks.names):
        p = int(stacks.parent[i])
        path = f"{prefix[p]};{_frame_name(name)}" if p >= 0 else _frame_name(name)
        prefix.append(path)
        if values[i] > 0:
            lines.append(f"{path} {int(values[i])}\n")
    return "".join(lines).encode()


def pprof_stacks_message(stacks: Stacks, select: tuple[str, ...], comment: str) -> pprof_pb2.Profile:
    """The Profile message: sample types ``select`` (with their units), samples per row."""
    strings = [""]
    index = {"": 0}

    def intern(text: str) -> int:
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    profile = pprof_pb2.Profile()
    for s in select:
        profile.sample_type.add(type=intern(s), unit=intern(stacks.unit(s)))
    profile.comment.append(intern(comment))
    function_of: dict[str, int] = {}
    stack_of: list[list[int]] = []  # leaf first
    columns = [stacks.values[s] for s in select]
    for i, name in enumerate(stacks.names):
        fid = function_of.get(name)
        if fid is None:
            fid = function_of[name] = len(function_of) + 1
            profile.function.add(id=fid, name=intern(name), system_name=intern(name))
            profile.location.add(id=fid).line.add(function_id=fid)
        p = int(stacks.parent[i])
        stack = [fid, *stack_of[p]] if p >= 0 else [fid]
        stack_of.append(stack)
        row = [int(c[i]) for c in columns]
        if any(row):
            profile.sample.add(location_id=stack, value=row)
    profile.string_table.extend(strings)
    return profile


def render_pprof_stacks(stacks: Stacks, select: tuple[str, ...], comment: str) -> bytes:
    """The gzipped, serialised Profile (``go tool pprof`` and ``pprof`` read it); mtime 0, so a
    view always gives the same bytes."""
    return gzip.compress(pprof_stacks_message(stacks, select, comment).SerializeToString(), compresslevel=6, mtime=0)
