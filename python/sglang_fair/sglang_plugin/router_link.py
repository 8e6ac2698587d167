"""How SGLang's processes reach the global router: the router flags of ``serve`` and the IPC endpoints.

``sglang-fair serve --dp-size N --load-balance-method POLICY`` with ``POLICY`` one of the core's
routing policies (:data:`ROUTER_METHODS`) starts the router (``sglang_fair_router``) as its own
process and exports a :class:`RouterLink` as JSON in ``SGLANG_FAIR_ROUTER``; SGLang's DP controller
and every scheduler rebuild it with :func:`link_from_env`. SGLang itself is told ``round_robin`` (its
fallback for health checks and requests without token ids); the hooks send everything else through
the router.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import asdict, dataclass, field
from typing import Any

from sglang_fair.core.errors import require
from sglang_fair.routing import ROUTING_POLICIES

ENV_ROUTER = "SGLANG_FAIR_ROUTER"
ROUTER_METHODS = tuple(ROUTING_POLICIES.names())
SGLANG_METHODS = ("auto", "round_robin", "follow_bootstrap_room", "total_requests", "total_tokens")
KV_EVENTS_PUBLISHER = "sglang_fair"  # the name our eviction publisher is registered under in SGLang


@dataclass(frozen=True)
class RouterFlags:
    """The router flags of ``sglang-fair serve`` (used with a router ``--load-balance-method``)."""

    router_quantum: float = field(default=16384.0, metadata={"help": "D2LPM quantum Q^w per worker"})
    router_heartbeat_interval: float = field(
        default=0.5, metadata={"help": "seconds between a worker's heartbeats to the router"})
    router_heartbeat_timeout: float = field(
        default=3.0, metadata={"help": "seconds without a heartbeat before a worker counts as dead"})
    router_stall_timeout: float = field(
        default=60.0, metadata={"help": "seconds a worker's loop may stand still with requests in flight"})
    router_http_port: int = field(default=0, metadata={"help": "router's /state and /metrics port (0: off)"})
    router_http_host: str = field(default="127.0.0.1", metadata={"help": "address the router's port binds"})
    router_max_tree_tokens: int = field(default=1 << 26, metadata={"help": "bound of the global tree"})

    def __post_init__(self) -> None:
        require(self.router_quantum > 0, f"--router-quantum must be > 0, got {self.router_quantum}")
        require(0 < self.router_heartbeat_interval < self.router_heartbeat_timeout,
                "need 0 < --router-heartbeat-interval < --router-heartbeat-timeout, got "
                f"{self.router_heartbeat_interval} and {self.router_heartbeat_timeout}")
        require(0 <= self.router_http_port < 65536, f"bad --router-http-port {self.router_http_port}")
        require(self.router_max_tree_tokens > 0, "--router-max-tree-tokens must be > 0")
        require(self.router_stall_timeout > 0, "--router-stall-timeout must be > 0")


@dataclass(frozen=True)
class RouterLink:
    """What an SGLang process needs to talk to the router: where, how many workers, how often."""

    directory: str
    num_workers: int
    heartbeat_interval: float = 0.5

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


def router_command(link: RouterLink, policy: str, flags: RouterFlags, cost_flags: list[str]) -> list[str]:
    """The ``sglang-fair router`` arguments that serve ``link`` with ``policy``."""
    return [
        "router", "--policy", policy, "--frontend", link.frontend, "--failures", link.failures,
        "--feedback", link.feedback, "--workers", ",".join(link.workers()),
        "--quantum", str(flags.router_quantum), "--max-tree-tokens", str(flags.router_max_tree_tokens),
        "--heartbeat-timeout", str(flags.router_heartbeat_timeout),
        "--stall-timeout", str(flags.router_stall_timeout),
        "--http-port", str(flags.router_http_port), "--http-host", flags.router_http_host, *cost_flags,
    ]
