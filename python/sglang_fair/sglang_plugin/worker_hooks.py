"""Inside each SGLang scheduler: the worker's side of the router <-> worker boundary, and its feedback
to the server's gateway hub.

:class:`WorkerLink` binds the worker's inbox when a router runs, turns the router's ``Dispatch`` into
SGLang's own tokenized request (decoded as SGLang's receiver would) and ``Cancel`` into an
``AbortReq``, and sends ``Finished`` (streamed finish or abort) and ``Evicted`` (from SGLang's KV
cache events, via :class:`EvictionPublisher`); a router's ``Hello`` (sent when it starts) is
answered with ``Holding``, the routed requests this worker holds, so a restarted router knows them.
A thread sends a ``Heartbeat`` every heartbeat interval with the number of loop iterations so far: a
dead process goes silent, a hung loop stops counting, and a long model step is neither. Every notice
goes to the router's feedback socket and, with ``serve --feedback-port``, to the server's
:class:`~sglang_fair.links.feedback_hub.FeedbackHub` (for gateways); a server without a
router has only the latter. Feedback never blocks the scheduler: a receiver that is gone has its
notices dropped (and counted). Fault injection, for tests and chaos runs only: with
``SGLANG_FAIR_FAULT_DROP_FINISHED=K`` a worker leaves every K-th ``Finished`` unsent (a lost notice).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import zmq

from sglang_fair.core.knee import BatchKnee
from sglang_fair.links.feedback_hub import hub_from_env
from sglang_fair.sglang_plugin.config import config_from_env
from sglang_fair.sglang_plugin.evictions import BlockIndex, Removal
from sglang_fair.sglang_plugin.router_link import RouterLink, decode_payload, link_from_env
from sglang_fair.sglang_plugin.state import client_of
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import MessageError, encode

logger = logging.getLogger("sglang_fair")
DEVICE_TIER = (None, "GPU")  # SGLang's StorageMedium of the device cache ("GPU" on CPU devices too)
ENV_DROP_FINISHED = "SGLANG_FAIR_FAULT_DROP_FINISHED"


def drop_every(environ: Mapping[str, str] = os.environ) -> int:
    """K of ``SGLANG_FAIR_FAULT_DROP_FINISHED`` (0: drop nothing)."""
    raw = environ.get(ENV_DROP_FINISHED, "").strip()
    if not raw:
        return 0
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{ENV_DROP_FINISHED} must be an integer >= 1, got {raw!r}")
    return int(raw)


class WorkerLink:
    """One scheduler's sockets to the router and the hub, and the requests the router sent it."""

    def __init__(self, link: RouterLink | None, rank: int, hub: str | None = None,
                 heartbeat_interval: float | None = None) -> None:
        self.rank, self.link = rank, link
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.inbox: zmq.Socket[bytes] | None = None
        if link is not None:
            self.inbox = self.context.socket(zmq.PULL)
            self.inbox.bind(link.worker(rank))
        self.receivers = [e for e in (link.feedback if link else None, hub) if e is not None]
        self.interval = heartbeat_interval or (link.heartbeat_interval if link else 0.5)
        self.feedback = self._feedback_sockets()
        self.routed: dict[str, str] = {}  # rid -> client, for what the router sent here, until it leaves
        self.loops = 0
        self.seq = 0
        self.dropped = 0
        self.drop_finished, self.finished_count = drop_every(), 0
        self.prefill_budget: int | None = None  # the latest PAB (pab_report.py), sent with heartbeats
        self.load: wm.Load | None = None  # the scheduler's latest (report_load), sent with heartbeats
        threading.Thread(target=self._beat, name="sglang-fair-heartbeat", daemon=True).start()

    def _feedback_sockets(self) -> list[zmq.Socket[bytes]]:
        socks = []
        for endpoint in self.receivers:
            sock = self.context.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(endpoint)
            socks.append(sock)
        return socks

    def _beat(self) -> None:
        socks = self._feedback_sockets()  # the thread's own: ZMQ sockets are not shared across threads
        while True:
            self.seq += 1
            beat = wm.Heartbeat(worker=self.rank, seq=self.seq, inflight=len(self.routed), loops=self.loops,
                                prefill_budget=self.prefill_budget, load=self.load)
            self._send(beat, socks)
            time.sleep(self.interval)

    def poll(self, into: list[Any]) -> None:
        """Append what the router sent since the last poll to ``into`` (once per loop iteration)."""
        self.loops += 1
        while self.inbox is not None:
            try:
                frames = self.inbox.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                req = self._decode(frames)
            except MessageError as err:
                logger.warning("sglang-fair worker %d: dropped a message from the router: %s", self.rank, err)
                continue
            if req is not None:
                into.append(req)

    def _decode(self, frames: list[bytes]) -> Any:
        from sglang.srt.managers.io_struct import AbortReq

        msg = wm.decode_to_worker(frames[0])
        if isinstance(msg, wm.Cancel):
            return AbortReq(rid=msg.rid)
        if isinstance(msg, wm.Hello):
            held = wm.Holding(worker=self.rank, rids=list(self.routed), clients=list(self.routed.values()),
                              router=msg.router)
            self._send(held)
            return None
        if len(frames) != 2:
            raise MessageError(f"dispatch {msg.rid}: expected 2 frames, got {len(frames)}")
        try:
            req = decode_payload(frames[1])
        except Exception as err:  # SGLang's decoder raises its own and msgspec's errors
            raise MessageError(f"dispatch {msg.rid}: undecodable payload: {err}") from None
        if getattr(req, "rid", None) != msg.rid:
            raise MessageError(f"dispatch {msg.rid}: payload carries rid {getattr(req, 'rid', None)!r}")
        self.routed[msg.rid] = client_of(req)
        return req

    def finished(self, req: Any, aborted: bool) -> None:
        """``req`` left this worker: tell the router its output length (once per routed request)."""
        rid = str(req.rid)
        if self.routed.pop(rid, None) is not None:
            self.finished_count += 1
            if self.drop_finished and self.finished_count % self.drop_finished == 0:
                return
            self._send(wm.Finished(worker=self.rank, rid=rid, output_tokens=len(req.output_ids),
                                   aborted=aborted))

    def evicted(self, removals: list[Removal]) -> None:
        for tokens, start in removals:
            self._send(wm.Evicted(worker=self.rank, tokens=tokens, start=start))

    def _send(self, msg: wm.Finished | wm.Evicted | wm.Heartbeat | wm.Holding,
              socks: list[zmq.Socket[bytes]] | None = None) -> None:
        frame = encode(msg)
        for sock in self.feedback if socks is None else socks:
            try:
                sock.send(frame, zmq.NOBLOCK)
            except zmq.Again:
                self.dropped += 1
                if self.dropped in (1, 100, 10_000):
                    logger.warning("sglang-fair worker %d: feedback not read; %d notices dropped",
                                   self.rank, self.dropped)


_LINK: WorkerLink | None = None
_LOOKED = False  # whether this process has looked for a router (once: the hook runs every loop)


def worker_link(create: bool = True) -> WorkerLink | None:
    """This scheduler's link (made on first use, on a DP rank's leader, when a router runs or the
    server publishes feedback)."""
    global _LINK, _LOOKED
    if _LINK is None and create and not _LOOKED:
        from sglang.srt.runtime_context import get_parallel

        _LOOKED = True
        link, hub, rank = link_from_env(), hub_from_env(), get_parallel().dp_rank
        if link is not None and rank is not None:
            _LINK = WorkerLink(link, rank, hub)
        elif hub is not None:
            _LINK = WorkerLink(None, rank or 0, hub, config_from_env().feedback.heartbeat_interval)
    return _LINK


def pull_raw_reqs(result: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``SchedulerRequestReceiver._pull_raw_reqs``: add the router's requests (leader rank)."""
    if isinstance(result, list) and (link := worker_link()) is not None:
        link.poll(result)


def stream_output(_result: Any, self: Any, reqs: list[Any], *args: Any, **kwargs: Any) -> None:
    """AFTER ``SchedulerOutputStreamer.stream_output``: finished requests go back as ``Finished``."""
    link = worker_link(create=False)
    if link is not None and link.routed:
        for req in reqs:
            if req.finished():
                link.finished(req, aborted=False)


def send_abort_output(_result: Any, self: Any, abort_req: Any, req: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``Scheduler.send_abort_output``: a request ended outside the stream (aborted while queued)."""
    link = worker_link(create=False)
    if link is not None:
        link.finished(req, aborted=True)


class EvictionPublisher:
    """SGLang KV-event publisher (``--kv-events-config '{"publisher": "sglang_fair"}'``) that turns
    removed pages into ``Evicted`` notices for the router."""

    def __init__(self, attn_dp_rank: int = 0, **_config: Any) -> None:
        self.index = BlockIndex()

    def publish(self, batch: Any) -> None:
        removals: list[Removal] = []
        for event in batch.events:
            if getattr(event, "medium", None) not in DEVICE_TIER:
                continue  # host memory, disk, remote tiers: routing follows what the device holds
            kind = type(event).__name__
            if kind == "BlockStored":
                self.index.stored(event.block_hashes, event.parent_block_hash, event.token_ids,
                                  event.block_size)
            elif kind == "BlockRemoved":
                removals += self.index.removed(event.block_hashes)
            elif kind == "AllBlocksCleared":
                removals += self.index.cleared()
        link = worker_link()
        if removals and link is not None:
            link.evicted(removals)

    def shutdown(self) -> None:
        return

    def describe_local_source(self, block_size: int) -> None:
        return None


KNEE_REFIT_STEPS = 32  # decode steps between fits of the knee (a fit is about 1 ms; reports go every step)


def knee_of(scheduler: Any) -> BatchKnee:
    """The scheduler's decode steps, measured (its useful batch, :mod:`sglang_fair.core.knee`)."""
    knee = getattr(scheduler, "_sglang_fair_knee", None)
    if knee is None:
        knee = scheduler._sglang_fair_knee = BatchKnee(refit_every=KNEE_REFIT_STEPS)
    return knee


def observe_step(scheduler: Any, batch: Any, now: float) -> None:
    """A decode batch's measured time (``now - batch.launch_ts``, SGLang's ``time.monotonic``) and size."""
    launched, reqs = getattr(batch, "launch_ts", None), list(getattr(batch, "reqs", None) or ())
    if launched is None or not reqs or not batch.forward_mode.is_decode():
        return
    context = sum(len(r.origin_input_ids) + len(r.output_ids) for r in reqs)
    knee_of(scheduler).observe(len(reqs), context, now - launched)


def report_load(scheduler: Any, service_rate: float, batch: Any = None) -> None:
    """What the scheduler runs (its running batch and the batch just run: a prefill batch joins the
    running one only at the next step) and holds waiting, its admission policy's measured service rate,
    its cap on running requests and the batch beyond which its decode throughput grows by little, for the
    next heartbeat (the router learns the worker's capacity from it)."""
    link = worker_link(create=False)
    if link is not None:
        just_run = getattr(batch, "reqs", None) or ()
        reqs = {id(r) for r in scheduler.running_batch.reqs} | {id(r) for r in just_run}
        link.load = wm.Load(running=len(reqs), waiting=len(scheduler.waiting_queue),
                            service_rate=max(0.0, service_rate),
                            max_running=max(0, int(getattr(scheduler, "max_running_requests", 0) or 0)),
                            knee=knee_of(scheduler).knee())
