"""One simulated run's specification: every setting the simulator reads, held once and validated once.

The routing policy's name is ``routing.policy``, the admission policy's ``admission.policy``, the
worker count ``cluster.dp`` and the cost model ``cost``. The policies' own configs carry a copy of
the cost model and of the worker count (they are shared with the serving path); :class:`RunSpec`
fills those copies in from its own fields and refuses a config that names other values, so nothing
given is silently replaced.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.batching import BatchingConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import require
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.workloads import Program, WorkloadConfig, make_workload


@dataclass(frozen=True)
class RunSpec:
    """Workload, cluster, engine, policies and metrics options of one run.

    ``workload`` builds the programs (:meth:`programs`) unless the caller brings its own; its
    ``duration`` also sets the default end of the run (20x the arrivals). With ``workload=None``
    the programs must be given, and the run ends at 20x the last arrival unless ``cluster.max_time``
    says otherwise. ``slo`` records token times for the SLO summary (``Simulator.slo``).
    """

    workload: WorkloadConfig | None = None
    cluster: ClusterSimConfig = field(default_factory=ClusterSimConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    routing: RouterConfig = field(default_factory=RouterConfig)
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    cost: CostModel = field(default_factory=CostModel)
    slo: bool = False

    def __post_init__(self) -> None:
        default = CostModel()
        for name, config in (("admission", self.admission), ("routing", self.routing)):
            require(config.cost in (default, self.cost),
                    f"the {name} config names another cost model than the run's: set RunSpec.cost")
        require(self.routing.num_workers in (1, self.cluster.dp),
                f"routing.num_workers {self.routing.num_workers} is not the cluster's dp {self.cluster.dp}")
        object.__setattr__(self, "admission", replace(self.admission, cost=self.cost))
        routing = replace(self.routing, cost=self.cost, num_workers=self.cluster.dp)
        object.__setattr__(self, "routing", routing)

    @property
    def pair(self) -> str:
        """``router:policy``, the run's name in tables."""
        return f"{self.routing.policy}:{self.admission.policy}"

    def programs(self) -> list[Program]:
        """The programs of ``workload`` for this cluster."""
        require(self.workload is not None, "a RunSpec without a workload needs its programs given")
        assert self.workload is not None
        return make_workload(self.workload, self.cluster.dp)

    def max_time(self, programs: list[Program]) -> float:
        """Where the run stops: ``cluster.max_time``, else 20x the arrivals' span."""
        if self.cluster.max_time:
            return self.cluster.max_time
        if self.workload is not None:
            return 20 * self.workload.duration
        return 20 * max(max((p.arrival for p in programs), default=0.0), 1.0)

    def with_pair(self, router: str, policy: str) -> RunSpec:
        """This spec with another routing and admission policy (their settings kept)."""
        return replace(self, routing=replace(self.routing, policy=router),
                       admission=replace(self.admission, policy=policy))

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data, the cost model once (at ``cost``)."""
        out = asdict(self)
        for name in ("admission", "routing"):
            del out[name]["cost"]
        return out
