"""Client-side retries of throttled requests, with exponential backoff and jitter.

Only throttling is retried: ``OTSServerBusy`` (a partition over its capacity)
and ``OTSPartitionUnavailable`` (a split or merge in progress). Every other
error is raised at once. The delay before retry ``n`` (from 0) is drawn
uniformly from ``[0, min(max_delay, base_delay * 2**n)]`` ("full jitter"), so
throttled clients spread out instead of retrying in step.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import PARTITION_UNAVAILABLE, SERVER_BUSY, ParameterInvalid, WidetableError

RETRYABLE = frozenset({SERVER_BUSY, PARTITION_UNAVAILABLE})


class Retrier:
    """Retries calls that were throttled, and counts what it did (thread-safe).

    ``retries`` counts retries made; ``gave_up`` counts calls that still
    failed after ``max_attempts`` attempts (the last error is then raised).
    """

    def __init__(
        self,
        max_attempts: int = 10,
        base_delay: float = 0.005,
        max_delay: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ParameterInvalid(f"max_attempts must be at least 1, got {max_attempts!r}")
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.calls = self.retries = self.gave_up = 0

    def delay(self, attempt: int) -> float:
        """The pause before retry ``attempt`` (0-based): full jitter on an exponential cap."""
        cap = min(self.max_delay, self.base_delay * (2**attempt))
        with self._lock:
            return self._random.uniform(0, cap)

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, retried while it raises a throttling error."""
        with self._lock:
            self.calls += 1
        for attempt in range(self.max_attempts):
            try:
                return fn(*args, **kwargs)
            except WidetableError as exc:
                if exc.code not in RETRYABLE:
                    raise
                if attempt + 1 == self.max_attempts:
                    with self._lock:
                        self.gave_up += 1
                    raise
            with self._lock:
                self.retries += 1
            self._sleep(self.delay(attempt))
        raise AssertionError("unreachable")

    def batch_write_row(self, db: Any, requests: list) -> list:
        """``db.batch_write_row`` that resends the rows throttled, until none are or attempts run out."""
        return self.rows(db.batch_write_row, requests)

    def rows(self, write: Callable[[list], list], requests: list) -> list:
        """``write(requests)`` (a batch: one result per row, each with ``error``), resending
        the rows throttled until none are or attempts run out."""
        results = write(requests)
        for attempt in range(self.max_attempts - 1):
            again = [i for i, r in enumerate(results) if r.error is not None and r.error.code in RETRYABLE]
            if not again:
                break
            with self._lock:
                self.retries += len(again)
            self._sleep(self.delay(attempt))
            for i, r in zip(again, write([requests[i] for i in again])):
                results[i] = r
        return results

    def wrap(self, target: Any) -> RetryingProxy:
        """A proxy of ``target`` (a Table, a Database) whose methods retry."""
        return RetryingProxy(target, self)


class RetryingProxy:
    """Calls methods of the wrapped object through :meth:`Retrier.call`."""

    def __init__(self, target: Any, retrier: Retrier) -> None:
        self._target = target
        self._retrier = retrier

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr) or name.startswith("_"):
            return attr
        if name == "batch_write_row":
            return lambda requests: self._retrier.batch_write_row(self._target, requests)
        retrier = self._retrier

        def retried(*args: Any, **kwargs: Any) -> Any:
            return retrier.call(attr, *args, **kwargs)

        return retried
