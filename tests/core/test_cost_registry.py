import pytest

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.routing import RouterConfig, make_routing_policy


def test_cost_is_weighted_extend_plus_output() -> None:
    cost = CostModel()
    assert cost.cost(extend_tokens=10, output_tokens=3) == 10 * 1 + 3 * 2
    assert CostModel(w_e=0.5, w_q=4).cost(4, 1) == 6
    assert CostModel(client_weights={"gold": 3}).weight("gold") == 3
    assert CostModel().weight("anyone") == 1


@pytest.mark.parametrize(
    "kwargs", [{"w_e": -1}, {"w_q": -0.1}, {"w_e": 0, "w_q": 0}, {"client_weights": {"a": 0}},
               {"client_weights": {"a": -2}}],
)
def test_bad_cost_is_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        CostModel(**kwargs)  # type: ignore[arg-type]


def test_weights_parse_from_flags_and_round_trip_through_json() -> None:
    from sglang_fair.core.cost import format_weights, parse_weights

    assert parse_weights("alice=2, bob=1.5,") == {"alice": 2.0, "bob": 1.5}
    odd = {"team,x=1": 3.0, "b": 0.5}
    assert parse_weights(format_weights(odd)) == odd
    bad_inputs = (("a", "expected CLIENT=WEIGHT"), ("a=x", "not a number"), ("a=0", "must be > 0"),
                  ('{"a": "x"}', "not a number"), ("{nope", "not a JSON object"), ("[1]", "CLIENT=WEIGHT"))
    for bad, message in bad_inputs:
        with pytest.raises(ConfigError, match=message):
            parse_weights(bad)


def test_negative_lengths_are_rejected() -> None:
    with pytest.raises(ConfigError, match="extend tokens"):
        CostModel().extend_cost(-1)
    with pytest.raises(ConfigError, match="output tokens"):
        CostModel().output_cost(-5)


def test_unknown_policy_lists_known_names() -> None:
    known = "dlpm, dlpm_light, fcfs, lpm, preble, vtc"
    with pytest.raises(ConfigError, match=rf"unknown admission policy 'lfu'; known: {known}"):
        make_admission_policy(AdmissionConfig(policy="lfu"))
    routers = ("cache_aware, client_rr, d2lpm, d2lpm_guarded, fair_cache_aware, pab, per_server, preble, "
               "round_robin, shortest_queue")
    with pytest.raises(ConfigError, match=rf"known: {routers}"):
        make_routing_policy(RouterConfig(policy="random"))


@pytest.mark.parametrize("quantum", [0, -1.0])
def test_quantum_must_be_positive(quantum: float) -> None:
    if quantum < 0:  # Q^u 0 means the policy's default (below)
        with pytest.raises(ConfigError, match="quantum"):
            AdmissionConfig(quantum=quantum)
    with pytest.raises(ConfigError, match="quantum"):
        RouterConfig(quantum=quantum)


def test_zero_quantum_is_the_policys_default() -> None:
    assert AdmissionConfig().policy == "dlpm_light"
    light = make_admission_policy(AdmissionConfig())
    assert light._quantum.timed and light._quantum.seconds == 0.25  # a quarter second of service
    assert make_admission_policy(AdmissionConfig("dlpm", 0)).quantum == 4096.0
    assert make_admission_policy(AdmissionConfig("dlpm", 512)).quantum == 512.0


def test_bad_router_config() -> None:
    with pytest.raises(ConfigError, match="num_workers"):
        RouterConfig(num_workers=0)
    with pytest.raises(ConfigError, match="cache_threshold"):
        RouterConfig(cache_threshold=1.5)
