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

from sglang_fair.harness.memory import GIB, SAMPLER, Peak, over_budget

ROOT = Path(__file__).resolve().parents[2]
SERVER_BUDGET = 4 * GIB  # one CPU server of the tiny model, all its processes (measured 1.6 to 2.6 GiB)
PEAKS: list[tuple[str, Peak]] = []  # (module, peak) of every server the e2e modules started


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama + tokenizer, built offline by scripts/make_tiny_model.py."""
    pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
    out = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True)
    return out


@pytest.fixture(scope="module", autouse=True)
def memory_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    """Sample the memory of every SGLang server this module starts; after its last test (its servers
    stopped), fail the module if one went past ``SERVER_BUDGET`` (a server started without a token
    limit sizes its KV pool from the machine's free memory)."""
    SAMPLER.enabled = True
    SAMPLER.take()
    yield
    module = request.node.name
    peaks = SAMPLER.take()
    PEAKS.extend((module, p) for p in peaks)
    over = [p.describe() for p in over_budget(peaks, SERVER_BUDGET)]
    if over:
        pytest.fail(f"{module}: over the memory budget of {SERVER_BUDGET / GIB:.0f} GiB per server: "
                    + "; ".join(over), pytrace=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not PEAKS:
        return
    module, peak = max(PEAKS, key=lambda mp: mp[1].pss)
    terminalreporter.write_line(
        f"e2e memory: {len(PEAKS)} servers sampled, the largest {module} {peak.describe()} "
        f"(budget {SERVER_BUDGET / GIB:.0f} GiB per server)")


SHARED_CLUSTER_USERS = ("test_chaos_e2e", "test_fairness_page_e2e")  # modules on the session's cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on the shared :func:`cluster` run last (in their order): its two servers and two
    gateways stay up from its first user to the end of the session, their idle schedulers taking about
    60% of a core each, and every test run after its first user ran beside them (a timing test on the
    2-core CI machine failed so)."""
    def shares_cluster(item: pytest.Item) -> bool:
        return getattr(getattr(item, "module", None), "__name__", "") in SHARED_CLUSTER_USERS

    items.sort(key=shares_cluster)


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
