"""The admission interface: which waiting requests enter the running batch, and in what order.

A host (the SGLang scheduler, the simulator, a test) drives an :class:`AdmissionPolicy` through the
life of each request:

    on_arrival(req)        the request joins the waiting queue
    select(waiting, budget) -> admitted requests, in order; the policy charges their extend cost
    on_output(client, n)   n output tokens were produced for ``client`` (the first token included)
    on_retract(req)        a running request went back to the waiting queue (memory pressure)
    on_finish(req)         a running request left the batch (finished or aborted)
    on_drop(req)           a waiting request left the queue without running (aborted)

Charging rule, the same for every policy: a request's admission cost, w_e * (input - cached prefix)
(VTC, as in 001, counts all input), is charged once, when it is first admitted; a retracted request
admitted again is not charged a second time (the recomputation is the system's choice, not the
client's). Output tokens are charged as they are produced, so tokens produced before a retraction
or an abort stay charged.

Time is never read: requests carry their arrival time, and the order of calls is the clock.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, TypeVar

from sglang_fair.admission.band_names import MAX_BAND, parse_bands
from sglang_fair.admission.quantum import Quantum
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError, require


class WaitingRequest(Protocol):
    """What a policy may read of a request. ``cached_len`` is the prefix the local cache holds now."""

    @property
    def rid(self) -> Hashable: ...
    @property
    def client(self) -> str: ...
    @property
    def input_len(self) -> int: ...
    @property
    def cached_len(self) -> int: ...
    @property
    def arrival(self) -> float: ...


R = TypeVar("R", bound=WaitingRequest)


class Budget(Protocol):
    """The host's capacity check for one admission step (SGLang's PrefillAdder plays this role).

    A budget may also have ``room() -> int | None``: how many more requests the worker's running-request
    cap lets this step start (None: unknown), read through :func:`room_of`. The reserves (``headroom.py``,
    ``light_reserve.py``) need it; a budget without it gets none.
    """

    def try_add(self, req: WaitingRequest) -> bool:
        """Reserve room for ``req`` and return True if it fits; otherwise change nothing, return False."""
        ...

    def exhausted(self) -> bool:
        """True when no further request can be admitted in this step."""
        ...


def room_of(budget: Budget) -> Callable[[], int | None] | None:
    """``budget``'s ``room`` (see :class:`Budget`), or None if it has none."""
    room: Callable[[], int | None] | None = getattr(budget, "room", None)
    return room


@dataclass(frozen=True)
class AdmissionConfig:
    """Configuration of a worker's admission policy (flags ``--fair-...``: ``--fair-quantum``)."""

    flag_prefix: ClassVar[str] = "fair_"

    policy: str = field(default="dlpm_light", metadata={"help": "admission policy"})
    quantum: float = field(default=0.0, metadata={
        "help": "Q^u in service units (w_e x extend + w_q x output tokens) per DLPM refill, times the "
                "client's weight; overrides --fair-quantum-s; 0: the policy's default (dlpm 4096 units, "
                "dlpm_light a quantum in seconds)"})
    cost: CostModel = field(default_factory=CostModel)
    quantum_s: float = field(default=0.0, metadata={
        "help": "Q^u as seconds of the worker's measured service (never below one request's cost), "
                "times the client's weight; 0: the policy's default (dlpm_light 0.25 s; dlpm: none, "
                "its quantum is in units)"})

    client_bands: Mapping[str, float] = field(default_factory=dict, metadata={
        "parse": parse_bands,
        "help": "priority band per client, 'chat=interactive,etl=batch' (interactive 0, standard 1, batch 2, "
                "or numbers; 0 first; unnamed clients 1; a tenant file's band too): strict priority between "
                "bands, the policy's fairness inside each (dlpm, dlpm_light; docs/guides/tenants.md)"})
    band_aging_s: float = field(default=10.0, metadata={
        "help": "seconds a request of a later band waits before it is admitted as if of band 0 (no band "
                "starves; with --fair-client-bands)"})
    band_reserve_s: float = field(default=30.0, metadata={
        "help": "a band with a request waiting or running in the last this many seconds keeps running slots "
                "free for its peak in-flight count of the last 1-2 such windows: later bands are admitted "
                "only into the rest (admission/headroom.py; with --fair-client-bands; 0: no reserve)"})
    band_reserve_margin: float = field(default=0.25, metadata={
        "help": "a band's reserve over its peak in-flight count (--fair-band-reserve-s), as a share of that "
                "peak, rounded up: room for the next arrival past the peak"})
    band_reserve_share: float = field(default=0.5, metadata={
        "help": "the most of the worker's running slots the reserves of --fair-band-reserve-s may hold"})
    band_reserve_floor: int = field(default=1, metadata={
        "help": "running slots a band named before the last band in use (--fair-client-bands, a tenant file) "
                "keeps free even while quiet, so that its first request starts at once (within "
                "--fair-band-reserve-share; with --fair-band-reserve-s > 0; 0: none)"})
    band_prefill_share: float = field(default=0.1, metadata={
        "help": "while an earlier band has a request in flight, the later bands' prefill steps take at most "
                "this share of the worker's time, one request a step (admission/pace.py; with "
                "--fair-band-reserve-s > 0; 1: no pacing)"})

    def __post_init__(self) -> None:
        for client, band in self.client_bands.items():
            require(band >= 0 and float(band).is_integer() and band <= MAX_BAND,
                    f"band of client {client!r} must be a whole number in [0, {MAX_BAND}], got {band}")
        object.__setattr__(self, "client_bands", {c: int(b) for c, b in self.client_bands.items()})
        require(self.band_aging_s > 0, f"--fair-band-aging-s must be > 0, got {self.band_aging_s}")
        require(self.band_reserve_s >= 0, f"--fair-band-reserve-s must be >= 0, got {self.band_reserve_s}")
        require(self.band_reserve_margin >= 0,
                f"--fair-band-reserve-margin must be >= 0, got {self.band_reserve_margin}")
        require(0 <= self.band_reserve_share < 1,
                f"--fair-band-reserve-share must be in [0, 1), got {self.band_reserve_share}")
        require(self.band_reserve_floor >= 0,
                f"--fair-band-reserve-floor must be >= 0, got {self.band_reserve_floor}")
        require(0 < self.band_prefill_share <= 1,
                f"--fair-band-prefill-share must be in (0, 1], got {self.band_prefill_share}")
        require(self.quantum >= 0,
                f"--fair-quantum (Q^u) must be >= 0 (0: the policy's default), got {self.quantum}")
        require(self.quantum_s >= 0,
                f"--fair-quantum-s must be >= 0 (0: the policy's default), got {self.quantum_s}")


def extend_len(req: WaitingRequest) -> int:
    """Input tokens the request must prefill: its input minus the cached prefix."""
    require(req.input_len >= 0, f"request {req.rid!r}: negative input length {req.input_len}")
    require(
        0 <= req.cached_len <= req.input_len,
        f"request {req.rid!r}: cached prefix {req.cached_len} outside [0, {req.input_len}]",
    )
    return req.input_len - req.cached_len


@dataclass
class ClientBook:
    """Per-client bookkeeping every policy keeps: where requests are and what was charged."""

    queued: Counter[str] = field(default_factory=Counter)
    running: Counter[str] = field(default_factory=Counter)
    charged_rids: set[Hashable] = field(default_factory=set)
    service: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))  # cost charged

    def active(self, client: str) -> bool:
        return self.queued[client] > 0 or self.running[client] > 0


@dataclass(frozen=True)
class ClientView:
    """A read-only view of one client for dashboards and metrics."""

    counter: float | None
    service: float
    queued: int
    running: int


class AdmissionPolicy(ABC):
    """Base class: keeps the :class:`ClientBook`; subclasses order requests and keep counters.

    Capabilities a host reads: ``orders_by_cache``: the order reads each waiting request's
    ``cached_len``, so a host must match every waiting request against its prefix cache before
    :meth:`select` (others need only the admitted ones matched); ``uses_quantum``: the policy reads
    ``quantum`` (Q^u: ``config.quantum`` units; else ``config.quantum_s`` or ``default_quantum_s``
    seconds of the worker's measured service, :mod:`sglang_fair.admission.quantum`; else
    ``default_quantum`` units).

    Time: a host calls :meth:`tick` with the time now (any origin) before each :meth:`select`; the
    policy measures the worker's service rate from it (:attr:`service_rate`), the one thing a quantum
    in seconds needs. Without ticks a quantum in seconds is the largest recent request's cost.
    """

    name: ClassVar[str]
    orders_by_cache: ClassVar[bool] = False
    uses_quantum: ClassVar[bool] = False
    default_quantum: ClassVar[float] = 4096.0
    default_quantum_s: ClassVar[float] = 0.0  # > 0: the default quantum is this many seconds of service
    supports_bands: ClassVar[bool] = False  # keeps priority bands (config.client_bands, bands.py)

    def __init__(self, config: AdmissionConfig) -> None:
        self.config = config
        self.cost = config.cost
        self.book = ClientBook()
        seconds = config.quantum_s or self.default_quantum_s
        tokens = config.quantum or (0.0 if seconds else self.default_quantum)
        self._quantum = Quantum(tokens, seconds)
        self.served = 0.0  # service charged to every client so far
        self.now: float | None = None  # the host's clock at the last tick (None: it never ticks)

    @property
    def quantum(self) -> float:
        """Q^u now, before the client's weight."""
        return self._quantum.value()

    @property
    def service_rate(self) -> float:
        """The worker's measured service per busy second (0 before the first ticks)."""
        return self._quantum.meter.rate

    def tick(self, now: float) -> None:
        """The host's clock, in seconds of any origin, read before admission."""
        book = self.book
        busy = any(book.queued.values()) or any(book.running.values())
        self._quantum.meter.tick(now, self.served, busy)
        self.now = now

    # ---- events -------------------------------------------------------------------------------
    def on_arrival(self, req: WaitingRequest) -> None:
        require(req.input_len >= 0, f"request {req.rid!r}: negative input length {req.input_len}")
        self.book.queued[req.client] += 1

    def on_output(self, client: str, tokens: int) -> None:
        self._charge(client, self.cost.output_cost(tokens))

    def on_retract(self, req: WaitingRequest) -> None:
        """Back to the waiting queue; the client stays active, so no counter is reset."""
        self._leave_running(req.client)
        self._requeue(req)
        self.book.queued[req.client] += 1

    def on_finish(self, req: WaitingRequest) -> None:
        self._leave_running(req.client)
        self.book.charged_rids.discard(req.rid)

    def on_drop(self, req: WaitingRequest) -> None:
        require(self.book.queued[req.client] > 0, f"drop of {req.rid!r}: client has no queued request")
        self.book.queued[req.client] -= 1
        self.book.charged_rids.discard(req.rid)

    def forget(self, client: str) -> bool:
        """Drop the state of ``client`` if it has nothing waiting or running (it returns as a new
        client); False, and nothing changes, if it is active. Hosts bound their memory with it."""
        if self.book.active(client):
            return False
        for table in (self.book.queued, self.book.running, self.book.service):
            table.pop(client, None)
        return True

    @abstractmethod
    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        """Admit requests from ``waiting`` while ``budget`` allows; return them in admission order."""

    # ---- views ----------------------------------------------------------------------------------
    def counter(self, client: str) -> float | None:
        """The policy's per-client counter (deficit or virtual tokens), or None if it keeps none."""
        return None

    def snapshot(self) -> dict[str, ClientView]:
        book = self.book
        clients = set(book.queued) | set(book.running) | set(book.service)
        return {
            c: ClientView(self.counter(c), float(book.service[c]), book.queued[c], book.running[c])
            for c in sorted(clients)
        }

    # ---- helpers for subclasses ------------------------------------------------------------------
    def _admit(self, req: WaitingRequest) -> float:
        """Move ``req`` from queued to running; return the extend cost to charge (0 if already paid)."""
        book = self.book
        if book.queued[req.client] <= 0:  # not require(): its message would be formatted at every admission
            raise ConfigError(f"admission of {req.rid!r}: client has no queued request")
        book.queued[req.client] -= 1
        book.running[req.client] += 1
        if req.rid in book.charged_rids:
            return 0.0
        book.charged_rids.add(req.rid)
        cost = self.admission_cost(req)
        self._quantum.note_admission(cost)
        return cost

    def admission_cost(self, req: WaitingRequest) -> float:
        """Service charged when ``req`` is admitted: w_e times its extend length ([1] §3)."""
        return self.cost.extend_cost(extend_len(req))

    def _requeue(self, req: WaitingRequest) -> None:  # noqa: B027 (an optional hook)
        """Hook: a retracted request is about to rejoin the waiting queue."""

    def _charge(self, client: str, amount: float) -> None:
        """Record ``amount`` of service for ``client``; subclasses also move their counters."""
        self.book.service[client] += amount
        self.served += amount

    def _leave_running(self, client: str) -> None:
        require(self.book.running[client] > 0, f"client {client!r} has no running request")
        self.book.running[client] -= 1
