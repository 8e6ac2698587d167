"""The gateway's parts and its relay with failover (:class:`Gateway`); its HTTP endpoint, FastAPI on
uvicorn as SGLang's own server, is ``front.py``'s.

``POST /v1/chat/completions``, ``/v1/completions`` and ``/generate``, the hot path: the request is
accepted (``intake.py``: the body, the client by the same rules as ``serve``, the model name), its
prompt's token ids are found (``prompt.py``), the router picks a worker (``routing.py``), and the body
goes to that worker's server with ``routed_dp_rank`` pinned (any pin the client sent is dropped), the
client named in the identity header and the gateway's token (``upstream.py``). Streams are relayed
chunk by chunk as they arrive (``relay.py``); the response's end is the router's finish. A server that
cannot be reached is taken out and the request, not started there, goes to another (failover); a
server that breaks off a started request is taken out and the request fails with 503; a server that
feedback takes out (``supervision.py``) has its requests in flight cut: 503 for a whole answer, an
error event ending a stream. ``GET /v1/models`` is the first server's; ``/gateway/state`` shows the
worker table, each worker's counts, what the feedback ports and peers delivered and the background
duties (``duties.py``); ``/fairness``, the fairness page (``/fairness/ui``) and ``/metrics`` (per-client
answers, workers' queues, the duties' restarts) are ``dashboard/gateway_page.py``'s; ``/health`` answers
200. With ``--ext-proc-port`` the same parts also answer a Gateway API proxy as its endpoint picker
(``epp_front.py``). Nothing here imports the page or the picker: ``front.py`` mounts both.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from sglang_fair.edge.budgets import OverBudget
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.duties import Duties
from sglang_fair.gateway.feedback import FeedbackListener
from sglang_fair.gateway.http1 import Answer, HttpError
from sglang_fair.gateway.intake import Accepted, Intake, error
from sglang_fair.gateway.local_tokens import LocalTokenizer
from sglang_fair.gateway.processes import ProcessView
from sglang_fair.gateway.prompt import CHAT, COMPLETIONS, GENERATE, ServerTokenizer
from sglang_fair.gateway.relay import Relay, RelayedStream, pinned, where
from sglang_fair.gateway.replication import Replication
from sglang_fair.gateway.routing import GatewayRouter, Ticket
from sglang_fair.gateway.servers import WorkerTable
from sglang_fair.gateway.supervision import Cut, ServerSupervisor
from sglang_fair.gateway.tenants import GatewayTenants
from sglang_fair.gateway.upstream import Unreachable, Upstream, UpstreamError
from sglang_fair.gateway.usage import output_tokens
from sglang_fair.gateway.wire import loads
from sglang_fair.routing import NoWorkerError
from sglang_fair.routing.clients import ClientOverLimit

RELAYED = (CHAT, COMPLETIONS, GENERATE)
RELAYED_HEADERS = frozenset({"retry-after"})  # of a server's answer, besides its content type
logger = logging.getLogger("sglang_fair.gateway")


class Gateway:
    """The gateway's parts (assembled by ``launch.build_gateway``) and the relay with failover."""

    def __init__(self, config: GatewayConfig, table: WorkerTable, router: GatewayRouter,
                 listener: FeedbackListener | None = None, replication: Replication | None = None,
                 local: LocalTokenizer | None = None) -> None:
        self.config, self.table, self.router = config, table, router
        self.listener, self.replication = listener, replication
        self.supervisor = ServerSupervisor(table, router, listener, config.heartbeat_timeout,
                                           config.health_failures)
        self.tenants = GatewayTenants(config.edge, router, dict(config.router.cost.client_weights))
        self.intake = Intake(config.edge, None if config.edge.accept_any_model else table.model_names(),
                             self.tenants.live)
        self.tokenizer = ServerTokenizer(self.supervisor.servers_in, config.health_timeout, local)
        self.duties = Duties()
        self.upstream: Upstream | None = None  # set at start-up, in the serving event loop
        self.failed_over = 0  # requests a server could not be reached for, tried at another
        self.picker: Any = None  # the endpoint picker (--ext-proc-port, epp_front.start_picker)
        self.process: ProcessView | None = None  # which of --workers N this is (None: the only one)

    def _servers(self) -> Upstream:
        if self.upstream is None:
            raise RuntimeError("the gateway is not started")
        return self.upstream

    async def relay(self, request: Request, path: str) -> Response:
        accepted = await self.intake.accept(request, path)
        if not isinstance(accepted, Accepted):
            return accepted
        client, body = accepted.client, accepted.body
        tokens = await self.tokenizer.tokens(path, body, accepted.plain)
        supervisor, reasons = self.supervisor, []
        for _ in self.table.servers:  # a server not reached did not start the request: try another
            try:
                ticket = self.router.route(client, tokens)
            except NoWorkerError:
                break
            except ClientOverLimit as err:
                return error(429, "TooManyRequests", str(err), {"retry-after": "1"})
            except OverBudget as err:
                return error(429, "TooManyRequests", str(err), {"retry-after": str(err.retry_after)})
            url = ticket.worker.server.url
            try:
                sent = self._servers().send(url, path, pinned(accepted.raw, body, ticket), client)
                resp = await supervisor.until_cut(url, sent)
            except Cut as err:
                self.router.finish(ticket, 0)
                return taken_out(ticket, err)
            except UpstreamError as err:
                self.router.finish(ticket, 0)
                supervisor.take_out(url, str(err))
                if isinstance(err, Unreachable):
                    reasons.append(str(err))
                    self.failed_over += 1
                    continue
                return error(503, "ServiceUnavailable", f"worker {ticket.worker.index} broke off: {err}")
            except BaseException:  # not sent (a client name no header can carry) or cancelled: no answer
                self.router.finish(ticket, 0)
                raise
            if body.get("stream") and resp.status == 200:
                heard = functools.partial(supervisor.heard, ticket.worker.index)
                return RelayedStream(Relay(resp, ticket, self.router, supervisor.streams_at(url), heard))
            return await self._whole(resp, ticket)
        return error(503, "ServiceUnavailable", "no server can take the request: "
                     + ("; ".join(reasons) or "every server is taken out (failed health probes)"))

    async def _whole(self, resp: Answer, ticket: Ticket) -> Response:
        produced = 0
        url = ticket.worker.server.url
        try:
            data = await self.supervisor.until_cut(url, resp.read())
            if resp.status == 200:
                self.supervisor.heard(ticket.worker.index)
                produced = output_tokens(loads(data))
        except Cut as err:
            resp.close()
            return taken_out(ticket, err)
        except (HttpError, TimeoutError) as err:
            self.supervisor.take_out(url, f"broke off a request: {err}")
            return error(503, "ServiceUnavailable", f"worker {ticket.worker.index} broke off: {err}")
        except ValueError:
            pass
        finally:
            resp.release()
            self.router.finish(ticket, produced)
        kept = {k: v for k, v in resp.headers.items() if k.lower() in RELAYED_HEADERS}
        return Response(data, status_code=resp.status, headers=kept,
                        media_type=resp.headers.get("content-type", "application/json"))

    def start_duties(self, upstream: Upstream) -> None:
        """Start the background duties (in the serving event loop, ``upstream`` open)."""
        config, duties, supervisor = self.config, self.duties, self.supervisor
        duties.start("health", lambda: supervisor.watch_health(
            lambda url: upstream.healthy(url, config.health_timeout), config.health_interval))
        if self.router.clients.ttl > 0:
            duties.start("client_expiry", lambda: every(min(60.0, self.router.clients.ttl / 2),
                                                        self.router.expire))
        if self.listener is not None:
            duties.start("feedback", self.listener.run)
            look_every = min(0.5, config.heartbeat_timeout / 4)
            duties.start("liveness", lambda: supervisor.watch_feedback(look_every))
        if self.replication is not None:
            duties.start("replica_link", self.replication.run)
        if self.tenants.reloader is not None:
            duties.start("tenants", self.tenants.run)  # reload on SIGHUP and on change (tenants.py)

    def state(self) -> dict[str, Any]:
        """What ``/gateway/state`` shows."""
        heard = self.listener.view() if self.listener is not None else None
        peers = self.replication.view() if self.replication is not None else None
        picked = self.picker.picker.view() if self.picker is not None else None
        return {**self.router.state(), "servers_out": self.supervisor.health.out, "feedback": heard,
                "peers": peers, "failed_over": self.failed_over, "duties": self.duties.view(),
                "local_tokenizer": self.tokenizer.local.view() if self.tokenizer.local else None,
                "ext_proc": picked, "process": self.process.view() if self.process is not None else None}


def taken_out(ticket: Ticket, why: Exception) -> JSONResponse:
    return error(503, "ServiceUnavailable", f"{where(ticket)} was taken out: {why}")


async def every(interval: float, call: Callable[[], object]) -> None:
    """Call ``call`` every ``interval`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        call()
