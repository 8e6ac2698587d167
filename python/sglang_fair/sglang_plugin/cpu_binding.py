"""CPU cores for the ranks of a CPU server: ``SGLANG_CPU_OMP_THREADS_BIND``, chosen by ``serve``.

SGLang's CPU engine binds each rank (``dp_size * tp_size * pp_size`` of them) to the cores of one
NUMA node unless ``SGLANG_CPU_OMP_THREADS_BIND`` lists one core set per rank (``"0-7|8-15"``). With
more ranks than NUMA nodes (``--dp-size 2`` on an ordinary one-node machine) an unset variable is an
assertion in every scheduler, reported ~20 s later as a scheduler that "died ... OOM killer".
``serve`` therefore sets it itself, the cores this process may use split into one contiguous range
per rank, and refuses at once a value the user set with too few sets, naming the value to use.
"""

from __future__ import annotations

import glob
import os
from collections.abc import MutableMapping, Sequence
from typing import Any

from sglang_fair.core.errors import ConfigError

ENV_BIND = "SGLANG_CPU_OMP_THREADS_BIND"


def rank_count(server_args: Any) -> int:
    """The CPU ranks SGLang starts: one per (data-parallel, tensor-parallel, pipeline) position."""
    return max(1, (getattr(server_args, "dp_size", 1) or 1) * (getattr(server_args, "tp_size", 1) or 1)
               * (getattr(server_args, "pp_size", 1) or 1))


def numa_node_count() -> int:
    """The NUMA nodes Linux reports (1 where it reports none)."""
    return max(1, len(glob.glob("/sys/devices/system/node/node[0-9]*")))


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity mask), in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _span(cores: Sequence[int]) -> str:
    """``cores`` in SGLang's notation: ``"a-b"`` for a consecutive run, else ``"a,b,c"``."""
    if len(cores) > 1 and cores[-1] - cores[0] == len(cores) - 1:
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(str(c) for c in cores)


def split_cores(cores: Sequence[int], ranks: int) -> str:
    """One core set per rank, ``|``-separated: ``cores`` cut into ``ranks`` contiguous runs of equal
    size (the first ones one longer); with fewer cores than ranks, ranks share cores round robin."""
    if not cores or ranks < 1:
        raise ValueError("no cores or no ranks to bind")
    if ranks > len(cores):
        return "|".join(str(cores[r % len(cores)]) for r in range(ranks))
    size, extra = divmod(len(cores), ranks)
    groups, start = [], 0
    for r in range(ranks):
        end = start + size + (1 if r < extra else 0)
        groups.append(_span(cores[start:end]))
        start = end
    return "|".join(groups)


def bind_cpu_ranks(server_args: Any, env: MutableMapping[str, str] | None = None,
                   cores: Sequence[int] | None = None, numa_nodes: int | None = None) -> str | None:
    """Set :data:`ENV_BIND` in ``env`` (``os.environ``) for a CPU server with more ranks than NUMA
    nodes and return the notice to print; None when nothing was needed. A value the user set is kept
    when it has a set per rank, and refused (:class:`ConfigError`, with the value to use) otherwise."""
    if getattr(server_args, "device", None) != "cpu":
        return None
    env = os.environ if env is None else env
    ranks = rank_count(server_args)
    cores = usable_cores() if cores is None else cores
    given = env.get(ENV_BIND, "")
    if given:
        sets = len(given.split("|"))
        if sets < ranks:
            raise ConfigError(f"{ENV_BIND}={given!r} has {sets} core set(s) for {ranks} CPU ranks "
                              f"(dp * tp * pp): set {ENV_BIND}={split_cores(cores, ranks)!r} or unset it "
                              "and sglang-fair serve chooses")
        return None
    if ranks <= (numa_node_count() if numa_nodes is None else numa_nodes):
        return None  # SGLang binds each rank to a NUMA node of its own
    env[ENV_BIND] = split_cores(cores, ranks)
    shared = " (fewer cores than ranks: ranks share cores)" if ranks > len(cores) else ""
    return (f"sglang-fair: {ENV_BIND}={env[ENV_BIND]} (one core range per CPU rank{shared}; "
            "set it yourself to choose the cores)")

