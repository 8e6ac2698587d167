"""The gateway's configuration: one frozen :class:`GatewayConfig`, validated once, flags derived from it.

``--worker-urls`` names the servers; the routing policy and its knobs are the router's own
``--router-...`` flags (:class:`RouterConfig`; the worker count comes from discovery), the cost the
``--w-e``/``--w-q``/``--client-weights`` of :class:`CostModel`, and the HTTP edge (client identity,
per-client bounds, the servers' token) the same :class:`EdgeConfig` as ``serve``'s, so one key file
serves both; the servers'
feedback ports are heard with ``--feedback-keys`` (CurveZMQ) and judged by ``--heartbeat-timeout``
and ``--stall-timeout``; replicas share their dispatches over ``--peer-...`` (:class:`PeerConfig`);
``--workers`` processes serve one port (:class:`ProcessConfig`; their parent is ``processes.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import require
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.edge.config import EdgeConfig, edge_config
from sglang_fair.gateway.epp.config import ExtProcConfig
from sglang_fair.gateway.peers import PeerConfig
from sglang_fair.links.curve import CurveKeys, gateway_keys
from sglang_fair.links.feedback_hub import is_loopback
from sglang_fair.routing import ROUTING_POLICIES, RouterConfig

ROUTER_FILLED_IN = ("num_workers",)  # from discovery


MAX_WORKERS = 256


@dataclass(frozen=True)
class ProcessConfig:
    """How many gateway processes serve the one port (``--workers``) and how their parent supervises."""

    workers: int = field(default=1, metadata={
        "help": "gateway processes serving --port, sharing what they route over ipc:// (each a whole "
                "gateway on one core; `--workers $(nproc)` for every core); see docs/evidence/gateway.md"})
    worker_restarts: int = field(default=5, metadata={
        "help": "with --workers > 1: restarts of dead processes allowed within a minute before the whole "
                "gateway exits non-zero for its supervisor to restart it"})

    def __post_init__(self) -> None:
        require(1 <= self.workers <= MAX_WORKERS,
                f"--workers must be in 1..{MAX_WORKERS}, got {self.workers}")
        require(self.worker_restarts >= 0, f"--worker-restarts must be >= 0, got {self.worker_restarts}")


@dataclass(frozen=True)
class GatewayConfig:
    """What ``sglang-fair gateway`` takes: the servers, where to listen, the edge, routing, replicas."""

    worker_urls: str = field(default="", metadata={
        "help": "comma-separated base URLs of the sglang-fair serve instances (http://HOST:PORT,...)"})
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=30080, metadata={"help": "port to listen on"})
    discovery_timeout: float = field(default=600.0, metadata={
        "help": "seconds to wait at start-up for every server to answer /server_info (a server still "
                "loading its model is asked again every 0.5 s, each try connecting within "
                "--connect-timeout)"})
    feedback_timeout: float = field(default=30.0, metadata={
        "help": "seconds to wait at start-up, once the servers answer, for the first heartbeat of every "
                "worker on their feedback ports (a closed port or wrong keys are silent in ZMQ)"})
    connect_timeout: float = field(default=3.0, metadata={
        "help": "seconds to connect to a server before trying another (a server gone from the network "
                "does not refuse, it stays silent)"})
    request_timeout: float = field(default=600.0, metadata={
        "help": "seconds a server may stay silent during one request before the gateway gives up"})
    health_interval: float = field(default=5.0, metadata={
        "help": "seconds between health probes of every server (GET /health): a server that fails one is "
                "taken out, one that passes is taken back"})
    health_timeout: float = field(default=10.0, metadata={
        "help": "seconds a health probe may take (SGLang's /health serves a one-token request)"})
    health_failures: int = field(default=2, metadata={
        "help": "health probes failed in a row that take a server out"})
    feedback_keys: str = field(default="", metadata={
        "help": "directory of CurveZMQ keys (`sglang-fair keys DIR`): this gateway's "
                "<--feedback-key-name>.key_secret and the servers' server.key; needed for servers whose "
                "feedback port speaks CURVE"})
    feedback_key_name: str = field(default="gateway", metadata={
        "help": "which gateway key pair of --feedback-keys is this gateway's"})
    heartbeat_timeout: float = field(default=5.0, metadata={
        "help": "seconds without a heartbeat on a server's feedback port before the server is taken out "
                "and its requests in flight fail with 503"})
    stall_timeout: float = field(default=60.0, metadata={
        "help": "seconds a worker's loop may stand still with requests in flight before its server is "
                "taken out (longer than the longest model step)"})
    tokenizer: str = field(default="auto", metadata={
        "help": "the servers' tokenizer, so that prompts and plain chats are tokenized in the gateway, not "
                "by a /tokenize call to a server, once start-up probes gave the server's ids: 'auto' the "
                "directory the servers' /server_info names, where it is one here (else a log line and "
                "/tokenize); a model or tokenizer directory readable here; 'none': every prompt is "
                "tokenized by a server"})
    router: RouterConfig = field(default_factory=RouterConfig)
    peer: PeerConfig = field(default_factory=PeerConfig)
    ext_proc: ExtProcConfig = field(default_factory=ExtProcConfig)
    edge: EdgeConfig = field(default_factory=EdgeConfig)
    processes: ProcessConfig = field(default_factory=ProcessConfig)
    curve_keys: CurveKeys | None = None

    def __post_init__(self) -> None:
        urls = self.urls()
        require(bool(urls), "--worker-urls: give at least one server URL (http://HOST:PORT)")
        for url in urls:
            parts = urlsplit(url)
            require(parts.scheme in ("http", "https") and bool(parts.netloc) and parts.path in ("", "/"),
                    f"--worker-urls: {url!r} is not a server base URL (http://HOST:PORT)")
        require(len(set(urls)) == len(urls), "--worker-urls: a server is listed twice")
        require(0 < self.port < 65536, f"--port must be in 1..65535, got {self.port}")
        require(self.discovery_timeout > 0, "--discovery-timeout must be > 0")
        require(self.request_timeout > 0, "--request-timeout must be > 0")
        require(self.connect_timeout > 0, "--connect-timeout must be > 0")
        require(self.health_interval > 0, "--health-interval must be > 0")
        require(self.health_timeout > 0, "--health-timeout must be > 0")
        require(self.health_failures >= 1, "--health-failures must be >= 1")
        require(self.feedback_timeout > 0, "--feedback-timeout must be > 0")
        require(self.heartbeat_timeout > 0, "--heartbeat-timeout must be > 0")
        require(self.stall_timeout > 0, "--stall-timeout must be > 0")
        require(not self.peer.port or self.curve_keys is not None or is_loopback(self.peer.host),
                f"--peer-host {self.peer.host} is reachable from other machines: give --feedback-keys DIR")
        require(self.curve_keys is None or all(key for key, _ in self.peer.peers()),
                "--peer-addresses: with --feedback-keys name each peer's key pair, KEYNAME@HOST:PORT")
        several = self.processes.workers > 1
        require(not several or not self.peer.port, "--workers > 1 with --peer-port is not supported: the "
                "processes of one gateway share their state over ipc://; run one process per replica")
        require(not several or not self.ext_proc.port, "--workers > 1 with --ext-proc-port is not "
                "supported: run the endpoint picker with --workers 1")
        require(self.router.policy in ROUTING_POLICIES.names(),
                f"--router-policy {self.router.policy!r}: known {', '.join(ROUTING_POLICIES.names())}")

    def urls(self) -> tuple[str, ...]:
        """The servers' base URLs, without a trailing slash, in the order given."""
        return tuple(u.strip().rstrip("/") for u in self.worker_urls.split(",") if u.strip())

    def routing(self, num_workers: int) -> RouterConfig:
        """The routing policy's config for ``num_workers`` workers, with every client's weight."""
        return dataclasses.replace(self.router, num_workers=num_workers, cost=self.cost())

    def cost(self) -> CostModel:
        """The cost model with the weights of ``--client-weights`` and the key file (a conflict: error)."""
        weights = self.edge.weights(self.router.cost.client_weights)
        return dataclasses.replace(self.router.cost, client_weights=weights)


def add_gateway_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of :class:`GatewayConfig`, the routing policy's and the cost model's."""
    add_flags(parser, GatewayConfig)
    add_flags(parser, EdgeConfig)
    add_flags(parser, PeerConfig)
    add_flags(parser, ExtProcConfig)
    add_flags(parser, ProcessConfig)
    add_flags(parser, RouterConfig, skip=ROUTER_FILLED_IN)
    add_flags(parser, CostModel)


def gateway_config(args: argparse.Namespace) -> GatewayConfig:
    """Build and validate the config from the parsed flags (reads the key and token files)."""
    router = from_flags(RouterConfig, args, cost=from_flags(CostModel, args))
    curve = str(getattr(args, "feedback_keys", "") or "")
    name = str(getattr(args, "feedback_key_name", "") or "gateway")
    config = from_flags(GatewayConfig, args, router=router, peer=from_flags(PeerConfig, args),
                        ext_proc=from_flags(ExtProcConfig, args), edge=edge_config(args),
                        processes=from_flags(ProcessConfig, args),
                        curve_keys=gateway_keys(curve, name) if curve else None)
    config.cost()  # a weight conflict is an error at once
    return config
