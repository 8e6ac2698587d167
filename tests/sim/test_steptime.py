"""Step-time models: preset magnitudes and coefficient fitting."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from sglang_fair.cli import main as cli_main
from sglang_fair.core.errors import ConfigError
from sglang_fair.sim.fit import load_model, read_samples
from sglang_fair.sim.fit import main as fit_main
from sglang_fair.sim.steptime import LinearStepModel, StepShape, fit_linear, preset

RESULTS = Path(__file__).resolve().parents[2] / "results"


def test_presets_have_plausible_magnitudes() -> None:
    a100, kv = preset("a100-llama8b")
    h100, _ = preset("h100-llama8b")
    assert 300_000 < kv < 500_000  # ~51 GB of KV at 128 KiB/token
    decode = StepShape(requests=64, new_tokens=64, context_tokens=64 * 1000)
    assert 0.01 < a100.step_time(decode) < 0.06  # tens of ms per decode step
    prefill = StepShape(requests=1, new_tokens=8192, context_tokens=8192, attention_pairs=8192 * 4096)
    assert 0.4 < a100.step_time(prefill) < 2.0
    assert h100.step_time(decode) < a100.step_time(decode)
    assert h100.step_time(prefill) < a100.step_time(prefill) / 2
    with pytest.raises(ConfigError, match="unknown step-time preset"):
        preset("tpu")


def test_fit_recovers_coefficients() -> None:
    truth = LinearStepModel(0.01, 2e-5, 1e-4, 9e-8, 3e-9)
    rng = random.Random(0)
    samples = []
    for _ in range(200):
        prefill = rng.random() < 0.4
        n = rng.randint(1, 4096) if prefill else rng.randint(1, 256)
        r = rng.randint(1, 8) if prefill else n
        ctx = n + rng.randint(0, 200_000)
        shape = StepShape(r, n, ctx, n * (ctx - n / 2) if prefill else 0.0, prefill)
        samples.append((shape, truth.step_time(shape) * (1 + rng.gauss(0, 0.001))))
    fit = fit_linear(samples)
    for name in ("fixed", "per_new_token", "per_context_token", "per_attention_pair"):
        assert getattr(fit, name) == pytest.approx(getattr(truth, name), rel=0.05), name
    assert all(v >= 0 for v in (fit.fixed, fit.per_request, fit.per_new_token))


def test_fit_clips_negative_coefficients() -> None:
    samples = [(StepShape(1, n, 0), 0.02 + 1e-4 * n) for n in (1, 10, 100, 1000)]
    fit = fit_linear(samples)
    assert fit.per_new_token == pytest.approx(1e-4, rel=1e-3)
    assert fit.fixed + fit.per_request == pytest.approx(0.02, rel=1e-3)  # one request per step: collinear
    assert min(fit.fixed, fit.per_request, fit.per_context_token, fit.per_attention_pair) >= 0


def test_fit_cli_and_step_model_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = ["requests,new_tokens,context_tokens,attention_pairs,seconds"]
    for r, n, c in [(1, 512, 512), (4, 4, 4000), (8, 8, 9000), (2, 1024, 3000), (16, 16, 30000),
                    (1, 64, 64), (32, 32, 64000)]:
        rows.append(f"{r},{n},{c},0,{0.01 + 2e-5 * r + 1e-4 * n + 1e-7 * c}")
    csv_path = tmp_path / "steps.csv"
    csv_path.write_text("\n".join(rows))
    assert fit_main([str(csv_path)]) == 0
    model_path = tmp_path / "model.json"
    model_path.write_text(capsys.readouterr().out)
    model = load_model(model_path)
    assert model.per_new_token == pytest.approx(1e-4, rel=0.01)
    assert cli_main(["sim", "--workload", "tot", "--depth", "1", "--duration", "3", "--rate", "0.3",
                     "--synthetic-data", "--step-model", str(model_path), "--no-progress"]) == 0
    assert cli_main(["sim", "--step-model", str(tmp_path / "missing.json"), "--duration", "3",
                     "--synthetic-data", "--no-progress"]) == 2


def cpu_like_samples(truth: LinearStepModel, prefix_pairs: bool = True) -> list[tuple[StepShape, float]]:
    """Decode steps and one-request prefills after up to 24,576 cached tokens, timed by ``truth``;
    with ``prefix_pairs`` False the shapes do not tell the model about the padded prefix square."""
    rng = random.Random(1)
    samples = []
    for _ in range(160):
        if rng.random() < 0.5:
            new, cached = rng.randint(16, 4096), rng.choice((0, 512, 2048, 8192, 16384, 24576))
            shape = StepShape.of_prefill([(cached, new)], 0, 0)
        else:
            b = rng.randint(1, 32)
            shape = StepShape(b, b, b * rng.randint(32, 1100))
        seconds = truth.step_time(shape) * (1 + rng.gauss(0, 0.001))
        samples.append((shape if prefix_pairs else shape._replace(prefix_pairs=0.0), seconds))
    return samples


CPU_LIKE = LinearStepModel(3e-3, 2e-4, 5e-5, 7e-7, 1e-8, per_prefix_token=1e-5, per_prefix_pair=2e-8)


@pytest.mark.parametrize("relative", [False, True])
def test_fit_recovers_the_prefix_terms(relative: bool) -> None:
    fit = fit_linear(cpu_like_samples(CPU_LIKE), relative=relative)
    for name in ("fixed", "per_new_token", "per_prefix_token", "per_prefix_pair", "per_attention_pair"):
        assert getattr(fit, name) == pytest.approx(getattr(CPU_LIKE, name), rel=0.1), name


def test_without_the_prefix_square_long_prefills_are_mispredicted() -> None:
    """The control: a fit blind to the padded prefix square misses prefills after long prefixes."""
    fit = fit_linear(cpu_like_samples(CPU_LIKE, prefix_pairs=False), relative=True)
    long = StepShape.of_prefill([(24576, 1024)], 0, 0)
    assert fit.step_time(long._replace(prefix_pairs=0.0)) < 0.8 * CPU_LIKE.step_time(long)


def test_a_prefill_shape_counts_the_padded_square() -> None:
    """SGLang's CPU attention computes (p + n)^2 / 2 pairs for n new tokens after p cached ones:
    the real pairs n * (p + n/2) plus the prefix's own p^2 / 2."""
    shape = StepShape.of_prefill([(3000, 1000), (0, 500)], decoding=2, decode_context=700)
    assert (shape.requests, shape.new_tokens, shape.context_tokens) == (4, 1502, 4500 + 700)
    assert shape.attention_pairs + shape.prefix_pairs == 4000**2 / 2 + 500**2 / 2 + 700
    assert shape.prefix_pairs == 3000**2 / 2 and shape.prefill


def test_a_measurement_csv_without_prefix_pairs_gets_them_from_its_shape(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text("requests,new_tokens,context_tokens,attention_pairs,seconds,prefill\n"
                    "1,1024,9216,8912896,1.0,1\n4,4,16480,0,0.01,0\n")
    (prefill, _), (decode, _) = read_samples(path)
    assert prefill.prefix_pairs == 8192**2 / 2 and decode.prefix_pairs == 0


def test_sglang_defaults_follow_its_rules() -> None:
    from sglang_fair.sim.steptime import sglang_chunk_size, sglang_max_running

    assert sglang_chunk_size("a100-llama8b") == 8192 and sglang_chunk_size("a10-llama3b") == 4096
    assert sglang_chunk_size("cpu-tiny-llama") == 4096
    _, kv = preset("a100-llama8b")
    assert sglang_max_running("a100-llama8b", kv) == 2048  # kv / 131072 * 512 < 2048: clamped up
    assert sglang_max_running("cpu-tiny-llama", 60000) == 3750  # 60000 / 8192 * 512
    assert sglang_max_running("cpu-tiny-llama", 1000) == 500  # at most half the pool
    fitted, kv = preset("cpu-tiny-llama")
    assert kv == 60000 and fitted.per_prefix_token > 0


def test_gpu_preset_pools_follow_the_public_figure_rule() -> None:
    from sglang_fair.sim.steptime import sglang_chunk_size, sglang_max_running

    # (0.88 x memory - 2 B x params - 3 GB) // KV bytes per token; pinned so a changed rule fails
    assert (24e9 * 0.88 - 2 * 8.03e9 - 3e9) // (32 * 8 * 128 * 2 * 2) == 15_716
    pools = {name: preset(name)[1] for name in ("a100-llama8b", "h100-llama8b", "a10-llama3b", "a10-llama8b")}
    assert pools == {"a100-llama8b": 391_693, "h100-llama8b": 391_693, "a10-llama3b": 102_015,
                     "a10-llama8b": 15_716}
    small, _ = preset("a10-llama8b")
    big, _ = preset("a10-llama3b")
    decode = StepShape(requests=16, new_tokens=16, context_tokens=16 * 800)
    assert small.step_time(decode) > big.step_time(decode)  # 2.5x the weights read per step
    assert 0.03 < small.step_time(decode) < 0.06
    assert sglang_chunk_size("a10-llama8b") == 4096
    assert sglang_max_running("a10-llama8b", 15_716) == 2048  # the cap is not what binds: the pool is


@pytest.mark.parametrize("gpu,model", [(g, m) for g in ("h100", "h200") for m in ("llama8b", "llama3b")])
def test_measured_gpu_presets_reproduce_their_measurements(gpu: str, model: str) -> None:
    csv = f"{gpu}_llama-{'3.1-8b' if model == 'llama8b' else '3.2-3b'}_steps.csv"
    samples = read_samples(RESULTS / "fidelity" / "gpu" / csv)
    assert len(samples) >= 40 and {s.prefill for s, _ in samples} == {True, False}
    fitted, _ = preset(f"{gpu}-{model}-measured")
    errors = [abs(fitted.step_time(s) - t) / t for s, t in samples]
    assert statistics.median(errors) < 0.08 and max(errors) < 0.25
    if model == "llama8b":  # negative control: the roofline guess on the same model
        roofline, _ = preset("h100-llama8b")
        assert statistics.median(abs(roofline.step_time(s) - t) / t for s, t in samples) > 0.2


def test_measured_presets_pools_follow_the_public_figure_rule() -> None:
    from sglang_fair.sim.steptime import sglang_chunk_size, sglang_max_running

    assert preset("h100-llama8b-measured")[1] == preset("h100-llama8b")[1] == 391_693
    pool = (141e9 * 0.88 - 2 * 8.03e9 - 3e9) // (32 * 8 * 128 * 2 * 2)
    assert preset("h200-llama8b-measured")[1] == int(pool)
    assert sglang_chunk_size("h200-llama8b-measured") == 8192  # 141 GB: below SGLang's 160 GB step
    assert sglang_max_running("h200-llama8b-measured", 801_239) == 3129  # 801,239 / 131,072 * 512
