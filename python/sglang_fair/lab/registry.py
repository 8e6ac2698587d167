"""The labs by name: which module each runs, its group and what it measures, in one table.

A lab's module has ``main()``, which reads its flags from ``sys.argv`` (argparse); :func:`run` sets
``sys.argv`` to ``["sglang-fair lab NAME", *args]`` for the call, so the lab's ``--help`` names it.
Standard library only: the table imports no lab until one is run.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

GROUPS = ("benchmarks", "comparisons", "simulator studies", "probes and checks", "reports and docs tools")


@dataclass(frozen=True)
class Lab:
    name: str
    module: str  # its main() is the lab
    group: str
    summary: str


def _labs(group: str, *entries: tuple[str, str, str]) -> tuple[Lab, ...]:
    return tuple(Lab(name, module, group, summary) for name, module, summary in entries)


_LAB = "sglang_fair.lab."
_EXP = "sglang_fair.experiments."
LABS: tuple[Lab, ...] = (
    *_labs(
        "benchmarks",
        ("gateway-speed", _LAB + "gateway_speed",
         "one gateway process's throughput, added latency and CPU profile (stub servers)"),
        ("gateway-latency", _LAB + "gateway_latency",
         "the latency the gateway adds in front of a CPU server: p50/p99 direct vs through it"),
        ("replicas-speed", _LAB + "replicas_speed",
         "what sharing costs gateway replicas: bytes and time per dispatch, link delay"),
        ("plugin-speed", _LAB + "plugin_speed",
         "the SGLang plugin's scheduler overhead per step; CPU throughput lpm vs dlpm"),
        ("cpu-steps", _LAB + "cpu_steps",
         "a running server's step times over a grid of batch shapes (for sim/fit.py)"),
        ("gpu-steps", _LAB + "gpu_steps",
         "Llama-shaped step times on a GPU in plain PyTorch (for sim/fit.py: the *-measured presets)"),
        ("soak", _LAB + "soak",
         "mixed clients for minutes against one CPU server; memory of every process"),
        ("cluster-soak", _LAB + "cluster_soak",
         "two CPU servers and two gateways at a fraction of capacity, a row a minute"),
        ("chaos", _LAB + "chaos",
         "faults injected in turn into two CPU servers and two gateways under keyed traffic"),
    ),
    *_labs(
        "comparisons",
        ("gateway-compare", _LAB + "gateway_compare",
         "the gateway's default policy against round robin over two CPU servers"),
        ("replicas-compare", _LAB + "replicas_compare",
         "one gateway, two replicas sharing what they route, two that do not"),
        ("dp-compare", _LAB + "dp_compare",
         "the default fair pair against SGLang's own data-parallel methods on the CPU server"),
        ("fidelity", _LAB + "fidelity",
         "the simulator against the real CPU engine: one workload in both, per policy"),
        ("trace-weighted-dp", _LAB + "trace_weighted_dp",
         "the weighted 4:1 pair on the CPU engine, each scheduler's view sampled every second"),
        ("bands-live", _LAB + "bands_live",
         "priority bands and their reserve on the CPU engine: an interactive client beside a batch flood"),
    ),
    *_labs(
        "simulator studies",
        ("paper", _EXP + "paper", "the evaluation of the DLPM / D²LPM paper, reproduced in the simulator"),
        ("frontier", _EXP + "frontier",
         "every routing and admission pair side by side at every operating point"),
        ("herding", _EXP + "herding", "does d2lpm_guarded remove D²LPM's herding?"),
        ("bands", _EXP + "bands",
         "priority bands: an interactive tenant's P99 under a saturating batch tenant"),
        ("goodput", _EXP + "goodput",
         "goodput against load for the batch-formation policies, on the Azure or Mooncake trace"),
        ("light-client", _EXP + "light_client",
         "a light client beside a flood under each batch-formation and admission policy"),
        ("quantum-sweep", _EXP + "quantum_sweep",
         "which Q^u protects a light client: DLPM and dlpm_light over a Q^u sweep"),
        ("router-quantum-sweep", _EXP + "router_quantum_sweep",
         "which Q^w: D²LPM over a router-quantum sweep on two workers, beside the baselines"),
    ),
    *_labs(
        "probes and checks",
        ("docker-probe", _LAB + "docker_probe",
         "a running server checked as a user of the compose cpu profile (stdlib only)"),
        ("fleet-probe", _LAB + "fleet_probe",
         "the compose fleet-cpu profile checked as a user and operator (stdlib only)"),
        ("monitoring-probe", _LAB + "monitoring_probe",
         "the monitoring profile and load balancer checked by an operator (stdlib only)"),
        ("envoy-check", _LAB + "envoy_check",
         "real SGLang behind a real Envoy and the endpoint picker, on CPU"),
        ("sim-golden", _LAB + "sim_golden",
         "the simulator's golden runs: save a baseline, then check nothing changed"),
    ),
    *_labs(
        "reports and docs tools",
        ("fair-router", _EXP + "fair_router",
         "docs/design/fair_router.md: the default pair against the others, from the runs"),
        ("overlay", _LAB + "overlay", "the service over time of several runs' JSON in one plot"),
        ("page-shot", _LAB + "page_shot",
         "the fairness page under a flood, shot by headless Chromium (README's picture)"),
        ("sync-docs", _LAB + "sync_docs", "the docs' generated blocks rewritten from the code (or --check)"),
        ("epp-descriptors", _LAB + "epp_descriptors",
         "the endpoint picker's descriptor set built from the vendored protos (grpcio-tools)"),
        ("crd-schema", _LAB + "crd_schema",
         "one version's OpenAPI schema of a CRD (tests/deploy/crd_schemas/)"),
    ),
)
BY_NAME = {lab.name: lab for lab in LABS}


class UnknownLab(LookupError):
    """No lab of that name."""


def listing() -> str:
    """Every lab with its summary, grouped."""
    width = max(len(lab.name) for lab in LABS)
    lines = ["usage: sglang-fair lab NAME [ARGS...]   (sglang-fair lab NAME --help: the lab's flags)"]
    for group in GROUPS:
        lines += ["", f"{group}:"]
        lines += [f"  {lab.name:<{width}}  {lab.summary}" for lab in LABS if lab.group == group]
    return "\n".join(lines)


def run(name: str, args: Sequence[str]) -> int:
    """Run lab NAME with ARGS as its command line; its exit code (``SystemExit`` passes through)."""
    lab = BY_NAME.get(name)
    if lab is None:
        raise UnknownLab(name)
    module = importlib.import_module(lab.module)
    saved = sys.argv
    sys.argv = [f"sglang-fair lab {name}", *args]
    try:
        return int(module.main() or 0)
    finally:
        sys.argv = saved


def main(argv: Sequence[str] | None = None) -> int:
    """``[NAME [ARGS...]]``: no name, ``--list`` or ``--help`` prints the list; an unknown name exits 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("--list", "-h", "--help"):
        print(listing())
        return 0
    try:
        return run(argv[0], argv[1:])
    except UnknownLab:
        print(f"sglang-fair lab: error: no lab named {argv[0]!r}\n\n{listing()}", file=sys.stderr)
        return 2
