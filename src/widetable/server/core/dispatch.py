"""Where a request runs: inline on the event loop, or on the worker pool. One rule for
every protocol.

Checks and decoding run inline on the event loop's thread, and so do the
single-row calls and small range reads: a GetRow is ~10 µs of store work, less
than handing it to a thread would cost (~20 µs of CPU measured, and GIL
handoffs). A request that can wait or run long goes to the pool, so that the
loop keeps reading and serving other connections meanwhile (the GIL runs one
thread's Python at a time, but a pool thread yields it at least every 5 ms, the
interpreter's switch interval). A protocol names the kind of each of its calls:

* ``POOLED``: always on the pool, and takes no row lock: split points, batch
  reads (milliseconds), the stream calls, a table's full description;
* ``POOLED_WRITE``: always on the pool, and may hold row locks while it runs:
  table DDL, index creation (it backfills), batch writes (one of 200 rows holds
  about 140 of the 256 lock stripes), transactions' start and end;
* ``ROW_WRITE``: a single-row write. Inline, unless it may wait: while a local
  transaction is open anywhere (``Database.transactions_open()``; such a write
  waits up to 50 ms when it meets the partition key a transaction holds), or
  while a call that may hold row locks runs on the pool (``Dispatcher.writers``).
  The event loop thus never waits on a row lock a pool thread holds: when the
  loop sees no such call, no pool thread runs one (the count goes up on the loop
  before the call is handed over and down on the loop once it has returned);
* ``RANGE``: a range read; inline if its limit is 1 to ``INLINE_RANGE_LIMIT`` rows;
* ``INLINE``: anything else (point reads, catalog reads).

Whatever its kind, a request goes to the pool if it names a transaction (the store
waits up to 50 ms on a row lock a transaction holds) or its body is over
``INLINE_BODY`` bytes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from concurrent.futures import Executor, Future

from ...db import Database
from ...wire.busypoll import BusyPoll

log = logging.getLogger("widetable.server")

INLINE_RANGE_LIMIT = 100  # rows of a range small enough to run on the loop
INLINE_BODY = 64 * 1024  # bytes of the largest request run on the loop
MAX_CONNECTIONS = 512  # open client connections by default (``--max-connections``)

# Request ids (x-ots-requestid, and the id a 500 names), unique in this process.
REQUEST_IDS = itertools.count(1)
ID_PREFIX = os.urandom(4).hex() + "-"


def new_request_id() -> str:
    """A new request id. Any thread."""
    return f"{ID_PREFIX}{next(REQUEST_IDS):012x}"


# the kinds of call (see the module docstring)
INLINE, RANGE, ROW_WRITE, POOLED, POOLED_WRITE = range(5)
LOCKING = frozenset({ROW_WRITE, POOLED_WRITE})  # kinds that may hold row locks


def pooled(kind: int, size: int, transaction: object, limit: object,
           writes_wait: object) -> bool:
    """Whether a call of ``kind`` (``size`` bytes, naming ``transaction`` if truthy,
    ``limit`` rows if a range) may wait or run long, and so goes to the pool.
    ``writes_wait``: truthy while a row write may wait (a transaction is open, or a
    call that may hold row locks runs on the pool: ``Dispatcher.writers``)."""
    if kind >= POOLED or size > INLINE_BODY or transaction:
        return True
    if kind == ROW_WRITE:
        return bool(writes_wait)
    if kind == RANGE:
        return not (type(limit) is int and 0 < limit <= INLINE_RANGE_LIMIT)
    return False


class Dispatcher:
    """What every protocol's connections share: the store, the worker pool and the
    count of requests on it, the loop, its busy-poll window, and whether the server
    drains. Used on the loop thread only, but for the calls it runs on the pool."""

    def __init__(self, db: Database, pool: Executor, busy_poll: int = 0,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        """``busy_poll``: microseconds the loop polls for the next request after an
        answer (``wire/busypoll.py``; 0: it sleeps at once). ``max_connections``: open
        client connections, over every listener and protocol; one more is answered
        ``OTSServerBusy`` (503) and closed."""
        self.db = db
        self.pool = pool
        self.max_connections = max_connections
        self.open: set = set()  # the open client connections (``FramedConnection``s)
        self.draining = False
        self.request_ids = REQUEST_IDS
        self.id_prefix = ID_PREFIX
        self.jobs = 0  # requests on the pool, not answered yet
        self.writers = 0  # of them, those that may hold row locks (``LOCKING`` kinds)
        self.loop: asyncio.AbstractEventLoop | None = None  # set before the first request
        self.poll = BusyPoll(busy_poll, lambda: self.jobs)  # its loop is set with ``loop``

    def room(self) -> bool:
        """Whether another client connection may open (``max_connections``)."""
        return len(self.open) < self.max_connections

    @staticmethod
    def request_id() -> str:
        return new_request_id()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = self.poll.loop = loop

    def submit(self, call: Callable, args: tuple, finish: Callable, what: str,
               kind: int = POOLED) -> None:
        """Run ``call(*args)`` on the pool, then ``finish(its result)`` on the loop.
        ``call`` must not raise (it answers its own errors); ``what`` names it in the
        log if the server stops before it returns. ``kind``: the call's kind; one of
        ``LOCKING`` counts in ``writers`` until it has returned."""
        locking = kind in LOCKING
        self.jobs += 1
        if locking:
            self.writers += 1
        loop = self.loop
        assert loop is not None, "the server sets the loop before serving"

        def land(result: object) -> None:
            self.jobs -= 1
            if locking:
                self.writers -= 1
            finish(result)

        def done(future: Future) -> None:  # on the pool thread
            try:
                loop.call_soon_threadsafe(land, future.result())
            except RuntimeError:  # the loop has stopped: drain's grace ran out
                log.warning("%s finished after the server stopped; not answered", what)

        self.pool.submit(call, *args).add_done_callback(done)
