"""The gateway's configuration: one frozen :class:`GatewayConfig`, validated once, flags derived from it.

``--worker-urls`` names the servers; the routing policy and its knobs are the router's own
``--router-...`` flags (:class:`RouterConfig`; the worker count comes from discovery), the cost the
``--w-e``/``--w-q``/``--client-weights`` of :class:`CostModel`, and client identity the same
``--client-keys``/``--client-header`` as ``serve``, so one key file serves both; the servers'
feedback ports are heard with ``--feedback-keys`` (CurveZMQ) and judged by ``--heartbeat-timeout``
and ``--stall-timeout``; replicas share their dispatches over ``--peer-...`` (:class:`PeerConfig`).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.gateway.epp.config import ExtProcConfig
from sglang_fair.gateway.peers import PeerConfig
from sglang_fair.routing import ROUTING_POLICIES, RouterConfig
from sglang_fair.sglang_plugin.curve import CurveKeys, gateway_keys
from sglang_fair.sglang_plugin.feedback_hub import is_loopback
from sglang_fair.sglang_plugin.gateway_trust import GatewayToken, load_token_file
from sglang_fair.sglang_plugin.keys import KeyTable, load_key_file

ROUTER_FILLED_IN = ("num_workers",)  # from discovery


@dataclass(frozen=True)
class GatewayConfig:
    """What ``sglang-fair gateway`` takes: the servers, where to listen, identity, trust, routing."""

    worker_urls: str = field(default="", metadata={
        "help": "comma-separated base URLs of the sglang-fair serve instances (http://HOST:PORT,...)"})
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=30080, metadata={"help": "port to listen on"})
    client_keys: str = field(default="", metadata={
        "help": "file of 'API_KEY CLIENT [WEIGHT]' lines (the same file as serve's); enables 401"})
    client_header: str = field(default="X-Client-Id", metadata={
        "help": "HTTP header naming the client without keys; the gateway names the client to the servers "
                "in the same header"})
    gateway_token_file: str = field(default="", metadata={
        "help": "the token the servers trust (their --gateway-token-file), sent with every request"})
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
    client_max_inflight: int = field(default=0, metadata={
        "help": "requests one client may have in flight through this gateway; more get 429 with "
                "Retry-After (0: no limit)"})
    client_ttl: float = field(default=600.0, metadata={
        "help": "seconds a client without requests in flight is remembered (its routing counters) when no "
                "--client-keys are given (0: forever)"})
    max_body_bytes: int = field(default=16 << 20, metadata={
        "help": "largest HTTP request body; larger ones get 413 before they are read (0: no limit)"})
    accept_any_model: bool = field(default=False, metadata={
        "help": "relay a request whatever its `model` names, as SGLang serves it (by default a name other "
                "than the servers' model name, model path or `default` gets 404 here, as from OpenAI)"})
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
    router: RouterConfig = field(default_factory=RouterConfig)
    peer: PeerConfig = field(default_factory=PeerConfig)
    ext_proc: ExtProcConfig = field(default_factory=ExtProcConfig)
    key_table: KeyTable = field(default_factory=KeyTable)
    token: GatewayToken = field(default_factory=GatewayToken)
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
        require(bool(self.client_header.strip()), "--client-header must not be empty")
        require(self.discovery_timeout > 0, "--discovery-timeout must be > 0")
        require(self.request_timeout > 0, "--request-timeout must be > 0")
        require(self.connect_timeout > 0, "--connect-timeout must be > 0")
        require(self.health_interval > 0, "--health-interval must be > 0")
        require(self.health_timeout > 0, "--health-timeout must be > 0")
        require(self.health_failures >= 1, "--health-failures must be >= 1")
        require(self.feedback_timeout > 0, "--feedback-timeout must be > 0")
        require(self.heartbeat_timeout > 0, "--heartbeat-timeout must be > 0")
        require(self.client_max_inflight >= 0, "--client-max-inflight must be >= 0")
        require(self.client_ttl >= 0, "--client-ttl must be >= 0")
        require(self.max_body_bytes >= 0, "--max-body-bytes must be >= 0")
        require(self.stall_timeout > 0, "--stall-timeout must be > 0")
        require(not self.peer.port or self.curve_keys is not None or is_loopback(self.peer.host),
                f"--peer-host {self.peer.host} is reachable from other machines: give --feedback-keys DIR")
        require(self.curve_keys is None or all(key for key, _ in self.peer.peers()),
                "--peer-addresses: with --feedback-keys name each peer's key pair, KEYNAME@HOST:PORT")
        require(self.router.policy in ROUTING_POLICIES.names(),
                f"--router-policy {self.router.policy!r}: known {', '.join(ROUTING_POLICIES.names())}")

    def idle_ttl(self) -> float:
        """The client TTL that applies: none with keys (the key file bounds the clients), as in serve."""
        return 0.0 if self.key_table.enabled else self.client_ttl

    def urls(self) -> tuple[str, ...]:
        """The servers' base URLs, without a trailing slash, in the order given."""
        return tuple(u.strip().rstrip("/") for u in self.worker_urls.split(",") if u.strip())

    def routing(self, num_workers: int) -> RouterConfig:
        """The routing policy's config for ``num_workers`` workers, with every client's weight."""
        return dataclasses.replace(self.router, num_workers=num_workers, cost=self.cost())

    def cost(self) -> CostModel:
        """The cost model with the weights of ``--client-weights`` and the key file (a conflict: error)."""
        weights = dict(self.router.cost.client_weights)
        for client, weight in self.key_table.weights.items():
            if weights.get(client, weight) != weight:
                raise ConfigError(f"client {client!r}: weight {weights[client]} in --client-weights "
                                  f"conflicts with weight {weight} in --client-keys")
            weights[client] = weight
        return dataclasses.replace(self.router.cost, client_weights=weights)


def add_gateway_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of :class:`GatewayConfig`, the routing policy's and the cost model's."""
    add_flags(parser, GatewayConfig)
    add_flags(parser, PeerConfig)
    add_flags(parser, ExtProcConfig)
    add_flags(parser, RouterConfig, skip=ROUTER_FILLED_IN)
    add_flags(parser, CostModel)


def gateway_config(args: argparse.Namespace) -> GatewayConfig:
    """Build and validate the config from the parsed flags (reads the key and token files)."""
    router = from_flags(RouterConfig, args, cost=from_flags(CostModel, args))
    keys = str(getattr(args, "client_keys", "") or "")
    token = str(getattr(args, "gateway_token_file", "") or "")
    curve = str(getattr(args, "feedback_keys", "") or "")
    name = str(getattr(args, "feedback_key_name", "") or "gateway")
    config = from_flags(GatewayConfig, args, router=router, peer=from_flags(PeerConfig, args),
                        ext_proc=from_flags(ExtProcConfig, args),
                        key_table=load_key_file(keys) if keys else KeyTable(),
                        token=load_token_file(token) if token else GatewayToken(),
                        curve_keys=gateway_keys(curve, name) if curve else None)
    config.cost()  # a weight conflict is an error at once
    return config
