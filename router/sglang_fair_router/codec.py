"""What both message modules share: msgpack framing, version check, errors."""

from __future__ import annotations

from typing import TypeVar

import msgspec

T = TypeVar("T")


class MessageError(ValueError):
    """A frame that is not a valid message of the expected boundary and version."""


def encode(msg: msgspec.Struct) -> bytes:
    return msgspec.msgpack.encode(msg)


def decode(decoder: msgspec.msgpack.Decoder[T], frame: bytes, version: int) -> T:
    """Decode and validate ``frame``; raise :class:`MessageError` with the reason otherwise."""
    try:
        msg = decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise MessageError(f"malformed message: {err}") from None
    if getattr(msg, "v", None) != version:
        raise MessageError(f"unsupported version {getattr(msg, 'v', None)!r}, expected {version}")
    return msg
