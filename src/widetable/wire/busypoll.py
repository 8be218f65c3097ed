"""Busy polling: after an answer, the event loop keeps polling its sockets for a short
window before it sleeps, so a client's next request is picked up at once.

Why. A client that sends its next request as soon as it has the answer (a loop of
``get_row`` calls, a YCSB client) leaves the server idle for the few tens of
microseconds the client spends on the answer. Sleeping in ``epoll_wait`` for that
gap is costly out of proportion: waking a thread whose CPU went idle takes
microseconds, and the first request after a sleep runs on cold caches. Measured on
a 2-core virtual machine, a RocksDB point read took 3 µs back to back and 7 µs after
a 30 µs sleep; a ``get_row`` over the unix socket took 41-50 µs with the loop asleep
between requests and 32-38 µs with it polling (``bench/README.md``).

How. ``answered()``, called when an answer is written, opens the window (again).
While it is open, a callback on the loop's ready queue keeps itself scheduled, and
a loop with a ready callback polls its sockets without blocking: every connection,
timer and thread-safe call is served as usual, only the sleep is skipped. When the
window closes with no request, the loop sleeps as before: an idle server costs no
CPU once the window after its last answer has passed.

What it costs: up to the window of one core's time after each answer. It adapts:
after ``MAX_MISSES`` windows in a row with no request in them, the loop stops
polling, until a request comes within a window's time of the answer before it
(a client that calls back to back again). It does not poll while a request runs
on the worker pool: those threads need the GIL that each poll takes. And it
gives way: two polls ``PREEMPTED`` apart with nothing served between them show
that another thread had the CPU (a RocksDB flush or compaction, another
process) or the GIL; the loop then sleeps between requests for ``QUIET``
seconds.

Off (window 0) by default in :class:`~widetable.server.app.WidetableServer`, which
may share its process (and its GIL) with the caller; ``widetable serve``, a process
of its own, polls for 200 µs unless ``--busy-poll 0``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from time import perf_counter

from ..errors import describe

MAX_MISSES = 3  # windows in a row that ended with no request: then stop polling
MAX_WINDOW_US = 100_000  # a window longer than this would be a spinning server, not a pause
# Seconds between two polls, with nothing served in between, that show the thread lost its
# CPU to another thread (or the GIL, for up to 5 ms): then it stops polling and sleeps
# (``_poll``). A poll takes a few µs; on a shared virtual machine a thread that never
# sleeps still stands still now and then for up to 150 µs (seen here: 65 gaps over
# 50 µs, none over 150, in 3 s), which is not what this looks for.
PREEMPTED = 300e-6
# Seconds without polling after that: the CPU is wanted elsewhere (a RocksDB flush or
# compaction, another process) for a while, and a thread that polls through it loses
# its turn on the CPU to them each time, so every request would wait for one.
QUIET = 0.1


def check_window(microseconds: object) -> int:
    """The busy-poll window in microseconds, checked: an int in 0..MAX_WINDOW_US."""
    if type(microseconds) is not int or not 0 <= microseconds <= MAX_WINDOW_US:
        raise ValueError(f"busy_poll must be an int of microseconds in 0..{MAX_WINDOW_US}, "
                         f"got {describe(microseconds)}")
    return microseconds


class BusyPoll:
    """The busy-poll window of one event loop (see the module's docstring)."""

    def __init__(self, window_us: int, busy: Callable[[], object]) -> None:
        """``window_us``: microseconds to poll after an answer (0: never). ``busy``: true
        while the loop should not poll (requests running on the worker pool)."""
        self.window = check_window(window_us) / 1e6
        self.loop: asyncio.AbstractEventLoop | None = None  # set when the loop starts
        self._busy = busy
        self._until = 0.0  # when the open window closes
        self._answered = 0.0  # when the last answer was written
        self._polling = False  # the callback is scheduled
        self._last = 0.0  # when it last ran
        self._quiet = 0.0  # no polling until then (``QUIET``)
        self.misses = 0  # windows in a row that closed with no request
        self.preempted = 0  # polls that found the loop had lost its CPU (for tests and stats)
        self.polls = 0  # times the loop started polling
        self.windows = 0  # windows that closed with no request, in all (for tests and stats)

    def answered(self) -> None:
        """An answer was written: open the window (again), unless polling is off."""
        if not self.window:
            return
        now = self._answered = perf_counter()
        if self.misses >= MAX_MISSES or now < self._quiet:
            return
        self._until = now + self.window
        if not self._polling and self.loop is not None:
            self._polling = True
            self.polls += 1
            self._last = now
            self.loop.call_soon(self._poll)

    def arrived(self) -> None:
        """Bytes of a request arrived. After misses, one that comes within a window's
        time of the last answer turns polling back on."""
        if self.misses and perf_counter() - self._answered <= self.window:
            self.misses = 0

    def _poll(self) -> None:
        if self._busy():
            self._polling = False  # the pool's answer opens a new window
            return
        now = perf_counter()
        last, self._last = self._last, now
        if now - last > PREEMPTED and self._answered < last:
            # With no answer since the last poll, the loop stood still: the CPU went to
            # another thread. Stop for QUIET seconds.
            self._polling = False
            self._quiet = now + QUIET
            self.preempted += 1
            return
        if now < self._until:
            self.loop.call_soon(self._poll)  # type: ignore[union-attr]
            return
        self._polling = False  # the window closed with no request
        self.misses += 1
        self.windows += 1
