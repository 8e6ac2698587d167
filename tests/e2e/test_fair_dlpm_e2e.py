"""DLPM in the real SGLang server vs SGLang's own LPM: the light client, the bound, the cache.

One LPM server and one DLPM server (API keys, metrics on) run the same workload (see
``sglang_fair.harness.scenario``) for the same window, on the same machine, one after the other. The
DLPM server's clients come from a tenant file, where one more tenant has a budget of two requests a
minute.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fair_e2e_support import (
    MAX_RUNNING,
    WINDOW_S,
    post,
    requests_eventually,
    requests_of,
    run_policy,
    wait_idle,
)

from sglang_fair.harness.scenario import Summary, Workload, run_scenario
from sglang_fair.harness.server import get_json, running_server

pytestmark = pytest.mark.e2e

QUANTUM = 256.0
KEYS = {"heavy": "key-heavy", "medium": "key-medium", "light": "key-light"}
ADMIN = {"Authorization": "Bearer key-ops"}  # /fairness and /metrics need a --fairness-admins key
W_E, W_Q = 1.0, 2.0
SERVED: dict[str, Any] = {}  # the DLPM server's process and tenant file


@pytest.fixture(scope="module")
def lpm(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Summary:
    return run_policy(tiny_model, tmp_path_factory.mktemp("lpm") / "server.log", "lpm")


@pytest.fixture(scope="module")
def dlpm_server(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory, lpm: Summary
) -> Iterator[tuple[str, Summary]]:
    tmp = tmp_path_factory.mktemp("dlpm")
    keys = tmp / "tenants.toml"
    keys.write_text("".join(f'[tenants.{client}]\nkeys = ["{key}"]\n' for client, key in KEYS.items())
                    + '[tenants.ops]\nkeys = ["key-ops"]\n[tenants.budgeted]\nkeys = ["key-budgeted"]\n'
                    'requests_per_minute = 2\ntokens_per_minute = 100000\n')
    args = ("--schedule-policy", "dlpm", *MAX_RUNNING, "--fair-quantum", str(QUANTUM),
            "--client-keys", str(keys), "--fairness-admins", "ops", "--enable-metrics")
    SERVED["keys"] = keys
    with running_server(tiny_model, args, tmp / "server.log",
                        started=lambda proc: SERVED.__setitem__("proc", proc)) as url:
        summary = run_scenario(url, Workload(keys=KEYS, admin_key="key-ops"), WINDOW_S)
        print("\nlpm ", json.dumps(lpm.row()), "\ndlpm", json.dumps(summary.row()))
        wait_idle(url, headers=ADMIN)
        yield url, summary


def auth(client: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[client]}"}


def test_light_client_p99_at_most_half_of_lpm(lpm: Summary, dlpm_server: tuple[str, Summary]) -> None:
    _, dlpm = dlpm_server
    assert dlpm.done["light"] >= 2, dlpm.row()
    assert dlpm.light_p99 <= 0.5 * lpm.light_p99, (dlpm.row(), lpm.row())


def test_backlogged_service_difference_within_dlpm_bound(dlpm_server: tuple[str, Summary]) -> None:
    _, dlpm = dlpm_server
    delta = dlpm.service_delta
    assert delta["heavy"] > 0 and delta["medium"] > 0, delta
    longest_input = Workload().prefix_words + Workload().question_words + 64  # tokenizer slack
    bound = 2 * (W_E * longest_input + W_Q * Workload().max_tokens + QUANTUM)  # [1] Thm 4.1
    assert abs(delta["heavy"] - delta["medium"]) <= bound, (delta, bound)


def test_cache_hit_rate_within_ten_percent_of_lpm(lpm: Summary, dlpm_server: tuple[str, Summary]) -> None:
    _, dlpm = dlpm_server
    assert dlpm.hit_rate >= 0.9 * lpm.hit_rate, (dlpm.hit_rate, lpm.hit_rate)


def test_a_tenant_over_its_budget_gets_429_and_sees_what_it_used(dlpm_server: tuple[str, Summary]) -> None:
    url, _ = dlpm_server
    body = {"text": "the budget", "sampling_params": {"max_new_tokens": 4}}
    budgeted = {"Authorization": "Bearer key-budgeted"}
    assert [post(url, "/generate", body, budgeted)[0] for _ in range(2)] == [200, 200]
    status, answer = post(url, "/generate", body, budgeted)
    assert status == 429 and b"2 requests per minute" in answer, answer
    used = get_json(url + "/fairness", headers=budgeted)["budgets"]
    assert list(used) == ["budgeted"]  # its own row only
    assert used["budgeted"]["requests_used"] == 2 and used["budgeted"]["requests_left"] == 0
    deadline = time.monotonic() + 10  # its tokens, as the scheduler publishes them (every half second)
    while used["budgeted"]["tokens_used"] == 0 and time.monotonic() < deadline:
        time.sleep(0.3)
        used = get_json(url + "/fairness", headers=budgeted)["budgets"]
    assert 8 <= used["budgeted"]["tokens_used"] < 1000, used
    assert post(url, "/generate", body, auth("light"))[0] == 200  # a tenant without a budget


def test_a_key_added_to_the_file_is_served_after_sighup_without_a_restart(
        dlpm_server: tuple[str, Summary]) -> None:
    url, _ = dlpm_server
    late = {"Authorization": "Bearer key-late"}
    body = {"text": "the reload", "sampling_params": {"max_new_tokens": 4}}
    assert post(url, "/generate", body, late)[0] == 401
    held = {"text": "the queue", "sampling_params": {"max_new_tokens": 48, "ignore_eos": True}}
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(post, url, "/generate", held, auth("light"))
        keys: Path = SERVED["keys"]
        keys.write_text(keys.read_text() + '[tenants.late]\nkeys = ["key-late"]\nweight = 3\n')
        os.kill(SERVED["proc"].pid, signal.SIGHUP)
        deadline, status = time.monotonic() + 10, 401
        while status == 401 and time.monotonic() < deadline:
            time.sleep(0.1)
            status = post(url, "/generate", body, late)[0]
        assert status == 200
        assert in_flight.result()[0] == 200  # admitted before the reload, served through it
    assert SERVED["proc"].poll() is None
    deadline, rows = time.monotonic() + 10, {}
    while rows.get("late", {}).get("weight") != 3.0 and time.monotonic() < deadline:
        time.sleep(0.6)  # the scheduler publishes every half second
        rows = get_json(url + "/fairness", headers=ADMIN)["clients"]
    assert rows["late"]["weight"] == 3.0, rows.get("late")


def test_missing_or_unknown_key_gets_401(dlpm_server: tuple[str, Summary]) -> None:
    url, _ = dlpm_server
    body = {"text": "the queue", "sampling_params": {"max_new_tokens": 2}}
    assert post(url, "/generate", body)[0] == 401
    assert post(url, "/generate", body, {"Authorization": "Bearer nope", "X-Client-Id": "light"})[0] == 401
    assert post(url, "/v1/completions", {"model": "default", "prompt": "a", "user": "light"})[0] == 401


def test_header_cannot_override_the_key(dlpm_server: tuple[str, Summary]) -> None:
    url, _ = dlpm_server
    light, heavy = requests_of(url, "light", auth("light")), requests_of(url, "heavy", ADMIN)
    body = {"text": "the queue", "sampling_params": {"max_new_tokens": 2}, "routing_key": "heavy"}
    spoof = {**auth("light"), "X-Client-Id": "heavy", "x-smg-routing-key": "heavy"}
    status, _ = post(url, "/generate", body, spoof)
    assert status == 200
    assert requests_eventually(url, "light", light + 1, headers=auth("light")) == light + 1
    assert requests_of(url, "heavy", ADMIN) == heavy
    assert set(get_json(url + "/fairness", headers=auth("light"))["clients"]) <= {"light"}  # own row only


def test_openai_endpoints_carry_the_client(dlpm_server: tuple[str, Summary]) -> None:
    url, _ = dlpm_server
    before = requests_of(url, "medium", ADMIN)
    chat = {"model": "default", "messages": [{"role": "user", "content": "the queue"}], "max_tokens": 3}
    comp = {"model": "default", "prompt": "the fair share", "max_tokens": 3}
    for path, body in (("/v1/chat/completions", chat), ("/v1/completions", comp)):
        for stream in (False, True):
            status, data = post(url, path, {**body, "stream": stream, "user": "light"}, auth("medium"))
            assert status == 200, data[:300]
            assert (b"data: [DONE]" in data) is stream
    assert requests_eventually(url, "medium", before + 4, headers=ADMIN) == before + 4


def test_oversized_prompt_gets_sglang_400_and_server_lives(dlpm_server: tuple[str, Summary]) -> None:
    url, _ = dlpm_server
    huge = {"text": "the " * 20_000, "sampling_params": {"max_new_tokens": 2}}
    status, data = post(url, "/generate", huge, auth("light"))
    assert status == 400, data[:300]
    ok = {"text": "the queue", "sampling_params": {"max_new_tokens": 2}}
    assert post(url, "/generate", ok, auth("light"))[0] == 200


def test_prometheus_has_per_client_figures(dlpm_server: tuple[str, Summary]) -> None:
    import urllib.request

    url, _ = dlpm_server
    with urllib.request.urlopen(urllib.request.Request(url + "/metrics", headers=ADMIN), timeout=10) as resp:
        text = resp.read().decode()
    for figure in ("service", "counter", "waiting", "running", "perceived_service"):
        assert f'sglang_fair:{figure}{{client="heavy"' in text, figure
    assert 'sglang_fair_tenant_service{tenant="heavy"}' in text  # the bounded series (top K by service)
