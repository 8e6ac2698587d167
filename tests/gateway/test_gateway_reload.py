"""The gateway reloads its tenant file on SIGHUP without dropping a request: a key added to the file is
accepted after the signal, while a request admitted before it is still in flight and then completes;
the new weights reach the routing policy; an invalid file is refused and the running keys stay."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
import aiohttp
from fake_sglang import FakeSGLang, Running
from test_gateway import CHAT, config, gateway_at, run, until

from sglang_fair.edge.keys import load_key_file

pytestmark = pytest.mark.timers
FIRST = '[tenants.old]\nkeys = ["k-old"]\n'
SECOND = FIRST + '[tenants.new]\nkeys = ["k-new"]\nweight = 3\nrequests_per_minute = 100\n'


async def chat(s: aiohttp.ClientSession, url: str, key: str) -> int:
    async with s.post(url + "/v1/chat/completions", json=CHAT,
                      headers={"Authorization": f"Bearer {key}"}) as resp:
        await resp.read()
        return resp.status


def test_a_key_added_is_accepted_after_sighup_while_a_request_is_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    path.write_text(FIRST)
    fake = FakeSGLang(hold_whole=threading.Event())
    with Running(fake) as urls:
        async def scenario() -> None:
            cfg = config(urls, "fair_cache_aware", client_keys=str(path), key_table=load_key_file(str(path)))
            async with gateway_at(cfg) as (gw, gateway), aiohttp.ClientSession() as s:
                assert await chat(s, gw, "k-new") == 401
                held = asyncio.create_task(chat(s, gw, "k-old"))
                await until(lambda: len(fake.relayed()) == 1)  # admitted, waiting for its answer
                path.write_text("[tenants.new\n")  # an invalid file: refused, the keys stay
                await until(lambda: "k-new" not in gateway.tenants.live.table.clients
                            and gateway.tenants.reloader is not None
                            and gateway.tenants.reloader.text == "[tenants.new\n", timeout=6.0)
                assert gateway.tenants.live.table.clients == {"k-old": "old"}
                path.write_text(SECOND)
                assert signal.getsignal(signal.SIGHUP) not in (signal.SIG_DFL, None)  # the duty's handler
                os.kill(os.getpid(), signal.SIGHUP)
                await until(lambda: "k-new" in gateway.tenants.live.table.clients, timeout=1.5)
                assert not held.done()  # the request admitted before the reload is still in flight
                fake.hold_whole.set()  # type: ignore[union-attr]
                assert await chat(s, gw, "k-new") == 200
                assert await held == 200
                assert gateway.router.policy.config.cost.weight("new") == 3.0
                async with s.get(gw + "/gateway/state") as resp:
                    assert (await resp.json())["budgets"]["new"]["requests_used"] == 1

        run(scenario)
    assert [c.headers["x-client-id"] for c in fake.relayed()] == ["old", "new"]
