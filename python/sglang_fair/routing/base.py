"""The routing interface: which worker gets a request.

A host (the fair router process, the simulator, a test) drives a :class:`RoutingPolicy`:

    route(req) -> worker      choose a worker and record the dispatch (queue size +1; policies
                              that keep the global tree insert the input tokens for that worker;
                              the policy's own charge, e.g. D²LPM's counter)
    observe(req, worker)      another router replica dispatched ``req`` to ``worker``: record it as
                              :meth:`route` would have, without choosing (``routing/replicas.py``)
    on_finish(worker, client, output_tokens)
                              the request finished (or was aborted) there: queue size -1
    on_evict(worker, tokens, start)
                              the worker's cache dropped ``tokens[start:]``
    on_prefill_budget(worker, tokens)
                              the worker can still take ``tokens`` prefill tokens within its TTFT
                              target (FairBatching's report; only ``pab`` reads it)
    on_load(worker, load)     the worker's own report (:class:`WorkerLoad`: requests running and
                              waiting there, its measured service rate), every heartbeat: the base
                              keeps it and learns the worker's capacity from it
    forget(client)            drop the client's per-client state (it returns as a new client)
    set_client_weights(weights)
                              the tenant file was reloaded: every client's weight from the next
                              refill on (counters keep what they hold)

    mark_dead(worker) / mark_alive(worker)
                              failure handling: a dead worker gets nothing, its queue size is
                              reset and the tree forgets what it cached

Queue size s_w counts requests dispatched to w and not yet finished, as in [1] Alg. 2. Ties between
equally good workers go to the lowest index, so runs are deterministic. Time is never read.

Capacity c_w, the requests worker w runs at once when it has more than it can run: at first its
configured maximum (``worker_capacity``, or the cap its reports name: SGLang's max running requests),
then learned from its load reports (:meth:`RoutingPolicy.on_load`): a worker that reports requests
waiting runs all it can, so c_w is what it runs; one with nothing waiting runs at least what it runs.
Where the KV pool binds before the running cap (long requests, large caps) c_w is far below the
configured maximum. And c_w is at most the worker's knee: the batch beyond which its decode throughput
grows by little (``core/knee.py``; on a CPU about ten requests where it has 256 slots), as the worker
measures and reports it or, until it has, the median of the knees the other live workers reported (the
workers of one data-parallel server run one model on like devices; a worker that knows its own and one
that does not would otherwise be filled by different measures). So a policy that balances or spills by
c_w means the same on every machine and at every cap.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, NamedTuple, Protocol

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.global_tree import GlobalRadixTree, TokenKey, token_count

SERVER_BALANCERS = ("round_robin", "client_hash")  # per_server's load balancers over servers


class RouteRequest(Protocol):
    @property
    def rid(self) -> Hashable: ...
    @property
    def client(self) -> str: ...
    @property
    def tokens(self) -> TokenKey: ...  # token ids, or packed (global_tree.pack_tokens)


@dataclass(frozen=True)
class RouterConfig:
    """Configuration of the global router; defaults of cache_aware are the SGLang router's (flags
    ``--router-...``, in ``serve``, ``sim`` and the router process alike)."""

    flag_prefix: ClassVar[str] = "router_"

    policy: str = field(default="fair_cache_aware", metadata={"help": "routing policy"})
    num_workers: int = field(default=1, metadata={"help": "number of data-parallel workers"})
    quantum: float = field(default=16384.0, metadata={"help": "Q^w of D2LPM: per-worker quantum"})
    quantum_requests: float = field(default=4.0, metadata={
        "help": "fair_cache_aware: a client's per-worker quantum is at least this many of its largest "
                "recent requests"})
    quantum_s: float = field(default=2.0, metadata={
        "help": "fair_cache_aware: a client's per-worker credit per refill, in seconds of a worker's "
                "measured service (reported with its load); 0, or before any report: --router-quantum units"})
    spill_ratio: float = field(default=1.5, metadata={
        "help": "fair_cache_aware: a request goes to the least-filled worker instead of its chosen one when "
                "that is filled more than this x the least's fill + --router-spill-slack (fill: requests "
                "in flight per request a worker runs at once)"})
    spill_slack: float = field(default=0.0625, metadata={
        "help": "fair_cache_aware: see --router-spill-ratio"})
    spread_backlog: float = field(default=1.0, metadata={
        "help": "fair_cache_aware: a client with more than this x a worker's capacity in flight at the "
                "holder of its prompt, and none at a worker not overfilled, goes there (clients placed by "
                "their prompts are then served across workers, not per worker); 0: never"})
    hold_threshold: float = field(default=0.1, metadata={
        "help": "fair_cache_aware: a request goes to the holders of its longest cached match when it covers "
                "more than this share of the prompt (cache_aware: --router-cache-threshold)"})
    cache_threshold: float = field(default=0.3, metadata={"help": "cache_aware: match rate to exploit"})
    balance_abs_threshold: int = field(default=64, metadata={
        "help": "cache_aware: max-min load; d2lpm_guarded: holder's minus lightest queue"})
    balance_rel_threshold: float = field(default=1.5, metadata={
        "help": "cache_aware: max/min load; d2lpm_guarded: holder's / lightest queue"})
    guard_min_match: int = field(default=64, metadata={
        "help": "d2lpm_guarded: tokens a match needs to count as holding the prefix"})
    preble_threshold: float = field(default=0.5, metadata={"help": "preble: match ratio to exploit"})
    preble_window: int = field(default=4096, metadata={"help": "preble: dispatches in the load window"})
    preble_balance: float = field(default=1.5, metadata={
        "help": "preble: load ratio (chosen / lightest) that redirects to the lightest worker"})
    max_tree_tokens: int = field(default=1 << 26, metadata={"help": "bound of the global tree"})
    server_workers: int = field(default=0, metadata={
        "help": "per_server: workers per server (consecutive indices); 0 = one server of all"})
    server_balancer: str = field(default="round_robin", metadata={
        "help": "per_server: how the load balancer picks a server", "choices": SERVER_BALANCERS})
    server_policy: str = field(default="fair_cache_aware", metadata={
        "help": "per_server: each server's own routing policy over its workers"})
    worker_capacity: int = field(default=0, metadata={
        "help": "requests a worker runs at once before its reports say (SGLang's max running requests; "
                "0: 64 until the first report)"})
    cost: CostModel = field(default_factory=CostModel)

    def __post_init__(self) -> None:
        require(self.num_workers >= 1, f"num_workers must be >= 1, got {self.num_workers}")
        require(self.quantum > 0, f"--router-quantum (Q^w) must be > 0, got {self.quantum}")
        require(self.quantum_s >= 0, f"--router-quantum-s must be >= 0, got {self.quantum_s}")
        require(self.spill_ratio >= 1, f"--router-spill-ratio must be >= 1, got {self.spill_ratio}")
        require(self.spill_slack >= 0, f"--router-spill-slack must be >= 0, got {self.spill_slack}")
        require(self.spread_backlog >= 0, f"--router-spread-backlog must be >= 0, got {self.spread_backlog}")
        require(self.quantum_requests >= 1,
                f"--router-quantum-requests must be >= 1, got {self.quantum_requests}")
        for name in ("cache_threshold", "preble_threshold", "hold_threshold"):
            value = getattr(self, name)
            require(0 <= value <= 1, f"{name} must be in [0, 1], got {value}")
        require(self.balance_abs_threshold >= 0, "balance_abs_threshold must be >= 0")
        require(self.balance_rel_threshold >= 1, "balance_rel_threshold must be >= 1")
        require(self.guard_min_match >= 0, f"guard_min_match must be >= 0, got {self.guard_min_match}")
        require(self.max_tree_tokens > 0, "max_tree_tokens must be > 0")
        require(self.preble_window >= 1, f"preble_window must be >= 1, got {self.preble_window}")
        require(self.preble_balance >= 1, f"preble_balance must be >= 1, got {self.preble_balance}")
        require(self.server_workers >= 0, f"server_workers must be >= 0, got {self.server_workers}")
        require(self.worker_capacity >= 0, f"worker_capacity must be >= 0, got {self.worker_capacity}")
        require(self.server_balancer in SERVER_BALANCERS,
                f"server_balancer must be one of {SERVER_BALANCERS}, got {self.server_balancer!r}")


DEFAULT_CAPACITY = 64  # requests a worker is assumed to run at once until it reports (SGLang's CPU default)


class WorkerLoad(NamedTuple):
    """A worker's report of itself (its heartbeat): requests running and waiting in its scheduler, its
    measured service rate (the admission policy's cost units per busy second; 0: not measured), its
    cap on running requests (SGLang's max running requests; 0: not said) and its knee (the batch
    beyond which its decode throughput grows by little; 0: not measured)."""

    running: int
    waiting: int
    service_rate: float = 0.0
    max_running: int = 0
    knee: int = 0


class NoWorkerError(RuntimeError):
    """Every worker is marked dead."""


def least_loaded(workers: Iterable[int], queue: Sequence[int]) -> int:
    """The worker of ``workers`` with the smallest queue (lowest index on ties: ``min`` keeps the first)."""
    return min(sorted(workers), key=queue.__getitem__)


class RoutingPolicy(ABC):
    """Base class: keeps queue sizes and, for policies that need it, the global radix tree."""

    name: ClassVar[str]
    uses_tree: ClassVar[bool] = False

    def __init__(self, config: RouterConfig) -> None:
        self.config = config
        self.workers = range(config.num_workers)
        self.alive = list(self.workers)  # workers that may receive requests, ascending
        self.queue = [0] * config.num_workers
        self.tree = GlobalRadixTree(config.max_tree_tokens)
        self.routed_tokens = [0] * config.num_workers  # input tokens dispatched to each worker
        self.matched_tokens = [0] * config.num_workers  # of which the tree said it already held
        self.learned = [config.worker_capacity or DEFAULT_CAPACITY] * config.num_workers  # from slots and KV
        self.capacity = list(self.learned)  # c_w: the learned capacity, at most the knee
        self.reports: list[WorkerLoad | None] = [None] * config.num_workers  # each worker's last
        self.saturated = [False] * config.num_workers  # has reported requests waiting
        self._held: tuple[RouteRequest, dict[int, int]] | None = None  # held(), for the request at hand

    def hit_estimate(self, worker: int) -> float | None:
        """The share of input tokens dispatched to ``worker`` that the tree recorded it as holding
        (None for policies without a tree, or before any dispatch)."""
        routed = self.routed_tokens[worker]
        return self.matched_tokens[worker] / routed if self.uses_tree and routed else None

    def counter_view(self) -> dict[str, list[float]]:
        """Per-client counters per worker, for views (D²LPM's q[client][worker]; empty otherwise)."""
        return {}

    def route(self, req: RouteRequest) -> int:
        if not self.alive:
            raise NoWorkerError("no live worker to route to")
        worker = self.choose(req)
        self.observe(req, worker)
        return worker

    def observe(self, req: RouteRequest, worker: int) -> None:
        """Record the dispatch of ``req`` to ``worker``: the policy's :meth:`charge`, the queue size,
        the tree. :meth:`route` calls it for its own choice; a host calls it for a peer replica's."""
        if worker not in self.workers:
            raise ConfigError(f"unknown worker {worker}")
        self.charge(req, worker)
        self._held = None
        self.queue[worker] += 1
        if self.uses_tree:
            self.matched_tokens[worker] += self.tree.insert(req.tokens, worker)
            self.routed_tokens[worker] += token_count(req.tokens)

    @abstractmethod
    def choose(self, req: RouteRequest) -> int:
        """Pick a worker of ``self.alive`` for ``req``; :meth:`observe` records the dispatch."""

    def charge(self, req: RouteRequest, worker: int) -> None:  # noqa: B027 (an optional hook)
        """Hook: what the policy keeps per dispatch besides the queue and the tree (called before the
        tree insert, by :meth:`route` and for a peer's dispatch alike)."""

    def held(self, req: RouteRequest) -> dict[int, int]:
        """Each worker's cached match of ``req``'s tokens by the tree, walked once per dispatch (the
        choice and the charge both read it)."""
        if self._held is None or self._held[0] is not req:
            self._held = (req, self.tree.match_lengths(req.tokens))
        return self._held[1]

    def mark_dead(self, worker: int) -> None:
        require(worker in self.workers, f"unknown worker {worker}")
        if worker in self.alive:
            self.alive.remove(worker)
        self.queue[worker] = 0
        self.tree.forget_worker(worker)

    def mark_alive(self, worker: int) -> None:
        require(worker in self.workers, f"unknown worker {worker}")
        if worker not in self.alive:
            self.alive = sorted([*self.alive, worker])

    def on_finish(self, worker: int, client: str, output_tokens: int) -> None:
        if output_tokens < 0:  # not require(): its message would be formatted at every finish
            raise ConfigError(f"negative output tokens {output_tokens}")
        if worker not in self.workers:
            raise ConfigError(f"unknown worker {worker}")
        self.queue[worker] = max(0, self.queue[worker] - 1)

    def set_client_weights(self, weights: Mapping[str, float]) -> None:
        """Run with ``weights`` (client -> weight; others 1) from now on: the next refill of a
        client's counters uses its new weight, what they already hold stays."""
        self.config = replace(self.config, cost=replace(self.config.cost, client_weights=weights))

    def forget(self, client: str) -> None:  # noqa: B027 (an optional hook)
        """Drop what the policy keeps per ``client`` (the host forgets clients idle for a TTL; one that
        comes back is a new client)."""

    def on_prefill_budget(self, worker: int, tokens: float) -> None:  # noqa: B027 (an optional hook)
        """Hook: ``worker`` reported its prefill admission budget."""

    def on_evict(self, worker: int, tokens: TokenKey, start: int = 0) -> None:
        if self.uses_tree:
            self.tree.remove(tokens, worker, start)

    def on_load(self, worker: int, load: WorkerLoad) -> None:
        """``worker``'s report of itself: kept, and its capacity c_w learned (module docstring)."""
        if worker not in self.workers:
            raise ConfigError(f"unknown worker {worker}")
        self.reports[worker] = load
        learned = self.learned
        if load.waiting > 0:
            self.saturated[worker] = True
            learned[worker] = max(1, load.running)
        elif not self.saturated[worker] and load.max_running:
            learned[worker] = max(load.running, load.max_running)  # its cap, until it fills
        else:
            learned[worker] = max(learned[worker], load.running)
        knees = [r.knee if r is not None else 0 for r in self.reports]  # 0: not measured
        told = sorted(knees[w] for w in self.alive if knees[w])
        fleet = told[(len(told) - 1) // 2] if told else 0  # for a worker that has not measured its own
        self.capacity = [min(c, knees[w] or fleet) if knees[w] or fleet else c for w, c in enumerate(learned)]

    def fill(self, worker: int) -> float:
        """Requests in flight at ``worker`` per request it runs at once (> 1: some wait there)."""
        return self.queue[worker] / self.capacity[worker]

    def service_rate(self) -> float:
        """The live workers' mean reported service rate (0 until one reports a rate)."""
        reports = [self.reports[w] for w in self.alive]
        rates = [r.service_rate for r in reports if r is not None and r.service_rate > 0]
        return sum(rates) / len(rates) if rates else 0.0
