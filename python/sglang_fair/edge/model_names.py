"""The ``model`` of an OpenAI request: 404 for a name the server does not serve, as OpenAI and vLLM answer.

SGLang 0.5.23 ignores the field on ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/embeddings``:
any name was served. Accepted here: the served model name (``--served-model-name``, else the model
path: what ``/v1/models`` lists), the model path, ``default`` (the default of SGLang's request classes,
sent by its docs and examples) and, with LoRA, an adapter's name alone or as ``BASE:ADAPTER``. A body
without a string ``model`` passes (SGLang answers a non-string itself). ``--accept-any-model`` keeps
SGLang's behaviour. :class:`ModelNameMiddleware` checks at ``serve``'s edge; ``sglang-fair gateway``
calls :func:`refusal` itself, so both answer the same body.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sglang_fair.edge.asgi import ASGIApp, Receive, Scope, Send, json_body
from sglang_fair.edge.errors import error_body, send_json

DEFAULT_MODEL = "default"
MODEL_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})
NOT_FOUND = 404


@dataclass(frozen=True)
class ModelNames:
    """The names one server answers to: ``names`` (the model's) and LoRA ``adapters``."""

    names: frozenset[str]
    adapters: frozenset[str] = frozenset()
    served: str = ""  # the name to tell a client who sent another (``/v1/models`` lists it)

    @classmethod
    def of(cls, served: str, path: str = "", adapters: Iterable[str] = ()) -> ModelNames:
        """The names of a server serving ``served`` from ``path``, with ``default`` and its adapters."""
        return cls(frozenset(n for n in (served, path, DEFAULT_MODEL) if n), frozenset(adapters),
                   served or path)

    def accepts(self, model: object) -> bool:
        """Is ``model`` (a request's field) served here? Anything but a string is left to SGLang."""
        if not isinstance(model, str) or model in self.names or model in self.adapters:
            return True
        return any(model.startswith(name + ":") and model[len(name) + 1:].strip() in self.adapters
                   for name in self.names)


def not_found(model: str, names: ModelNames | None = None) -> dict[str, Any]:
    """The 404 body for an unknown ``model``: OpenAI's and vLLM's message, then what to send instead
    (the name ``names`` serves) and the flag that takes any name."""
    message = f"The model `{model}` does not exist."
    if names is not None and names.served:
        message += (f" This server serves `{names.served}`: send that, `{DEFAULT_MODEL}` or no `model` "
                    "(started with --accept-any-model, it serves whatever name a request gives).")
    return error_body(NOT_FOUND, "NotFoundError", message, param="model")


def refusal(path: str, body: object, names: ModelNames | None) -> dict[str, Any] | None:
    """The 404 body for a request to ``path`` whose JSON ``body`` names a model that ``names`` does not
    accept; None to serve it (``names`` None: any name is served)."""
    if names is None or path not in MODEL_PATHS or not isinstance(body, dict):
        return None
    model = body.get("model")
    return None if names.accepts(model) else not_found(str(model), names)


class ModelNameMiddleware:
    """ASGI middleware: 404 (:func:`refusal`) for a POST whose body names a model ``names()`` does not
    accept; ``names()`` is asked per request (None: not known yet, any name passes). The body is read
    once with the other middlewares (``asgi.json_body``)."""

    def __init__(self, app: ASGIApp, names: Callable[[], ModelNames | None]) -> None:
        self.app, self.names = app, names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST" and scope.get("path") in MODEL_PATHS:
            names = self.names()
            if names is not None:
                body, receive = await json_body(scope, receive)
                refused = refusal(str(scope["path"]), body, names)
                if refused is not None:
                    await send_json(send, NOT_FOUND, refused)
                    return
        await self.app(scope, receive, send)
