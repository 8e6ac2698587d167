"""What the gateway accepts from a client, before anything is routed: the body, the client, the model.

The same rules as ``serve``'s edge (``sglang_fair.edge``): a body that is not a JSON object is 400
(``edge/bodies.py``); the client is the key's, else the header's, else ``user`` (``edge/identity.py``;
401 for a missing or unknown key when keys are configured); a ``model`` the servers do not serve is 404
(``edge/model_names.py``, unless ``--accept-any-model``). Every refusal is the edge's OpenAI-style error
body (:func:`error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from sglang_fair.edge.asgi import headers_of, scope_state
from sglang_fair.edge.bodies import NOT_JSON, NOT_OBJECT, body_problem
from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.errors import error_body
from sglang_fair.edge.identity import SCOPE_KEY, Unauthorized, resolve_client
from sglang_fair.edge.model_names import NOT_FOUND, ModelNames, refusal
from sglang_fair.edge.reload import LiveTenants
from sglang_fair.gateway.wire import parse


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error answer (the same body as ``serve``'s edge)."""
    return JSONResponse(error_body(status, kind, message), status_code=status, headers=headers)


@dataclass(frozen=True)
class Accepted:
    """A request the gateway routes: its client, its JSON body and that body's bytes."""

    client: str
    body: dict[str, Any]
    raw: bytes
    plain: bool  # read by orjson (wire.parse): wire.dumps may write it by orjson


class Intake:
    """The edge's checks on one relayed request (``model_names`` None: any model name passes)."""

    def __init__(self, edge: EdgeConfig, model_names: ModelNames | None,
                 tenants: LiveTenants | None = None) -> None:
        self.edge, self.model_names = edge, model_names
        self.tenants = tenants if tenants is not None else LiveTenants(edge.key_table)  # reloaded

    async def accept(self, request: Request, path: str) -> Accepted | JSONResponse:
        """The request's client and body, or the answer refusing it."""
        raw = await body_of(request)
        try:
            body, plain = parse(raw)
        except (ValueError, UnicodeDecodeError):
            return error(400, "BadRequest", NOT_JSON)
        if not isinstance(body, dict):
            return error(400, "BadRequest", body_problem(raw, body) or NOT_OBJECT)
        headers = headers_of(request.scope)
        try:
            client = self.client(headers, body)
        except Unauthorized as err:
            return error(401, "Unauthorized", str(err), {"www-authenticate": "Bearer"})
        scope_state(request.scope)[SCOPE_KEY] = client  # for the answers counted per client (dashboard)
        if (refused := self.refusal(path, body)) is not None:
            return JSONResponse(refused, status_code=NOT_FOUND)
        return Accepted(client, body, raw, plain)

    def client(self, headers: Mapping[str, str], body: dict[str, Any]) -> str:
        """The request's client (``headers`` lower-cased); raises ``Unauthorized``."""
        return resolve_client(headers, body.get("user"), self.tenants.table, self.edge.client_header)

    def refusal(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The 404 body for a model the servers do not serve, else None."""
        return refusal(path, body, self.model_names)


async def body_of(request: Request) -> bytes:
    """The request's body, as Starlette's ``Request.body`` reads it (``ClientDisconnect`` if the client
    left), without its generator and context manager (5% of a relayed chat's CPU)."""
    chunks = []
    while True:
        message = await request.receive()
        if message["type"] == "http.request":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return b"".join(chunks)
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()
