"""Messages across the router <-> worker boundary (the router and each SGLang scheduler).

Router -> worker: ``[Dispatch header, payload]`` or ``[Cancel]``. Worker -> router (one feedback
socket for all workers): ``Finished``, ``Evicted`` and a periodic ``Heartbeat`` by which the router
knows the worker is alive, and with it (version 3) the worker's prefill admission budget.

Versions: the router reads feedback of :data:`FEEDBACK_VERSIONS` (a version-2 heartbeat carries no
budget: the worker counts as not reporting one); each side sends :data:`VERSION`, and a worker reads
only the router's own version (``serve`` starts both from one install). A version-2 router refuses a
version-3 worker's feedback (its check is exact), so upgrade the router first.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sglang_fair.core.global_tree import WIDTH
from sglang_fair_router.codec import MessageError, decode

VERSION = 3  # 2: Dispatch and Finished carry no client (the router knows it); Heartbeat.inflight
# 3: Heartbeat.prefill_budget
FEEDBACK_VERSIONS = (2, 3)
Count = Annotated[int, msgspec.Meta(ge=0)]
# prefill tokens; negative: overcommitted; bounded so a bad report cannot swamp the router's arithmetic
Budget = Annotated[int, msgspec.Meta(ge=-(1 << 40), le=1 << 40)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]


class Dispatch(msgspec.Struct, tag="dispatch", frozen=True):
    """Run the request in the payload frame (its rid is ``rid``)."""

    rid: NonEmpty
    v: int = VERSION


class Cancel(msgspec.Struct, tag="cancel", frozen=True):
    rid: NonEmpty
    v: int = VERSION


class Finished(msgspec.Struct, tag="finished", frozen=True):
    """``rid`` left ``worker`` (finished, or aborted when ``aborted``) after ``output_tokens``."""

    worker: Count
    rid: NonEmpty
    output_tokens: Count
    aborted: bool = False
    v: int = VERSION


class Evicted(msgspec.Struct, tag="evicted", frozen=True):
    """``worker``'s cache dropped ``tokens[start:]`` (``tokens[:start]`` is still cached)."""

    worker: Count
    tokens: bytes  # packed: sglang_fair.core.global_tree.pack_tokens(ids)
    start: Count
    v: int = VERSION


class Heartbeat(msgspec.Struct, tag="heartbeat", frozen=True):
    """Sent every interval by a thread of the worker process (so a long step does not silence it);
    ``loops`` counts the scheduler loop's iterations, so the router can tell a hung loop from a busy
    one; ``inflight`` counts the routed requests the worker has not finished (shown beside the
    router's own count in ``/state``); ``prefill_budget`` (version 3) the prefill tokens it can still
    take within its TTFT target (FairBatching's PAB, ``sglang_plugin/pab_report.py``; None: not
    reported)."""

    worker: Count
    seq: Count
    inflight: Count = 0
    loops: Count = 0
    v: int = VERSION
    prefill_budget: Budget | None = None


ToWorker = Dispatch | Cancel
Feedback = Finished | Evicted | Heartbeat
_to_worker: msgspec.msgpack.Decoder[ToWorker] = msgspec.msgpack.Decoder(ToWorker)
_feedback: msgspec.msgpack.Decoder[Feedback] = msgspec.msgpack.Decoder(Feedback)


def decode_to_worker(frame: bytes) -> ToWorker:
    return decode(_to_worker, frame, VERSION)


def decode_feedback(frame: bytes) -> Feedback:
    msg = decode(_feedback, frame, FEEDBACK_VERSIONS)
    if isinstance(msg, Evicted) and len(msg.tokens) % WIDTH:
        raise MessageError(f"evicted: tokens must be packed {WIDTH}-byte ids")
    if isinstance(msg, Heartbeat) and msg.v < 3 and msg.prefill_budget is not None:
        raise MessageError("heartbeat: prefill_budget needs version 3")
    return msg
