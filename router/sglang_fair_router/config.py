"""Configuration of the router service: endpoints, liveness, and the routing policy's own config."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.errors import require


@dataclass(frozen=True)
class ServiceConfig:
    frontend: str = field(default="tcp://127.0.0.1:29600", metadata={"help": "bind: frontends PUSH requests"})
    failures: str = field(default="tcp://127.0.0.1:29601", metadata={"help": "bind: failure notices out"})
    feedback: str = field(default="tcp://127.0.0.1:29602", metadata={"help": "bind: workers PUSH feedback"})
    workers: str = field(default="", metadata={"help": "comma-separated worker endpoints (they bind PULL)"})
    heartbeat_timeout: float = field(default=3.0, metadata={"help": "seconds of silence = worker dead"})
    stall_timeout: float = field(
        default=60.0, metadata={"help": "seconds a worker's loop may stand still with requests in flight"})
    http_port: int = field(default=0, metadata={"help": "port of /state and /metrics (0: off)"})
    http_host: str = field(default="127.0.0.1", metadata={"help": "address /state and /metrics bind to"})

    def __post_init__(self) -> None:
        require(bool(self.worker_endpoints()), "at least one worker endpoint is needed (--workers)")
        require(self.heartbeat_timeout > 0, f"heartbeat_timeout must be > 0, got {self.heartbeat_timeout}")
        require(self.stall_timeout > 0, f"stall_timeout must be > 0, got {self.stall_timeout}")
        require(0 <= self.http_port < 65536, f"bad http_port {self.http_port}")

    def worker_endpoints(self) -> list[str]:
        return [e.strip() for e in self.workers.split(",") if e.strip()]
