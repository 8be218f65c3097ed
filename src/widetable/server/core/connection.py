"""What every connection shares, whatever protocol it speaks: its receive buffer, back
pressure, and what the server's idle sweep and drain look at.

A protocol subclasses :class:`FramedConnection` and frames its requests in
``_take``; the HTTP framing of Tablestore's protocol is ``server/tablestore/http.py``,
widetable's own frames ``server/native/service.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import NamedTuple

from .auth import Verified
from .dispatch import Dispatcher

READ_AHEAD = 256 * 1024  # bytes buffered behind a request being served before reading pauses


class Upgrade(NamedTuple):
    """A protocol a connection can switch to from another one (HTTP's ``Upgrade``)."""

    token: str  # the Upgrade header's value: "<name>/<version>"
    switch: Callable[[FramedConnection, Verified, bytes | bytearray], None]
    """Takes the connection over, answered 101: the identity its upgrade request was
    signed with, and the bytes received after that request (they belong to the new
    protocol)."""


class FramedConnection(asyncio.Protocol):
    """What a connection shares with any protocol it speaks (HTTP here, widetable's own
    in ``server/native/``): its receive buffer, back pressure, the ``busy`` / ``last_active``
    / ``started`` / ``idle`` / ``close`` that the server's sweep and drain use, and the
    loop that frames and hands on buffered requests one at a time (``_take``)."""

    def __init__(self, service, core: Dispatcher, connections: set) -> None:
        self.service = service
        self.core = core
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.last_active = time.monotonic()
        # When the first bytes of the request partly in the buffer arrived: the request
        # deadline runs from then, however slowly the rest trickles in (``expired``).
        self.started = self.last_active
        self.busy = False  # a request is being served; its answer is not written yet
        self.closing = False
        self._buffer: bytes | bytearray = b""
        self._pumping = False
        self._write_paused = False
        self._read_paused = False
        # The client half-closed: close once the whole requests received before it are
        # all answered (the rest of the buffer can never become one).
        self._eof = False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        self.core.poll.arrived()
        self.last_active = time.monotonic()
        if self.closing:
            return
        buffer = self._buffer
        if not buffer:
            self._buffer = data
            self.started = self.last_active
        else:
            if type(buffer) is bytes:
                buffer = self._buffer = bytearray(buffer)
            buffer += data
        if self.busy:
            if len(self._buffer) > READ_AHEAD:
                self._pause_reading()
        else:
            self._pump()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self.busy:
            self._pump()

    def _pump(self) -> None:
        """Frame and hand on buffered requests, one at a time, while nothing is in flight;
        then, after a half-close (``_eof``), close once they are all answered. A request
        on the pool, or a full write buffer, leaves that for later: its answer or
        ``resume_writing`` pumps again."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self._buffer and not (self.busy or self.closing or self._write_paused):
                if not self._take():
                    break
        finally:
            self._pumping = False
        if self.busy or self._write_paused or self.closing:
            return
        if self._eof:
            self.close()
        elif self._read_paused:
            self._read_paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]

    def _take(self) -> bool:
        """Frame the next buffered request and hand it on; False to wait for more bytes
        (or after refusing the connection)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close after the written answers go out."""
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def expired(self, idle_since: float, started_before: float) -> bool:
        """Whether the sweep closes this connection: not serving a request, and either
        silent since before ``idle_since``, or holding part of a request whose first
        bytes came before ``started_before`` (a client trickling a byte now and then
        still meets the deadline)."""
        if self.busy:
            return False
        return self.last_active < idle_since or (bool(self._buffer)
                                                 and self.started < started_before)

    def idle(self) -> bool:
        """No request is being served or partly received."""
        return not (self.busy or self._buffer)

    def _pause_reading(self) -> None:
        if not self._read_paused and not self.closing:
            self._read_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
