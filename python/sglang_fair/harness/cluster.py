"""Two CPU servers, two gateway replicas and HAProxy in front of them on one machine, with handles to
break them (for ``sglang-fair lab chaos``, ``sglang-fair lab cluster-soak`` and their tests).

Each server (``sglang-fair serve``, one worker) serves HTTP on ``127.0.0.2`` and publishes its feedback
on ``127.0.0.1``; a :class:`LinkProxy` carries the feedback from ``127.0.0.1:F`` to ``127.0.0.2:F``, where
the gateways look for it (a server's feedback host is its URL's), so the link can be cut while HTTP goes
on. The gateways (``sglang-fair gateway``) share what they route over their peer ports; clients reach
them through HAProxy (:class:`~sglang_fair.harness.balancer.Balancer`, the compose profiles'
configuration), which health-checks them. Every process runs in its own session, so a signal reaches the
whole server or gateway, or only its scheduler.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from sglang_fair.harness.balancer import Balancer
from sglang_fair.harness.proc import Proc, free_ports
from sglang_fair.harness.server import cpu_server_cmd

TOKEN = "chaos-gateway-token-0123456789abcdef"
SERVER_HOST = "127.0.0.2"
ADMIN = "ops"  # the client whose key reads every client's row of the servers' /fairness


class LinkProxy:
    """A TCP relay from ``listen`` to ``target`` that can be cut: while cut it reads nothing from either
    side (a partition: the sender's buffers fill, ZMQ's PUB drops what does not fit, no connection is
    reset), and when mended the bytes flow again."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self.target = target
        self.flowing = threading.Event()
        self.flowing.set()
        self.server = socket.create_server(listen, reuse_port=False)
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        self.flowing.clear()

    def mend(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.server.accept()
            except OSError:
                return
            try:
                far = socket.create_connection(self.target, timeout=5)
            except OSError:
                near.close()
                continue
            far.settimeout(None)
            for src, dst in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                self.flowing.wait()
                data = src.recv(65536)
                if not data:
                    break
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@dataclass
class Cluster:
    """The servers (``servers``), their feedback links (``links``, by server name), the gateways and the
    load balancer in front of them (``balancer``: where clients send)."""

    servers: list[Proc]
    links: dict[str, LinkProxy]
    gateways: list[Proc]
    keys: dict[str, str]  # client -> API key (and ADMIN's)
    balancer: Balancer

    def procs(self) -> list[Proc]:
        return [*self.servers, *self.gateways]


def start_cluster(stack: ExitStack, model: Path, tmp: Path, clients: dict[str, float],
                  server_args: Sequence[str] = (), gateway_args: Sequence[str] = (),
                  timeout: float = 300.0) -> Cluster:
    """Start the cluster (stopped when ``stack`` closes); ``clients``: name -> weight, each given a key."""
    keys = {name: f"k-{name}" for name in (*clients, ADMIN)}
    weights = {**clients, ADMIN: 1.0}
    (tmp / "keys").write_text("".join(f"{keys[c]} {c} {weights[c]:g}\n" for c in keys))
    (tmp / "token").write_text(TOKEN + "\n")
    common = ("--client-keys", str(tmp / "keys"), "--gateway-token-file", str(tmp / "token"))
    http, feedback, gw, peer = (free_ports(2) for _ in range(4))
    env = dict(os.environ, SGLANG_USE_CPU_ENGINE="1")
    env.setdefault("OMP_NUM_THREADS", "1")
    servers, links = [], {}
    for k, name in enumerate(("server-a", "server-b")):
        cmd = cpu_server_cmd(model, http[k], ("--host", SERVER_HOST, "--feedback-port", str(feedback[k]),
                                              *common, "--fairness-admins", ADMIN, *server_args))
        servers.append(Proc(name, cmd, f"http://{SERVER_HOST}:{http[k]}", tmp / f"{name}.log", env,
                            sampled=True))
        links[name] = LinkProxy((SERVER_HOST, feedback[k]), ("127.0.0.1", feedback[k]))
        stack.callback(links[name].close)
    gateways = []
    urls = ",".join(s.url for s in servers)
    for k, name in enumerate(("gateway-1", "gateway-2")):
        cmd = [sys.executable, "-m", "sglang_fair.cli", "gateway", "--worker-urls", urls,
               "--port", str(gw[k]), "--peer-port", str(peer[k]), "--peer-addresses",
               f"127.0.0.1:{peer[1 - k]}", *common, "--fairness-admins", ADMIN, *gateway_args]
        gateways.append(Proc(name, cmd, f"http://127.0.0.1:{gw[k]}", tmp / f"{name}.log"))
    balancer = Balancer([g.url for g in gateways], tmp / "haproxy.log")
    cluster = Cluster(servers, links, gateways, keys, balancer)
    for proc in cluster.procs():
        proc.log.write_bytes(b"")
        stack.callback(proc.stop)
    stack.callback(balancer.stop)
    for group in (servers, gateways):
        for proc in group:
            proc.start()
        for proc in group:
            proc.wait_ready(timeout)
    balancer.start()
    return cluster

