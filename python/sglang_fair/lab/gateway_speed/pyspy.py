"""Where a gateway's CPU time goes (``sglang-fair lab gateway-speed --profile``): py-spy samples the
gateway's process while a load runs, and :func:`profile` reads the raw samples back as shares of its busy
samples: inclusive, under each step of a request's path (:data:`STEPS`), and exclusive, by the library its
innermost frame is in (:data:`LIBRARIES`; the shares sum to 1).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

# inclusive shares of the gateway's busy samples: (label, a frame's text contains this)
STEPS = (("Gateway.relay (the whole handler)", "relay (sglang_fair/gateway/app.py"),
         ("  prompt_tokens (the /tokenize round trip)", "prompt_tokens (sglang_fair/gateway/prompt.py"),
         ("  LocalTokenizer.ids (tokenizing in the gateway)", "ids (sglang_fair/gateway/local_tokens.py"),
         ("  GatewayRouter.route (the policy's decision)", "route (sglang_fair/gateway/routing.py"),
         ("  Upstream.send (the request to the server)", "send (sglang_fair/gateway/upstream.py"),
         ("  Gateway._whole (read the answer, policy finish)", "_whole (sglang_fair/gateway/app.py"))
# exclusive shares: the sample's innermost frame's file names the library (first match)
LIBRARIES = (("json", ("json/",)), ("uvicorn + h11 (HTTP server)", ("uvicorn/", "h11/", "httptools")),
             ("fastapi + starlette + anyio", ("fastapi/", "starlette/", "anyio/", "pydantic")),
             ("aiohttp + yarl + multidict (client)", ("aiohttp/", "yarl/", "multidict/")),
             ("the gateway's HTTP client (sglang_fair.gateway.http1)", ("sglang_fair/gateway/http1.py",)),
             ("JSON (sglang_fair.gateway.wire: orjson and its guard)", ("sglang_fair/gateway/wire.py",)),
             ("routing policy + tree (sglang_fair.routing/core)",
              ("sglang_fair/routing/", "sglang_fair/core/")),
             ("gateway's own code (sglang_fair)", ("sglang_fair/",)),
             ("asyncio event loop, sockets", ("asyncio/", "uvloop", "selectors", "socket")))


def profile(py_spy: str, pid: int, seconds: float, run: Callable[[], float], out: Path,
            keep: Path | None = None) -> dict[str, float]:
    """Sample ``pid`` with py-spy while ``run`` loads it; inclusive share of busy samples per part (the
    raw samples copied to ``keep``, if given)."""
    spy = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                            "--rate", "250", "--format", "raw", "--output", str(out), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    run()
    spy.wait(timeout=seconds + 60)
    if keep is not None:
        shutil.copyfile(out, keep)
    stacks: Counter[str] = Counter()
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            stacks[stack] += int(count)
    total = sum(stacks.values()) or 1
    shares = {label: sum(n for s, n in stacks.items() if needle in s) / total for label, needle in STEPS}
    libraries: Counter[str] = Counter()
    for stack, n in stacks.items():
        leaf = stack.rsplit(";", 1)[-1]
        label = next((name for name, needles in LIBRARIES if any(x in leaf for x in needles)), "other")
        libraries[label] += n
    shares.update({f"innermost in {label}": n / total for label, n in libraries.most_common()})
    return {k: round(v, 3) for k, v in shares.items()} | {"busy samples": total}
