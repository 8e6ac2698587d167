"""The memory the harness's servers take: each server's whole process tree, sampled in the background.

:data:`SAMPLER` watches every server that :func:`sglang_fair.harness.server.running_server` and
:mod:`sglang_fair.harness.cluster` start; the end-to-end tests read its peaks after each module and fail
a module whose servers went past their budget (``tests/e2e/conftest.py``). A server's footprint is the
sum of its processes' proportional set sizes (PSS: a page shared by n processes counts 1/n in each, so
the libraries every SGLang process maps are not counted once per process); the largest single process's
resident set (RSS) is kept beside it, since that is what an OOM killer picks.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

GIB = 2**30


@dataclass
class Peak:
    """The most one server took at any sample: its processes' PSS summed, and its largest process."""

    name: str
    pss: int = 0
    largest_rss: int = 0
    largest: str = ""

    def describe(self) -> str:
        return (f"{self.name}: {self.pss / GIB:.2f} GiB (PSS of its processes), largest process "
                f"{self.largest} {self.largest_rss / GIB:.2f} GiB RSS")


def role(cmdline: list[str], name: str) -> str:
    """A short name for one process of a server: SGLang's process titles (``sglang::scheduler_DP0``)
    where it set them, else the program."""
    title = " ".join(cmdline) or name
    return title.split()[0][-40:] if title.startswith("sglang::") else name


def sample_tree(pid: int) -> tuple[int, int, str] | None:
    """(PSS summed, largest RSS, its process's role) over ``pid`` and every descendant; None if gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    pss = largest = 0
    which = ""
    for p in procs:
        try:
            info = p.memory_full_info()
            title = role(p.cmdline(), p.name())
        except psutil.Error:
            continue
        pss += getattr(info, "pss", info.rss)
        if info.rss > largest:
            largest, which = info.rss, title
    return pss, largest, which


class PeakSampler:
    """Samples every watched server's tree each ``interval`` seconds in a daemon thread (running only
    while something is watched) and keeps each server's :class:`Peak`."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.enabled = False  # the e2e tests turn it on; benchmarks run without the sampling thread
        self.peaks: list[Peak] = []
        self._watched: dict[int, Peak] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, name: str, popen: Any) -> None:
        """Start sampling the server whose launcher process is ``popen`` (a ``subprocess.Popen``), if
        :attr:`enabled`."""
        if not self.enabled:
            return
        peak = Peak(name)
        with self._lock:
            self.peaks.append(peak)
            self._watched[popen.pid] = peak
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
                self._thread.start()

    def unwatch(self, popen: Any) -> None:
        """Take a last sample of the server (call before stopping it) and stop watching it."""
        with self._lock:
            peak = self._watched.pop(popen.pid, None)
        if peak is not None:
            self._record(popen.pid, peak)

    def take(self) -> list[Peak]:
        """The peaks recorded since the last call (of servers stopped or still running); forgets them."""
        with self._lock:
            taken, self.peaks = self.peaks, [p for p in self.peaks if p in self._watched.values()]
        return taken

    def _record(self, pid: int, peak: Peak) -> None:
        got = sample_tree(pid)
        if got is None:
            return
        pss, largest, which = got
        peak.pss = max(peak.pss, pss)
        if largest > peak.largest_rss:
            peak.largest_rss, peak.largest = largest, which

    def _run(self) -> None:
        while True:
            with self._lock:
                watched = list(self._watched.items())
                if not watched:
                    self._thread = None
                    return
            for pid, peak in watched:
                self._record(pid, peak)
            time.sleep(self.interval)


def over_budget(peaks: list[Peak], budget: int) -> list[Peak]:
    """The servers whose footprint (PSS summed) went past ``budget`` bytes."""
    return [p for p in peaks if p.pss > budget]


SAMPLER = PeakSampler()
