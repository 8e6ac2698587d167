"""How SGLang's processes reach the global router: the router flags of ``serve`` and the IPC endpoints.

``sglang-fair serve --dp-size N --load-balance-method POLICY`` with ``POLICY`` one of the core's
routing policies (:data:`ROUTER_METHODS`) starts the router (``sglang_fair_router``) as its own
process and exports a :class:`RouterLink` as JSON in ``SGLANG_FAIR_ROUTER``; SGLang's DP controller
and every scheduler rebuild it with :func:`link_from_env`. SGLang itself is told ``round_robin`` (its
fallback for health checks and requests without token ids); the hooks send everything else through
the router.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import require
from sglang_fair.core.flags import add_flags, from_flags, to_flags
from sglang_fair.routing import ROUTING_POLICIES, RouterConfig
from sglang_fair_router.config import ServiceConfig

ENV_ROUTER = "SGLANG_FAIR_ROUTER"
ROUTER_METHODS = tuple(ROUTING_POLICIES.names())  # every routing policy serves through the router
SGLANG_METHODS = ("auto", "round_robin", "follow_bootstrap_room", "total_requests", "total_tokens")
ROUTER_FILLED_IN = ("policy", "num_workers")  # from --load-balance-method and --dp-size
# the link's IPC endpoints, the client TTL (serve's --client-ttl, 0 with --client-keys), the
# per-client bound (serve's --client-max-queued x the workers) and the tenant file (serve's --client-keys)
SERVICE_FILLED_IN = ("frontend", "failures", "feedback", "workers", "client_ttl", "client_max_inflight",
                     "state_file", "client_keys")
KV_EVENTS_PUBLISHER = "sglang_fair"  # the name our eviction publisher is registered under in SGLang


@dataclass(frozen=True)
class RouterSettings:
    """The router flags of ``sglang-fair serve``: the routing policy's knobs (:class:`RouterConfig`)
    and the service's (:class:`ServiceConfig`), as the same ``--router-...`` flags the router process
    takes. The policy, worker count, cost and endpoints are filled in when the router starts."""

    routing: RouterConfig = field(default_factory=RouterConfig)
    service: ServiceConfig = field(default_factory=ServiceConfig)


def add_router_flags(parser: argparse.ArgumentParser) -> None:
    """``serve``'s ``--router-...`` flags (those of :class:`RouterSettings`)."""
    add_flags(parser, RouterConfig, skip=ROUTER_FILLED_IN)
    add_flags(parser, ServiceConfig, skip=SERVICE_FILLED_IN)


def router_settings(args: argparse.Namespace) -> RouterSettings:
    return RouterSettings(from_flags(RouterConfig, args), from_flags(ServiceConfig, args))


@dataclass(frozen=True)
class RouterLink:
    """What an SGLang process needs to talk to the router: where, how many workers, how often."""

    directory: str
    num_workers: int
    heartbeat_interval: float = 0.5
    prefill_budget: bool = False  # workers report their prefill admission budget (the pab router)
    policy: str = ""  # the router's routing policy (the fairness page's bound, the ready line)

    def __post_init__(self) -> None:
        require(self.num_workers >= 1, f"num_workers must be >= 1, got {self.num_workers}")
        require(self.heartbeat_interval > 0, "heartbeat_interval must be > 0")

    def _ipc(self, name: str) -> str:
        return f"ipc://{os.path.join(self.directory, name)}"

    @property
    def frontend(self) -> str:
        return self._ipc("frontend")

    @property
    def failures(self) -> str:
        return self._ipc("failures")

    @property
    def feedback(self) -> str:
        return self._ipc("feedback")

    def worker(self, rank: int) -> str:
        return self._ipc(f"worker-{rank}")

    def workers(self) -> list[str]:
        return [self.worker(rank) for rank in range(self.num_workers)]

    @property
    def state_file(self) -> str:
        """The router's ``/state`` view, rewritten every half second (``GET /fairness/router``)."""
        return os.path.join(self.directory, "state.json")

    def to_env(self) -> str:
        return json.dumps(asdict(self))


def encode_payload(req: Any) -> bytes:
    """SGLang's request as SGLang's own IPC would send it (pickle or msgpack, per its setting)."""
    from sglang.srt.environ import envs
    from sglang.srt.managers.io_struct import msgpack_encode

    if envs.SGLANG_USE_PICKLE_IPC.get():
        return pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
    return bytes(msgpack_encode(req))


def decode_payload(frame: bytes) -> Any:
    """The inverse of :func:`encode_payload` (the frame comes from our own DP controller)."""
    from sglang.srt.environ import envs
    from sglang.srt.managers.io_struct import msgpack_decode

    if envs.SGLANG_USE_PICKLE_IPC.get():
        return pickle.loads(frame)
    return msgpack_decode(frame)


def link_from_env(environ: dict[str, str] | None = None) -> RouterLink | None:
    """The link the launcher exported, or None when no router runs."""
    raw = (os.environ if environ is None else environ).get(ENV_ROUTER)
    return RouterLink(**json.loads(raw)) if raw else None


def router_command(link: RouterLink, policy: str, settings: RouterSettings, cost: CostModel) -> list[str]:
    """The ``sglang-fair router`` arguments that serve ``link`` with ``policy`` and ``cost``: every
    setting written back as the flags that declare it."""
    routing = replace(settings.routing, policy=policy, num_workers=link.num_workers, cost=cost)
    service = replace(settings.service, frontend=link.frontend, failures=link.failures,
                      feedback=link.feedback, workers=",".join(link.workers()), state_file=link.state_file)
    return ["router", *to_flags(service), *to_flags(routing, skip=("num_workers",)), *to_flags(cost)]
