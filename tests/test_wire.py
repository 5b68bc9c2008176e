"""The judge/worker codec carries plain data only and rejects malformed frames."""

from __future__ import annotations

import pickle
import struct

import pytest
import torch

from grader.harness import wire


def test_round_trip_of_nested_values() -> None:
    value = {
        "a": [1, 2.5, None, True, "s"],
        "t": torch.arange(6, dtype=torch.int32).reshape(2, 3),
        "e": torch.empty(0, 4),
        "b": torch.tensor([1.5], dtype=torch.bfloat16),
    }
    back = wire.decode(wire.encode(value))
    assert back["a"] == value["a"]
    for key in ("t", "e", "b"):
        assert back[key].dtype == value[key].dtype and torch.equal(back[key], value[key])


def test_tuples_arrive_as_lists() -> None:
    assert wire.decode(wire.encode((1, (2, 3)))) == [1, [2, 3]]


def test_tensor_subclass_arrives_as_plain_tensor() -> None:
    class Sneaky(torch.Tensor):
        def __eq__(self, other):  # type: ignore[override]
            return True

    back = wire.decode(wire.encode(torch.tensor([1, 2]).as_subclass(Sneaky)))
    assert type(back) is torch.Tensor


@pytest.mark.parametrize("value", [object(), {1: "int key"}, {"__tensor__": 0}, torch.ones(2).to_sparse()])
def test_refuses_what_is_not_plain_data(value: object) -> None:
    with pytest.raises(wire.WireError):
        wire.encode(value)


def test_a_pickle_is_not_a_frame() -> None:
    with pytest.raises(wire.WireError):
        wire.decode(pickle.dumps({"ok": True}))


def test_lying_tensor_header_is_rejected() -> None:
    frame = wire.encode(torch.arange(4))
    forged = frame.replace(b'"shape": [4]', b'"shape": [9]')
    with pytest.raises(wire.WireError, match="does not match"):
        wire.decode(forged)


@pytest.mark.parametrize("dtype", [b'["int64"]', b'{"a": 1}', b"7", b"null"])
def test_a_forged_dtype_of_any_json_type_is_a_wire_error(dtype: bytes) -> None:
    """A rank's reply is written where student code runs: whatever it forges is a WireError the judge
    turns into a verdict, never another exception that would stop the grading (a list is unhashable)."""
    frame = wire.encode(torch.arange(4))
    (length,) = struct.unpack_from("<Q", frame)
    header = frame[8 : 8 + length].replace(b'"dtype": "int64"', b'"dtype": ' + dtype)
    assert header != frame[8 : 8 + length]
    forged = struct.pack("<Q", len(header)) + header + frame[8 + length :]
    with pytest.raises(wire.WireError, match="malformed tensor header"):
        wire.decode(forged)
