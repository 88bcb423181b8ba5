"""OperationChecker (docs/TFPROF_BEHAVIOUR.md, 'OperationChecker'): ops that have a faster form.

Two findings, each one row when it fires, in tfprof's report order:

* ``unfused_batch_norm``: some node name contains ``BatchNorm`` and no node has a fused batch
  norm op type. tfprof recognises only ``FusedBatchNorm`` itself, so graphs built with
  FusedBatchNormV2/V3 (every TF 2 graph) get the advice anyway (docs/TFPROF_BEHAVIOUR.md, 'Known quirks' #14); we
  recognise
  V2 and V3 as fused, since the advice is wrong for every TF 2 graph (docs/ADVISOR.md).
* ``nhwc_on_gpu``: some node has ``data_format`` NHWC and a canonical device containing ``gpu``.

Columns: ``finding``, ``nodes`` (how many nodes are evidence), ``example`` (the first of them
in name order).
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile
from tfprof.queries.advisor.base import CheckOptions, Evidence

# Op types that count as a fused batch norm. tfprof: {"FusedBatchNorm"} only.
FUSED_BATCH_NORM = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
# node_attrs keeps each attr as a serialized AttrValue; AttrValue{s: "NHWC"} is field 2
# (bytes) = tag 0x12, length 4, then the text: comparing bytes avoids decoding every attr.
NHWC_ATTR = b"\x12\x04NHWC"

FINDINGS = ("unfused_batch_norm", "nhwc_on_gpu")


def _evidence(finding: str, names: pl.LazyFrame) -> pl.LazyFrame:
    return names.select(
        pl.lit(finding).alias("finding"),
        pl.len().cast(pl.Int64).alias("nodes"),
        pl.col("name").min().alias("example"),
    )


def operation_findings(prof: Profile, options: CheckOptions) -> Evidence:
    """The check: one row per finding that fires (tfprof ignores the options)."""
    nodes = prof.lazy("nodes").select("node_id", "name", pl.col("canonical_device").cast(pl.String))
    batch_norm = nodes.filter(pl.col("name").str.contains("BatchNorm", literal=True))
    fused = prof.lazy("node_types").filter(pl.col("op_type").cast(pl.String).is_in(FUSED_BATCH_NORM))
    nhwc = (
        prof.lazy("node_attrs")
        .filter((pl.col("attr").cast(pl.String) == "data_format") & (pl.col("value") == NHWC_ATTR))
        .join(nodes, on="node_id")
        .filter(pl.col("canonical_device").str.contains("gpu", literal=True))
    )
    has_fused = fused.select(pl.len() > 0).collect().item()
    candidates = pl.concat(
        [
            _evidence("unfused_batch_norm", batch_norm.filter(pl.lit(not has_fused))),
            _evidence("nhwc_on_gpu", nhwc),
        ]
    )
    return Evidence(candidates.filter(pl.col("nodes") > 0).collect())
