"""A server's feedback to gateways: its workers' evictions and heartbeats, published on one TCP port.

``sglang-fair serve --feedback-port P`` starts a :class:`FeedbackHub` in the server's HTTP process
(``sglang_plugin/launcher.py``): every scheduler pushes its notices (``worker_msgs``: ``Evicted``,
``Heartbeat``, and ``Finished`` for requests its router sent) to the hub over ``ipc://``, and the hub
publishes them (ZMQ PUB) to every gateway subscribed. The port binds to ``--feedback-host`` (loopback
by default); any other address needs ``--feedback-keys DIR`` (``curve.py``): the link is then
CurveZMQ, authenticated and encrypted, and only the gateways whose public keys are in DIR are let in.
``GET /sglang_fair/feedback`` tells a gateway the port (:func:`advert`), so a gateway needs only the
server's URL. A slow gateway loses notices (PUB drops at its high-water mark), never slows a worker.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

import zmq

from sglang_fair.core.errors import require
from sglang_fair.links.curve import server_keys
from sglang_fair.links.sockets import publisher

logger = logging.getLogger("sglang_fair")
ENV_HUB = "SGLANG_FAIR_HUB"  # the hub's ipc:// endpoint, for the schedulers
ADVERT_PATH = "/sglang_fair/feedback"
ADVERT_VERSION = 1


@dataclass(frozen=True)
class FeedbackConfig:
    """``serve``'s ``--feedback-...`` flags: where the server publishes its workers' feedback."""

    flag_prefix: ClassVar[str] = "feedback_"
    port: int = field(default=0, metadata={
        "help": "TCP port publishing the workers' evictions and heartbeats to gateways (0: off)"})
    host: str = field(default="127.0.0.1", metadata={
        "help": "address the feedback port binds to; other than loopback needs --feedback-keys"})
    keys: str = field(default="", metadata={
        "help": "directory of CurveZMQ keys (`sglang-fair keys DIR`): server.key_secret and the "
                "gateways' gateway*.key; the link is then authenticated and encrypted"})
    heartbeat_interval: float = field(default=0.5, metadata={
        "help": "seconds between a worker's heartbeats on the feedback port"})

    def __post_init__(self) -> None:
        require(0 <= self.port < 65536, f"--feedback-port must be in 0..65535, got {self.port}")
        require(self.heartbeat_interval > 0, "--feedback-heartbeat-interval must be > 0")
        require(not self.port or bool(self.keys) or is_loopback(self.host),
                f"--feedback-host {self.host} is reachable from other machines: give --feedback-keys DIR "
                "(`sglang-fair keys DIR`) so the link is authenticated and encrypted")
        if self.keys:
            server_keys(self.keys)  # unreadable or missing keys stop the launch here

    @property
    def enabled(self) -> bool:
        return self.port > 0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class FeedbackHub:
    """PULL (``ipc://``, the schedulers) -> PUB (``tcp://HOST:PORT``, the gateways), in a thread."""

    def __init__(self, config: FeedbackConfig, directory: str) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.inbound = f"ipc://{os.path.join(directory, 'feedback-hub')}"
        self.pull = self.context.socket(zmq.PULL)
        self.pull.bind(self.inbound)
        keys = server_keys(config.keys) if config.keys else None
        self.pub, self.auth = publisher(self.context, config.host, config.port, keys)
        self.thread = threading.Thread(target=self._run, name="sglang-fair-feedback-hub", daemon=True)

    def start(self) -> FeedbackHub:
        self.thread.start()
        os.environ[ENV_HUB] = self.inbound
        return self

    def _run(self) -> None:
        with contextlib.suppress(zmq.ZMQError):  # the context ended: the server stops
            zmq.proxy(self.pull, self.pub)

    def stop(self) -> None:
        if self.auth is not None:
            self.auth.stop()
        self.context.destroy(linger=0)


def hub_from_env() -> str | None:
    """The hub's endpoint in a scheduler process (None: the server publishes no feedback)."""
    return os.environ.get(ENV_HUB) or None


def advert(config: FeedbackConfig) -> dict[str, Any]:
    """What ``GET /sglang_fair/feedback`` answers: the port (on the host of the server's URL), whether
    it speaks CURVE, and the heartbeat interval."""
    return {"v": ADVERT_VERSION, "port": config.port, "curve": bool(config.keys),
            "heartbeat_interval": config.heartbeat_interval}
