"""End-to-end tests: the real SGLang server on CPU with a tiny random-weight Llama, over real HTTP."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: starts real SGLang servers on CPU (minutes; needs the sglang extra)"
    )


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama + tokenizer, built offline by scripts/make_tiny_model.py."""
    pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
    out = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def cluster(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The chaos run's cluster (two CPU servers, two gateway replicas, HAProxy in front), shared by the
    tests that need it (test_chaos_e2e.py, test_fairness_page_e2e.py)."""
    pytest.importorskip("psutil")
    if shutil.which("haproxy") is None:
        if "haproxy" in os.environ.get("SGLANG_FAIR_REQUIRE_TOOLS", ""):
            pytest.fail("haproxy is not installed (scripts/install_test_tools.sh)")
        pytest.skip("haproxy is not installed (scripts/install_test_tools.sh)")
    from sglang_fair.harness.chaos import CLIENTS, SERVER_ARGS
    from sglang_fair.harness.cluster import start_cluster

    with ExitStack() as stack:
        yield start_cluster(stack, tiny_model, tmp_path_factory.mktemp("cluster"), CLIENTS, SERVER_ARGS)
