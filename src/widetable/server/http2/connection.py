"""An HTTP/2 server connection (RFC 9113): frames in, streams and flow control, frames out.

What it does with a stream's request and answer is left to a subclass (``rpc.py``):
``open_stream`` / ``stream_data`` / ``stream_ended`` / ``stream_reset`` as the request
arrives, ``refill`` when the stream may send more. It sends through ``send_headers``,
``send_data`` (queued behind the peer's flow-control windows) and ``end_stream``.

Its rules:
* windows: each stream may send us ``STREAM_WINDOW`` bytes and the connection
  ``CONNECTION_WINDOW`` before we grant more, so that a unary call never waits for a
  WINDOW_UPDATE; both are granted again as data arrives (a request is buffered whole
  anyway, and its size is capped by the subclass);
* we send no more than the peer's windows allow, and pull a stream's next message only
  once its previous one is sent and the transport's buffer is below its high-water mark:
  a slow reader holds at most one message per stream, not the whole answer;
* every frame read in one ``data_received`` is answered in one transport write;
* a protocol error closes the connection with GOAWAY naming it (others are untouched);
  a stream error resets that stream alone;
* ``goaway()`` (a server stopping) lets the open streams finish, refuses new ones, and
  closes once none is left.
"""

from __future__ import annotations

import asyncio
import logging

from . import frames as F
from .headers import HeaderDecoder, HeaderError

log = logging.getLogger("widetable.server.http2")

STREAM_WINDOW = 16 * 2**20  # bytes a stream may send before a WINDOW_UPDATE
CONNECTION_WINDOW = 64 * 2**20
MAX_FRAME = 2**20  # the largest frame we accept (SETTINGS_MAX_FRAME_SIZE)
MAX_STREAMS = 256  # concurrent streams per connection
MAX_HEADER_LIST = 64 * 1024  # decoded request headers, counted as HTTP/2 counts them
MAX_HEADER_BLOCK = 64 * 1024  # encoded bytes of one header block (HEADERS + CONTINUATION)
WRITE_HIGH = 1 * 2**20  # transport buffer above which streams stop pulling answers
PULL_BUDGET = 4 * 2**20  # bytes one stream sends before it lets the loop serve others


class Stream:
    """One stream: its flow-control windows, what it has yet to send, and (``call``) what
    the subclass keeps for it."""

    __slots__ = ("id", "window", "recv_window", "remote_closed", "local_closed",
                 "headers_sent", "pending", "offset", "blocked", "call")

    def __init__(self, stream_id: int, window: int) -> None:
        self.id = stream_id
        self.window = window  # what we may still send on it
        self.recv_window = STREAM_WINDOW  # what the peer may still send
        self.remote_closed = False  # the peer sent END_STREAM
        self.local_closed = False  # we sent END_STREAM or RST_STREAM
        self.headers_sent = False
        self.pending: bytes | memoryview = b""  # DATA not yet sent (flow control)
        self.offset = 0
        self.blocked = False  # waiting for a window, or for the transport to drain
        self.call = None


class Connection(asyncio.Protocol):
    """An HTTP/2 server connection. ``connections``: the set it is in while open."""

    def __init__(self, connections: set) -> None:
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.streams: dict[int, Stream] = {}
        self.last_stream = 0  # the highest stream id the peer opened
        self.window = F.DEFAULT_WINDOW  # what we may still send on the connection
        self.peer_window = F.DEFAULT_WINDOW  # the peer's initial stream window
        self.peer_frame = F.DEFAULT_FRAME  # the largest frame the peer takes
        self.recv_window = max(CONNECTION_WINDOW, F.DEFAULT_WINDOW)
        self.closed = False
        self.going_away = False  # we sent GOAWAY: no new streams
        self.peer_going_away = False
        self._buf: bytes | bytearray = b""
        self._need = 0  # bytes ``_buf`` must hold before a frame can be handled
        self._preface = False
        self._settings_seen = False
        self._continuing: list | None = None  # [stream id, [fragments], end_stream, size]
        self._out: list = []
        self._paused = False  # the transport's buffer is over its high-water mark
        self._blocked: dict[int, Stream] = {}
        self._decoder = HeaderDecoder(MAX_HEADER_LIST, self.parse_head)
        self._handlers = (self._data, self._headers, self._priority, self._rst_stream,
                          self._settings, self._push_promise, self._ping, self._goaway,
                          self._window_update, self._continuation)

    # -- the subclass's part --------------------------------------------------------------

    def parse_head(self, headers: list[tuple[bytes, bytes]]):
        """What ``open_stream`` gets for a decoded header list (remembered per header
        block while the HPACK table is unchanged: it must depend on the list alone)."""
        return headers

    def open_stream(self, s: Stream, head) -> None:
        raise NotImplementedError

    def stream_data(self, s: Stream, data: bytes) -> None:
        raise NotImplementedError

    def stream_ended(self, s: Stream) -> None:
        """The peer sent END_STREAM (after ``open_stream`` and any ``stream_data``)."""
        raise NotImplementedError

    def stream_reset(self, s: Stream) -> None:
        """The stream is gone (RST_STREAM from the peer, or the connection closed)."""

    def refill(self, s: Stream) -> None:
        """``s`` has sent all it had queued and may send more."""

    # -- asyncio --------------------------------------------------------------------------

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        self.connections.add(self)
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        hello = F.settings({
            F.MAX_CONCURRENT_STREAMS: MAX_STREAMS, F.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            F.MAX_FRAME_SIZE: MAX_FRAME, F.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
            F.ENABLE_PUSH: 0})
        if CONNECTION_WINDOW > F.DEFAULT_WINDOW:  # a WINDOW_UPDATE of 0 is a protocol error
            hello += F.window_update(0, CONNECTION_WINDOW - F.DEFAULT_WINDOW)
        transport.write(hello)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.connections.discard(self)
        streams, self.streams = list(self.streams.values()), {}
        self._blocked.clear()
        for s in streams:
            s.local_closed = True
            self.stream_reset(s)

    def pause_writing(self) -> None:
        self._paused = True
        self.transport.pause_reading()  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        self._paused = False
        if not self.closed:
            self.transport.resume_reading()  # type: ignore[union-attr]
            self._unblock()
            self.flush()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        buf = self._buf
        if buf:
            if type(buf) is bytes:
                buf = self._buf = bytearray(buf)
            buf += data
            if len(buf) < self._need:  # the frame under way is not all here yet
                return
        else:
            buf = data
        try:
            if not self._preface:
                if len(buf) < len(F.PREFACE):
                    if not F.PREFACE.startswith(bytes(buf)):
                        raise F.ConnectionError(F.PROTOCOL_ERROR, "not an HTTP/2 client preface")
                    self._buf = buf
                    return
                if buf[:len(F.PREFACE)] != F.PREFACE:
                    raise F.ConnectionError(F.PROTOCOL_ERROR, "not an HTTP/2 client preface")
                buf = buf[len(F.PREFACE):]
                self._preface = True
            used = self._frames(buf)
        except F.ConnectionError as exc:
            self.fail(exc.code, str(exc))
            return
        if used < len(buf):
            self._buf = buf[used:]
            rest = len(self._buf)
            self._need = 9 + (self._buf[0] << 16 | self._buf[1] << 8 | self._buf[2]) if rest >= 9 else 9
        else:
            self._buf = b""
        self.flush()

    # -- frames in ------------------------------------------------------------------------

    def _frames(self, buf) -> int:
        """Handle the whole frames at the start of ``buf``; the bytes used."""
        i, n, unpack, handlers = 0, len(buf), F.HEADER.unpack_from, self._handlers
        while n - i >= 9 and not self.closed:
            high, low, kind, flags, sid = unpack(buf, i)
            length = (high << 16) | low
            if length > MAX_FRAME:
                raise F.ConnectionError(F.FRAME_SIZE_ERROR, f"a frame of {length} bytes is over "
                                        f"the {MAX_FRAME} allowed")
            end = i + 9 + length
            if end > n:
                break
            payload = buf[i + 9:end]
            i = end
            if not self._settings_seen:
                if kind != F.SETTINGS or flags & F.ACK:
                    raise F.ConnectionError(F.PROTOCOL_ERROR, "the first frame is not SETTINGS")
                self._settings_seen = True
            if self._continuing is not None and kind != F.CONTINUATION:
                raise F.ConnectionError(F.PROTOCOL_ERROR, "a header block is interrupted")
            if kind < 10:
                handlers[kind](flags, sid & 0x7FFFFFFF, payload)
            # frames of unknown types are ignored (RFC 9113 §4.1)
        return i

    @staticmethod
    def _unpad(flags: int, payload: bytes) -> bytes:
        if not flags & F.PADDED:
            return payload
        if not payload or payload[0] >= len(payload):
            raise F.ConnectionError(F.PROTOCOL_ERROR, "padding runs past the frame")
        return payload[1:len(payload) - payload[0]]

    def _data(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise F.ConnectionError(F.PROTOCOL_ERROR, "DATA on stream 0")
        size = len(payload)
        self.recv_window -= size
        if self.recv_window < 0:
            raise F.ConnectionError(F.FLOW_CONTROL_ERROR, "DATA beyond the connection window")
        if self.recv_window < CONNECTION_WINDOW // 2:
            self._out.append(F.window_update(0, CONNECTION_WINDOW - self.recv_window))
            self.recv_window = max(CONNECTION_WINDOW, F.DEFAULT_WINDOW)
        data = self._unpad(flags, payload)
        s = self.streams.get(sid)
        if s is None:
            if sid > self.last_stream:
                raise F.ConnectionError(F.PROTOCOL_ERROR, f"DATA on idle stream {sid}")
            return  # a stream already closed or reset: counted above, discarded
        if s.remote_closed:
            self.reset_stream(s, F.STREAM_CLOSED)
            return
        s.recv_window -= size
        if s.recv_window < 0:
            self.reset_stream(s, F.FLOW_CONTROL_ERROR)
            return
        if data:
            self.stream_data(s, data)
        if flags & F.END_STREAM:
            s.remote_closed = True
            if s.local_closed:
                self._forget(s)
            self.stream_ended(s)
        elif s.recv_window < STREAM_WINDOW // 2 and not s.local_closed:
            self._out.append(F.window_update(sid, STREAM_WINDOW - s.recv_window))
            s.recv_window = STREAM_WINDOW

    def _headers(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0 or not sid & 1:
            raise F.ConnectionError(F.PROTOCOL_ERROR, f"HEADERS on stream {sid}")
        block = self._unpad(flags, payload)
        if flags & F.PRIORITY_FLAG:
            if len(block) < 5:
                raise F.ConnectionError(F.FRAME_SIZE_ERROR, "HEADERS too short for its priority")
            if F.u32(block) == sid:
                raise F.ConnectionError(F.PROTOCOL_ERROR, f"stream {sid} depends on itself")
            block = block[5:]
        if flags & F.END_HEADERS:
            self._header_block(sid, block, flags & F.END_STREAM)
        else:
            self._continuing = [sid, [block], flags & F.END_STREAM, len(block)]

    def _continuation(self, flags: int, sid: int, payload: bytes) -> None:
        c = self._continuing
        if c is None or c[0] != sid:
            raise F.ConnectionError(F.PROTOCOL_ERROR, "CONTINUATION without its HEADERS")
        c[1].append(payload)
        c[3] += len(payload)
        if c[3] > MAX_HEADER_BLOCK:
            raise F.ConnectionError(F.ENHANCE_YOUR_CALM, f"a header block is over "
                                    f"{MAX_HEADER_BLOCK} bytes")
        if flags & F.END_HEADERS:
            self._continuing = None
            self._header_block(sid, b"".join(c[1]), c[2])

    def _header_block(self, sid: int, block: bytes, end_stream: int) -> None:
        try:
            head = self._decoder.decode(bytes(block))
        except HeaderError as exc:
            raise F.ConnectionError(F.COMPRESSION_ERROR, str(exc)) from None
        s = self.streams.get(sid)
        if s is not None:  # trailers from the peer: they end its side
            if s.remote_closed or not end_stream:
                self.reset_stream(s, F.PROTOCOL_ERROR if not s.remote_closed else F.STREAM_CLOSED)
                return
            s.remote_closed = True
            if s.local_closed:
                self._forget(s)
            self.stream_ended(s)
            return
        if sid <= self.last_stream:
            raise F.ConnectionError(F.STREAM_CLOSED, f"HEADERS on closed stream {sid}")
        self.last_stream = sid
        if self.going_away or len(self.streams) >= MAX_STREAMS:
            self._out.append(F.rst_stream(sid, F.REFUSED_STREAM))
            return
        s = Stream(sid, self.peer_window)
        s.remote_closed = bool(end_stream)
        self.streams[sid] = s
        self.open_stream(s, head)
        if end_stream and not self.closed:
            if s.local_closed:
                self._forget(s)
            self.stream_ended(s)

    def _priority(self, flags: int, sid: int, payload: bytes) -> None:
        if sid == 0:
            raise F.ConnectionError(F.PROTOCOL_ERROR, "PRIORITY on stream 0")
        if len(payload) != 5:
            s = self.streams.get(sid)
            if s is not None:
                self.reset_stream(s, F.FRAME_SIZE_ERROR)
            else:
                self._out.append(F.rst_stream(sid, F.FRAME_SIZE_ERROR))

    def _rst_stream(self, flags: int, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise F.ConnectionError(F.FRAME_SIZE_ERROR, "RST_STREAM is not 4 bytes")
        if sid == 0 or sid > self.last_stream:
            raise F.ConnectionError(F.PROTOCOL_ERROR, f"RST_STREAM on idle stream {sid}")
        s = self.streams.get(sid)
        if s is not None:
            s.remote_closed = s.local_closed = True
            self._forget(s)
            self.stream_reset(s)

    def _settings(self, flags: int, sid: int, payload: bytes) -> None:
        if sid != 0:
            raise F.ConnectionError(F.PROTOCOL_ERROR, "SETTINGS on a stream")
        if flags & F.ACK:
            if payload:
                raise F.ConnectionError(F.FRAME_SIZE_ERROR, "a SETTINGS ack with a payload")
            return
        if len(payload) % 6:
            raise F.ConnectionError(F.FRAME_SIZE_ERROR, "SETTINGS not a multiple of 6 bytes")
        grew = False
        for key, value in F.parse_settings(payload):
            if key == F.INITIAL_WINDOW_SIZE:
                if value > F.MAX_WINDOW:
                    raise F.ConnectionError(F.FLOW_CONTROL_ERROR, f"initial window {value}")
                delta, self.peer_window = value - self.peer_window, value
                for s in self.streams.values():
                    s.window += delta
                    if s.window > F.MAX_WINDOW:
                        raise F.ConnectionError(F.FLOW_CONTROL_ERROR, "a stream window overflows")
                grew = grew or delta > 0
            elif key == F.MAX_FRAME_SIZE:
                if not F.DEFAULT_FRAME <= value <= F.MAX_FRAME_LIMIT:
                    raise F.ConnectionError(F.PROTOCOL_ERROR, f"max frame size {value}")
                self.peer_frame = value
            elif key == F.ENABLE_PUSH and value > 1:
                raise F.ConnectionError(F.PROTOCOL_ERROR, f"enable push {value}")
            # HEADER_TABLE_SIZE: our encoder never uses the dynamic table; others: no use
        self._out.append(F.SETTINGS_ACK)
        if grew:
            self._unblock()

    def _push_promise(self, flags: int, sid: int, payload: bytes) -> None:
        raise F.ConnectionError(F.PROTOCOL_ERROR, "PUSH_PROMISE from a client")

    def _ping(self, flags: int, sid: int, payload: bytes) -> None:
        if len(payload) != 8:
            raise F.ConnectionError(F.FRAME_SIZE_ERROR, "PING is not 8 bytes")
        if sid != 0:
            raise F.ConnectionError(F.PROTOCOL_ERROR, "PING on a stream")
        if not flags & F.ACK:
            self._out.append(F.frame(F.PING, F.ACK, 0, payload))

    def _goaway(self, flags: int, sid: int, payload: bytes) -> None:
        if sid != 0:
            raise F.ConnectionError(F.PROTOCOL_ERROR, "GOAWAY on a stream")
        if len(payload) < 8:
            raise F.ConnectionError(F.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes")
        self.peer_going_away = True
        if not self.streams:
            self.close()

    def _window_update(self, flags: int, sid: int, payload: bytes) -> None:
        if len(payload) != 4:
            raise F.ConnectionError(F.FRAME_SIZE_ERROR, "WINDOW_UPDATE is not 4 bytes")
        increment = F.u32(payload)
        if sid == 0:
            if increment == 0:
                raise F.ConnectionError(F.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0")
            self.window += increment
            if self.window > F.MAX_WINDOW:
                raise F.ConnectionError(F.FLOW_CONTROL_ERROR, "the connection window overflows")
            self._unblock()
            return
        s = self.streams.get(sid)
        if s is None:
            if sid > self.last_stream:
                raise F.ConnectionError(F.PROTOCOL_ERROR, f"WINDOW_UPDATE on idle stream {sid}")
            return
        if increment == 0:
            self.reset_stream(s, F.PROTOCOL_ERROR)
            return
        s.window += increment
        if s.window > F.MAX_WINDOW:
            self.reset_stream(s, F.FLOW_CONTROL_ERROR)
            return
        if s.blocked:
            self._resume(s)

    # -- frames out -----------------------------------------------------------------------

    def flush(self) -> None:
        """Write what the frames handled so far answered, in one write."""
        out = self._out
        if out and not self.closed:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))  # type: ignore[union-attr]
        out.clear()

    def send_headers(self, s: Stream, block: bytes, end_stream: bool = False) -> None:
        """A header block (our blocks fit one frame: they are small and ours)."""
        self._out.append(F.frame_header(F.HEADERS, F.END_HEADERS | (F.END_STREAM if end_stream else 0),
                                        s.id, len(block)) + block)
        s.headers_sent = True
        if end_stream:
            self._closed_locally(s)

    def send_data(self, s: Stream, data: bytes) -> bool:
        """Queue ``data`` on ``s`` and send what the windows allow; True if all of it
        went (then the stream may queue more), False if it waits for a window."""
        s.pending, s.offset = data, 0
        return self._send_pending(s)

    def _send_pending(self, s: Stream) -> bool:
        data, off = s.pending, s.offset
        n, out, view = len(data), self._out, None
        while off < n:
            room = min(s.window, self.window, self.peer_frame, n - off)
            if room <= 0:
                break
            if off == 0 and room == n:
                out.append(F.frame_header(F.DATA, 0, s.id, n))
                out.append(data)
            else:
                if view is None:
                    view = memoryview(data)
                out.append(F.frame_header(F.DATA, 0, s.id, room))
                out.append(view[off:off + room])
            off += room
            s.window -= room
            self.window -= room
        if off < n:
            s.offset = off
            self._block(s)
            return False
        s.pending, s.offset = b"", 0
        return True

    def end_stream(self, s: Stream, trailers: bytes | None = None) -> None:
        """End our side: trailers (a header block) with END_STREAM, or an empty DATA
        frame. Sent after any queued data. If the peer has not ended its side, the
        stream is then reset NO_ERROR (we want no more of its request)."""
        if trailers is not None:
            self.send_headers(s, trailers, end_stream=True)
        else:
            self._out.append(F.frame(F.DATA, F.END_STREAM, s.id))
            self._closed_locally(s)

    def reset_stream(self, s: Stream, code: int) -> None:
        """RST_STREAM ``code``: the stream ends on both sides now."""
        if not s.local_closed or not s.remote_closed:
            self._out.append(F.rst_stream(s.id, code))
        s.local_closed = s.remote_closed = True
        self._forget(s)
        self.stream_reset(s)

    def _closed_locally(self, s: Stream) -> None:
        s.local_closed = True
        if not s.remote_closed:
            self._out.append(F.rst_stream(s.id, F.NO_ERROR))
            s.remote_closed = True
        self._forget(s)

    def _forget(self, s: Stream) -> None:
        self.streams.pop(s.id, None)
        if s.blocked:
            s.blocked = False
            self._blocked.pop(s.id, None)
        if not self.streams and (self.going_away or self.peer_going_away):
            self.close()

    def _block(self, s: Stream) -> None:
        if not s.blocked:
            s.blocked = True
            self._blocked[s.id] = s

    def wait_for_room(self, s: Stream) -> bool:
        """Whether ``s`` should stop pulling answers now (the transport is backed up);
        if so it is resumed when it drains."""
        if self._paused:
            self._block(s)
            return True
        return False

    def _unblock(self) -> None:
        for s in list(self._blocked.values()):
            if self._paused or self.window <= 0:
                return
            self._resume(s)

    def _resume(self, s: Stream) -> None:
        s.blocked = False
        self._blocked.pop(s.id, None)
        if s.pending and not self._send_pending(s):
            return
        if not s.local_closed:
            self.refill(s)

    # -- the connection's end -------------------------------------------------------------

    def goaway(self) -> None:
        """No new streams (GOAWAY NO_ERROR naming the last one opened); close once the
        open ones have finished."""
        if self.closed or self.going_away:
            return
        self.going_away = True
        self._out.append(F.goaway(self.last_stream, F.NO_ERROR))
        if not self.streams:
            self.close()
        self.flush()

    def fail(self, code: int, message: str) -> None:
        """A connection error: GOAWAY ``code`` and close (the other connections go on)."""
        if self.closed:
            return
        log.info("closing an HTTP/2 connection: %s", message)
        self._out.append(F.goaway(self.last_stream, code, message.encode()[:200]))
        self.flush()
        self.close()

    def close(self) -> None:
        """Close once what is written has gone out."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        self.transport.close()  # type: ignore[union-attr]
        self.connection_lost(None)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.connection_lost(None)
