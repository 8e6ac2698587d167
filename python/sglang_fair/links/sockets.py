"""The two ZMQ sockets of the fleet's links, set up one way: a PUB bound on a TCP port (a server's
feedback port, a gateway's peer port) and a SUB connected to one (a gateway hearing a server or a peer
replica). Over CurveZMQ when given keys (``curve.py``)."""

from __future__ import annotations

from typing import Any

import zmq
from zmq.auth.thread import ThreadAuthenticator

from sglang_fair.links.curve import CurveKeys, serve_curve

RECONNECT_IVL_MAX_MS = 2000  # a gone publisher: retry with backoff up to 2 s


def publisher(context: Any, host: str, port: int, keys: CurveKeys | None = None, local: str = ""
              ) -> tuple[Any, ThreadAuthenticator | None]:
    """A PUB socket bound on ``tcp://HOST:PORT`` (not if ``port`` is 0) and on the ``ipc://`` endpoint
    ``local`` (if given) that never lingers at close; with ``keys`` a CURVE server admitting only
    ``keys.peers`` (stop the authenticator returned when the socket closes; CURVE binds to TCP alone)."""
    sock = context.socket(zmq.PUB)
    sock.setsockopt(zmq.LINGER, 0)
    auth = serve_curve(sock, keys) if keys is not None and port else None
    if port:
        sock.bind(f"tcp://{host}:{port}")
    if local:
        sock.bind(local)
    return sock, auth


def subscriber(context: Any, endpoint: str | None, keys: CurveKeys | None = None,
               server_key: bytes | None = None) -> Any:
    """A SUB socket on every message of ``endpoint`` (``tcp://HOST:PORT``; None: the caller connects it,
    as ``gateway/peer_dns.py`` does to every address a name resolves to), reconnecting with backoff;
    with ``keys`` a CURVE client of the publisher's public key ``server_key`` (default: the first of
    ``keys.peers``, the servers' key)."""
    sock = context.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
    if keys is not None:
        sock.curve_secretkey, sock.curve_publickey = keys.secret, keys.public
        sock.curve_serverkey = server_key if server_key is not None else keys.peers[0]
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    if endpoint is not None:
        sock.connect(endpoint)
    return sock
