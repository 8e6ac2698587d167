"""CurveZMQ keys of the feedback link between servers and gateways: authenticated and encrypted.

``sglang-fair keys DIR`` writes ZeroMQ certificate files (``zmq.auth.create_certificates``): the
fleet's server pair ``server.key`` / ``server.key_secret`` (every server uses it) and one pair per
gateway, ``gateway.key`` / ``gateway.key_secret`` (``--gateway-names gateway,gateway-2`` for more).
A server reads its secret key and accepts exactly the gateways whose ``gateway*.key`` public files
are in the directory (a ZAP handler refuses any other); a gateway reads its own secret key and the
servers' public key, so it talks only to a server that holds the server secret. Gateway replicas
(``gateway/peers.py``) admit each other by the same gateway pairs. Copy to each node only what it
needs: servers ``server.key_secret`` and the gateways' ``*.key``; a gateway its own ``.key_secret``,
``server.key`` and its peers' ``gateway*.key``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from sglang_fair.core.errors import ConfigError

SERVER = "server"
GATEWAY = "gateway"


@dataclass(frozen=True)
class CurveKeys:
    """One side's key pair and the public keys of the peers it accepts (server) or trusts (gateway)."""

    public: bytes
    secret: bytes = field(repr=False)
    peers: tuple[bytes, ...]


def make_keys(directory: str | Path, gateways: Sequence[str] = (GATEWAY,)) -> list[Path]:
    """Write the server pair and one pair per gateway name into ``directory``; refuse to overwrite."""
    out = Path(directory)
    names = [SERVER, *gateways]
    if len(set(names)) != len(names) or any(not n.startswith(GATEWAY) for n in gateways):
        raise ConfigError(f"gateway key names must be distinct and start with {GATEWAY!r}: {list(gateways)}")
    taken = [str(out / f"{n}.key_secret") for n in names if (out / f"{n}.key_secret").exists()]
    if taken:
        raise ConfigError(f"keys exist already (remove them to make new ones): {', '.join(taken)}")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in names:
        public, secret = zmq.auth.create_certificates(str(out), name)
        os.chmod(secret, 0o600)
        written += [Path(public), Path(secret)]
    return written


def _pair(path: Path) -> tuple[bytes, bytes]:
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read the CurveZMQ key {path}: {err} "
                          "(make keys with `sglang-fair keys DIR`)") from None
    if secret is None:
        raise ConfigError(f"{path} holds no secret key")
    return public, secret


def _public(path: Path) -> bytes:
    try:
        public, _ = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read the CurveZMQ public key {path}: {err}") from None
    return public


def server_keys(directory: str | Path) -> CurveKeys:
    """A server's keys: its pair and every gateway public key in ``directory`` (at least one)."""
    root = Path(directory)
    public, secret = _pair(root / f"{SERVER}.key_secret")
    gateways = tuple(_public(p) for p in sorted(root.glob(f"{GATEWAY}*.key")))
    if not gateways:
        raise ConfigError(f"{root}: no {GATEWAY}*.key public key: no gateway could connect")
    return CurveKeys(public, secret, gateways)


def gateway_keys(directory: str | Path, name: str = GATEWAY) -> CurveKeys:
    """A gateway's keys: its pair ``name`` and the servers' public key."""
    root = Path(directory)
    public, secret = _pair(root / f"{name}.key_secret")
    return CurveKeys(public, secret, (_public(root / f"{SERVER}.key"),))


def replica_keys(directory: str | Path, name: str = GATEWAY) -> CurveKeys:
    """A gateway's keys toward its peer replicas: its pair ``name`` and every gateway public key in
    ``directory`` (the replicas its peer port admits)."""
    root = Path(directory)
    public, secret = _pair(root / f"{name}.key_secret")
    return CurveKeys(public, secret, tuple(_public(p) for p in sorted(root.glob(f"{GATEWAY}*.key"))))


def public_key(directory: str | Path, name: str) -> bytes:
    """The public key ``name`` of ``directory`` (a peer replica's, to connect to it)."""
    return _public(Path(directory) / f"{name}.key")


def serve_curve(socket: zmq.Socket[Any], keys: CurveKeys) -> ThreadAuthenticator:
    """Make ``socket`` (before it binds) a CURVE server that admits only ``keys.peers``; the
    authenticator thread returned must live as long as the socket."""
    auth = ThreadAuthenticator(socket.context)
    auth.start()
    allowed = frozenset(keys.peers)
    auth.configure_curve_callback("*", credentials_provider=_Allow(allowed))
    socket.curve_secretkey = keys.secret
    socket.curve_publickey = keys.public
    socket.curve_server = True
    return auth


class _Allow:
    """ZAP credentials provider: a client is admitted iff its public key is one of ``allowed``."""

    def __init__(self, allowed: frozenset[bytes]) -> None:
        self.allowed = allowed

    def callback(self, domain: str, key: bytes) -> bool:
        return key in self.allowed
