"""Bad input at the HTTP edge of the real CPU server, and through ``sglang-fair gateway`` in front of it.

One server with API keys (trusting the gateway's token): every case gets a 4xx with an error body, and
after each one the server still answers a good request. Then a gateway in front of it (the same key
file): each case of the table goes to the server and to the gateway, which answers the same status with
an OpenAI-style error body (the server's own body where the server decided), and the server keeps serving
through the gateway; the key, header, body-size and flooding cases, and generated bodies, get through the
gateway what ``serve`` gives. (One module, one server: the gateway's cases once had their own.)

The table of what each input gets is in docs/evidence/reliability.md.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bad_input_cases import (
    CASES,
    GOOD,
    KEYS,
    MAX_INFLIGHT,
    OPS,
    PATHS,
    SERVER_ARGS,
    TOKEN,
    A,
    bodies,
    error_message,
    raw,
    still_serving,
)
from fair_e2e_support import post

from sglang_fair.harness.gateway import running_gateway
from sglang_fair.harness.server import free_port, get_json, running_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-input")


@pytest.fixture(scope="module")
def trust(tmp: Path) -> tuple[str, ...]:
    """The flags the server and the gateway share: the key file and the gateway's token."""
    (tmp / "keys.txt").write_text("".join(f"{key} {client}\n" for client, key in KEYS.items()))
    (tmp / "token").write_text(TOKEN + "\n")
    return ("--client-keys", str(tmp / "keys.txt"), "--gateway-token-file", str(tmp / "token"))


@pytest.fixture(scope="module")
def url(tiny_model: Path, tmp: Path, trust: tuple[str, ...]) -> Iterator[str]:
    feedback = ("--feedback-port", str(free_port()))  # loopback: no CurveZMQ keys (docs/guides/gateway.md)
    with running_server(tiny_model, (*SERVER_ARGS, *trust, *feedback), tmp / "server.log") as base:
        yield base


@pytest.fixture(scope="module")
def urls(url: str, trust: tuple[str, ...], tmp: Path) -> Iterator[dict[str, str]]:
    """The server and a gateway in front of it (the same key file), for the cases through the gateway:
    docs/guides/gateway.md's gateway for one machine, without encryption keys."""
    with running_gateway([url], trust, tmp / "gateway.log") as gateway:
        yield {"server": url, "gateway": gateway, "log": str(tmp / "gateway.log")}


def test_the_gateway_for_one_machine_hears_the_server_without_keys(urls: dict[str, str]) -> None:
    """It started only once it heard every worker (``wait_first_beats``); its listener goes on hearing."""
    deadline = time.monotonic() + 10.0
    while (heard := get_json(urls["gateway"] + "/gateway/state")["feedback"])["heartbeats"] == 0:
        assert time.monotonic() < deadline, heard
        time.sleep(0.2)
    ready = [line for line in Path(urls["log"]).read_text().splitlines() if "gateway: ready on" in line]
    assert len(ready) == 1 and "1 server of" in ready[0] and "1 worker," in ready[0], ready




@pytest.mark.parametrize("case", list(CASES))
def test_bad_request_gets_4xx_with_an_error_body_and_the_server_keeps_serving(url: str, case: str) -> None:
    path, body, expected = CASES[case]
    status, data = raw(url, path, body, A)
    assert status == expected, data[:300]
    error_message(data)
    still_serving(url)


@pytest.mark.parametrize(("headers", "reason"), [({}, "missing API key"),
                                                 ({"Authorization": "Bearer nope"}, "unknown API key")])
def test_missing_or_unknown_key_gets_401(url: str, headers: dict[str, str], reason: str) -> None:
    chat = {"model": "default", "messages": [{"role": "user", "content": "a"}]}
    status, data = post(url, "/v1/chat/completions", chat, headers)
    assert status == 401 and error_message(data) == reason and json.loads(data)["type"] == "Unauthorized"
    still_serving(url)


def test_an_unknown_model_gets_404_and_the_listed_one_is_served(url: str) -> None:
    chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "a"}], "max_tokens": 2}
    status, data = post(url, "/v1/chat/completions", chat, A)
    listed = get_json(url + "/v1/models", headers=A)["data"][0]["id"]  # the served name: the model path
    assert status == 404 and json.loads(data) == {
        "object": "error", "message": f"The model `gpt-4o` does not exist. This server serves `{listed}`: "
        "send that, `default` or no `model` (started with --accept-any-model, it serves whatever name a "
        "request gives).", "type": "NotFoundError", "param": "model", "code": 404}, data[:300]
    assert post(url, "/v1/chat/completions", {**chat, "model": listed}, A)[0] == 200


def test_oversized_headers_are_refused(url: str) -> None:
    status, _ = raw(url, "/v1/completions", json.dumps(GOOD).encode(), {**A, "X-Big": "x" * 200_000})
    assert status in (0, 400, 413, 431)  # uvicorn refuses or drops the connection; never served
    still_serving(url)


def test_an_oversized_body_is_refused_or_served_and_the_server_lives(url: str) -> None:
    body = json.dumps({**GOOD, "prompt": "the " * (1 << 18)}).encode()  # 1 MiB, 256 Ki tokens
    status, data = raw(url, "/v1/completions", body, A)
    assert status in (400, 413), data[:300]
    still_serving(url)


def test_a_body_over_the_limit_gets_413_before_it_is_read(url: str) -> None:
    """--max-body-bytes (16 MiB by default): the declared length is enough, nothing is read."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Authorization: Bearer k-alice\r\nContent-Length: %d\r\n\r\n" % ((16 << 20) + 1))
        answer = b""
        while b"}" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    assert head.split(b" ")[1] == b"413", answer[:300]
    body = rest[rest.index(b"{"):rest.rindex(b"}") + 1]  # the body may come chunked
    assert json.loads(body)["type"] == "RequestTooLarge" and "--max-body-bytes" in error_message(body)
    still_serving(url)


def test_websocket_without_a_key_is_refused(url: str) -> None:
    """Without a websocket library uvicorn serves the upgrade as plain HTTP (401 from the identity
    middleware); with one, the middleware closes the handshake (403). Either way: refused."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        head = sock.recv(4096).split(b"\r\n", 1)[0]
    assert head.split(b" ")[1] in (b"401", b"403"), head


def test_client_listings_need_a_key(url: str) -> None:
    import urllib.error
    import urllib.request

    for path in ("/fairness", "/metrics"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url + path, timeout=10)
        assert err.value.code == 401
    still_serving(url)
    assert set(get_json(url + "/fairness", headers=A)["clients"]) == {"alice"}
    assert "alice" in get_json(url + "/fairness", headers=OPS)["clients"]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(url + "/metrics", headers=A), timeout=10)
    assert err.value.code == 403




@pytest.mark.parametrize("kind", list(PATHS))
def test_generated_requests_never_get_a_5xx_or_break_the_server(url: str, kind: str) -> None:
    from hypothesis import HealthCheck, given, settings

    path = PATHS[kind]
    seen: list[tuple[int, str]] = []

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(bodies(kind))
    def check(body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        status, answer = raw(url, path, data, A)
        seen.append((status, data.decode()[:200]))
        assert 200 <= status < 500, (status, body, answer[:300])

    check()
    still_serving(url)
    assert any(s == 200 for s, _ in seen) and any(400 <= s < 500 for s, _ in seen), seen  # both kinds ran


def test_a_flooding_client_gets_429_and_another_is_served(url: str) -> None:
    import concurrent.futures

    carol = {"Authorization": "Bearer k-carol"}
    long = {**GOOD, "max_tokens": 48, "ignore_eos": True}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        flood = [pool.submit(raw, url, "/v1/completions", json.dumps(long).encode(), carol) for _ in range(8)]
        status, _ = post(url, "/v1/completions", GOOD, A)  # alice, meanwhile
        statuses = [f.result()[0] for f in flood]
    assert status == 200
    assert statuses.count(200) >= MAX_INFLIGHT and statuses.count(429) >= 1, statuses
    assert set(statuses) <= {200, 429}, statuses


def test_streams_one_after_another_never_meet_the_inflight_limit(url: str) -> None:
    """SGLang holds a stream's handler 2 s after its last byte (an abort task): the slot is not."""
    body = json.dumps({**GOOD, "stream": True}).encode()
    answers = [raw(url, "/v1/completions", body, A) for _ in range(MAX_INFLIGHT + 2)]
    assert [s for s, _ in answers] == [200] * len(answers), answers
    assert all(d.rstrip().endswith(b"data: [DONE]") for _, d in answers), answers


def test_a_dropped_stream_frees_its_slot_and_is_charged_for_what_was_computed(url: str) -> None:
    import time

    dave = {"Authorization": "Bearer k-dave"}
    body = json.dumps({**GOOD, "max_tokens": 2000, "ignore_eos": True, "stream": True}).encode()
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", "/v1/completions", body=body, headers={"content-type": "application/json", **dave})
    resp = conn.getresponse()
    assert resp.status == 200
    for _ in range(5):
        resp.fp.readline()
    conn.sock.close()  # the client goes away mid-stream
    conn.close()
    deadline = time.monotonic() + 30
    while True:
        row = get_json(url + "/fairness", headers=OPS)["clients"].get("dave", {})
        if (row and row["running"] == 0 and row["waiting"] == 0) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert row["running"] == 0 and row["waiting"] == 0, row  # the slot is free
    assert 0 < row["output_tokens"] < 2000, row  # stopped early, and what was produced is charged
    extend = row["input_tokens"] - row["cached_tokens"]
    assert row["service"] == pytest.approx(1.0 * extend + 2.0 * row["output_tokens"]), row  # w_e, w_q
    still_serving(url)


# ---- the same through the gateway ---------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_bad_request_gets_what_serve_answers(urls: dict[str, str], case: str) -> None:
    path, body, expected = CASES[case]
    direct, direct_data = raw(urls["server"], path, body, A)
    status, data = raw(urls["gateway"], path, body, A)
    assert status == direct == expected, (status, direct, data[:300], direct_data[:300])
    assert error_message(data) == error_message(direct_data), (data[:300], direct_data[:300])
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
    test_oversized_headers_are_refused(urls["gateway"])
    test_a_body_over_the_limit_gets_413_before_it_is_read(urls["gateway"])


def test_a_flooding_client_gets_the_servers_429_with_retry_after(urls: dict[str, str]) -> None:
    import concurrent.futures

    erin = {"Authorization": "Bearer k-erin"}  # a client of its own: the server's /fairness counts it
    long = json.dumps({**GOOD, "max_tokens": 48, "ignore_eos": True}).encode()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        flood = [pool.submit(raw, urls["gateway"], "/v1/completions", long, erin) for _ in range(8)]
        still_serving(urls["gateway"])  # alice, meanwhile
        answers = [f.result() for f in flood]
    statuses = [s for s, _ in answers]
    assert statuses.count(200) >= MAX_INFLIGHT and statuses.count(429) >= 1, statuses
    assert set(statuses) <= {200, 429}, statuses
    assert all(error_message(d) for s, d in answers if s == 429)
    fairness = get_json(urls["server"] + "/fairness", headers=OPS)["clients"]
    assert fairness["erin"]["requests"] == statuses.count(200), fairness["erin"]  # charged to erin


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
