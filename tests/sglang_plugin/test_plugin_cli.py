"""Bad input at start-up: a clear message and a non-zero exit (SGLang needed for the parse cases)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from plugin_support import serve, sglang_args

from sglang_fair.core.errors import ConfigError
from sglang_fair.sglang_plugin.config import FairConfig, build_config, config_from_env
from sglang_fair.sglang_plugin.launcher import check_combination


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--fair-quantum", "-5"), "--fair-quantum (Q^u) must be >= 0 (0: the policy's default), got -5.0"),
        (("--w-q", "-1"), "w_q must be >= 0"),
        (("--client-weights", "a=0"), "weight of 'a' must be > 0"),
        (("--client-keys", "/nonexistent/keys.txt"), "cannot read"),
    ],
)
def test_bad_project_flag_exits_2_before_sglang_starts(args: tuple[str, ...], message: str) -> None:
    done = serve(*args, timeout=60)
    assert done.returncode == 2
    assert message in done.stderr, done.stderr[-2000:]


def test_malformed_key_file_names_the_line(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("k1 alice 2\nk2 bob two\n")
    done = serve("--client-keys", str(keys), timeout=60)
    assert done.returncode == 2
    assert f"{keys}:2: weight 'two' is not a number" in done.stderr


def test_config_travels_through_the_environment(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("k1 alice 2\n")
    config = build_config({"fair_quantum": 512.0, "client_keys": str(keys), "client_weights": "bob=3"})
    again = config_from_env({"SGLANG_FAIR_CONFIG": config.to_env()})
    assert again == config
    assert again.cost().client_weights == {"bob": 3.0, "alice": 2.0}
    assert config_from_env({}) == FairConfig()


@pytest.mark.parametrize(
    ("config", "server", "message"),
    [
        ({"fair_quantum": 100.0}, sglang_args("lpm"), "--fair-quantum applies to --schedule-policy dlpm"),
        ({"fair_quantum": 100.0}, sglang_args("vtc"), "--fair-quantum applies to --schedule-policy dlpm"),
        ({"client_weights": "a=2"}, sglang_args("fcfs"), "client weights need"),
        ({"fair_client_bands": "a=batch"}, sglang_args("vtc"), "priority bands"),
        ({}, sglang_args("vtc", pp_size=2), "--pp-size > 1"),
        ({}, sglang_args("dlpm", lora_paths=["x"]), "--enable-lora"),
    ],
)
def test_conflicting_flags_are_refused(
    config: dict[str, object], server: SimpleNamespace, message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_combination(build_config(config), server)


def test_priority_scheduling_is_served_and_request_priority_needs_bands(tmp_path: Path) -> None:
    check_combination(build_config({}), sglang_args("dlpm", enable_priority_scheduling=True))
    (tmp_path / "t.toml").write_text('[tenants.a]\nkeys = ["k"]\nallow_request_priority = true\n')
    config = build_config({"client_keys": str(tmp_path / "t.toml")})
    check_combination(config, sglang_args("dlpm_light"))
    with pytest.raises(ConfigError, match="allow_request_priority"):
        check_combination(config, sglang_args("vtc"))


def test_token_budgets_need_a_policy_that_counts_tokens(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text('[tenants.a]\nkeys = ["k"]\ntokens_per_minute = 1000\n')
    config = build_config({"client_keys": str(tmp_path / "t.toml")})
    check_combination(config, sglang_args("dlpm_light"))
    with pytest.raises(ConfigError, match="tokens_per_minute budgets need"):
        check_combination(config, sglang_args("fcfs"))


def test_weight_conflict_between_flag_and_key_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("k1 alice 2\n")
    with pytest.raises(ConfigError, match=re.escape("conflicts with weight 2.0 in --client-keys")):
        build_config({"client_keys": str(keys), "client_weights": "alice=3"})


@pytest.mark.sglang
def test_unknown_policy_is_sglangs_usage_error(
        refused_after_parse: dict[str, subprocess.CompletedProcess[str]]) -> None:
    done = refused_after_parse["unknown policy"]
    assert done.returncode == 2
    assert "invalid choice: 'nope'" in done.stderr
    assert "'dlpm'" in done.stderr and "'vtc'" in done.stderr  # the plugin's names are offered


@pytest.mark.sglang
def test_conflicting_flag_exits_2_after_sglang_parses(
        refused_after_parse: dict[str, subprocess.CompletedProcess[str]]) -> None:
    done = refused_after_parse["conflicting flag"]
    assert done.returncode == 2
    assert "does not support --pp-size > 1" in done.stderr
