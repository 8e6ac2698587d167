"""The servers behind the gateway and their workers: what each URL serves, and the global worker table.

A server is discovered from its URL alone: ``GET /server_info`` (SGLang's resolved server arguments)
gives its ``served_model_name`` and ``dp_size``, ``GET /sglang_fair/feedback`` its feedback port
(404: it publishes none; ``feedback.py``). Every server must serve the same model; the gateway
numbers all their data-parallel workers 0..W-1 (server by server, in the order of ``--worker-urls``,
rank by rank), and the routing policy sees only those global indices.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.model_names import ModelNames
from sglang_fair.links.feedback_hub import ADVERT_PATH


@dataclass(frozen=True)
class ServerInfo:
    """One ``sglang-fair serve`` instance: its base URL, the model it serves, its DP size, and where
    it publishes feedback (``tcp://HOST:PORT``; empty: nowhere) and whether over CURVE; the model's
    path and whether it serves LoRA adapters (the names a request may give, ``model_names.py``); its
    tokenizer's path (``--tokenizer auto``)."""

    url: str
    model: str
    dp_size: int
    feedback_endpoint: str = ""
    feedback_curve: bool = False
    model_path: str = ""
    lora: bool = False
    tokenizer_path: str = ""


@dataclass(frozen=True)
class Worker:
    """Global worker ``index``: rank ``rank`` of ``server``."""

    index: int
    server: ServerInfo
    rank: int

    def pinned_rank(self) -> int | None:
        """The ``routed_dp_rank`` to send (None for a server with one rank: SGLang ignores it there)."""
        return self.rank if self.server.dp_size > 1 else None


class WorkerTable:
    """Global worker index <-> (server, rank)."""

    def __init__(self, servers: Sequence[ServerInfo]) -> None:
        self.servers = tuple(servers)
        self.workers = tuple(Worker(i, server, rank) for i, (server, rank) in enumerate(
            (s, r) for s in self.servers for r in range(s.dp_size)))
        self._index = {(w.server.url, w.rank): w.index for w in self.workers}

    def __len__(self) -> int:
        return len(self.workers)

    def __iter__(self) -> Iterator[Worker]:
        return iter(self.workers)

    def __getitem__(self, index: int) -> Worker:
        return self.workers[index]

    def of_server(self, url: str) -> list[Worker]:
        """The workers of the server at ``url``, by rank."""
        return [w for w in self.workers if w.server.url == url]

    def index(self, url: str, rank: int) -> int:
        """The global index of rank ``rank`` of the server at ``url`` (KeyError if there is none)."""
        return self._index[(url, rank)]

    @property
    def model(self) -> str:
        return self.servers[0].model

    def model_names(self) -> ModelNames | None:
        """The ``model`` names every server accepts (the served name and ``default``, the model path
        where all share it); None (any name passes on to them) when one serves LoRA adapters, which it
        may load at run time."""
        if any(s.lora for s in self.servers):
            return None
        each = [ModelNames.of(s.model, s.model_path).names for s in self.servers]
        return ModelNames(frozenset.intersection(*each), served=self.model)


def server_info(url: str, info: Any) -> ServerInfo:
    """Read a server's ``/server_info`` answer (a :class:`ConfigError` says what is missing)."""
    if not isinstance(info, dict):
        raise ConfigError(f"{url}/server_info: expected a JSON object")
    model = info.get("served_model_name") or info.get("model_path")
    dp_size = info.get("dp_size")
    if not isinstance(model, str) or not isinstance(dp_size, int) or isinstance(dp_size, bool) or dp_size < 1:
        raise ConfigError(f"{url}/server_info: no served_model_name/model_path and dp_size >= 1 "
                          "(is this an SGLang server?)")
    path, tokenizer = info.get("model_path"), info.get("tokenizer_path")
    lora = bool(info.get("enable_lora") or info.get("lora_paths"))
    return ServerInfo(url, model, dp_size, model_path=path if isinstance(path, str) else "", lora=lora,
                      tokenizer_path=tokenizer if isinstance(tokenizer, str) else "")


def with_feedback(server: ServerInfo, advert: Any) -> ServerInfo:
    """``server`` with the feedback port of its ``/sglang_fair/feedback`` answer, on its URL's host."""
    port = advert.get("port") if isinstance(advert, dict) else None
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ConfigError(f"{server.url}{ADVERT_PATH}: expected a JSON object with a port in 1..65535")
    host = urlsplit(server.url).hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return dataclasses.replace(server, feedback_endpoint=f"tcp://{host}:{port}",
                               feedback_curve=bool(advert.get("curve")))


def check_same_model(servers: Sequence[ServerInfo]) -> None:
    """Every server must serve one model (a :class:`ConfigError` lists which serves what)."""
    if len({s.model for s in servers}) > 1:
        raise ConfigError("the servers serve different models: "
                          + ", ".join(f"{s.url} serves {s.model!r}" for s in servers))


async def discover(urls: Sequence[str], fetch: Callable[[str, str], Awaitable[Any]],
                   timeout: float, clock: Callable[[], float] = time.monotonic,
                   report: Callable[[str], None] = lambda line: None,
                   retry_every: float = 0.5, report_every: float = 10.0) -> WorkerTable:
    """The worker table of the servers at ``urls``; ``fetch(url, path)`` returns a JSON answer or
    raises ``OSError`` (with ``status`` 404 when the path is not served). A server not up yet (still
    loading its model, or not yet on the network) is asked again every ``retry_every`` s up to
    ``timeout``; ``report`` hears, every ``report_every`` s, which server is awaited and why."""

    async def one(url: str) -> ServerInfo:
        start = clock()
        reported = start
        while True:
            try:
                server = server_info(url, await fetch(url, "/server_info"))
                try:
                    return with_feedback(server, await fetch(url, ADVERT_PATH))
                except OSError as err:
                    if getattr(err, "status", None) == 404:
                        return server
                    raise
            except OSError as err:
                now = clock()
                if now - start >= timeout:
                    raise ConfigError(f"{url}: no answer from /server_info within {timeout:.0f} s "
                                      f"({err})") from None
                if now - reported >= report_every:
                    reported = now
                    report(f"waiting for {url} ({now - start:.0f} s of {timeout:.0f}): {err}")
            await asyncio.sleep(retry_every)

    servers = await asyncio.gather(*(one(url) for url in urls))
    check_same_model(servers)
    return WorkerTable(servers)
