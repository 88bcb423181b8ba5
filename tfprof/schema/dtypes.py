"""TensorFlow DataType names and numbers: types.proto's, and those of newer TensorFlow releases.

A checkpoint's ``dtype`` column holds the name (``DT_FLOAT``); tfprof's outputs need the number.
Names of types our types.proto lacks come from ``NEWER``; a number no release names is written
``DT_<number>``, and reads back as that number.
"""

from __future__ import annotations

from tfprof.schema.proto import types_pb2

# DataType values TensorFlow 2.21 defines beyond our types.proto.
NEWER = {
    24: "DT_FLOAT8_E5M2", 25: "DT_FLOAT8_E4M3FN", 26: "DT_FLOAT8_E4M3FNUZ",
    27: "DT_FLOAT8_E4M3B11FNUZ", 28: "DT_FLOAT8_E5M2FNUZ", 29: "DT_INT4", 30: "DT_UINT4",
    31: "DT_INT2", 32: "DT_UINT2", 33: "DT_FLOAT4_E2M1FN",
}  # fmt: skip
_NUMBERS = {name: code for code, name in NEWER.items()}


def dtype_name(code: int) -> str:
    """The name of DataType ``code`` (``DT_<code>`` for one no release names)."""
    if code in NEWER:
        return NEWER[code]
    try:
        return types_pb2.DataType.Name(code)
    except ValueError:
        return f"DT_{code}"


def dtype_number(name: str) -> int:
    """The number of DataType ``name``, as ``dtype_name`` writes it (ValueError for another name)."""
    if name in _NUMBERS:
        return _NUMBERS[name]
    if name.startswith("DT_") and name[3:].isdigit():
        return int(name[3:])
    return types_pb2.DataType.Value(name)
