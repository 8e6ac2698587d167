"""Configuration of the full simulator: one frozen dataclass per component, validated once."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.errors import require
from sglang_fair.sim.steptime import PRESETS


@dataclass(frozen=True)
class EngineConfig:
    """One worker: SGLang's scheduler loop limits and the step-time preset."""

    preset: str = field(
        default="a100-llama8b", metadata={"help": "step-time preset", "choices": tuple(PRESETS)})
    kv_tokens: int = field(default=0, metadata={"help": "KV pool tokens per worker; 0 = the preset's"})
    chunk_size: int = field(default=8192, metadata={"help": "chunked prefill size (tokens per prefill step)"})
    max_running: int = field(default=256, metadata={"help": "cap on running requests per worker"})
    new_token_ratio: float = field(
        default=0.4, metadata={"help": "fraction of remaining output reserved at admission"})
    retract_steps: int = field(default=20, metadata={"help": "decode steps of room kept by retraction"})
    step_model: str = field(
        default="", metadata={"help": "JSON of fitted coefficients (python -m sglang_fair.sim.fit)"})

    def __post_init__(self) -> None:
        require(self.preset in PRESETS, f"unknown preset {self.preset!r}; known: {', '.join(PRESETS)}")
        require(self.kv_tokens >= 0, f"kv_tokens must be >= 0, got {self.kv_tokens}")
        require(self.chunk_size >= 1, f"chunk_size must be >= 1, got {self.chunk_size}")
        require(self.max_running >= 1, f"max_running must be >= 1, got {self.max_running}")
        require(0 <= self.new_token_ratio <= 1,
                f"new_token_ratio must be in [0, 1], got {self.new_token_ratio}")
        require(self.retract_steps >= 1, f"retract_steps must be >= 1, got {self.retract_steps}")


@dataclass(frozen=True)
class ClusterSimConfig:
    """The cluster: workers, the routing and admission policies and the router's feedback delay."""

    dp: int = field(default=1, metadata={"help": "data-parallel workers (GPUs)"})
    router: str = field(default="d2lpm", metadata={"help": "routing policy"})
    policy: str = field(default="dlpm", metadata={"help": "admission policy"})
    q_u: float = field(default=0.0, metadata={"help": "Q^u of DLPM; 0 = the policy's default"})
    q_w: float = field(default=16384.0, metadata={"help": "Q^w of D2LPM"})
    feedback_delay: float = field(
        default=0.005, metadata={"help": "seconds before the router hears of finishes and evictions"})
    max_time: float = field(
        default=0.0, metadata={"help": "stop at this simulated time; 0 = 20x --duration"})
    window: float = field(default=1.0, metadata={"help": "metrics window (seconds)"})

    def __post_init__(self) -> None:
        require(self.dp >= 1, f"dp must be >= 1, got {self.dp}")
        require(self.q_u >= 0, f"q_u must be >= 0, got {self.q_u}")
        require(self.q_w > 0, f"q_w must be > 0, got {self.q_w}")
        require(self.feedback_delay >= 0, f"feedback_delay must be >= 0, got {self.feedback_delay}")
        require(self.max_time >= 0, f"max_time must be >= 0, got {self.max_time}")
        require(self.window > 0, f"window must be > 0, got {self.window}")
