"""The instructions of a serialized ``xla.HloProto`` (JAX's compiled programs in an XSpace): name ->
(opcode, ``metadata.op_name``), where ``op_name`` is the JAX name stack (``jit(f)/jvp(loss)/mlp/…``).

We read the few fields needed straight off the wire instead of vendoring XLA's protos. Field numbers
(xla/service/hlo.proto, xla/xla_data.proto): HloProto.hlo_module 1; HloModuleProto.computations 3;
HloComputationProto.instructions 2; HloInstructionProto name 1, opcode 2, metadata 7; OpMetadata.op_name 2.
"""

from __future__ import annotations

from tfprof.ingest.sstable import varint as _varint


def _fields(buf: bytes) -> dict[int, list[bytes]]:
    """The length-delimited fields of one message, by number (other wire types skipped)."""
    out: dict[int, list[bytes]] = {}
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(buf, pos)
            out.setdefault(number, []).append(buf[pos:pos + size])
            pos += size
        else:
            raise ValueError(f"wire type {wire}")
    return out


def _one(fields: dict[int, list[bytes]], number: int) -> bytes:
    return fields.get(number, [b""])[0]


def instructions(hlo_proto: bytes) -> dict[str, tuple[str, str]]:
    """Instruction name -> (opcode, op_name) over every computation of the program; {} when the
    bytes are not an HloProto."""
    out: dict[str, tuple[str, str]] = {}
    try:
        module = _fields(_one(_fields(hlo_proto), 1))
        for computation in module.get(3, []):
            for ins in _fields(computation).get(2, []):
                f = _fields(ins)
                meta = _fields(_one(f, 7))
                out[_one(f, 1).decode()] = (_one(f, 2).decode(), _one(meta, 2).decode())
    except (ValueError, IndexError, UnicodeDecodeError):
        return {}
    return out
