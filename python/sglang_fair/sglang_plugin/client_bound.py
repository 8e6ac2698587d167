"""Per-client bound on the requests waiting in each scheduler (``--client-max-queued``).

A client with ``limit`` requests in a scheduler's waiting queue gets its next one aborted there with
HTTP 429 (SGLang's own abort path: the tokenizer manager answers the client, the identity middleware
adds ``Retry-After``), the way SGLang's global ``--max-queued-requests`` answers 503. A retracted
request going back to the queue is never refused (it was admitted already). Requests without a
client (no ``routing_key``: the edge does not name clients) are not bounded here.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
from typing import Any

from sglang_fair.sglang_plugin.config import config_from_env

TOO_MANY_REQUESTS = 429


@cache
def queued_limit() -> int:
    """This process's ``--client-max-queued`` (read once)."""
    return config_from_env().client_max_queued


def refusal(waiting: Collection[Any], req: Any, limit: int) -> str | None:
    """Why ``req`` may not join ``waiting`` (its client already has ``limit`` there), or None.
    The client's requests are counted only when the whole queue could hold ``limit`` of them."""
    client = getattr(req, "routing_key", None)
    if limit <= 0 or len(waiting) < limit or not client or getattr(req, "is_retracted", False):
        return None
    held = sum(1 for other in waiting if getattr(other, "routing_key", None) == client)
    if held < limit:
        return None
    return f"client {client!r} already has {held} requests waiting on this worker (the limit); retry later"


def abort_on_queued_limit(original: Any, self: Any, recv_req: Any, *args: Any, **kwargs: Any) -> bool:
    """AROUND ``Scheduler._abort_on_queued_limit``: SGLang's global bound first, then the client's.
    True means ``recv_req`` was aborted (SGLang then releases it and does not queue it)."""
    if original(self, recv_req, *args, **kwargs):
        return True
    reason = refusal(self.waiting_queue, recv_req, queued_limit())
    if reason is None:
        return False
    from sglang.srt.managers.io_struct import AbortReq

    finished = {"type": "abort", "status_code": TOO_MANY_REQUESTS, "message": reason}
    abort = AbortReq(rid=recv_req.rid, finished_reason=finished, abort_message=reason)
    self.send_abort_output(abort, recv_req)
    return True
