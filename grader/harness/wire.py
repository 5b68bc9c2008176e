"""Plain-data codec for the judge/worker boundary: JSON plus raw tensor bytes, never pickle.

A frame is ``u64 header_len | header (JSON) | (u64 blob_len | blob)*``. Tensors appear in the header as
``{"__tensor__": index, "dtype": name, "shape": [...]}`` and their bytes are blob ``index``. Decoding trusts
nothing: every dtype, shape and length is checked, and the only objects it builds are JSON values and plain
``torch.Tensor``s.
"""

from __future__ import annotations

import ctypes
import json
import struct
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from grader.core.formats import JSON, JSONValue

TENSOR_KEY = "__tensor__"
DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
_DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
_U64 = struct.Struct("<Q")


class WireError(ValueError):
    """A value that cannot cross the boundary, or a frame that is not well formed."""


# ---------------------------------------------------------------------------------------------------------
# encode


def encode(value: object) -> bytes:
    """Serialize ``value`` (JSON values, tuples, str-keyed dicts and dense tensors) into one frame."""
    blobs: list[bytes] = []
    header = json.dumps(_to_json(value, blobs, "value")).encode()
    parts = [_U64.pack(len(header)), header]
    for blob in blobs:
        parts += [_U64.pack(len(blob)), blob]
    return b"".join(parts)


def _to_json(value: object, blobs: list[bytes], where: str) -> JSONValue:
    if value is None:
        return None
    if isinstance(value, bool | int | float | str) and type(value) in (bool, int, float, str):
        return value
    if isinstance(value, torch.Tensor):
        return _tensor_to_json(value, blobs, where)
    if isinstance(value, list | tuple) and type(value) in (list, tuple):
        return [_to_json(item, blobs, f"{where}[{i}]") for i, item in enumerate(value)]
    if type(value) is dict:
        if TENSOR_KEY in value:
            raise WireError(f"{where}: a dict may not use the key {TENSOR_KEY!r}")
        if not all(type(key) is str for key in value):
            raise WireError(f"{where}: dict keys must be str")
        return {key: _to_json(item, blobs, f"{where}[{key!r}]") for key, item in value.items()}
    raise WireError(f"{where}: a {type(value).__qualname__} cannot cross to the judge (plain data only)")


def _tensor_to_json(tensor: torch.Tensor, blobs: list[bytes], where: str) -> JSON:
    if tensor.layout != torch.strided or tensor.dtype not in _DTYPE_NAMES:
        raise WireError(f"{where}: unsupported tensor ({tensor.dtype}, {tensor.layout})")
    # as_subclass drops any student Tensor subclass; the bytes are read straight from memory.
    plain = torch.Tensor.as_subclass(tensor.detach(), torch.Tensor).to("cpu").contiguous()
    nbytes = plain.numel() * plain.element_size()
    blobs.append(ctypes.string_at(plain.data_ptr(), nbytes) if nbytes else b"")
    return {TENSOR_KEY: len(blobs) - 1, "dtype": _DTYPE_NAMES[plain.dtype], "shape": list(plain.shape)}


# ---------------------------------------------------------------------------------------------------------
# decode


# Any: JSON values and tensors, which each caller reads by its own protocol (a task, a rank's reply)
def decode(frame: bytes) -> Any:
    """Rebuild a value from ``frame``; raise ``WireError`` on anything malformed."""
    header, offset = _read_chunk(frame, 0)
    blobs: list[bytes] = []
    while offset < len(frame):
        blob, offset = _read_chunk(frame, offset)
        blobs.append(blob)
    try:
        tree = json.loads(header)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"malformed header: {exc}") from None
    return _from_json(tree, blobs)


def _read_chunk(frame: bytes, offset: int) -> tuple[bytes, int]:
    if offset + _U64.size > len(frame):
        raise WireError("truncated frame")
    (length,) = _U64.unpack_from(frame, offset)
    start = offset + _U64.size
    if start + length > len(frame):
        raise WireError("truncated frame")
    return frame[start : start + length], start + length


def _from_json(node: object, blobs: list[bytes]) -> object:
    if isinstance(node, list):
        return [_from_json(item, blobs) for item in node]
    if isinstance(node, dict):
        if TENSOR_KEY in node:
            return _tensor_from_json(node, blobs)
        return {key: _from_json(item, blobs) for key, item in node.items()}
    return node


def _tensor_from_json(node: dict[str, object], blobs: list[bytes]) -> torch.Tensor:
    index, dtype_name, shape = node.get(TENSOR_KEY), node.get("dtype"), node.get("shape")
    # isinstance first: a forged dtype that cannot be hashed (a list) would raise TypeError in the lookup
    if (
        set(node) != {TENSOR_KEY, "dtype", "shape"}
        or not isinstance(dtype_name, str)
        or dtype_name not in DTYPES
    ):
        raise WireError(f"malformed tensor header {node!r:.200}")
    if type(index) is not int or not 0 <= index < len(blobs):
        raise WireError("tensor refers to a missing blob")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise WireError(f"malformed tensor shape {shape!r:.200}")
    dtype = DTYPES[dtype_name]
    numel = 1
    for dim in shape:
        numel *= dim
    blob = blobs[index]
    if len(blob) != numel * torch.empty((), dtype=dtype).element_size():
        raise WireError(f"tensor of shape {shape} and {dtype_name} does not match its {len(blob)} bytes")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(blob), dtype=dtype).reshape(shape)
