"""The health of background loops: log with context, back off, keep running, report.

Every background loop of a store (the TTL purge, partition maintenance, the
global-index applier) catches whatever a pass raises, so one failure never ends
it; :class:`LoopHealth` does the rest the same way for each:

* **log** the failure on the ``widetable.background`` logger with the loop's
  name, what it was doing and how many failures in a row (the traceback with
  the first of a streak, then one line each, so a stuck loop cannot flood it);
* **back off**: the delay before the next try doubles with each failure in a
  row, from ``base`` up to ``cap`` seconds, with jitter; a pass that works
  resets it;
* **report**: :meth:`LoopHealth.state` is a :class:`~widetable.descriptions.LoopState`
  (ok, the last error, when, how often), shown by ``describe_table``,
  ``widetable describe`` and the server's health endpoint.

A leaf module: the layers that run loops (``index``, ``db``) import it.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from .descriptions import LoopState

log = logging.getLogger("widetable.background")

BASE_DELAY = 0.5  # seconds before the first retry
MAX_DELAY = 30.0  # seconds at most between two tries


class LoopHealth:
    """The state of one background loop. Thread-safe; cheap enough to call on every pass."""

    def __init__(self, name: str, base: float = BASE_DELAY, cap: float = MAX_DELAY) -> None:
        self.name = name
        self.base, self.cap = base, cap
        self.error: str | None = None
        self.error_at: float | None = None
        self.errors = 0
        self.streak = 0  # failures in a row
        self.ok_at: float | None = None
        self.running = False
        self._lock = threading.Lock()

    def ok(self) -> None:
        """A pass worked: the loop is healthy again."""
        if self.streak:
            log.info("widetable %s: working again after %d failed passes", self.name, self.streak)
        self.error, self.streak, self.ok_at = None, 0, time.time()

    def failed(self, exc: BaseException, doing: str) -> float:
        """Record and log that a pass failed while ``doing`` (for the log); returns the
        seconds to wait before the next try."""
        with self._lock:
            self.errors += 1
            self.streak += 1
            self.error, self.error_at = f"{type(exc).__name__}: {exc}", time.time()
            streak = self.streak
        delay = min(self.cap, self.base * 2 ** min(streak - 1, 30)) * random.uniform(0.5, 1.0)
        log.error(
            "widetable %s: %s failed (%d in a row, %d in all); next try in %.1f s: %s",
            self.name, doing, streak, self.errors, delay, self.error,
            exc_info=exc if streak == 1 else None,
        )
        return delay

    def state(self) -> LoopState:
        return LoopState(self.name, self.error is None, self.error, self.error_at, self.errors,
                         self.ok_at, self.running)
