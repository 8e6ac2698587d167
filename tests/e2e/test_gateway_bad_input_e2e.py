"""The bad-input and identity cases of ``test_bad_input_e2e.py`` through ``sglang-fair gateway``.

One CPU server (the same flags and key file as that module's, trusting the gateway's token) with a
gateway in front of it (the same key file). Each case of the shared table goes to the server and to
the gateway: the gateway answers the same status with an OpenAI-style error body (the server's own
body where the server decided), and the server keeps serving through the gateway. The key, header,
body-size and flooding cases, and generated bodies, get through the gateway what ``serve`` gives.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import test_bad_input_e2e as serve_cases
from test_bad_input_e2e import CASES, GOOD, KEYS, MAX_INFLIGHT, SERVER_ARGS, bodies, error_message, raw

from sglang_fair.harness.gateway import running_gateway
from sglang_fair.harness.server import get_json, running_server

pytestmark = pytest.mark.e2e
A = {"Authorization": "Bearer k-alice"}
TOKEN = "e2e-gateway-bad-input-token-0123456789"
GATEWAY_DECIDES = {"malformed JSON (chat)", "malformed JSON (generate)", "not JSON"}  # before any server


@pytest.fixture(scope="module")
def urls(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    tmp = tmp_path_factory.mktemp("gateway-bad-input")
    (tmp / "keys.txt").write_text("".join(f"{key} {client}\n" for client, key in KEYS.items()))
    (tmp / "token").write_text(TOKEN + "\n")
    shared = ("--client-keys", str(tmp / "keys.txt"), "--gateway-token-file", str(tmp / "token"))
    with ExitStack() as stack:
        server = stack.enter_context(running_server(
            tiny_model, (*SERVER_ARGS, *shared), tmp / "server.log"))
        gateway = stack.enter_context(running_gateway([server], shared, tmp / "gateway.log"))
        yield {"server": server, "gateway": gateway}


def still_serving(url: str) -> None:
    status, data = raw(url, "/v1/completions", json.dumps(GOOD).encode(), A)
    assert status == 200, data[:300]


@pytest.mark.parametrize("case", list(CASES))
def test_bad_request_gets_what_serve_answers(urls: dict[str, str], case: str) -> None:
    path, body, expected = CASES[case]
    direct, direct_data = raw(urls["server"], path, body, A)
    status, data = raw(urls["gateway"], path, body, A)
    assert status == direct == expected, (status, direct, data[:300], direct_data[:300])
    message = error_message(data)
    if case not in GATEWAY_DECIDES:
        assert message == error_message(direct_data), (data[:300], direct_data[:300])
    still_serving(urls["gateway"])


@pytest.mark.parametrize(("headers", "reason"), [({}, "missing API key"),
                                                 ({"Authorization": "Bearer nope"}, "unknown API key")])
def test_missing_or_unknown_key_gets_the_same_401(urls: dict[str, str], headers: dict[str, str],
                                                 reason: str) -> None:
    chat = json.dumps({"model": "default", "messages": [{"role": "user", "content": "a"}]}).encode()
    for url in (urls["server"], urls["gateway"]):
        status, data = raw(url, "/v1/chat/completions", chat, headers)
        assert status == 401 and error_message(data) == reason and json.loads(data)["type"] == "Unauthorized"


def test_a_1_mib_prompt_gets_the_servers_400(urls: dict[str, str]) -> None:
    """Under the gateway's --max-body-bytes: it reads and tokenizes the prompt, and the server refuses
    it as over the context."""
    body = json.dumps({**GOOD, "prompt": "the " * (1 << 18)}).encode()
    status, data = raw(urls["gateway"], "/v1/completions", body, A)
    assert status == 400 and "context" in error_message(data), data[:300]
    still_serving(urls["gateway"])


def test_oversized_headers_and_a_declared_body_over_the_limit_are_refused_as_by_serve(
        urls: dict[str, str]) -> None:
    serve_cases.test_oversized_headers_are_refused(urls["gateway"])
    serve_cases.test_a_body_over_the_limit_gets_413_before_it_is_read(urls["gateway"])


def test_a_flooding_client_gets_the_servers_429_with_retry_after(urls: dict[str, str]) -> None:
    import concurrent.futures

    carol = {"Authorization": "Bearer k-carol"}
    long = json.dumps({**GOOD, "max_tokens": 48, "ignore_eos": True}).encode()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        flood = [pool.submit(raw, urls["gateway"], "/v1/completions", long, carol) for _ in range(8)]
        still_serving(urls["gateway"])  # alice, meanwhile
        answers = [f.result() for f in flood]
    statuses = [s for s, _ in answers]
    assert statuses.count(200) >= MAX_INFLIGHT and statuses.count(429) >= 1, statuses
    assert set(statuses) <= {200, 429}, statuses
    assert all(error_message(d) for s, d in answers if s == 429)
    fairness = get_json(urls["server"] + "/fairness", headers={"Authorization": "Bearer k-ops"})["clients"]
    assert fairness["carol"]["requests"] == statuses.count(200), fairness["carol"]  # charged to carol


@pytest.mark.parametrize("kind", ["chat", "generate"])
def test_generated_requests_never_get_a_5xx_through_the_gateway(urls: dict[str, str], kind: str) -> None:
    from hypothesis import HealthCheck, given, settings

    path = {"chat": "/v1/chat/completions", "generate": "/generate"}[kind]
    seen: list[int] = []

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(bodies(kind))
    def check(body: dict[str, Any]) -> None:
        status, answer = raw(urls["gateway"], path, json.dumps(body).encode(), A)
        seen.append(status)
        assert 200 <= status < 500, (status, body, answer[:300])

    check()
    still_serving(urls["gateway"])
    assert 200 in seen and any(400 <= s < 500 for s in seen), seen
