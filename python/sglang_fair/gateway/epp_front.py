"""The HTTP gateway's parts as the endpoint picker uses them (``ext_proc.PickerFront``).

The picker decides with the same objects as the HTTP front: its intake (the identity rules and key
file, the model check), the servers' ``/tokenize``, the one routing policy with its tree, per-client
bound, health and feedback verdicts and peer replicas, and the same pinned body and trusted headers for
the servers.
This module is the only place the picker touches the gateway's insides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sglang_fair.edge.trust import TOKEN_HEADER
from sglang_fair.gateway.ext_proc_server import PickerServer, serve_picker
from sglang_fair.gateway.relay import pinned
from sglang_fair.gateway.routing import Ticket
from sglang_fair.gateway.servers import ServerInfo
from sglang_fair.routing import RoutingPolicy

if TYPE_CHECKING:
    from sglang_fair.gateway.app import Gateway


@contextlib.contextmanager
def only(policy: RoutingPolicy, workers: Collection[int]) -> Iterator[None]:
    """The policy chooses among ``workers`` (of those alive) for the duration (one decision)."""
    alive = policy.alive
    policy.alive = [w for w in alive if w in workers]
    try:
        yield
    finally:
        policy.alive = alive


class GatewayFront:
    """:class:`~sglang_fair.gateway.ext_proc.PickerFront` over a :class:`Gateway`."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway, self.edge = gateway, gateway.config.edge
        self.max_body_bytes = self.edge.max_body_bytes

    def client(self, headers: Mapping[str, str], body: dict[str, Any]) -> str:
        return self.gateway.intake.client(dict(headers), body)

    def refusal(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        return self.gateway.intake.refusal(path, body)

    async def tokens(self, path: str, body: dict[str, Any]) -> list[int]:
        return await self.gateway.tokenizer.tokens(path, body)

    def route(self, client: str, tokens: list[int], servers: Collection[str] | None) -> Ticket:
        router = self.gateway.router
        if servers is None:
            return router.route(client, tokens)
        with only(router.policy, [w.index for w in router.table if w.server.url in servers]):
            return router.route(client, tokens)

    def pinned(self, body: dict[str, Any], ticket: Ticket) -> bytes:
        return pinned(body, ticket)

    def upstream_headers(self, client: str) -> dict[str, str]:
        headers = {self.edge.client_header.lower(): client}
        if self.edge.gateway_token.enabled:
            headers[TOKEN_HEADER] = self.edge.gateway_token.token
        return headers

    def finish(self, ticket: Ticket, output_tokens: int) -> None:
        self.gateway.router.finish(ticket, output_tokens)

    def heard(self, ticket: Ticket) -> None:
        self.gateway.supervisor.heard(ticket.worker.index)

    def servers(self) -> list[ServerInfo]:
        out = self.gateway.supervisor.health.reasons
        return [s for s in self.gateway.table.servers if s.url not in out]


async def start_picker(gateway: Gateway) -> PickerServer:
    """The endpoint picker of ``--ext-proc-port`` over ``gateway`` (ready while a worker is in)."""
    return await serve_picker(GatewayFront(gateway), gateway.config.ext_proc,
                              lambda: bool(gateway.router.policy.alive))
