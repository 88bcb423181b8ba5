"""Which framework a profile comes from, for checks that only make sense for one (docs/ADVISOR.md).

* tfprof's own inputs (GraphDef, RunMetadata, ProfileProto, a store of them): ``tensorflow``.
* A Kineto trace: ``pytorch``.
* An XSpace: TensorFlow 2 and JAX both write them. JAX names itself (the ``info`` table's
  ``framework``, from its metadata plane's ``jax_version``); else the content decides. TensorFlow's executor
  records each op as an event named ``<node path>:<op type>`` whose display name (our
  ``category``) is the op type (``StatefulPartitionedCall/Add_2:AddV2``, category ``AddV2``);
  an XSpace with such an event is ``tensorflow``. JAX records XLA's ops with an ``hlo_op`` stat
  and no TensorFlow op events: such an XSpace is ``jax``. One with neither is ``unknown``.
  (A TensorFlow program compiled with XLA has both; the TensorFlow op events decide.)

>>> import tfprof
>>> framework(tfprof.load(tfprof.sample_path()))
'tensorflow'
"""

from __future__ import annotations

import polars as pl

from tfprof.profile import Profile

TENSORFLOW, PYTORCH, JAX, UNKNOWN = "tensorflow", "pytorch", "jax", "unknown"
LABELS = {TENSORFLOW: "TensorFlow", PYTORCH: "PyTorch", JAX: "JAX", UNKNOWN: "an unknown framework"}
"""How the advisor's text names each framework."""


def xspace_framework(events: pl.LazyFrame) -> str:
    """``tensorflow``, ``jax`` or ``unknown`` from an XSpace's ``trace_events`` (module doc)."""
    category = pl.col("category").cast(pl.String)
    tf_op = category.is_not_null() & pl.col("name").cast(pl.String).str.ends_with(":" + category)
    hlo = pl.col("args").str.contains('"hlo_op"', literal=True).fill_null(False)
    found = events.select(tf_op.any().alias("tf"), hlo.any().alias("hlo")).collect()
    if found["tf"][0]:
        return TENSORFLOW
    return JAX if found["hlo"][0] else UNKNOWN


def framework(prof: Profile) -> str:
    """The framework ``prof`` was recorded from (module doc)."""
    if prof.source == "kineto":
        return PYTORCH
    if prof.source == "xspace":
        said = prof.frame("info")["framework"].drop_nulls()
        return said[0] if len(said) and said[0] in LABELS else xspace_framework(prof.lazy("trace_events"))
    return TENSORFLOW
