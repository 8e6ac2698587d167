"""Start SGLang's HTTP server with the plugin enabled and the project's flags exported.

Order matters: the project's flags are validated first (fast, no SGLang import); then SGLang's
plugins load (which adds ``dlpm``/``vtc`` to ``--schedule-policy``), then SGLang parses its own
flags, the fair defaults fill in the policies the user did not choose (``defaults.py``), flag
combinations the fair policies do not support are refused, and the server runs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from sglang_fair.admission import ADMISSION_POLICIES, keeps_bands
from sglang_fair.core.errors import ConfigError
from sglang_fair.links.feedback_hub import FeedbackHub
from sglang_fair.sglang_plugin import PLUGIN_NAME
from sglang_fair.sglang_plugin.config import ENV_CONFIG, FAIR_POLICIES, FairConfig
from sglang_fair.sglang_plugin.cpu_binding import bind_cpu_ranks
from sglang_fair.sglang_plugin.defaults import fair_unsupported, with_defaults
from sglang_fair.sglang_plugin.http_hooks import check_edge
from sglang_fair.sglang_plugin.quiet import quiet_args, silence_harmless_warnings
from sglang_fair.sglang_plugin.router_launch import (
    RouterPlan,
    check_router_args,
    flag_value,
    plan_router,
    start_router,
    with_eviction_feed,
)
from sglang_fair.sglang_plugin.router_link import RouterSettings
from sglang_fair.sglang_plugin.tmpdirs import private_dir

logger = logging.getLogger("sglang_fair")


def export_environment(config: FairConfig, sglang_args: Sequence[str]) -> None:
    """Make every SGLang process see the config and load this plugin."""
    os.environ[ENV_CONFIG] = config.to_env()
    allowed = os.environ.get("SGLANG_PLUGINS", "")
    if allowed and PLUGIN_NAME not in {x.strip() for x in allowed.split(",")}:
        os.environ["SGLANG_PLUGINS"] = f"{allowed},{PLUGIN_NAME}"
    if flag_value(sglang_args, "--device") == "cpu":
        os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")  # SGLang's CPU engine (see docs/guides/serve.md)


def check_combination(config: FairConfig, server_args: Any) -> None:
    """Refuse flag combinations that conflict (a :class:`ConfigError` names them)."""
    policy = server_args.schedule_policy
    fair = policy in FAIR_POLICIES
    quantum_users = [p for p in FAIR_POLICIES if getattr(ADMISSION_POLICIES.get(p), "uses_quantum", False)]
    if config.admission.quantum and policy not in quantum_users:
        raise ConfigError(f"--fair-quantum applies to --schedule-policy {' or '.join(quantum_users)} only "
                          f"(got {policy})")
    if config.cost().client_weights and not fair:
        raise ConfigError(f"client weights need --schedule-policy dlpm, dlpm_light or vtc (got {policy})")
    if any(b.tokens_per_minute for b in config.edge.key_table.budgets.values()) and not fair:
        raise ConfigError(f"tokens_per_minute budgets need --schedule-policy dlpm, dlpm_light or vtc (its "
                          f"schedulers count each tenant's tokens; got {policy})")
    if (config.bands() or config.edge.key_table.request_priority) and not keeps_bands(policy):
        raise ConfigError(f"priority bands (--fair-client-bands, a tenant's band or "
                          f"allow_request_priority) need --schedule-policy "
                          f"dlpm or dlpm_light (got {policy})")
    if config.edge.key_table.enabled and getattr(server_args, "api_key", None):
        raise ConfigError("--client-keys and SGLang's --api-key are two key schemes: use one")
    bad = fair_unsupported(server_args) if fair else []
    if bad:
        raise ConfigError(f"--schedule-policy {policy} does not support {', '.join(bad)}")


def resolve(sglang_args: Sequence[str],
            parse: Callable[[list[str]], Any]) -> tuple[RouterPlan, Any, list[str]]:
    """The router plan and SGLang's parse (``parse``: SGLang's ``prepare_server_args``) of the user's
    arguments with the fair defaults filled in, and the notices of defaults that could not apply. The
    user's own choice is parsed first as SGLang sees it (a routing policy of this project becomes
    SGLang's ``round_robin``), so the defaults can read which SGLang features are on."""
    args, notices = with_defaults(sglang_args, parse(plan_router(sglang_args).sglang_args))
    plan = plan_router(args)
    server_args = parse(plan.sglang_args)
    if plan.policy is not None and check_router_args(plan, server_args).policy is None:
        plan = RouterPlan(None, args)  # one worker: SGLang's own round robin
        server_args = parse(args)
    return plan, server_args, notices


def _load_plugins_or_fail() -> None:
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    from sglang_fair.sglang_plugin.fence import check
    from sglang_fair.sglang_plugin.hooks import HOOKS

    check()  # a moved SGLang name stops the launch here, with one message naming all of them
    load_plugins()
    missing = [h.target for h in HOOKS if h.target not in HookRegistry._patched]
    if missing:
        raise ConfigError(
            "the sglang_fair plugin did not load or its hooks did not apply (is the package installed "
            f"so that its sglang.srt.plugins entry point exists?): {', '.join(missing)}"
        )


def run(config: FairConfig, sglang_args: Sequence[str], router: RouterSettings | None = None) -> int:
    """Validate, export, load the plugin, parse SGLang's flags (quiet by default: ``quiet.py``), fill
    in the fair defaults where the user chose no policy (``defaults.py``), bind a CPU server's ranks
    to cores (``cpu_binding.py``), start the router if one is asked for and the feedback hub if
    ``--feedback-port`` is given, and serve until the server exits."""
    export_environment(config, sglang_args)
    silence_harmless_warnings()
    _load_plugins_or_fail()
    from sglang.launch_server import run_server
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    sglang_args = quiet_args(sglang_args)
    if config.feedback.enabled:
        sglang_args = with_eviction_feed(sglang_args)
    plan, server_args, notices = resolve(sglang_args, prepare_server_args)
    for notice in notices:
        logger.warning(notice)
    check_combination(config, server_args)
    check_edge(server_args, config, plan.policy is not None)
    if (binding := bind_cpu_ranks(server_args)) is not None:
        logger.warning(binding)
    hub = FeedbackHub(config.feedback, private_dir("sgl-hub-")).start() if config.feedback.enabled else None
    process = None
    if plan.policy is not None:
        process = start_router(plan.policy, server_args.dp_size, router or RouterSettings(), config,
                               getattr(server_args, "max_running_requests", None) or 0,
                               server_args.schedule_policy)
    try:
        run_server(server_args)
    finally:
        if process is not None:
            process.stop()
        if hub is not None:
            hub.stop()
        kill_process_tree(os.getpid(), include_parent=False)
    return 0
