"""The fair pair is what ``serve`` runs when the user chooses no policy (``defaults.py``)."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import pytest

from sglang_fair.sglang_plugin.defaults import (
    DEFAULT_ADMISSION,
    DEFAULT_ROUTER,
    PRIORITY_FLAG,
    with_defaults,
)
from sglang_fair.sglang_plugin.router_launch import ROUTER_METHODS


def parsed(**kw: object) -> SimpleNamespace:
    """SGLang's parse of the user's flags, as far as the defaults read it."""
    return SimpleNamespace(**{"schedule_policy": "fcfs", "dp_size": 1, **kw})


def test_no_policy_flags_give_the_fair_pair() -> None:
    args, notices = with_defaults(["--model-path", "m"], parsed())
    assert args == ["--model-path", "m", "--schedule-policy", DEFAULT_ADMISSION] and notices == []
    args, notices = with_defaults(["--dp-size", "4"], parsed(dp_size=4))
    assert args[2:] == ["--schedule-policy", DEFAULT_ADMISSION, "--load-balance-method", DEFAULT_ROUTER]
    assert DEFAULT_ROUTER in ROUTER_METHODS and notices == []


@pytest.mark.parametrize("given", [["--schedule-policy", "fcfs"], ["--schedule-policy=lpm"],
                                   ["--schedule-policy", "vtc"]])
def test_a_chosen_admission_policy_is_kept(given: list[str]) -> None:
    assert with_defaults(given, parsed()) == (given, [])


@pytest.mark.parametrize("given", [["--load-balance-method", "round_robin"], ["--load-balance-method=d2lpm"]])
def test_a_chosen_routing_method_is_kept(given: list[str]) -> None:
    args, _ = with_defaults([*given, "--dp-size", "2"], parsed(dp_size=2))
    assert "--load-balance-method" not in args[len(given):] and args[:len(given)] == given


@pytest.mark.parametrize(("feature", "named"), [
    ({"enable_lora": True}, "--enable-lora"), ({"pp_size": 2}, "--pp-size > 1"),
    ({"disaggregation_mode": "prefill"}, "--disaggregation-mode"),
])
def test_an_unsupported_feature_gets_sglangs_default_and_a_notice(
        feature: dict[str, object], named: str) -> None:
    args, notices = with_defaults(["--model-path", "m"], parsed(**feature))
    assert args == ["--model-path", "m"]
    assert len(notices) == 1 and named in notices[0] and "fcfs" in notices[0]


@pytest.mark.parametrize("given", [[], ["--schedule-policy", "dlpm"]])
def test_priority_scheduling_keeps_the_fair_policy(given: list[str]) -> None:
    """It once turned the fair default off (SGLang's fcfs: SGLang accepts the flag only with fcfs or
    lof): now the flag is taken off SGLang's arguments and the fair policy orders admission."""
    args, notices = with_defaults(["--model-path", "m", PRIORITY_FLAG, *given],
                                  parsed(enable_priority_scheduling=True))
    assert args == ["--model-path", "m", *(given or ["--schedule-policy", DEFAULT_ADMISSION])]
    assert len(notices) == 1 and "the fair policy orders admission itself" in notices[0]
    plain, none = with_defaults([PRIORITY_FLAG, "--schedule-policy", "fcfs"],
                                parsed(enable_priority_scheduling=True))
    assert plain == [PRIORITY_FLAG, "--schedule-policy", "fcfs"] and none == []  # SGLang's own policy


@pytest.mark.parametrize(("feature", "flags", "named"), [
    ({"enable_dp_attention": True}, [], "--enable-dp-attention"),
    ({"nnodes": 2}, [], "--nnodes > 1"),
    ({}, ["--kv-events-config", "{}"], "--kv-events-config"),
])
def test_a_feature_the_router_cannot_serve_keeps_sglangs_routing(
        feature: dict[str, object], flags: list[str], named: str) -> None:
    args, notices = with_defaults([*flags, "--dp-size", "2"], parsed(dp_size=2, **feature))
    assert "--load-balance-method" not in args and args[-2:] == ["--schedule-policy", DEFAULT_ADMISSION]
    assert len(notices) == 1 and named in notices[0]


@pytest.mark.sglang
def test_the_launcher_resolves_defaults_and_chosen_routers_with_sglangs_parser(
        sglang_parser: argparse.ArgumentParser) -> None:
    """What ``serve`` hands SGLang: a routing policy of this project passes SGLang's parser (as its
    round_robin), the defaults fill in what was not chosen, and one worker keeps SGLang's own routing."""
    from sglang_fair.sglang_plugin.launcher import resolve

    def parse(args: list[str]) -> argparse.Namespace:
        return sglang_parser.parse_args(args)

    base = ["--model-path", "m"]
    plan, parsed_args, notices = resolve([*base, "--dp-size", "2", "--load-balance-method", "d2lpm"], parse)
    assert plan.policy == "d2lpm" and parsed_args.load_balance_method == "round_robin" and notices == []
    assert parsed_args.schedule_policy == DEFAULT_ADMISSION
    plan, parsed_args, _ = resolve([*base, "--dp-size", "2"], parse)
    assert plan.policy == DEFAULT_ROUTER and parsed_args.schedule_policy == DEFAULT_ADMISSION
    plan, parsed_args, _ = resolve([*base, "--schedule-policy", "lpm"], parse)
    assert plan.policy is None and parsed_args.schedule_policy == "lpm"
    plan, parsed_args, notices = resolve([*base, "--dp-size", "2", "--enable-dp-attention"], parse)
    assert plan.policy is None and len(notices) == 1 and "--enable-dp-attention" in notices[0]
