"""Messages across the frontend <-> router boundary (SGLang's tokenizer manager and the router).

Frames: ``[header]`` or, for a submission, ``[header, payload]`` where the payload is the frontend's
own opaque request (SGLang's pickled TokenizedGenerateReqInput), forwarded untouched to the worker.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sglang_fair.core.global_tree import WIDTH
from sglang_fair_router.codec import MessageError, decode

VERSION = 2  # 2: Failed.status (429 for a client over the router's limit, 503 otherwise)
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class Submit(msgspec.Struct, tag="submit", frozen=True):
    """A tokenized request of ``client`` to route; its payload frame follows."""

    rid: NonEmpty
    client: NonEmpty
    input_ids: bytes  # packed: sglang_fair.core.global_tree.pack_tokens(ids)
    v: int = VERSION

    @property
    def tokens(self) -> bytes:
        """What the routing policies read (the RouteRequest protocol)."""
        return self.input_ids


class Abort(msgspec.Struct, tag="abort", frozen=True):
    """The client gave up on ``rid``: cancel it wherever it is."""

    rid: NonEmpty
    v: int = VERSION


class Failed(msgspec.Struct, tag="failed", frozen=True):
    """Router -> frontend: ``rid`` will not be served (its worker died, or its client is over the
    router's per-client limit); tell the client why, with HTTP ``status``."""

    rid: NonEmpty
    reason: str
    status: Annotated[int, msgspec.Meta(ge=400, le=599)] = 503
    v: int = VERSION


Inbound = Submit | Abort
_inbound: msgspec.msgpack.Decoder[Inbound] = msgspec.msgpack.Decoder(Inbound)
_outbound = msgspec.msgpack.Decoder(Failed)


def decode_inbound(frame: bytes) -> Inbound:
    msg = decode(_inbound, frame, VERSION)
    if isinstance(msg, Submit) and (not msg.input_ids or len(msg.input_ids) % WIDTH):
        raise MessageError(f"submit {msg.rid}: input_ids must be non-empty packed {WIDTH}-byte ids")
    return msg


def decode_failed(frame: bytes) -> Failed:
    return decode(_outbound, frame, VERSION)
