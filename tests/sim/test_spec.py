"""The run spec: each setting held once, checked once, and the simulator built from it alone."""

from __future__ import annotations

import pytest

from sglang_fair.admission import AdmissionConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig

WL = WorkloadConfig(workload="tot", clients=2, rate=0.3, duration=4, depth=2, synthetic_data=True)


def test_the_policies_get_the_specs_cost_and_worker_count() -> None:
    cost = CostModel(w_q=3.0)
    spec = RunSpec(WL, ClusterSimConfig(dp=3), admission=AdmissionConfig(policy="vtc"),
                   routing=RouterConfig(policy="d2lpm"), cost=cost)
    assert spec.admission.cost == cost and spec.routing.cost == cost
    assert spec.routing.num_workers == 3
    assert spec.pair == "d2lpm:vtc"
    assert "cost" not in spec.to_dict()["admission"] and spec.to_dict()["cost"]["w_q"] == 3.0


def test_a_config_naming_other_values_is_refused_not_replaced() -> None:
    with pytest.raises(ConfigError, match="cost model"):
        RunSpec(WL, admission=AdmissionConfig(cost=CostModel(w_q=3.0)))
    with pytest.raises(ConfigError, match="num_workers"):
        RunSpec(WL, ClusterSimConfig(dp=2), routing=RouterConfig(num_workers=4))


def test_the_run_ends_at_max_time_else_twenty_times_the_arrivals() -> None:
    assert RunSpec(WL).max_time([]) == 80.0
    assert RunSpec(WL, ClusterSimConfig(max_time=5.0)).max_time([]) == 5.0
    assert RunSpec().max_time([]) == 20.0
    with pytest.raises(ConfigError, match="programs given"):
        RunSpec().programs()


def test_the_simulator_builds_the_workload_of_its_spec() -> None:
    spec = RunSpec(WL, ClusterSimConfig(dp=2), admission=AdmissionConfig(policy="lpm"),
                   routing=RouterConfig(policy="round_robin"))
    sim = Simulator(spec)
    assert len(sim.programs) == len(spec.programs()) > 0
    assert sim.max_time == 80.0
    assert all(r.finished >= 0 for r in sim.run().requests)
