"""Hooks in the HTTP (tokenizer-manager) process: the edge's middlewares (``sglang_fair.edge``),
``/fairness``, the router's view ``/fairness/router``, the feedback port's advert
``/sglang_fair/feedback`` (``links/feedback_hub.py``), warm-up window."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.admins import AdminOnlyMiddleware
from sglang_fair.edge.bodies import JsonBodyMiddleware
from sglang_fair.edge.budget_gate import BudgetMiddleware, TokenMeter
from sglang_fair.edge.budgets import BudgetBook
from sglang_fair.edge.identity import PROBE_CLIENT, ClientIdentityMiddleware, client_in, resolve_hosts
from sglang_fair.edge.inflight import ClientInflightMiddleware
from sglang_fair.edge.limits import EdgeLimitsMiddleware
from sglang_fair.edge.model_names import ModelNameMiddleware, ModelNames
from sglang_fair.edge.reload import LiveTenants
from sglang_fair.edge.trust import PinnedRankMiddleware, is_trusted
from sglang_fair.links.feedback_hub import ADVERT_PATH, FeedbackConfig, advert
from sglang_fair.metrics.tenant_series import TenantMetricsMiddleware
from sglang_fair.sglang_plugin.config import FAIR_POLICIES, FairConfig, config_from_env
from sglang_fair.sglang_plugin.fairness_page import install as install_page
from sglang_fair.sglang_plugin.fairness_page import page_for_server
from sglang_fair.sglang_plugin.publish import read_all, state_dir
from sglang_fair.sglang_plugin.ready import ready_line
from sglang_fair.sglang_plugin.request_slo import carry, with_request_slo
from sglang_fair.sglang_plugin.router_link import link_from_env
from sglang_fair.sglang_plugin.router_view import ROUTER_PATH, make_router_endpoint
from sglang_fair.sglang_plugin.tenant_reload import start_edge_reload

logger = logging.getLogger("sglang_fair")
MAX_SAMPLES = 128  # OpenAI's own bound on ``n``
PROBE_PATHS = frozenset({"/health", "/health_generate"})
_warmup = {"open": False}


def warmup_open() -> bool:
    """True only while SGLang's own start-up warm-up runs (it cannot send a client key)."""
    return _warmup["open"]


def wait_and_warmup(original: Any, *args: Any, **kwargs: Any) -> Any:
    """AROUND ``http_server._wait_and_warmup``: opens the loopback warm-up window, then closes it, and
    prints the ready line (``ready.py``) once the warm-up succeeded."""
    _warmup["open"] = True
    try:
        result = original(*args, **kwargs)
    finally:
        _warmup["open"] = False
    if server_up():
        server_args = args[0] if args else kwargs.get("server_args")
        print(ready_line(server_args, link_from_env(), config_from_env().edge.key_table.enabled), flush=True)
    return result


def server_up() -> bool:
    """Did SGLang's warm-up succeed (its tokenizer manager's status is ``Up``)?"""
    from sglang.srt.entrypoints import http_server

    manager = getattr(http_server.get_global_state(), "tokenizer_manager", None)
    return getattr(getattr(manager, "server_status", None), "name", "") == "Up"


def identity_needed(policy: str | None, config: FairConfig, router: bool) -> bool:
    """Does the edge decide the client (fair policy, client keys, a per-client limit or the router)?"""
    edge = config.edge
    return policy in FAIR_POLICIES or edge.key_table.enabled or edge.client_max_inflight > 0 or router


def check_edge(server_args: Any, config: FairConfig, router: bool) -> None:
    """Refuse the ways into SGLang that the identity middleware does not guard (a
    :class:`ConfigError` names them): more tokenizer workers (they load the app without it) and the
    native gRPC server (its requests carry no HTTP headers)."""
    if not identity_needed(getattr(server_args, "schedule_policy", None), config, router):
        return
    bad = []
    if (getattr(server_args, "tokenizer_worker_num", 1) or 1) > 1:
        bad.append("--tokenizer-worker-num > 1 (its workers serve HTTP without the client-identity check)")
    if getattr(server_args, "grpc_port", None) is not None:
        bad.append("--grpc-port (gRPC requests carry no client key or header)")
    if bad:
        raise ConfigError("client identity (a fair policy, --client-keys or the router) does not support "
                          + "; ".join(bad))


def pins_guarded(config: FairConfig, router: bool) -> bool:
    """Is a pinned data-parallel rank reserved to the trusted gateway? With the global router (a pin
    would pass it) or a gateway token; otherwise a pin is SGLang's own feature, untouched."""
    return router or config.edge.gateway_token.enabled


def fairness_view(everything: dict[str, Any], client: str | None, config: FairConfig,
                  meter: TokenMeter | None = None) -> dict[str, Any]:
    """What ``client`` may read: every client without keys or for an admin key, else its own row; with
    budgets, each readable tenant's budget, used and left in the last minute (``budgets``)."""
    whole = not config.edge.key_table.enabled or client in config.admins()
    if meter is not None and meter.book.enabled:
        now = time.monotonic()
        meter.sync(now)
        everything = {**everything, "budgets": meter.book.view(now, None if whole else {client or ""})}
    if whole:
        return everything
    clients = everything.get("clients", {})
    return {**everything, "clients": {client: clients[client]} if client in clients else {}}


def token_totals() -> dict[str, int]:
    """Each client's input + output tokens so far, as the schedulers published them."""
    return {c: int(f.get("input_tokens", 0)) + int(f.get("output_tokens", 0))
            for c, f in read_all(state_dir())["clients"].items()}


def make_fairness_endpoint(config: FairConfig, meter: TokenMeter | None = None) -> Any:
    """``GET /fairness``: per client counter, service (actual and perceived), waiting, running; budgets."""
    from starlette.responses import JSONResponse

    async def fairness_endpoint(request: Any) -> Any:
        client = client_in(request.scope)
        return JSONResponse(fairness_view(read_all(state_dir()), client, config, meter))

    return fairness_endpoint


def make_advert_endpoint(config: FeedbackConfig) -> Any:
    """``GET /sglang_fair/feedback``: where this server publishes its feedback (``links/feedback_hub.py``)."""
    from starlette.responses import Response

    body = json.dumps(advert(config)).encode()

    async def feedback_endpoint(request: Any) -> Any:
        return Response(body, media_type="application/json")

    return feedback_endpoint


def install_http(*args: Any, **kwargs: Any) -> None:
    """BEFORE ``http_server.launch_server``: add ``/fairness``, ``/fairness/router`` (``router_view.py``)
    and the edge's middlewares (``sglang_fair.edge``): the body-size limit, ``Retry-After`` on 429 and
    400 for a JSON endpoint's body that is not a JSON object (always), 404 for an unknown ``model``
    (unless ``--accept-any-model``) and, when a fair policy, client keys or the global router are
    configured, the client's identity, with the admins' ``/metrics`` and ``/fairness/router`` (with
    keys), the tenant file's budgets (``edge/budget_gate.py``) and the per-client in-flight bound
    (``--client-max-inflight``) inside it (so installing the package
    leaves SGLang's own policies, and their use of ``routing_key``, untouched)."""
    from sglang.srt.entrypoints import http_server

    app = http_server.app
    if getattr(app.state, "sglang_fair_installed", False):
        return None
    server_args = args[0] if args else kwargs.get("server_args")
    policy = getattr(server_args, "schedule_policy", None)
    config = config_from_env()
    link = link_from_env()
    router = link is not None
    check_edge(server_args, config, router)
    meter = TokenMeter(BudgetBook(config.edge.key_table.budgets), token_totals)
    tenants = LiveTenants(config.edge.key_table)
    reloadable = start_edge_reload(config, tenants, meter.book, policy) is not None
    app.add_route("/fairness", make_fairness_endpoint(config, meter), methods=["GET"])
    app.add_route(ROUTER_PATH, make_router_endpoint(link), methods=["GET"])
    if config.feedback.enabled:
        app.add_route(ADVERT_PATH, make_advert_endpoint(config.feedback), methods=["GET"])
    app.state.sglang_fair_installed = True
    edge = config.edge
    if not edge.accept_any_model:
        app.add_middleware(ModelNameMiddleware, names=served_names)  # innermost: after identity
    app.add_middleware(TenantMetricsMiddleware, rows=lambda: read_all(state_dir())["clients"],
                       k=edge.metrics_top_tenants)  # inside the admins' check of /metrics
    if identity_needed(policy, config, router):
        if edge.client_max_inflight > 0:
            app.add_middleware(ClientInflightMiddleware, max_inflight=edge.client_max_inflight)
        if meter.book.enabled or reloadable:  # a reload may give budgets
            app.add_middleware(BudgetMiddleware, book=meter.book, meter=meter)
        if edge.key_table.enabled:
            app.add_middleware(AdminOnlyMiddleware, admins=config.admins())
        app.add_middleware(
            ClientIdentityMiddleware, keys=tenants, header=edge.client_header,
            warmup_open=warmup_open, local_hosts=resolve_hosts(getattr(server_args, "host", None)),
        )
        logger.info("sglang-fair: client identity (%s) installed",
                    "API keys" if edge.key_table.enabled else f"header {edge.client_header}")
    if pins_guarded(config, router):
        app.add_middleware(PinnedRankMiddleware, token=edge.gateway_token, router=router)  # before identity
    app.add_middleware(JsonBodyMiddleware)  # a body that is not a JSON object: 400, before any reader
    app.add_middleware(EdgeLimitsMiddleware, max_body_bytes=edge.max_body_bytes)
    install_page(app, page_for_server(server_args, config))  # /fairness/ui; counts answers (outermost)
    return None


def served_names() -> ModelNames | None:
    """The model names this server answers to now, from SGLang's tokenizer manager (a weight update
    from disk renames the model there) and its LoRA registry; None before SGLang has set them up."""
    from sglang.srt.entrypoints import http_server

    manager = getattr(http_server.get_global_state(), "tokenizer_manager", None)
    if manager is None:
        return None
    registry = getattr(manager, "lora_registry", None)
    adapters = registry.get_all_adapters() if registry is not None else {}
    return ModelNames.of(manager.served_model_name, manager.model_path, adapters)


def generate_request(
    original: Any, self: Any, obj: Any, request: Any = None, *args: Any, **kwargs: Any
) -> Any:
    """AROUND ``TokenizerManager.generate_request``: the edge's client becomes ``obj.routing_key``.

    Whatever the body or the ``x-smg-routing-key`` header said is overwritten, so a client cannot
    pick its own identity when keys are configured; the one-token request of SGLang's ``/health`` is
    :data:`PROBE_CLIENT` (``publish.read_all`` shows it apart from the clients). When the global
    router routes or a gateway token is configured, a ``routed_dp_rank`` from a caller without the
    gateway's token (which would pick a worker past the router) is refused with 400
    (``PinnedRankMiddleware`` answers the ordinary spellings with 403 before this), and so is ``n``
    above :data:`MAX_SAMPLES` (SGLang expands the batch ``n`` times first: ``n`` = 10^12 was a
    MemoryError and a 500, a smaller huge ``n`` exhausts the server's memory). A body's per-request
    ``slo`` is checked and carried to the scheduler (``request_slo.py``).
    """
    if (shape := sampling_params_error(obj)) is not None:
        raise ValueError(shape)
    scope = getattr(request, "scope", None)
    client = client_in(scope) if scope is not None else None
    if is_probe(obj, scope):
        obj.routing_key = PROBE_CLIENT
    elif client:
        obj.routing_key = client
        samples = sample_count(obj)
        if samples > MAX_SAMPLES:
            raise ValueError(f"n must be at most {MAX_SAMPLES}, got {samples}")
    if (scope is not None and getattr(obj, "routed_dp_rank", None) is not None and not is_trusted(scope)
            and pins_guarded(config_from_env(), link_from_env() is not None)):
        raise ValueError("routed_dp_rank is not accepted here: only a trusted gateway may pin a worker")
    gen = original(self, obj, request, *args, **kwargs)
    if not hasattr(obj, "sampling_params"):  # an embedding request
        return gen
    if not callable(getattr(request, "json", None)):  # internal or gRPC: no JSON body to take an SLO from
        carry(obj, None)  # (and none a client could have forged in its sampling parameters)
        return gen
    return with_request_slo(gen, obj, request)


def is_probe(obj: Any, scope: Any) -> bool:
    """Is ``obj`` the request SGLang's ``/health`` or ``/health_generate`` makes (rid ``HEALTH_CHECK_...``,
    sent while answering that path)? A client's own request with such a rid stays the client's."""
    from sglang.srt.constants import HEALTH_CHECK_RID_PREFIX

    rid = getattr(obj, "rid", None)
    return (isinstance(scope, dict) and scope.get("path") in PROBE_PATHS and isinstance(rid, str)
            and rid.startswith(HEALTH_CHECK_RID_PREFIX))


def sampling_params_error(obj: Any) -> str | None:
    """Why ``obj.sampling_params`` does not fit its prompts, or None. SGLang 0.5.23 takes a list only for
    a batch, one dict per prompt: a list with one prompt (``.get`` on a list) or a list shorter than
    the batch (``IndexError`` when it splits the batch) was a 500, and so was an empty batch
    (``"text": []``). The batch size is read as SGLang's
    ``GenerateReqInput._determine_batch_size`` reads it (text, else input_ids; embeddings are not
    checked)."""
    params = getattr(obj, "sampling_params", None)
    text, ids = getattr(obj, "text", None), getattr(obj, "input_ids", None)
    if isinstance(text, list) and not text:
        return "text is an empty list: a batch needs at least one prompt"
    if not isinstance(params, list):
        return None
    if text is not None:
        batch = None if isinstance(text, str) else len(text)
    elif ids is not None:
        batch = len(ids) if ids and not isinstance(ids[0], int) else None
    else:
        return None
    if batch is None:
        return "sampling_params must be an object for a single prompt (a list is for a batch of prompts)"
    if len(params) != batch:
        return f"sampling_params has {len(params)} entries for a batch of {batch} prompts"
    return None


def sample_count(obj: Any) -> int:
    """The ``n`` a request asks for (SGLang reads it from its first sampling-params dict)."""
    params = getattr(obj, "sampling_params", None)
    if isinstance(params, list):
        params = params[0] if params else None
    n = params.get("n", 1) if isinstance(params, dict) else 1
    return n if isinstance(n, int) and not isinstance(n, bool) else 1


def validate_request(self: Any, obj: Any, input_ids: Any, *args: Any, **kwargs: Any) -> None:
    """BEFORE ``TokenizerManager._validate_one_request``: a prompt of 0 tokens, or with a token id
    outside the model's vocabulary, is refused (400). SGLang 0.5.23 checks only the length's upper
    bound; a 0-token prompt on ``/generate`` (empty text with a tokenizer that adds no BOS, or
    ``input_ids: []``), and a token-id prompt such as ``[-3]`` or ``[vocab_size]`` on
    ``/v1/completions``, reached the model's embedding and crashed the scheduler, and with it the
    server."""
    if input_ids is None or getattr(obj, "input_embeds", None) is not None:
        return
    if len(input_ids) == 0:
        raise ValueError("The prompt is empty (0 tokens); send at least one token")
    vocab = self.model_config.vocab_size
    bad = next((t for t in input_ids if not 0 <= t < vocab), None)
    if bad is not None:
        raise ValueError(f"Token id {bad} is outside the model's vocabulary [0, {vocab})")


def batch_item(result: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
    """AFTER ``GenerateReqInput.__getitem__``: items of a batch keep the batch's client."""
    if getattr(result, "routing_key", None) is None and getattr(self, "routing_key", None) is not None:
        result.routing_key = self.routing_key
    return result
