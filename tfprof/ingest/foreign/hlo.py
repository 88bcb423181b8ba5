"""The instructions of a serialized ``xla.HloProto`` (JAX's compiled programs in an XSpace): name ->
(opcode, ``metadata.op_name``), where ``op_name`` is the JAX name stack (``jit(f)/jvp(loss)/mlp/…``),
and which instruction each event of a capture executed.

Parsed by protobuf over ``schema/proto/hlo.proto``: upstream's messages cut to the fields read
(HloProto.hlo_module 1; HloModuleProto.computations 3; HloComputationProto.instructions 2;
HloInstructionProto name 1, opcode 2, metadata 7; OpMetadata.op_name 2), the rest skipped as
unknown fields.
"""

from __future__ import annotations

import polars as pl
from google.protobuf.message import DecodeError

from tfprof.ingest.foreign import codes
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


def kernel_name(instruction: pl.Expr) -> pl.Expr:
    """The name XLA's GPU backend gives the kernel of an instruction: the instruction's name with
    each ``.`` written ``_`` (``gemm_fusion_dot_general.5`` runs as ``gemm_fusion_dot_general_5``)."""
    return instruction.str.replace_all(".", "_", literal=True)


def executed(events: pl.DataFrame, programs: dict[str, dict[str, tuple[str, str]]]) -> pl.DataFrame:
    """For each row of ``events`` (``_program``: ``<hlo_module>(<program_id>)``, ``hlo_op``, and
    ``kernel``: a GPU event's name, null off a GPU; text or categoricals), the instruction of ``programs`` it executed
    (``_instr``) with its ``_opcode`` and ``_op_name``; nulls where none. An event's ``hlo_op`` stat
    names it; on a GPU that stat may instead name the command buffer (``command_buffer_1``: a CUDA
    graph XLA launches at once) that ran the kernel, which then names its instruction itself
    (``kernel_name``). Worked out once per distinct row."""
    table = pl.DataFrame(
        [(module, name, opcode, op_name) for module, ins in programs.items() for name, (opcode, op_name) in ins.items()],
        schema={"_program": pl.String, "_instr": pl.String, "_opcode": pl.String, "_op_name": pl.String}, orient="row")
    out = {"_instr": pl.String, "_opcode": pl.String, "_op_name": pl.String}
    if table.height == 0 or events.height == 0:
        return pl.DataFrame({c: pl.Series(c, [], t).extend_constant(None, events.height) for c, t in out.items()})
    first, inverse = codes.distinct(*events.get_columns())
    keys = events[first].with_columns(pl.all().cast(pl.String)).with_row_index("_key")
    by_op = keys.join(table, left_on=["_program", "hlo_op"], right_on=["_program", "_instr"], how="inner")
    by_op = by_op.with_columns(pl.col("hlo_op").alias("_instr"))
    by_kernel = keys.join(table.with_columns(kernel_name(pl.col("_instr")).alias("kernel")), on=["_program", "kernel"],
                          how="inner").filter(~pl.col("_key").is_in(by_op["_key"].implode()))
    found = pl.concat([by_op.select("_key", *out), by_kernel.select("_key", *out)]).unique(
        "_key", keep="first", maintain_order=True)
    per_key = keys.select("_key").join(found, on="_key", how="left").sort("_key").drop("_key")
    return per_key[inverse]
