"""Inside SGLang's data-parallel controller: requests go to the global router instead of a worker.

The controller stays SGLang's (it receives from the tokenizer manager, launches the schedulers,
broadcasts control messages); the hook swaps its ``dispatching`` function for :class:`RouterFrontend`,
which sends each tokenized request as ``[Submit, SGLang's own encoding of the request]`` to the
router, and forwards client aborts to it. A thread turns the router's ``Failed`` notices into
SGLang ``AbortReq`` outputs with the notice's status (503: worker gone; 429: the client is over the
router's per-client limit), which the tokenizer manager answers to the client.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import zmq

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.sglang_plugin.router_link import RouterLink, encode_payload, link_from_env
from sglang_fair.sglang_plugin.state import client_of
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router.codec import MessageError, encode

logger = logging.getLogger("sglang_fair")
ERROR_TYPES = {429: "TooManyRequests", 503: "ServiceUnavailable"}


class RouterFrontend:
    """The DP controller's side of the frontend <-> router boundary."""

    def __init__(self, link: RouterLink, controller: Any) -> None:
        self.controller = controller
        self.fallback = controller.round_robin_scheduler
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.to_router = self.context.socket(zmq.PUSH)
        self.to_router.setsockopt(zmq.LINGER, 0)
        self.to_router.connect(link.frontend)
        self.control = controller.send_control_message
        tokenizer_ipc = controller.port_args.tokenizer_ipc_name
        threading.Thread(target=self._relay_failures, args=(link.failures, tokenizer_ipc),
                         name="sglang-fair-failures", daemon=True).start()

    def dispatch(self, req: Any) -> None:
        """Replaces ``DataParallelController.dispatching``: one tokenized request to the router."""
        if self.controller.maybe_external_dp_rank_routing(req):
            return
        ids = getattr(req, "input_ids", None)
        if not ids:  # e.g. input embeddings: nothing to route on, SGLang's round robin takes it
            self.fallback(req)
            return
        header = fm.Submit(rid=str(req.rid), client=client_of(req), input_ids=pack_tokens(ids))
        self.to_router.send_multipart([encode(header), encode_payload(req)], copy=False)

    def on_control(self, obj: Any) -> None:
        """Replaces the controller's fallback: a client's abort also goes to the router, which
        cancels the request on its worker (behind its dispatch, so the order holds)."""
        from sglang.srt.managers.io_struct import AbortReq

        if isinstance(obj, AbortReq) and obj.rid and not obj.abort_all:
            self.to_router.send(encode(fm.Abort(rid=str(obj.rid))))
        self.control(obj)

    def _relay_failures(self, failures: str, tokenizer_ipc: str) -> None:
        from sglang.srt.managers.io_struct import AbortReq, sock_send

        inbox = self.context.socket(zmq.PULL)
        inbox.connect(failures)
        to_tokenizer = self.context.socket(zmq.PUSH)
        to_tokenizer.connect(tokenizer_ipc)
        while True:
            try:
                msg = fm.decode_failed(inbox.recv())
            except MessageError as err:
                logger.warning("sglang-fair: dropped a message from the router: %s", err)
                continue
            (logger.debug if msg.status == 429 else logger.warning)(
                "sglang-fair: request %s failed: %s", msg.rid, msg.reason)
            reason = {"type": "abort", "message": msg.reason, "status_code": msg.status,
                      "err_type": ERROR_TYPES.get(msg.status, "ServiceUnavailable")}
            sock_send(to_tokenizer, AbortReq(rid=msg.rid, finished_reason=reason, abort_message=msg.reason))


def init_dispatcher(_result: Any, self: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``DataParallelController.init_dispatcher``: route through the router when one runs."""
    link = link_from_env()
    if link is None:
        return
    frontend = RouterFrontend(link, self)
    self.dispatching = frontend.dispatch
    self._request_dispatcher.add_fallback_fn(frontend.on_control)
    self._sglang_fair_frontend = frontend
    logger.info("sglang-fair: DP controller dispatches through the router at %s", link.frontend)
