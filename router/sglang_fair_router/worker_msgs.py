"""Messages across the router <-> worker boundary (the router and each SGLang scheduler).

Router -> worker: ``[Dispatch header, payload]``, ``[Cancel]``, or ``[Hello]`` (once per router
start). Worker -> router (one feedback socket for all workers): ``Finished``, ``Evicted``, a periodic
``Heartbeat`` by which the router knows the worker is alive (with, from version 4, the worker's prefill
admission budget), and ``Holding`` (the answer to ``Hello``: the routed requests the worker holds, so a
restarted router can fail them if the worker dies later).

Versions: the router reads feedback of :data:`FEEDBACK_VERSIONS` (an older heartbeat carries no
budget: the worker counts as not reporting one); each side sends :data:`VERSION`, and a worker reads
only the router's own version (``serve`` starts both from one install). An older router refuses a newer
worker's feedback (its check is exact), so upgrade the router first.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from sglang_fair.core.global_tree import WIDTH
from sglang_fair_router.codec import MessageError, decode

VERSION = 7  # 2: Dispatch and Finished carry no client; Heartbeat.inflight. 3: Hello and Holding
# 4: Heartbeat.prefill_budget. 5: Hello.router, echoed by Holding.router. 6: Heartbeat.load. 7: Load.knee
FEEDBACK_VERSIONS = (2, 3, 4, 5, 6, 7)
Count = Annotated[int, msgspec.Meta(ge=0)]
# prefill tokens; negative: overcommitted; bounded so a bad report cannot swamp the router's arithmetic
Budget = Annotated[int, msgspec.Meta(ge=-(1 << 40), le=1 << 40)]
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
Rate = Annotated[float, msgspec.Meta(ge=0, le=1e12)]  # service units per second; bounded as Budget is


class Load(msgspec.Struct, frozen=True):
    """What a worker's scheduler runs and holds waiting, its measured service rate (its admission
    policy's cost units per busy second; 0: not measured yet), its cap on running requests and the
    batch beyond which its decode throughput grows little (``core/knee.py``; 0: not measured; not sent
    before version 7)."""

    running: Count
    waiting: Count
    service_rate: Rate = 0.0
    max_running: Count = 0
    knee: Count = 0


class Dispatch(msgspec.Struct, tag="dispatch", frozen=True):
    """Run the request in the payload frame (its rid is ``rid``)."""

    rid: NonEmpty
    v: int = VERSION


class Cancel(msgspec.Struct, tag="cancel", frozen=True):
    rid: NonEmpty
    v: int = VERSION


class Hello(msgspec.Struct, tag="hello", frozen=True):
    """A router started: tell it what you hold (``Holding``), naming ``router`` (this router's run id)."""

    router: str = ""
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
    router's own count in ``/state``); ``prefill_budget`` (version 4) the prefill tokens it can still
    take within its TTFT target (FairBatching's PAB, ``sglang_plugin/pab_report.py``; None: not
    reported); ``load`` (version 6) what its scheduler runs and holds, from which the router learns
    its capacity (``routing/base.py``: ``on_load``)."""

    worker: Count
    seq: Count
    inflight: Count = 0
    loops: Count = 0
    v: int = VERSION
    prefill_budget: Budget | None = None
    load: Load | None = None


class Holding(msgspec.Struct, tag="holding", frozen=True):
    """``worker`` holds the routed requests ``rids`` of ``clients`` (same order), not yet finished;
    the answer to the ``Hello`` of ``router`` (empty before version 5)."""

    worker: Count
    rids: list[NonEmpty]
    clients: list[NonEmpty]
    router: str = ""
    v: int = VERSION

    def __post_init__(self) -> None:
        if len(self.rids) != len(self.clients):
            raise ValueError("holding: rids and clients differ in length")


ToWorker = Dispatch | Cancel | Hello
Feedback = Finished | Evicted | Heartbeat | Holding
_to_worker: msgspec.msgpack.Decoder[ToWorker] = msgspec.msgpack.Decoder(ToWorker)
_feedback: msgspec.msgpack.Decoder[Feedback] = msgspec.msgpack.Decoder(Feedback)


def decode_to_worker(frame: bytes) -> ToWorker:
    return decode(_to_worker, frame, VERSION)


def decode_feedback(frame: bytes) -> Feedback:
    msg = decode(_feedback, frame, FEEDBACK_VERSIONS)
    if isinstance(msg, Evicted) and len(msg.tokens) % WIDTH:
        raise MessageError(f"evicted: tokens must be packed {WIDTH}-byte ids")
    if isinstance(msg, Heartbeat) and msg.v < 4 and msg.prefill_budget is not None:
        raise MessageError("heartbeat: prefill_budget needs version 4")
    if isinstance(msg, Heartbeat) and msg.v < 6 and msg.load is not None:
        raise MessageError("heartbeat: load needs version 6")
    if isinstance(msg, Heartbeat) and msg.v < 7 and msg.load is not None and msg.load.knee:
        raise MessageError("heartbeat: load.knee needs version 7")
    return msg
