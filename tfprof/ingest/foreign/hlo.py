"""The instructions of a serialized ``xla.HloProto`` (JAX's compiled programs in an XSpace): name ->
(opcode, ``metadata.op_name``), where ``op_name`` is the JAX name stack (``jit(f)/jvp(loss)/mlp/…``).

Parsed by protobuf over ``schema/proto/hlo.proto``: upstream's messages cut to the fields read
(HloProto.hlo_module 1; HloModuleProto.computations 3; HloComputationProto.instructions 2;
HloInstructionProto name 1, opcode 2, metadata 7; OpMetadata.op_name 2), the rest skipped as
unknown fields.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from tfprof.schema.proto.hlo_pb2 import HloProto


def instructions(hlo_proto: bytes) -> dict[str, tuple[str, str]]:
    """Instruction name -> (opcode, op_name) over every computation of the program; {} when the
    bytes are not an HloProto (protobuf cannot parse them: a damaged stat, or another message)."""
    try:
        program = HloProto.FromString(hlo_proto)
    except DecodeError:
        return {}
    return {ins.name: (ins.opcode, ins.metadata.op_name)
            for computation in program.hlo_module.computations for ins in computation.instructions}
