"""Configuration of the router service: endpoints, liveness, its HTTP view and its tenant file.

Its flags are ``--router-...`` wherever they appear (``sglang-fair router`` and ``sglang-fair serve``),
derived from this one declaration, as the routing policy's are from ``RouterConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sglang_fair.core.errors import require


@dataclass(frozen=True)
class ServiceConfig:
    flag_prefix: ClassVar[str] = "router_"
    frontend: str = field(default="tcp://127.0.0.1:29600", metadata={"help": "bind: frontends PUSH requests"})
    failures: str = field(default="tcp://127.0.0.1:29601", metadata={"help": "bind: failure notices out"})
    feedback: str = field(default="tcp://127.0.0.1:29602", metadata={"help": "bind: workers PUSH feedback"})
    workers: str = field(default="", metadata={"help": "comma-separated worker endpoints (they bind PULL)"})
    heartbeat_interval: float = field(
        default=0.5, metadata={"help": "seconds between a worker's heartbeats to the router"})
    heartbeat_timeout: float = field(
        default=3.0, metadata={"help": "seconds without a heartbeat before a worker counts as dead"})
    stall_timeout: float = field(
        default=60.0, metadata={"help": "seconds a worker's loop may stand still with requests in flight"})
    send_backlog: int = field(
        default=1024, metadata={"help": "messages that may wait per worker when its socket is full "
                                        "(then new requests for it fail with 503)"})
    client_ttl: float = field(
        default=600.0, metadata={"help": "seconds a client without requests in flight is remembered "
                                         "(its D2LPM counters; 0: forever)"})
    client_max_inflight: int = field(
        default=0, metadata={"help": "requests one client may have in flight; more fail with 429 "
                                     "(0: no limit; serve sets --client-max-queued x the workers)"})
    http_port: int = field(default=0, metadata={"help": "port of /state and /metrics (0: off)"})
    http_host: str = field(default="127.0.0.1", metadata={"help": "address /state and /metrics bind to"})
    client_keys: str = field(default="", metadata={
        "help": "tenant file (as --client-keys of serve and the gateway): its weights, merged with "
                "--client-weights, are the router's, looked at again every half second and on SIGHUP "
                "(serve gives it its own --client-keys; empty: --client-weights only)"})
    state_file: str = field(default="", metadata={
        "help": "file the router rewrites with its /state view every half second (serve reads it for "
                "GET /fairness/router; empty: none)"})

    def __post_init__(self) -> None:
        require(0 < self.heartbeat_interval < self.heartbeat_timeout,
                "need 0 < --router-heartbeat-interval < --router-heartbeat-timeout, got "
                f"{self.heartbeat_interval} and {self.heartbeat_timeout}")
        require(self.stall_timeout > 0, f"--router-stall-timeout must be > 0, got {self.stall_timeout}")
        require(self.client_ttl >= 0, f"--router-client-ttl must be >= 0, got {self.client_ttl}")
        require(self.client_max_inflight >= 0,
                f"--router-client-max-inflight must be >= 0, got {self.client_max_inflight}")
        require(self.send_backlog >= 1, f"--router-send-backlog must be >= 1, got {self.send_backlog}")
        require(0 <= self.http_port < 65536, f"bad --router-http-port {self.http_port}")

    def worker_endpoints(self) -> list[str]:
        return [e.strip() for e in self.workers.split(",") if e.strip()]

    def require_endpoints(self) -> None:
        """A running service needs its workers (``serve`` fills them in when it starts the router)."""
        require(bool(self.worker_endpoints()), "at least one worker endpoint is needed (--router-workers)")
