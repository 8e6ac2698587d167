"""What both message modules share: msgpack framing, version check, errors."""

from __future__ import annotations

from typing import TypeVar

import msgspec

T = TypeVar("T")


class MessageError(ValueError):
    """A frame that is not a valid message of the expected boundary and version."""


def encode(msg: msgspec.Struct) -> bytes:
    return msgspec.msgpack.encode(msg)


def decode(decoder: msgspec.msgpack.Decoder[T], frame: bytes, version: int | tuple[int, ...]) -> T:
    """Decode and validate ``frame`` (of ``version``, or one of them); raise :class:`MessageError`
    with the reason otherwise."""
    versions = (version,) if isinstance(version, int) else version
    try:
        msg = decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise MessageError(f"malformed message: {err}") from None
    if getattr(msg, "v", None) not in versions:
        raise MessageError(f"unsupported version {getattr(msg, 'v', None)!r}, expected "
                           f"{' or '.join(map(str, versions))}")
    return msg
