"""``serve`` binds the ranks of a CPU server to cores itself (``cpu_binding.py``): without
``SGLANG_CPU_OMP_THREADS_BIND``, SGLang 0.5.23 asserts in every scheduler of ``--dp-size 2 --device cpu``
on a one-NUMA-node machine and reports it ~20 s later as the OOM killer."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.sglang_plugin.cpu_binding import ENV_BIND, bind_cpu_ranks, split_cores


def cpu(**kw: int) -> SimpleNamespace:
    return SimpleNamespace(device="cpu", **{"dp_size": 1, "tp_size": 1, "pp_size": 1, **kw})


@pytest.mark.parametrize(("cores", "ranks", "expected"), [
    ([0, 1], 2, "0|1"),
    (list(range(16)), 2, "0-7|8-15"),
    (list(range(7)), 3, "0-2|3-4|5-6"),
    ([0, 1, 4, 5], 2, "0-1|4-5"),
    ([0, 2, 4, 6], 2, "0,2|4,6"),
    ([0, 1], 4, "0|1|0|1"),
])
def test_the_cores_are_cut_into_one_range_per_rank(cores: list[int], ranks: int, expected: str) -> None:
    binding = split_cores(cores, ranks)
    assert binding == expected and len(binding.split("|")) == ranks


def test_every_core_is_used_once_when_there_are_enough() -> None:
    for n in range(1, 20):
        for ranks in range(1, n + 1):
            used = [c for group in split_cores(list(range(n)), ranks).split("|")
                    for part in group.split(",") for c in _expand(part)]
            assert sorted(used) == list(range(n)), (n, ranks)


def _expand(part: str) -> list[int]:
    lo, _, hi = part.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def test_dp_on_a_one_node_cpu_machine_gets_a_binding_and_a_notice() -> None:
    env: dict[str, str] = {}
    notice = bind_cpu_ranks(cpu(dp_size=2), env, cores=[0, 1], numa_nodes=1)
    assert env[ENV_BIND] == "0|1" and notice is not None and "0|1" in notice
    env = {}
    bind_cpu_ranks(cpu(dp_size=2, tp_size=2), env, cores=list(range(8)), numa_nodes=1)
    assert env[ENV_BIND] == "0-1|2-3|4-5|6-7"  # SGLang counts dp * tp * pp ranks


@pytest.mark.parametrize(("args", "numa"), [
    (cpu(), 1), (cpu(dp_size=2), 2), (SimpleNamespace(device="cuda", dp_size=4, tp_size=1, pp_size=1), 1),
])
def test_nothing_is_set_where_sglang_binds_by_itself(args: SimpleNamespace, numa: int) -> None:
    env: dict[str, str] = {}
    assert bind_cpu_ranks(args, env, cores=[0, 1], numa_nodes=numa) is None and env == {}


def test_the_users_binding_is_kept_when_it_fits_and_refused_with_the_value_to_use_when_not() -> None:
    env = {ENV_BIND: "1|0"}
    assert bind_cpu_ranks(cpu(dp_size=2), env, cores=[0, 1], numa_nodes=1) is None and env[ENV_BIND] == "1|0"
    with pytest.raises(ConfigError, match=r"1 core set\(s\) for 2 CPU ranks.*BIND='0\|1'"):
        bind_cpu_ranks(cpu(dp_size=2), {ENV_BIND: "0-1"}, cores=[0, 1], numa_nodes=1)
