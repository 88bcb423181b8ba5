"""The pprof file of the code view: a gzipped ``perftools.profiles.Profile``
(docs/TFPROF_BEHAVIOUR.md, 'pprof output', 12.5).

The tables come from ``tfprof.queries.pprof``; here they become the message, with tfprof's
sample types, units and comment appended to the string table as tfprof appends them (after
every string of the walk).
"""

from __future__ import annotations

import gzip

from tfprof.schema.metrics import BY_SELECT
from tfprof.schema.proto import pprof_pb2

# select value -> (unit, comment), as tfprof's PprofProfileImpl::Build writes them
SAMPLE_TYPES = {
    "micros": ("microseconds", "Sum of accelerator execution time and cpu execution time."),
    "accelerator_micros": ("microseconds", "Accelerator execution time."),
    "cpu_micros": ("microseconds", "CPU execution time."),
    "bytes": ("bytes", "Sum of operation total memory requests, excluding deallocations."),
    "peak_bytes": ("bytes", "Sum of operation peak memory usage."),
    "residual_bytes": ("bytes", "Sum of operation allocated memory after finish."),
    "output_bytes": ("bytes", "Sum of operation output size."),
    "params": ("count", "Model parameters."),
    "float_ops": ("count", "Model float operations (Only available if defined)."),
}


def pprof_message(data) -> pprof_pb2.Profile:
    """The Profile message of a ``PprofData``."""
    strings = list(data.strings)
    index = {s: i for i, s in enumerate(strings)}

    def intern(text: str) -> int:
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    # a registered metric's: its kind's unit and its doc
    unit, comment = SAMPLE_TYPES.get(data.select) or (BY_SELECT[data.select].unit, BY_SELECT[data.select].doc)
    unit = data.unit or unit  # a foreign profile's times: ns
    profile = pprof_pb2.Profile()
    profile.sample_type.add(type=intern("count"), unit=intern("count"))
    profile.sample_type.add(type=intern(data.select), unit=intern(unit))
    profile.comment.append(intern(comment))
    profile.string_table.extend(strings)
    for ids, count, value, key, text in data.samples.select(
        "location_ids", "count", "value", "label_key", "label_str"
    ).iter_rows():
        sample = profile.sample.add(location_id=ids, value=[count, value])
        sample.label.add(key=key, str=text)
    for fid, name, filename, start in data.functions.iter_rows():
        profile.function.add(id=fid, name=name, filename=filename, start_line=start)
    for lid, fid, line in data.locations.iter_rows():
        profile.location.add(id=lid).line.add(function_id=fid, line=line)
    return profile


def render_pprof(data) -> bytes:
    """The gzipped, serialised Profile (what ``pprof`` and ``go tool pprof`` read)."""
    # zlib's default level, as tfprof's ZlibCompressionOptions::GZIP(); mtime 0: same bytes every run
    return gzip.compress(pprof_message(data).SerializeToString(), compresslevel=6, mtime=0)


def written_message(path) -> str:
    """What tfprof prints on stdout after writing the pprof file."""
    return f"\nRun pprof -png --nodecount=100 --sample_index=1 <{path}>\n"
