"""Configuration of the full simulator: one frozen dataclass per component, validated once."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sglang_fair.core.errors import require
from sglang_fair.sim.steptime import PRESET_NAMES, sglang_chunk_size, sglang_max_running


@dataclass(frozen=True)
class EngineConfig:
    """One worker: SGLang's scheduler loop limits and the step-time preset (0 = SGLang 0.5.23's default;
    :func:`resolve_engine` fills them in)."""

    preset: str = field(
        default="a100-llama8b", metadata={"help": "step-time preset", "choices": PRESET_NAMES})
    kv_tokens: int = field(default=0, metadata={"help": "KV pool tokens per worker; 0 = the preset's"})
    chunk_size: int = field(default=0, metadata={
        "help": "chunked prefill size (tokens per prefill step); 0 = SGLang's default for the device"})
    max_running: int = field(default=0, metadata={
        "help": "cap on running requests per worker; 0 = SGLang's default from the KV pool"})
    new_token_ratio: float = field(default=0.7, metadata={
        "help": "initial share of running requests' remaining output reserved at admission "
                "(SGLANG_INIT_NEW_TOKEN_RATIO); decays per decode step, reset when idle"})
    min_ratio_factor: float = field(default=0.14, metadata={
        "help": "the ratio decays to new_token_ratio x this (SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR)"})
    ratio_decay_steps: int = field(default=600, metadata={
        "help": "decode steps to decay to the minimum (SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS)"})
    ignore_eos: bool = field(default=False, metadata={
        "help": "requests sent with ignore_eos: SGLang then reserves all their remaining output"})
    retract_steps: int = field(default=1, metadata={
        "help": "decode steps of room retraction makes (SGLang 0.5.23: 1, check_decode_mem)"})
    skip_misfits: bool = field(default=False, metadata={
        "help": "admission goes on past a request that does not fit (the papers' model); off: as SGLang's "
                "scheduler, it stops at the first one (add_one_req's NO_TOKEN/OTHER end the step)"})
    mixed_chunk: bool = field(default=False, metadata={
        "help": "running requests decode inside prefill steps (SGLang's --enable-mixed-chunk); the "
                "chunk budget shrinks by the running batch"})
    retry_every: int = field(default=4, metadata={
        "help": "simulator: a failed admission is retried after this many steps even if nothing "
                "changed (fairness counters move as tokens are charged); 1 = at every step"})
    max_decode_steps: int = field(default=64, metadata={
        "help": "simulator: decode steps simulated as one event when nothing else can happen meanwhile"})
    step_model: str = field(
        default="", metadata={"help": "JSON of fitted coefficients (python -m sglang_fair.sim.fit)"})

    def __post_init__(self) -> None:
        require(self.preset in PRESET_NAMES,
                f"unknown preset {self.preset!r}; known: {', '.join(PRESET_NAMES)}")
        require(self.kv_tokens >= 0, f"kv_tokens must be >= 0, got {self.kv_tokens}")
        require(self.chunk_size >= 0, f"chunk_size must be >= 0, got {self.chunk_size}")
        require(self.max_running >= 0, f"max_running must be >= 0, got {self.max_running}")
        require(0 <= self.new_token_ratio <= 1,
                f"new_token_ratio must be in [0, 1], got {self.new_token_ratio}")
        require(0 <= self.min_ratio_factor <= 1,
                f"min_ratio_factor must be in [0, 1], got {self.min_ratio_factor}")
        require(self.ratio_decay_steps >= 1, f"ratio_decay_steps must be >= 1, got {self.ratio_decay_steps}")
        require(self.retract_steps >= 1, f"retract_steps must be >= 1, got {self.retract_steps}")
        require(self.retry_every >= 1, f"retry_every must be >= 1, got {self.retry_every}")
        require(self.max_decode_steps >= 1, f"max_decode_steps must be >= 1, got {self.max_decode_steps}")


def resolve_engine(engine: EngineConfig, kv_tokens: int) -> EngineConfig:
    """``engine`` with SGLang's defaults in place of its zeros, for a pool of ``kv_tokens``."""
    return replace(
        engine,
        kv_tokens=kv_tokens,
        chunk_size=engine.chunk_size or sglang_chunk_size(engine.preset),
        max_running=engine.max_running or sglang_max_running(engine.preset, kv_tokens),
    )


@dataclass(frozen=True)
class ClusterSimConfig:
    """The cluster: workers, the router's feedback delay and the run's end (the policies are the
    run spec's ``routing`` and ``admission``)."""

    dp: int = field(default=1, metadata={"help": "data-parallel workers (GPUs)"})
    feedback_delay: float = field(
        default=0.005, metadata={"help": "seconds before the router hears of finishes and evictions"})
    client_delay: float = field(default=0.0, metadata={
        "help": "seconds between a call's finish and the dispatch of the calls it unblocks: a client's "
                "round trip (HTTP, tokenizing) that a closed-loop client pays live; 0 = at once"})
    load_interval: float = field(default=0.5, metadata={
        "help": "seconds between a worker's load reports to the router (running, waiting, service "
                "rate), as the heartbeats of a real worker"})
    eviction_feedback: bool = field(default=True, metadata={
        "help": "the router hears of the workers' evictions (off: its tree learns only from dispatches, "
                "as a gateway's over servers without --feedback-port)"})
    max_time: float = field(
        default=0.0, metadata={"help": "stop at this simulated time; 0 = 20x --duration"})
    window: float = field(default=1.0, metadata={"help": "metrics window (seconds)"})
    router_replicas: int = field(default=1, metadata={
        "help": "router replicas (active-active gateways) behind a round-robin load balancer, each a "
                "full routing policy (routing/replicas.py)"})
    replica_sharing: bool = field(default=True, metadata={
        "help": "replicas tell each other of their dispatches and finishes (off: each knows only its own)"})
    replica_lag: int = field(default=0, metadata={
        "help": "a replica's dispatch or finish reaches the others after this many later ones"})

    def __post_init__(self) -> None:
        require(self.dp >= 1, f"dp must be >= 1, got {self.dp}")
        require(self.router_replicas >= 1, f"router_replicas must be >= 1, got {self.router_replicas}")
        require(self.replica_lag >= 0, f"replica_lag must be >= 0, got {self.replica_lag}")
        require(self.load_interval > 0, f"load_interval must be > 0, got {self.load_interval}")
        require(self.feedback_delay >= 0, f"feedback_delay must be >= 0, got {self.feedback_delay}")
        require(self.client_delay >= 0, f"client_delay must be >= 0, got {self.client_delay}")
        require(self.max_time >= 0, f"max_time must be >= 0, got {self.max_time}")
        require(self.window > 0, f"window must be > 0, got {self.window}")
