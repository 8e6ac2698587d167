"""Reloading the tenant file (``--client-keys``) while serving: on SIGHUP and when the file changes.

:class:`LiveTenants` holds the key table in force; the edge's readers (the identity middleware, the
gateway's intake and pages) read ``live.table`` on every request, and a reload replaces it whole, so a
request in flight keeps the tenant it was admitted as and the next one sees the new file.

:class:`TenantReloader` looks at the file at most every ``poll_s`` seconds (:meth:`~TenantReloader.poll`,
time passed in) and at once after :meth:`~TenantReloader.request` (SIGHUP). An unchanged file does
nothing; an invalid one is refused with a log line naming ``file:line`` and the running table stays; a
valid one is compared part by part (:data:`PARTS`): the parts this process can change live (``live``)
are applied through ``apply``, and a changed part that needs a restart here keeps its running value,
with a log line naming it. :func:`watch` runs a reloader in a daemon thread and wakes it on SIGHUP.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.keys import KeyTable, load_key_file

logger = logging.getLogger("sglang_fair")
POLL_S = 2.0
PARTS = ("clients", "weights", "budgets", "bands", "request_priority")  # KeyTable's fields
PART_NAMES = {"clients": "keys", "weights": "weights", "budgets": "budgets", "bands": "bands",
              "request_priority": "allow_request_priority"}


class LiveTenants:
    """The key table in force (replaced whole by a reload; readers read :attr:`table` per request)."""

    def __init__(self, table: KeyTable) -> None:
        self.table = table


def live(keys: KeyTable | LiveTenants) -> LiveTenants:
    """``keys`` as a :class:`LiveTenants` (a fixed table: one that never changes)."""
    return keys if isinstance(keys, LiveTenants) else LiveTenants(keys)


@dataclass(frozen=True)
class Outcome:
    """What one reload did: ``applied`` the parts that changed and were applied, ``kept`` those that
    changed but need a restart here, ``error`` why the file was refused (then nothing changed)."""

    applied: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    error: str = ""


def changed_parts(old: KeyTable, new: KeyTable) -> list[str]:
    """The parts (:data:`PARTS`) in which ``new`` differs from ``old``."""
    return [part for part in PARTS if getattr(old, part) != getattr(new, part)]


class TenantReloader:
    """Reloads the tenant file ``path`` into ``apply`` (see the module docstring).

    ``apply(table)`` gets the table to run with (the new file's live parts, the running values of the
    others); it must check before it changes anything, and raise :class:`ConfigError` to refuse (e.g. a
    weight that conflicts with ``--client-weights``). ``who`` names this process in the log lines."""

    def __init__(self, path: str, table: KeyTable, apply: Callable[[KeyTable], None],
                 live_parts: frozenset[str], who: str = "serve", poll_s: float = POLL_S) -> None:
        self.path, self.table, self.apply, self.live_parts = path, table, apply, live_parts
        self.who, self.poll_s = who, poll_s
        self.requested = False
        self.looked_at: float | None = None
        self.stamp = self._stamp()
        self.text = self._read()

    def request(self) -> None:
        """Reload at the next :meth:`poll`, changed or not (SIGHUP)."""
        self.requested = True

    def poll(self, now: float) -> Outcome | None:
        """Look at the file if ``poll_s`` passed since the last look or a reload was requested; None
        when nothing was looked at or nothing changed."""
        forced = self.requested
        if not forced and self.looked_at is not None and now - self.looked_at < self.poll_s:
            return None
        self.requested, self.looked_at = False, now
        stamp = self._stamp()
        if not forced and stamp == self.stamp:
            return None
        self.stamp = stamp
        text = self._read()
        if text == self.text and not forced:
            return None
        self.text = text
        return self.reload()

    def reload(self) -> Outcome:
        """Read, check and apply the file now."""
        try:
            new = load_key_file(self.path)
        except ConfigError as err:
            return self._refuse(str(err))
        parts = changed_parts(self.table, new)
        kept = tuple(p for p in parts if p not in self.live_parts)
        applied = tuple(p for p in parts if p in self.live_parts)
        if not parts:
            return Outcome()
        table = dataclasses.replace(new, **{p: getattr(self.table, p) for p in kept})
        if applied:
            try:
                self.apply(table)
            except ConfigError as err:
                return self._refuse(f"{self.path}: {err}")
            self.table = table
            logger.warning("sglang-fair %s: reloaded %s: %s changed and applied (%d tenants, %d keys)",
                           self.who, self.path, ", ".join(PART_NAMES[p] for p in applied),
                           len(set(table.clients.values())), len(table.clients))
        if kept:
            logger.error("sglang-fair %s: reloaded %s: its %s changed but cannot change here while "
                         "serving: kept as they were; restart to apply them", self.who, self.path,
                         ", ".join(PART_NAMES[p] for p in kept))
        return Outcome(applied, kept)

    def _refuse(self, why: str) -> Outcome:
        logger.error("sglang-fair %s: tenant file refused, the running configuration stays: %s",
                     self.who, why)
        return Outcome(error=why)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _read(self) -> str | None:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return None


def watch(reloader: TenantReloader, sighup: bool = True,
          clock: Callable[[], float] = time.monotonic) -> Callable[[], None]:
    """Poll ``reloader`` in a daemon thread every ``poll_s`` seconds, at once on SIGHUP (``sighup``:
    install the handler; only the main thread can). Returns a function that stops the thread."""
    wake, stop = threading.Event(), threading.Event()

    def on_sighup(_signum: int, _frame: object) -> None:
        reloader.request()
        wake.set()

    def loop() -> None:
        while not stop.is_set():
            wake.wait(reloader.poll_s)
            wake.clear()
            try:
                reloader.poll(clock())
            except Exception:  # a reload that fails is logged; the watch goes on
                logger.exception("sglang-fair %s: reloading %s failed", reloader.who, reloader.path)

    if sighup and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGHUP, on_sighup)
    threading.Thread(target=loop, name="sglang-fair-tenant-reload", daemon=True).start()

    def stop_watch() -> None:
        stop.set()
        wake.set()

    return stop_watch
