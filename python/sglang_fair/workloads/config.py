"""Workload configuration (one frozen dataclass, validated once) and shared helpers."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fair.core.errors import require

WORKLOADS = ("tot", "judge", "qa", "multiturn", "arena", "trace", "mix", "sysprompt", "groups")
SCENARIOS = ("none", "s1", "s2")
SOURCES = ("mtbench", "mooncake", "vtc")
DEFAULT_DATA_DIR = str(Path(__file__).resolve().parents[1] / "data")  # shipped with the package (MANIFEST.md)


@dataclass(frozen=True)
class WorkloadConfig:
    """Which programs the clients send, and when."""

    workload: str = field(default="tot", metadata={"help": "workload", "choices": WORKLOADS})
    scenario: str = field(
        default="none", metadata={"help": "misbehaving client c0 ([1] Table 3)", "choices": SCENARIOS}
    )
    clients: int = field(default=4, metadata={"help": "number of clients (c0 misbehaves in s1/s2)"})
    rate: float = field(
        default=0.0, metadata={"help": "programs per second per client; 0 = the workload's default x dp"}
    )
    cv: float = field(default=1.0, metadata={"help": "coefficient of variation of Gamma inter-arrivals"})
    duration: float = field(default=60.0, metadata={"help": "seconds during which programs arrive"})
    seed: int = field(default=0, metadata={"help": "seed of every random choice"})
    trace_file: str = field(default="", metadata={"help": "CSV/JSONL trace for --workload trace"})
    source: str = field(
        default="mtbench", metadata={"help": "multiturn source", "choices": SOURCES}
    )
    branches: int = field(default=2, metadata={"help": "Tree-of-Thoughts branches (S1: c0 uses 2x)"})
    depth: int = field(default=4, metadata={"help": "Tree-of-Thoughts levels (SGLang's benchmark: 4)"})
    documents: int = field(default=200, metadata={
        "help": "qa: distinct documents, LooGLE lengths (200 x ~21K tokens: ~11 A100 KV pools)"})
    dimensions: int = field(default=2, metadata={"help": "LLM-as-a-Judge dimensions (S1: c0 uses 8x)"})
    time_scale: float = field(default=1.0, metadata={
        "help": "trace replay and arena: divide arrival times by this (arena: 2.5x this conversations/s)"})
    data_dir: str = field(default=DEFAULT_DATA_DIR, metadata={
        "help": "the data sets' folder (default: the ones shipped with the package)"})
    synthetic_data: bool = field(default=False, metadata={
        "help": "seeded synthetic texts and lengths instead of the data sets (fast, for tests; "
                "figures differ from the published ones)"})

    def __post_init__(self) -> None:
        checks = (("workload", self.workload, WORKLOADS), ("scenario", self.scenario, SCENARIOS),
                  ("multiturn source", self.source, SOURCES))
        for name, value, known in checks:
            require(value in known, f"unknown {name} {value!r}; known: {', '.join(known)}")
        require(self.clients >= 1, f"clients must be >= 1, got {self.clients}")
        require(self.rate >= 0, f"rate must be >= 0, got {self.rate}")
        require(self.cv > 0, f"cv must be > 0, got {self.cv}")
        require(self.duration > 0, f"duration must be > 0, got {self.duration}")
        require(self.branches >= 1, f"branches must be >= 1, got {self.branches}")
        require(self.depth >= 1, f"depth must be >= 1, got {self.depth}")
        require(self.documents >= 1, f"documents must be >= 1, got {self.documents}")
        require(self.dimensions >= 1, f"dimensions must be >= 1, got {self.dimensions}")
        require(self.time_scale > 0, f"time_scale must be > 0, got {self.time_scale}")
        require(self.workload != "trace" or bool(self.trace_file), "--workload trace needs --trace-file")
        require(
            self.scenario == "none" or self.clients >= 2,
            f"scenario {self.scenario} needs at least 2 clients (c0 misbehaves)",
        )
        require(self.workload != "arena" or self.clients >= 4,
                "--workload arena needs at least 4 clients ([1] Fig. 8: c2 and c3 send more)")
        require(self.workload != "mix" or self.scenario == "none",
                "--workload mix has no misbehaving client ([1] Fig. 12): leave --scenario at none")
        require(self.workload != "arena" or self.scenario == "none",
                "--workload arena has its own misbehaving clients (c2, c3): leave --scenario at none")

    @property
    def data(self) -> Path:
        return Path(self.data_dir)

    def client_names(self) -> list[str]:
        return [f"c{i}" for i in range(self.clients)]

    def misbehaving(self, client: str) -> bool:
        return self.scenario != "none" and client == "c0"


def uniform_len(rng: random.Random, mean: int, spread: float = 0.5) -> int:
    """An integer length uniform in mean * [1 - spread, 1 + spread], at least 1."""
    return max(1, round(rng.uniform(mean * (1 - spread), mean * (1 + spread))))


def data_file(config: WorkloadConfig, relative: str) -> Path:
    """The data set ``relative`` under ``config.data_dir``; a ConfigError naming it when absent."""
    path = config.data / relative
    require(path.is_file(), f"data set {relative} not found in {config.data_dir} (--data-dir): the package "
            f"ships it in {DEFAULT_DATA_DIR}; --synthetic-data runs without data sets")
    return path
