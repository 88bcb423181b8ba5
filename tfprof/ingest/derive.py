"""Columns and tables derived the same way whatever the input format was."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from tfprof.schema.conform import conform


def params(shape: list[int]) -> int:
    """Parameters (docs/TFPROF_BEHAVIOUR.md, 'Shapes and parameters'): product of the dims; 0 for no shape or any
    unknown (negative) dim."""
    if not shape or any(d < 0 for d in shape):
        return 0
    # an absurd shape overflows int64 in tfprof's C++ too: wrap as its arithmetic does
    return (math.prod(shape) + 2**63) % 2**64 - 2**63


def params_column(shapes: pa.ListArray | pa.ChunkedArray) -> pa.Array:
    """``params`` for a whole column of shapes, without a Python loop per node."""
    if isinstance(shapes, pa.ChunkedArray):
        shapes = shapes.combine_chunks()
    n = len(shapes)
    if n == 0:
        return pa.array([], pa.int64())
    import numpy as np

    offsets = shapes.offsets.to_numpy()
    dims = shapes.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(offsets)
    parent = np.repeat(np.arange(n), lengths)
    prod = np.ones(n, dtype=np.int64)
    np.multiply.at(prod, parent, np.maximum(dims, 0))
    bad = np.zeros(n, dtype=bool)
    np.logical_or.at(bad, parent, dims < 0)
    prod[(lengths == 0) | bad] = 0
    return pa.array(prod, pa.int64())


def devices_table(exec_devices: pa.Table, nodes: pa.Table) -> pa.Table:
    """Every device of the step stats with tfprof's classification
    (docs/TFPROF_BEHAVIOUR.md, 'Device classification')."""
    names = pa.concat_arrays(
        [
            exec_devices.column("device").combine_chunks().cast(pa.string()),
            nodes.column("canonical_device").combine_chunks().cast(pa.string()).drop_null(),
        ]
    )
    names = pc.unique(names)
    return conform(
        "devices",
        {
            "device": names,
            "is_canonical": pc.match_substring_regex(names, r"^.*/(device:gpu|gpu|device:cpu|cpu):\d+$"),
            "is_accelerator_stream": pc.match_substring(names, "stream:all"),
            "on_accelerator": pc.match_substring(names, "gpu"),
            "on_cpu": pc.match_substring(names, "cpu"),
        },
    )
