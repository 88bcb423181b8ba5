"""``tf.profiler``'s Python API (the v1 ``tf.compat.v1.profiler`` functions), without TensorFlow.

``profile``, ``advise``, ``Profiler``, ``ProfileOptionBuilder`` and ``write_op_log`` take the
same arguments and return the same protos as TensorFlow's; graphs, RunMetadata and op logs may
be messages (TensorFlow's or ours), bytes, or file paths. ``ProfileContext`` (tf.contrib.tfprof's)
profiles a running TensorFlow program and needs TensorFlow. Re-exported by ``tfprof``.
"""

from __future__ import annotations

# Every `noqa: F401` import below is a re-export; the names are listed once, in tfprof.tf_names.
from tfprof.schema.proto.tfprof_log_pb2 import OpLogProto  # noqa: F401
from tfprof.schema.proto.tfprof_output_pb2 import AdviceProto, GraphNodeProto, MultiGraphNodeProto  # noqa: F401
from tfprof.tf_api.capture import ProfileContext  # noqa: F401
from tfprof.tf_api.logger import write_op_log  # noqa: F401
from tfprof.tf_api.option_builder import ProfileOptionBuilder  # noqa: F401
from tfprof.tf_api.profiler import ALL_ADVICE, Profiler, advise, profile  # noqa: F401
from tfprof.tf_names import TF_API_NAMES

__all__ = list(TF_API_NAMES)
