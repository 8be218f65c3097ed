"""Where a request runs: inline on the event loop, or on the worker pool. One rule for
every protocol.

Checks and decoding run inline on the event loop's thread, and so do the
single-row calls and small range reads: a GetRow is ~10 µs of store work, less
than handing it to a thread would cost (~20 µs of CPU measured, and GIL
handoffs). A request that can wait or run long goes to the pool, so that the
loop keeps reading and serving other connections meanwhile (the GIL runs one
thread's Python at a time, but a pool thread yields it at least every 5 ms, the
interpreter's switch interval). A protocol names the kind of each of its calls:

* ``POOLED``: always on the pool: table DDL, index creation (it backfills), split
  points, batches (milliseconds), transactions' start and end, the stream calls,
  a table's full description;
* ``ROW_WRITE``: a single-row write. Inline, unless a local transaction is open
  anywhere (``Database.transactions_open()``): such a write waits up to 50 ms when
  it meets the partition key a transaction holds. With no transaction open no
  single-row write can wait;
* ``RANGE``: a range read; inline if its limit is 1 to ``INLINE_RANGE_LIMIT`` rows;
* ``INLINE``: anything else (point reads, catalog reads).

Whatever its kind, a request goes to the pool if it names a transaction (the store
waits up to 50 ms on a row lock a transaction holds) or its body is over
``INLINE_BODY`` bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future

from ...db import Database
from ...wire.busypoll import BusyPoll

log = logging.getLogger("widetable.server")

INLINE_RANGE_LIMIT = 100  # rows of a range small enough to run on the loop
INLINE_BODY = 64 * 1024  # bytes of the largest request run on the loop

INLINE, POOLED, ROW_WRITE, RANGE = range(4)  # the kinds of call (see the module docstring)


def pooled(kind: int, size: int, transaction: object, limit: object,
           transactions_open: bool) -> bool:
    """Whether a call of ``kind`` (``size`` bytes, naming ``transaction`` if truthy,
    ``limit`` rows if a range) may wait or run long, and so goes to the pool."""
    if kind == POOLED or size > INLINE_BODY or transaction:
        return True
    if kind == ROW_WRITE:
        return transactions_open
    if kind == RANGE:
        return not (type(limit) is int and 0 < limit <= INLINE_RANGE_LIMIT)
    return False


class Dispatcher:
    """What every protocol's connections share: the store, the worker pool and the
    count of requests on it, the loop, its busy-poll window, and whether the server
    drains. Used on the loop thread only, but for the calls it runs on the pool."""

    def __init__(self, db: Database, pool: Executor, busy_poll: int = 0) -> None:
        """``busy_poll``: microseconds the loop polls for the next request after an
        answer (``wire/busypoll.py``; 0: it sleeps at once)."""
        self.db = db
        self.pool = pool
        self.draining = False
        self.jobs = 0  # requests on the pool, not answered yet
        self.loop: asyncio.AbstractEventLoop | None = None  # set before the first request
        self.poll = BusyPoll(busy_poll, lambda: self.jobs)  # its loop is set with ``loop``

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = self.poll.loop = loop

    def submit(self, call: Callable, args: tuple, finish: Callable, what: str) -> None:
        """Run ``call(*args)`` on the pool, then ``finish(its result)`` on the loop.
        ``call`` must not raise (it answers its own errors); ``what`` names it in the
        log if the server stops before it returns."""
        self.jobs += 1
        loop = self.loop
        assert loop is not None, "the server sets the loop before serving"

        def land(result: object) -> None:
            self.jobs -= 1
            finish(result)

        def done(future: Future) -> None:  # on the pool thread
            try:
                loop.call_soon_threadsafe(land, future.result())
            except RuntimeError:  # the loop has stopped: drain's grace ran out
                log.warning("%s finished after the server stopped; not answered", what)

        self.pool.submit(call, *args).add_done_callback(done)
