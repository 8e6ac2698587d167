"""Time Llama-shaped forward passes on a GPU in plain PyTorch, over a grid of batch shapes (for sim/fit.py).

    python3 python/sglang_fair/lab/gpu_steps.py --model llama-3.1-8b > steps.csv  # on the GPU machine
    python -m sglang_fair.sim.fit --relative steps.csv > model.json              # here

(``sglang-fair lab gpu-steps`` where the package is installed; the file alone needs only PyTorch.)

No SGLang and no checkpoint: SGLang's GPU kernels (sgl-kernel, FlashInfer) do not travel to the lent
machines (docs/evidence/fidelity.md). The model is the named architecture with random bf16 weights, run as
SGLang runs a step: a packed batch of new tokens through every layer (RMSNorm, fused QKV, rotary, attention
over the KV cache, output projection, fused gate/up, SiLU, down), then the LM head and a greedy pick for each
request's last token only. Attention is PyTorch's scaled_dot_product_attention (FlashAttention-2 on
Hopper) with grouped KV heads. Every step is replayed from a CUDA graph, so the times are the GPU's
alone: SGLang replays decode steps from graphs too, and launches a prefill step's kernels from the CPU
while the GPU runs them (--eager measures this script's own launches, slower than SGLang's). One K/V
buffer serves every layer (the bytes read per layer are the same; the buffers are far larger than L2).
What this leaves out: the scheduler's CPU work between steps, sampling beyond greedy, and FlashInfer's
paged-KV gathers; docs/evidence/fidelity.md says what that means for the preset.

Prints ``requests,new_tokens,context_tokens,attention_pairs,seconds,prefill,prefix_pairs`` rows, the
median of --repeats timed runs after --warmup runs; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:  # the package installs without PyTorch; this lab runs where it is
    torch = F = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Arch:
    """A decoder's shape: layers, hidden size, query/KV heads, head dim, MLP width, vocabulary."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int


ARCHS = {
    "llama-3.1-8b": Arch(32, 4096, 32, 8, 128, 14336, 128256),
    "llama-3.2-3b": Arch(28, 3072, 24, 8, 128, 8192, 128256),
    "tiny": Arch(2, 256, 4, 2, 64, 512, 1000),  # for checking the script itself on a CPU
}

DECODE = [(r, c) for r in (1, 8, 32, 64, 128, 256) for c in (256, 1024, 4096, 8192) if r * c <= 1 << 20]
PREFILL = ([(1, n, p) for n in (64, 512, 2048, 8192) for p in (0, 2048, 8192, 32768)]
           + [(r, n, p) for r in (4, 16) for n in (128, 512, 2048) for p in (0, 4096) if r * n <= 8192])


class Model:
    """Random weights of ``arch`` and one forward step over a packed batch."""

    def __init__(self, arch: Arch, device: str, dtype: torch.dtype) -> None:
        a, self.arch = arch, arch
        g = torch.Generator(device=device).manual_seed(0)

        def w(*shape: int) -> torch.Tensor:
            return (torch.randn(*shape, generator=g, device=device, dtype=dtype) / math.sqrt(shape[-1]))

        qkv = (a.heads + 2 * a.kv_heads) * a.head_dim
        self.embed = w(a.vocab, a.hidden)
        self.layers = [(w(qkv, a.hidden), w(a.hidden, a.heads * a.head_dim), w(2 * a.mlp, a.hidden),
                        w(a.hidden, a.mlp)) for _ in range(a.layers)]
        self.norm = torch.ones(a.hidden, device=device, dtype=dtype)
        self.head = w(a.vocab, a.hidden)

    def step(self, ids: torch.Tensor, k: torch.Tensor, v: torch.Tensor, new: int,
             prefix: int) -> torch.Tensor:
        """One step: ``ids`` (r * new tokens) after ``prefix`` cached tokens per request; ``k``/``v``
        (r, kv_heads, prefix + new, head_dim) stand for every layer's cache. Returns the picked ids."""
        a, r = self.arch, k.shape[0]
        x = self.embed[ids]
        pos = torch.arange(prefix, prefix + new, device=ids.device).repeat(r)
        cos, sin = _angles(pos, a.head_dim, x.dtype)
        for wqkv, wo, wgu, wd in self.layers:
            h = F.rms_norm(x, (a.hidden,), self.norm)
            sizes = [a.heads * a.head_dim, a.kv_heads * a.head_dim, a.kv_heads * a.head_dim]
            q, kn, vn = torch.split(h @ wqkv.T, sizes, dim=-1)
            q, kn = _rotary(q, cos, sin, a.head_dim), _rotary(kn, cos, sin, a.head_dim)
            k[:, :, prefix:] = kn.view(r, new, a.kv_heads, a.head_dim).transpose(1, 2)
            v[:, :, prefix:] = vn.view(r, new, a.kv_heads, a.head_dim).transpose(1, 2)
            q = q.view(r, new, a.heads, a.head_dim).transpose(1, 2)
            o = _attend(q, k, v, new, prefix)
            x = x + o.transpose(1, 2).reshape(r * new, -1) @ wo.T
            gate, up = (F.rms_norm(x, (a.hidden,), self.norm) @ wgu.T).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ wd.T
        last = F.rms_norm(x.view(r, new, -1)[:, -1], (a.hidden,), self.norm)
        return (last @ self.head.T).argmax(dim=-1)


def _angles(pos: torch.Tensor, dim: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    half = dim // 2
    freq = 500000.0 ** (-torch.arange(half, device=pos.device, dtype=torch.float32) / half)
    ang = pos[:, None].float() * freq[None]
    return ang.cos().repeat(1, 2).to(dtype)[:, None], ang.sin().repeat(1, 2).to(dtype)[:, None]


def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dim: int) -> torch.Tensor:
    t, half = x.view(x.shape[0], -1, dim), dim // 2
    return (t * cos + torch.cat((-t[..., half:], t[..., :half]), dim=-1) * sin).view_as(x)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, new: int, prefix: int) -> torch.Tensor:
    if new == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    if prefix == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    from torch.nn.attention.bias import causal_lower_right
    mask = causal_lower_right(new, prefix + new)
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    except RuntimeError:  # a PyTorch whose causal bias takes no grouped heads
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def time_shape(model: Model, r: int, new: int, prefix: int, args: argparse.Namespace) -> float:
    """Median seconds of one step of ``r`` requests, ``new`` tokens each after ``prefix`` cached."""
    a, dev = model.arch, args.device
    ids = torch.randint(0, a.vocab, (r * new,), device=dev)
    k = torch.randn(r, a.kv_heads, prefix + new, a.head_dim, device=dev, dtype=model.embed.dtype)
    v = torch.randn_like(k)
    run: Callable[[], Any] = lambda: model.step(ids, k, v, new, prefix)  # noqa: E731
    if dev == "cuda" and not args.eager:
        run = _graphed(run)
    for _ in range(args.warmup):
        run()
    times = []
    for _ in range(args.repeats):
        _sync(dev)
        start = time.perf_counter()
        run()
        _sync(dev)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _graphed(run: Callable[[], Any]) -> Callable[[], Any]:
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph.replay


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(ARCHS), default="llama-3.1-8b")
    p.add_argument("--device", default="cuda" if torch is not None and torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--eager", action="store_true", help="launch each kernel (no CUDA graph)")
    p.add_argument("--quick", action="store_true", help="a few shapes only (checking the script)")
    args = p.parse_args(argv)
    if torch is None:
        p.error("needs PyTorch (pip install torch; a CUDA build to time a GPU)")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA device (pass --device cpu with --model tiny to check the script)")
    torch.manual_seed(0)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {where}, {args.model}", file=sys.stderr)
    model = Model(ARCHS[args.model], args.device, torch.bfloat16)
    shapes = [(r, 1, c - 1) for r, c in DECODE] + PREFILL
    if args.quick:
        shapes = shapes[:2] + shapes[-3:]
    print("requests,new_tokens,context_tokens,attention_pairs,seconds,prefill,prefix_pairs", flush=True)
    for i, (r, new, prefix) in enumerate(shapes, 1):
        with torch.inference_mode():
            seconds = time_shape(model, r, new, prefix, args)
        prefill = new > 1
        pairs = r * new * (prefix + new / 2) if prefill else 0
        print(f"{r},{r * new},{r * (prefix + new)},{pairs:.0f},{seconds:.6f},{int(prefill)},0", flush=True)
        print(f"[{i}/{len(shapes)}] r={r} new={new} prefix={prefix}: {seconds * 1e3:.2f} ms", file=sys.stderr)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
