"""Row locks: one striped lock table per store, shared by every write path.

A row's lock is one of ``stripes`` ``threading.Lock`` objects, chosen by hashing
the row key (``hash(key) & mask``). Every write of a row holds its lock from
the read it depends on to its engine write, so a row is atomic and
conditional writes and increments are linearizable. Writers of several rows
(batches, bulk puts, transaction commits, backfill chunks) take their stripes
in stripe order, each stripe once, so two of them never deadlock.

Contracts:

* ``lock(key)``      -- the stripe of one key, to use as ``with locks.lock(key):``;
* ``stripes_of(keys)`` -- the distinct stripes of ``keys``, in stripe order;
* ``acquire(keys)`` / ``release(held)`` -- take them all (blocking) and give them back;
  ``holding(keys)`` is the same as a context manager;
* ``try_acquire(keys)`` -- take them all without blocking: the held stripes, or None
  (nothing is held then) if any stripe is taken. An event loop that must never wait
  calls this and sends the request to a pool thread when it answers None;
* ``barrier()``      -- pass through every stripe once: returns after every write that
  held a stripe when it was called has finished (used after a change that every later
  write must see, such as a new index or a new transaction's lock).

The stripe list (``stripes``) and ``mask`` are public so a hot path can resolve
them once, at construction, and index them itself.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from operator import methodcaller

DEFAULT_STRIPES = 256  # enough for a GIL-bound process; a 200-row batch takes ~140 of them

_ACQUIRE = methodcaller("acquire")
_RELEASE = methodcaller("release")
_TRY = methodcaller("acquire", False)


class RowLocks:
    """A striped lock table; ``stripes`` must be a power of two."""

    __slots__ = ("mask", "stripes")

    def __init__(self, stripes: int = DEFAULT_STRIPES) -> None:
        if stripes < 1 or stripes & (stripes - 1):
            raise ValueError(f"stripes must be a power of two, got {stripes}")
        self.stripes: list[threading.Lock] = [threading.Lock() for _ in range(stripes)]
        self.mask = stripes - 1

    def __len__(self) -> int:
        return len(self.stripes)

    def lock(self, key: bytes) -> threading.Lock:
        """The lock of the row at ``key``."""
        return self.stripes[hash(key) & self.mask]

    def stripes_of(self, keys: Iterable[bytes]) -> list[threading.Lock]:
        """The distinct locks of ``keys``, in stripe order (the order every caller takes them)."""
        mask = self.mask
        return list(map(self.stripes.__getitem__, sorted({hash(k) & mask for k in keys})))

    def acquire(self, keys: Iterable[bytes]) -> list[threading.Lock]:
        """Take the locks of ``keys`` in stripe order, waiting as needed; returns them for
        :meth:`release`."""
        held = self.stripes_of(keys)
        deque(map(_ACQUIRE, held), maxlen=0)
        return held

    def try_acquire(self, keys: Iterable[bytes]) -> list[threading.Lock] | None:
        """Take the locks of ``keys`` without waiting: the held locks (give them back with
        :meth:`release`), or None if one was taken by another thread, in which case
        nothing is held. Never blocks."""
        held = self.stripes_of(keys)
        for i, lock in enumerate(held):
            if not lock.acquire(False):
                deque(map(_RELEASE, reversed(held[:i])), maxlen=0)
                return None
        return held

    @staticmethod
    def release(held: list[threading.Lock]) -> None:
        """Give back locks taken by :meth:`acquire` or :meth:`try_acquire`."""
        deque(map(_RELEASE, held), maxlen=0)

    @contextmanager
    def holding(self, keys: Iterable[bytes]) -> Iterator[None]:
        """``with locks.holding(keys):`` -- :meth:`acquire`, and :meth:`release` on the way out."""
        held = self.acquire(keys)
        try:
            yield
        finally:
            deque(map(_RELEASE, held), maxlen=0)

    def barrier(self) -> None:
        """Return once every writer holding a stripe at the call has released it."""
        for lock in self.stripes:
            lock.acquire()
            lock.release()
