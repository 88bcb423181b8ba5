"""tfprof.varint, the package's one varint: its kernels and its Python reader against
protobuf's own encoding of the same numbers (an ``int64`` and a ``uint64`` field)."""

from __future__ import annotations

import numpy as np
import pytest

from tfprof import varint
from tfprof.schema.proto import pprof_pb2

VALUES = [0, 1, 127, 128, 300, 16_383, 16_384, 2**31 - 1, 2**32, 2**35 + 7, 2**56, 2**63 - 1, 2**63, 2**64 - 1]


def _protobuf(value: int) -> bytes:
    """The varint protobuf writes for ``value``: a uint64 field (pprof's Location.id, 1) without
    its tag (proto3 leaves a 0 out: its varint is one zero byte)."""
    raw = pprof_pb2.Location(id=value).SerializeToString()
    assert raw[:1] in (b"", b"\x08")  # field 1, varint
    return raw[1:] or b"\x00"


@pytest.mark.parametrize("value", VALUES)
def test_writes_and_reads_what_protobuf_does(value):
    want = _protobuf(value)
    out = np.zeros(16, np.uint8)
    end = varint.put(out, 3, np.uint64(value))
    assert bytes(out[3:end]) == want and end - 3 == varint.size(np.uint64(value)) == len(want)
    got, pos = varint.read(np.frombuffer(want, np.uint8), 0, len(want))
    assert pos == len(want) and np.int64(got).view(np.uint64) == value  # int64 bits: 2^63 and up wrap
    assert varint.decode(want, 0) == (value, len(want))


def test_cut_short_and_too_long_are_errors():
    ten = bytes([0xFF] * 9 + [0x01])
    eleven = bytes([0xFF] * 10 + [0x01])
    arr = np.frombuffer(eleven, np.uint8)
    assert varint.read(arr, 0, 9) == (0, varint.BAD)  # ends inside it
    assert varint.read(arr, 0, 11) == (0, varint.BAD)  # longer than 10 bytes
    assert varint.read(np.frombuffer(ten, np.uint8), 0, 10)[1] == 10
    with pytest.raises(varint.VarintError) as short:
        varint.decode(ten, 0, 9)
    assert short.value.kind == "short"
    with pytest.raises(varint.VarintError) as long:
        varint.decode(eleven, 0)
    assert long.value.kind == "long"
