"""Token buckets: the per-partition capacity and the table's reserved throughput.

A bucket holds up to ``burst`` tokens (default: one second of ``rate``) and
refills at ``rate`` tokens per second. A request takes one token or is
throttled; the throttled request is counted by the caller and changes nothing.
A range page takes a token per 4 KB it read after the fact (``charge``), which
may leave the bucket in debt until it refills.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class TokenBucket:
    """``take()`` is thread-safe and never blocks."""

    __slots__ = ("_lock", "burst", "clock", "last", "rate", "tokens")

    def __init__(
        self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(rate, 1.0))
        self.tokens = self.burst
        self.clock = clock  # seconds; a simulator passes a virtual clock
        self.last = clock()
        self._lock = threading.Lock()

    def take(self, n: float = 1.0) -> bool:
        """Take ``n`` tokens if there are that many; return whether it did."""
        with self._lock:
            now = self.clock()
            tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            if tokens >= n:
                self.tokens = tokens - n
                return True
            self.tokens = tokens
            return False

    def charge(self, n: float) -> None:
        """Take ``n`` tokens for work already done (a range page's bytes), going into debt
        down to ``-burst`` at most: the requests after it wait for the refill."""
        with self._lock:
            now = self.clock()
            tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
            self.last = now
            self.tokens = max(tokens - n, -self.burst)

    def give(self, n: float) -> None:
        """Return ``n`` tokens taken for a request that did not go ahead (up to ``burst``)."""
        with self._lock:
            self.tokens = min(self.burst, self.tokens + n)
