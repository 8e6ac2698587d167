"""Messages across the gateway <-> gateway boundary: what one replica tells the others.

Every replica publishes (``peers.py``) its own notices, each with its run (one per process start)
and a sequence number per run, so a peer can tell a restart from a gap:

- ``Dispatched``: this replica routed ``rid`` of ``client`` to global ``worker``, prompt ``tokens``
  (packed, ``global_tree.pack_tokens``); the peers record it as their own dispatch
  (``RoutingPolicy.observe``: the charge, the queue size, the tree). ``replay`` marks one re-sent for
  a peer that joined while the request was in flight (a peer that already holds it ignores it).
- ``Finished``: the response of ``rid`` ended after ``output_tokens`` (the peers' ``on_finish``).
- ``Alive``: sent every ``--peer-interval`` with the fingerprint of the replica's worker table (a
  peer that numbers the workers otherwise is not heard); ``heard`` names the runs this replica hears,
  so a replica replays its requests in flight once a new peer hears it (PUB/SUB drops what is
  published before a subscriber is connected, and a replica ignores a run until its first Alive).

Versions: a replica reads exactly :data:`VERSION` (replicas run one install).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sglang_fair.core.global_tree import WIDTH
from sglang_fair_router.codec import MessageError, decode, encode

VERSION = 1
Count = Annotated[int, msgspec.Meta(ge=0)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]


class Dispatched(msgspec.Struct, tag="dispatched", frozen=True):
    run: Name
    seq: Count
    rid: Name
    client: Name
    worker: Count
    tokens: bytes
    replay: bool = False
    v: int = VERSION


class Finished(msgspec.Struct, tag="finished", frozen=True):
    run: Name
    seq: Count
    rid: Name
    output_tokens: Count
    v: int = VERSION


class Alive(msgspec.Struct, tag="alive", frozen=True):
    run: Name
    seq: Count
    name: Name  # the replica's --peer-name, for views
    table: Name  # its worker table's fingerprint: replicas must number the workers alike
    heard: tuple[str, ...] = ()
    v: int = VERSION


Notice = Dispatched | Finished | Alive
_decoder = msgspec.msgpack.Decoder(Notice)


def decode_notice(frame: bytes) -> Notice:
    """Decode and validate a peer's frame (a :class:`MessageError` says why it is not one)."""
    msg: Notice = decode(_decoder, frame, VERSION)
    if isinstance(msg, Dispatched) and len(msg.tokens) % WIDTH:
        raise MessageError(f"tokens of {len(msg.tokens)} bytes are not whole {WIDTH}-byte ids")
    return msg


__all__ = ["VERSION", "Alive", "Dispatched", "Finished", "MessageError", "Notice", "decode_notice", "encode"]
