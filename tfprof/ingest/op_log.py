"""The op log that TensorFlow's ``tfprof_logger`` adds on its own, and its merge with the
caller's (``merge_default_with_oplog``, docs/TFPROF_BEHAVIOUR.md, 'Op log builder').

Without a ``tf.Graph`` only part of TensorFlow's default entries can be known: the
``_trainable_variables`` type of the trainable variables' ops, when the caller can name them
(a ``tf.Graph``'s TRAINABLE_VARIABLES collection). Float operations from static shapes and the
Python tracebacks of ops need the graph object itself and are not added here.
"""

from __future__ import annotations

from collections.abc import Iterable

from tfprof.ingest import raw
from tfprof.schema.proto import tfprof_log_pb2

TRAINABLE_VARIABLES = "_trainable_variables"


def read_op_log(source) -> tfprof_log_pb2.OpLogProto:
    """An OpLogProto from a path, bytes or a message (ours returned as is)."""
    if isinstance(source, tfprof_log_pb2.OpLogProto):
        return source
    return raw.read_op_log(source)


def default_op_log(trainable: Iterable[str] = ()) -> tfprof_log_pb2.OpLogProto:
    """TensorFlow's default entries: one per trainable variable op, typed `_trainable_variables`,
    in collection order; and its string table, whose id 0 is `none`."""
    log = tfprof_log_pb2.OpLogProto()
    seen: dict[str, tfprof_log_pb2.OpLogEntry] = {}
    for name in trainable:
        entry = seen.get(name)
        if entry is None:
            entry = seen[name] = log.log_entries.add(name=name)
        entry.types.append(TRAINABLE_VARIABLES)
    log.id_to_string[0] = "none"
    return log


def merge_op_logs(default: tfprof_log_pb2.OpLogProto, caller=None) -> tfprof_log_pb2.OpLogProto:
    """The caller's op log with the default entries merged in, as TensorFlow merges them: the
    caller's entries come first and win; for a name in both, the default's types are appended,
    its float_ops used if the caller's is 0 and its code_def if the caller's has no traces.

    Unlike TensorFlow, the caller's ``id_to_string`` is kept (TensorFlow replaces it with its
    own table, so the caller's trace ids no longer name their strings); the default table only
    fills ids the caller does not use.
    """
    out = tfprof_log_pb2.OpLogProto()
    if caller is not None:
        caller = read_op_log(caller)
        out.CopyFrom(caller)
        # A name logged twice keeps its last entry, in the place of its first (a dict).
        by_name: dict[str, tfprof_log_pb2.OpLogEntry] = {}
        for entry in caller.log_entries:
            by_name[entry.name] = entry
        if len(by_name) != len(caller.log_entries):
            del out.log_entries[:]
            out.log_entries.extend(by_name.values())
    index = {entry.name: entry for entry in out.log_entries}
    for entry in default.log_entries:
        mine = index.get(entry.name)
        if mine is None:
            added = out.log_entries.add()
            added.CopyFrom(entry)
            index[entry.name] = added
            continue
        mine.types.extend(entry.types)
        if entry.float_ops > 0 and mine.float_ops == 0:
            mine.float_ops = entry.float_ops
        if entry.code_def.traces and not mine.code_def.traces:
            mine.code_def.MergeFrom(entry.code_def)
    for key, value in default.id_to_string.items():
        if key not in out.id_to_string:
            out.id_to_string[key] = value
    return out
