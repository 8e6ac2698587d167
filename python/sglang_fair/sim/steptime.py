"""Step-time models: how long one forward pass of a batch takes on the simulated GPU.

The linear model (docs/design/simulator.md derives the presets) is

    t = fixed + per_request * requests + per_new_token * new_tokens
          + per_context_token * context_tokens + per_attention_pair * attention_pairs
          + per_prefix_token * prefix_tokens + per_prefix_pair * prefix_pairs

``new_tokens`` are tokens computed this step (prefill chunk tokens, one per decoding request);
``context_tokens`` the KV tokens read (each request's full KV length); ``attention_pairs`` the
(query, key) pairs of prefill attention (a chunk of n new tokens after a prefix of p tokens: n*(p + n/2));
``prefix_tokens`` the KV tokens a prefill step reads before its new tokens (context - new; 0 in decode
steps), and ``prefix_pairs`` the (query, key) pairs among those prefix tokens, p*p/2 per request:
SGLang's CPU torch_native backend pads each request's query to its whole KV length and runs causal
attention over the full square (sglang/srt/layers/attention/torch_native_backend.py,
``_run_sdpa_forward_extend``, ``per_req_query_redudant``), so a chunk after a long cached prefix costs
(p + n)^2/2 pairs, not n*(p + n/2) (docs/evidence/fidelity.md). The GPU presets leave both terms 0.
Coefficients can be fitted from measured step times with :func:`fit_linear` (least squares, pure
Python), so one model serves presets, CPU calibrations and GPU measurements.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple, Protocol

from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.linalg import least_squares


class StepShape(NamedTuple):
    """What a step-time model may read of a batch. A named tuple: the simulator makes one per step
    (a frozen dataclass sets each field through ``object.__setattr__``)."""

    requests: int
    new_tokens: int
    context_tokens: int
    attention_pairs: float = 0.0
    prefill: bool = False
    prefix_pairs: float = 0.0

    @classmethod
    def of_prefill(cls, chunks: list[tuple[int, int]], decoding: int, decode_context: int) -> StepShape:
        """A prefill step: ``chunks`` of (tokens already prefilled, new tokens) plus ``decoding``
        requests holding ``decode_context`` KV tokens that decode in the same (mixed) step."""
        return cls(
            requests=len(chunks) + decoding,
            new_tokens=sum(n for _, n in chunks) + decoding,
            context_tokens=sum(p + n for p, n in chunks) + decode_context,
            attention_pairs=sum(n * (p + n / 2) for p, n in chunks) + decode_context,
            prefill=True,
            prefix_pairs=sum(p * p / 2 for p, _ in chunks),
        )


class StepTimeModel(Protocol):
    def step_time(self, shape: StepShape) -> float:
        """Seconds the forward pass of ``shape`` takes."""
        ...


@dataclass(frozen=True)
class LinearStepModel:
    """The module's linear model (seconds)."""

    fixed: float
    per_request: float
    per_new_token: float
    per_context_token: float
    per_attention_pair: float = 0.0
    name: str = "custom"
    per_prefix_token: float = 0.0
    per_prefix_pair: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "name":
                require(getattr(self, f.name) >= 0, f"step model coefficient {f.name} must be >= 0")
        require(self.fixed > 0 or self.per_new_token > 0, "step model: fixed or per_new_token must be > 0")

    def step_time(self, shape: StepShape) -> float:
        return (self.fixed + self.per_request * shape.requests + self.per_new_token * shape.new_tokens
                + self.per_context_token * shape.context_tokens
                + self.per_attention_pair * shape.attention_pairs
                + self.per_prefix_token * _prefix(shape) + self.per_prefix_pair * shape.prefix_pairs)


def _prefix(shape: StepShape) -> int:
    return shape.context_tokens - shape.new_tokens if shape.prefill else 0


@dataclass(frozen=True)
class Hardware:
    """Public figures of a GPU: dense bf16 tensor throughput (FLOP/s), HBM bandwidth (B/s), memory (B)."""

    name: str
    flops: float
    bandwidth: float
    memory: float


@dataclass(frozen=True)
class Model:
    """Public figures of a model: parameters, layers, query heads, KV heads, head dimension, dtype bytes."""

    name: str
    params: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2
    context_len: int = 131072

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


A100_80GB = Hardware("A100-80GB-SXM", flops=312e12, bandwidth=2.039e12, memory=80e9)
H100_SXM = Hardware("H100-80GB-SXM", flops=989e12, bandwidth=3.35e12, memory=80e9)
A10_24GB = Hardware("A10-24GB", flops=125e12, bandwidth=0.6e12, memory=24e9)
H200_SXM = Hardware("H200-141GB-SXM", flops=989e12, bandwidth=4.8e12, memory=141e9)
LLAMA_31_8B = Model("Llama-3.1-8B", params=8.03e9, layers=32, heads=32, kv_heads=8, head_dim=128)
LLAMA_32_3B = Model("Llama-3.2-3B", params=3.21e9, layers=28, heads=24, kv_heads=8, head_dim=128)

COMPUTE_EFFICIENCY = 0.5  # fraction of peak dense FLOP/s reached by prefill GEMMs and attention
MEMORY_EFFICIENCY = 0.7  # fraction of peak HBM bandwidth reached by weight and KV reads
STEP_OVERHEAD_S = 1e-3  # scheduler + kernel launch overhead per step (SGLang with CUDA graphs)
PER_REQUEST_S = 2e-5  # per-request sampling and bookkeeping
MEM_FRACTION_STATIC = 0.88  # SGLang's default fraction of GPU memory for weights + KV pool
ACTIVATION_RESERVE_B = 3e9  # activations, CUDA graphs and workspace


def roofline_model(hw: Hardware, model: Model) -> LinearStepModel:
    """A linear model from hardware and model figures: the derivation in docs/design/simulator.md."""
    flops, bw = hw.flops * COMPUTE_EFFICIENCY, hw.bandwidth * MEMORY_EFFICIENCY
    return LinearStepModel(
        fixed=model.params * model.dtype_bytes / bw + STEP_OVERHEAD_S,
        per_request=PER_REQUEST_S,
        per_new_token=2 * model.params / flops,
        per_context_token=model.kv_bytes_per_token / bw,
        per_attention_pair=4 * model.layers * model.heads * model.head_dim / flops,
        name=f"{model.name}@{hw.name}",
    )


def kv_capacity_tokens(hw: Hardware, model: Model) -> int:
    """KV pool size in tokens: SGLang's static memory fraction minus weights and activations."""
    free = hw.memory * MEM_FRACTION_STATIC - model.params * model.dtype_bytes - ACTIVATION_RESERVE_B
    return int(free // model.kv_bytes_per_token)


PRESETS: dict[str, tuple[Hardware, Model]] = {
    "a100-llama8b": (A100_80GB, LLAMA_31_8B),
    "h100-llama8b": (H100_SXM, LLAMA_31_8B),
    "a10-llama3b": (A10_24GB, LLAMA_32_3B),  # the single-GPU setting of [1] Fig. 1, 9, 11, 12
    # Fig. 1's single A10 with [1]'s larger model ([1] names no model for Fig. 1): public figures, not
    # measured; kv_capacity_tokens' rule gives (0.88 x 24 GB - 16.06 GB weights - 3 GB) / 128 KiB
    # = 15,716 tokens, a pool small enough that requests wait for memory (docs/evidence/results.md, fig1mem)
    "a10-llama8b": (A10_24GB, LLAMA_31_8B),
}


def _measured(hw: Hardware, model: Model, fixed: float, per_new_token: float, per_context_token: float,
              per_attention_pair: float) -> tuple[LinearStepModel, int, int, int]:
    step = LinearStepModel(fixed=fixed, per_request=0.0, per_new_token=per_new_token,
                           per_context_token=per_context_token, per_attention_pair=per_attention_pair,
                           name=f"{model.name}@{hw.name} (measured)")
    return step, kv_capacity_tokens(hw, model), model.context_len, chunk_for_memory(hw.memory)


def chunk_for_memory(memory: float) -> int:
    """SGLang 0.5.23's default --chunked-prefill-size on a GPU of ``memory`` bytes
    (sglang/srt/arg_groups/memory_hook.py, _handle_gpu_memory_settings)."""
    gib = memory / 2**30
    for below, size in ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192)):
        if gib < below:
            return size
    return 16384


# Presets fitted from measured step times (docs/evidence/fidelity.md has how): (model, KV pool tokens,
# context length, SGLang's default chunked-prefill size there).
# cpu-tiny-llama: scripts/make_tiny_model.py's Llama on SGLang 0.5.23's CPU engine (torch_native
# attention, OMP_NUM_THREADS=1, --max-total-tokens 60000, chunked prefill 4096) on an otherwise idle
# 2-core VM, 2026-11-23: sglang-fair lab cpu-steps --grid short and --grid long (prefill after up
# to 24,576 cached tokens), then python -m sglang_fair.sim.fit --relative of both CSVs
# (results/fidelity/cpu_tiny_steps_quiet.csv, _quiet_long2.csv; median error 11% short, 6% long).
FITTED: dict[str, tuple[LinearStepModel, int, int, int]] = {
    "cpu-tiny-llama": (LinearStepModel(
        fixed=3.309e-3, per_request=1.229e-4, per_new_token=5.135e-5, per_context_token=6.145e-7,
        per_attention_pair=1.276e-8, per_prefix_token=1.153e-5, per_prefix_pair=2.310e-8,
        name="tiny-llama@cpu (measured)"), 60000, 8192, 4096),
    # *-measured: python/sglang_fair/lab/gpu_steps.py (plain PyTorch 2.11, random bf16 weights, every step a
    # CUDA graph: GPU time alone, no SGLang kernels or scheduler) on one H100 80GB HBM3 and one H200,
    # 2026-11-28, then sim.fit --relative (results/fidelity/gpu/; median error 5-6%, max 23%).
    "h100-llama8b-measured": _measured(H100_SXM, LLAMA_31_8B, 6.888e-3, 2.114e-5, 4.037e-8, 1.676e-9),
    "h100-llama3b-measured": _measured(H100_SXM, LLAMA_32_3B, 3.939e-3, 9.516e-6, 3.615e-8, 1.133e-9),
    "h200-llama8b-measured": _measured(H200_SXM, LLAMA_31_8B, 5.458e-3, 2.106e-5, 2.716e-8, 1.649e-9),
    "h200-llama3b-measured": _measured(H200_SXM, LLAMA_32_3B, 3.327e-3, 9.436e-6, 2.463e-8, 1.120e-9),
}
PRESET_NAMES = (*PRESETS, *FITTED)


def preset(name: str) -> tuple[LinearStepModel, int]:
    """(step model, KV capacity in tokens) of a named preset."""
    if name in FITTED:
        return FITTED[name][0], FITTED[name][1]
    if name not in PRESETS:
        raise ConfigError(f"unknown step-time preset {name!r}; known: {', '.join(sorted(PRESET_NAMES))}")
    hw, model = PRESETS[name]
    return roofline_model(hw, model), kv_capacity_tokens(hw, model)


def sglang_chunk_size(name: str) -> int:
    """SGLang 0.5.23's default --chunked-prefill-size for the preset's device: by GPU memory
    (sglang/srt/arg_groups/memory_hook.py, _handle_gpu_memory_settings), 4096 where it knows none."""
    if name in FITTED:
        return FITTED[name][3]
    return chunk_for_memory(PRESETS[name][0].memory)


def sglang_max_running(name: str, kv_tokens: int) -> int:
    """SGLang 0.5.23's default max_running_requests for a KV pool of ``kv_tokens``
    (sglang/srt/mem_cache/kv_cache_configurator.py, resolve_max_num_reqs):
    min(clamp(kv / context_len * 512, 2048, 4096), kv // 2)."""
    context = FITTED[name][2] if name in FITTED else PRESETS[name][1].context_len
    estimated = max(min(int(kv_tokens / context * 512), 4096), 2048)
    return max(1, min(estimated, kv_tokens // 2))


FEATURES = 7  # the model's coefficients, in _features' order


def fit_linear(samples: list[tuple[StepShape, float]], name: str = "fitted",
               ridge: float = 1e-12, relative: bool = False) -> LinearStepModel:
    """Least-squares fit of a :class:`LinearStepModel` to (shape, measured seconds) samples.

    Solves the normal equations with a tiny ridge term; negative coefficients (noise) are clipped
    to 0 and the fit is redone without them, so the result is a valid model. ``relative`` minimizes
    relative instead of absolute errors (each sample weighted by 1/seconds), so millisecond decode
    steps count as much as 100 ms prefills.
    """
    require(len(samples) >= 2, "fit_linear needs at least 2 samples")
    active = [True] * FEATURES
    for _ in range(FEATURES):
        coef = _solve(samples, active, ridge, relative)
        negative = [i for i, c in enumerate(coef) if active[i] and c < 0]
        if not negative:
            break
        for i in negative:
            active[i] = False
    coef = [max(0.0, c) for c in coef]
    if coef[0] == 0 and coef[2] == 0:
        coef[0] = min(t for _, t in samples)
    fixed, per_request, per_new, per_ctx, per_pair, per_prefix, per_prefix_pair = coef
    return LinearStepModel(fixed, per_request, per_new, per_ctx, per_pair, name, per_prefix, per_prefix_pair)


def _features(s: StepShape) -> list[float]:
    return [1.0, float(s.requests), float(s.new_tokens), float(s.context_tokens), float(s.attention_pairs),
            float(_prefix(s)), s.prefix_pairs]


def _solve(samples: list[tuple[StepShape, float]], active: list[bool], ridge: float,
           relative: bool = False) -> list[float]:
    idx = [i for i in range(FEATURES) if active[i]]
    weight = [1.0 / t if relative and t > 0 else 1.0 for _, t in samples]
    rows = [[_features(s)[i] * w for i in idx] for (s, _), w in zip(samples, weight, strict=True)]
    scale = [max(1e-30, max(abs(r[j]) for r in rows)) for j in range(len(idx))]
    rows = [[r[j] / scale[j] for j in range(len(idx))] for r in rows]
    ys = [t * w for (_, t), w in zip(samples, weight, strict=True)]
    sol = least_squares(rows, ys, ridge)
    coef = [0.0] * FEATURES
    for j, i in enumerate(idx):
        coef[i] = sol[j] / scale[j]
    return coef
