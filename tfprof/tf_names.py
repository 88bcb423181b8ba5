"""The names of tf.profiler's Python API that ``tfprof.tf_api`` exports, listed once: ``tfprof``
exports them lazily from this list without importing the API (which pulls in every view)."""

TF_API_NAMES = (
    "ALL_ADVICE",
    "AdviceProto",
    "GraphNodeProto",
    "MultiGraphNodeProto",
    "OpLogProto",
    "ProfileContext",
    "ProfileOptionBuilder",
    "Profiler",
    "advise",
    "profile",
    "write_op_log",
)
