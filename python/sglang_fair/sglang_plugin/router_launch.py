"""Start the global router next to SGLang when ``--load-balance-method`` names a routing policy.

:func:`plan_router` rewrites SGLang's arguments before SGLang parses them (SGLang is told
``round_robin`` and gets the eviction feed as its KV-event publisher); :func:`check_router_args`
checks the parsed flags; :func:`start_router` exports the :class:`RouterLink` and runs
``sglang-fair router`` as a supervised child process (:class:`RouterProcess`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.sglang_plugin.config import FairConfig
from sglang_fair.sglang_plugin.router_link import (
    ENV_ROUTER,
    KV_EVENTS_PUBLISHER,
    ROUTER_METHODS,
    SGLANG_METHODS,
    RouterLink,
    RouterSettings,
    router_command,
)
from sglang_fair.sglang_plugin.tenant_reload import router_tenant_file
from sglang_fair.sglang_plugin.tmpdirs import private_dir

logger = logging.getLogger("sglang_fair")
LB_FLAG, KV_FLAG = "--load-balance-method", "--kv-events-config"
KV_EVENTS = json.dumps({"publisher": KV_EVENTS_PUBLISHER, "endpoint": ""})


@dataclass(frozen=True)
class RouterPlan:
    policy: str | None  # None: SGLang dispatches as usual
    sglang_args: list[str]


def find_flag(args: Sequence[str], flag: str) -> tuple[int, str] | None:
    """(index of the value, value) of ``flag`` in ``args``."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return i + 1, args[i + 1]
        if arg.startswith(flag + "="):
            return i, arg.split("=", 1)[1]
    return None


def flag_value(args: Sequence[str], flag: str) -> str | None:
    found = find_flag(args, flag)
    return None if found is None else found[1]


def plan_router(sglang_args: Sequence[str]) -> RouterPlan:
    """Route through the router when ``--load-balance-method`` is one of :data:`ROUTER_METHODS`."""
    args = list(sglang_args)
    found = find_flag(args, LB_FLAG)
    if found is None or found[1] not in ROUTER_METHODS:
        return RouterPlan(None, args)
    index, policy = found
    args[index] = "round_robin" if args[index] == policy else f"{LB_FLAG}=round_robin"
    return RouterPlan(policy, with_eviction_feed(args))


def with_eviction_feed(args: Sequence[str]) -> list[str]:
    """``args`` with SGLang's KV events going to the plugin's eviction feed (the router's and the
    gateways' view of each cache); a user's own ``--kv-events-config`` is refused."""
    found = find_flag(args, KV_FLAG)
    if found is None:
        return [*args, KV_FLAG, KV_EVENTS]
    if found[1] != KV_EVENTS:
        raise ConfigError(f"the router ({LB_FLAG} with a routing policy) and --feedback-port feed on "
                          f"SGLang's KV events: drop {KV_FLAG}")
    return list(args)


def check_router_args(plan: RouterPlan, server_args: Any) -> RouterPlan:
    """Refuse what the router cannot serve; with one worker, SGLang's own method stays."""
    if plan.policy is None:
        return plan
    dp_size = int(getattr(server_args, "dp_size", 1) or 1)
    if dp_size < 2:
        if plan.policy in SGLANG_METHODS:
            return RouterPlan(None, plan.sglang_args)
        raise ConfigError(f"{LB_FLAG} {plan.policy} routes between data-parallel workers: "
                          "needs --dp-size >= 2")
    bad = router_unsupported(server_args)
    if bad:
        raise ConfigError(f"{LB_FLAG} {plan.policy} does not support {', '.join(bad)}")
    return plan


@dataclass(frozen=True)
class Feature:
    """An SGLang feature a fair policy cannot serve with: its flag, whether SGLang's parse has it on,
    and why (shown in the notice and the generated lists of ``defaults.py``)."""

    flag: str
    on: Callable[[Any], bool]
    why: str = ""

    def text(self, markdown: bool = False) -> str:
        flag = f"`{self.flag}`" if markdown else self.flag
        return f"{flag} ({self.why})" if self.why else flag


ROUTER_OFF = (
    Feature("--enable-dp-attention", lambda a: bool(getattr(a, "enable_dp_attention", False))),
    Feature("--nnodes > 1", lambda a: (getattr(a, "nnodes", 1) or 1) > 1, "the router runs on one node"),
    Feature("--sleep-on-idle", lambda a: bool(getattr(a, "sleep_on_idle", False)),
            "an idle scheduler would not hear the router"),
)


def router_unsupported(server_args: Any) -> list[str]:
    """The SGLang features on in ``server_args`` that the router cannot serve with."""
    return [f.text() for f in ROUTER_OFF if f.on(server_args)]


class RouterProcess:
    """A supervised router child process and its IPC directory. A router that fails (a non-zero exit
    or a signal other than SIGTERM) is started again, its state empty as after any restart;
    :meth:`stop` ends both."""

    def __init__(self, cmd: list[str], directory: str) -> None:
        self.cmd, self.directory = cmd, directory
        self.stopping = threading.Event()
        self.restarts = 0
        self.proc = subprocess.Popen(cmd)
        self._wait_bound()
        threading.Thread(target=self._supervise, name="sglang-fair-router", daemon=True).start()

    def _wait_bound(self, timeout: float = 30.0) -> None:
        frontend = os.path.join(self.directory, "frontend")
        deadline = time.monotonic() + timeout
        while not os.path.exists(frontend):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ConfigError(f"the router did not start (exit code {self.proc.returncode})")
            time.sleep(0.05)

    def _supervise(self, poll_s: float = 0.5) -> None:
        while not self.stopping.wait(poll_s):
            code = self.proc.poll()
            if code in (None, 0) or self.stopping.is_set():
                continue  # running, or told to stop (SIGTERM: the server is shutting down)
            self.restarts += 1
            logger.warning("sglang-fair: the router exited with code %s; starting it again (restart %d)",
                           code, self.restarts)
            self.proc = subprocess.Popen(self.cmd)

    def stop(self) -> None:
        self.stopping.set()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        os.environ.pop(ENV_ROUTER, None)
        shutil.rmtree(self.directory, ignore_errors=True)


def with_client_ttl(settings: RouterSettings, config: FairConfig, num_workers: int = 1) -> RouterSettings:
    """The router forgets idle clients as the schedulers do (``--client-ttl``; never with keys) and
    bounds a client's requests in flight at ``--client-max-queued`` per worker (0: no bound)."""
    service = replace(settings.service, client_ttl=config.edge.idle_ttl(),
                      client_max_inflight=config.client_max_queued * num_workers)
    return replace(settings, service=service)


def with_tenant_file(settings: RouterSettings, config: FairConfig,
                     schedule_policy: str | None) -> tuple[RouterSettings, CostModel]:
    """The router's settings and cost: the workers' cost with every client's weight, so the router's
    D²LPM is weighted as DLPM is. Where the schedulers reload the weights (a fair ``schedule_policy``)
    the router is given the tenant file and ``--client-weights`` apart, and merges and reloads them
    itself (``sglang_fair_router/tenants.py``); otherwise it gets the merged weights, to keep."""
    path = router_tenant_file(config, schedule_policy)
    if not path:
        return settings, config.cost()
    return replace(settings, service=replace(settings.service, client_keys=path)), config.admission.cost


def start_router(policy: str, num_workers: int, settings: RouterSettings, config: FairConfig,
                 max_running: int = 0, schedule_policy: str | None = None) -> RouterProcess:
    """Export the :class:`RouterLink` (every SGLang process started after this sees it) and start
    ``sglang-fair router`` on it, with the workers' cost and the tenants' weights
    (:func:`with_tenant_file`) and the workers' ``--max-running-requests`` as their capacity until
    their heartbeats say more."""
    directory = private_dir("sgl-fair-")  # short: ipc:// paths have a length limit
    link = RouterLink(directory, num_workers, settings.service.heartbeat_interval,
                      prefill_budget=policy == "pab", policy=policy)
    os.environ[ENV_ROUTER] = link.to_env()
    settings, cost = with_tenant_file(with_client_ttl(settings, config, num_workers), config, schedule_policy)
    if max_running and not settings.routing.worker_capacity:
        settings = replace(settings, routing=replace(settings.routing, worker_capacity=max_running))
    cmd = [sys.executable, "-m", "sglang_fair.cli", *router_command(link, policy, settings, cost)]
    return RouterProcess(cmd, directory)
