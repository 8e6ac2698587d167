"""Headless Chromium over the DevTools protocol: load a page, wait until it has drawn, read what it drew,
collect its console errors and the URLs it fetched, take a screenshot (the fairness page's tests and
``sglang-fair lab page-shot``).

Debian's ``chromium`` (``apt-get install --no-install-recommends chromium``) runs headless with the flags
of :data:`FLAGS` and a new empty profile directory each time. Errors are console calls of level error,
uncaught exceptions, and log entries of level error (a resource that failed to load, a blocked request).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-crash-reporter", "--disable-breakpad", "--hide-scrollbars", "--mute-audio",
         "--remote-debugging-port=0")
LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium``, or a Chrome), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@dataclass
class Visit:
    """What one page load showed."""

    value: Any = None  # what the ``read`` expression evaluated to
    errors: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)  # URLs the page requested
    screenshot: bytes = b""


class DevTools:
    """One DevTools websocket session (commands answered by id; events collected into ``visit``)."""

    def __init__(self, ws: Any, visit: Visit) -> None:
        self.ws, self.visit, self.ids = ws, visit, itertools.count(1)
        self.waiting: dict[int, asyncio.Future[Any]] = {}

    async def call(self, method: str, **params: Any) -> Any:
        ident = next(self.ids)
        answer = self.waiting[ident] = asyncio.get_running_loop().create_future()
        try:
            await self.ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
            return await asyncio.wait_for(answer, 60)
        finally:
            self.waiting.pop(ident, None)

    async def listen(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            answer = self.waiting.get(data.get("id", -1))
            if "id" not in data:
                self.event(data.get("method", ""), data.get("params", {}))
            elif answer is not None and "error" in data:
                answer.set_exception(RuntimeError(str(data["error"])))
            elif answer is not None:
                answer.set_result(data.get("result", {}))

    def event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.visit.errors.append(f"console.{params['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            self.visit.errors.append(f"uncaught: {text}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.visit.errors.append(f"log: {entry.get('text', '')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.visit.fetched.append(params.get("request", {}).get("url", ""))


def start_chromium(binary: str, profile: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start Chromium on about:blank; its process and the DevTools endpoint's ``host:port``."""
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    found: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            if not found and (m := LISTENING.search(raw.decode(errors="replace"))):
                found.append(m.group(1))
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    if not seen.wait(60) or not found:
        stop_chromium(proc)
        raise RuntimeError("chromium did not open its DevTools port within 60 s")
    return proc, found[0].split("/")[2]


def stop_chromium(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


async def _visit(endpoint: str, url: str, ready: str, read: str, timeout: float,
                 size: tuple[int, int]) -> Visit:
    import aiohttp

    visit = Visit()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{endpoint}/json/list") as resp:
            targets = await resp.json()
        page = next(t for t in targets if t.get("type") == "page")
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            tools = DevTools(ws, visit)
            listener = asyncio.create_task(tools.listen())
            for domain in ("Runtime", "Log", "Network", "Page"):
                await tools.call(f"{domain}.enable")
            await tools.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1],
                             deviceScaleFactor=1, mobile=False)
            await tools.call("Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            while True:
                got = await tools.call("Runtime.evaluate", expression=ready, returnByValue=True)
                if got.get("result", {}).get("value"):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url}: `{ready}` not true after {timeout:g} s; "
                                       f"errors {visit.errors}")
                await asyncio.sleep(0.2)
            got = await tools.call("Runtime.evaluate", expression=read, returnByValue=True)
            visit.value = got.get("result", {}).get("value")
            shot = await tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            visit.screenshot = base64.b64decode(shot["data"])
            listener.cancel()
    return visit


def visit_page(url: str, ready: str, read: str, timeout: float = 60.0,
               size: tuple[int, int] = (1280, 1100), binary: str | None = None) -> Visit:
    """Load ``url`` in a fresh headless Chromium; once the script expression ``ready`` is true, evaluate
    ``read`` (its JSON value in ``Visit.value``) and take a screenshot of the whole page."""
    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium on PATH (Debian: apt-get install --no-install-recommends "
                                "chromium)")
    with tempfile.TemporaryDirectory(prefix="sglang-fair-chromium-") as profile:
        proc, endpoint = start_chromium(binary, profile)
        try:
            return asyncio.run(_visit(endpoint, url, ready, read, timeout, size))
        finally:
            stop_chromium(proc)
