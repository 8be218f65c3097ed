"""Rows as ReadRows answers: chunked ``ReadRowsResponse`` messages, both directions.

Grammar of what ``encode_rows`` writes (protobuf wire format, field numbers of
``google.bigtable.v2.ReadRowsResponse``)::

    message   := chunk*                      # one ReadRowsResponse, <= max_message bytes
    chunk     := 0x0A len CellChunk
    CellChunk := [0x0A len row_key]          # the first chunk of a row, AND the first
                                             # chunk of every message
                 [0x12 len (0x0A len family)] [0x1A len (0x0A len qualifier)]
                                             # when they change within the row
                 [0x20 timestamp] (0x2A len label)* [0x32 len value]
                 [0x38 value_size]           # a cell split over chunks: every piece but
                                             # the last carries the whole value's size
                 [0x48 0x01]                 # commit_row, on the row's last chunk

Why the row key is repeated: client 2.39.0 takes the first chunk of each message as
the start of a new row when a row was committed before it, and refuses the stream when
that chunk has no key ("row keys should be strictly increasing"). A row that fits in
the message budget is never split across messages; a larger one (a cell over the
budget) is, with its key on the first chunk of every message. No message exceeds
``max_message`` plus one chunk's header, so none reaches the client's 4 MiB default.

The messages are encoded by hand, not built as protobuf objects: per cell that is a
few bytes joins instead of three message constructions, and ReadRows is the hot path.
``merge_rows`` is the client's direction (our client adapter and the tests): chunks,
parsed by protobuf, back into rows, with Bigtable's checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ...bigtable.types import BigtableRow, Cell
from ...errors import WidetableError

MAX_MESSAGE = 1 << 20  # bytes of chunks per ReadRowsResponse
MAX_PIECE = 1 << 20  # bytes of a cell value per chunk

_SMALL = [bytes((i,)) for i in range(128)]


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of ``n`` (a negative int as its 64-bit two's complement)."""
    if n < 0x80:
        return _SMALL[n] if n >= 0 else varint(n & 0xFFFFFFFFFFFFFFFF)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _wrapped(tag: bytes, value: bytes) -> bytes:
    """A StringValue / BytesValue field: ``tag len (0x0A len value)``; an empty value is
    an empty wrapper, still present (HasField is true)."""
    if not value:
        return tag + b"\x00"
    inner = b"\x0a" + varint(len(value)) + value
    return tag + varint(len(inner)) + inner


def _chunk(body: bytes) -> bytes:
    return b"\x0a" + varint(len(body)) + body


def _cell_bodies(cells, max_piece: int) -> list[bytes]:
    """The CellChunk bodies of one row's cells, without the row key: family and qualifier
    when they change, a value over ``max_piece`` split over pieces, commit on the last."""
    bodies = []
    family = qualifier = None
    last = len(cells) - 1
    for i, cell in enumerate(cells):
        head = []
        if cell.family != family:
            family = cell.family
            qualifier = cell.qualifier
            head.append(_wrapped(b"\x12", family.encode()))
            head.append(_wrapped(b"\x1a", qualifier))
        elif cell.qualifier != qualifier:
            qualifier = cell.qualifier
            head.append(_wrapped(b"\x1a", qualifier))
        if cell.timestamp:
            head.append(b"\x20" + varint(cell.timestamp))
        for label in cell.labels:
            lb = label.encode()
            head.append(b"\x2a" + varint(len(lb)) + lb)
        value = cell.value
        if len(value) <= max_piece:
            if value:
                head.append(b"\x32" + varint(len(value)) + value)
            if i == last:
                head.append(b"\x48\x01")
            bodies.append(b"".join(head))
            continue
        meta = b"".join(head)
        total = varint(len(value))
        for start in range(0, len(value), max_piece):
            part = value[start:start + max_piece]
            body = (meta if start == 0 else b"") + b"\x32" + varint(len(part)) + part
            if start + max_piece < len(value):
                body += b"\x38" + total
            elif i == last:
                body += b"\x48\x01"
            bodies.append(body)
    return bodies


def encode_rows(rows: Iterable[BigtableRow], max_message: int = MAX_MESSAGE,
                max_piece: int = MAX_PIECE) -> Iterator[bytes]:
    """Serialized ``ReadRowsResponse`` messages carrying ``rows`` (rows without cells are
    skipped, as Bigtable sends none). Lazy: a message is yielded once the next row would
    overfill it, so a scan streams."""
    out: list[bytes] = []
    size = 0
    for row in rows:
        if not row.cells:
            continue
        key_field = b"\x0a" + varint(len(row.key)) + row.key
        bodies = _cell_bodies(row.cells, max_piece)
        chunks = [_chunk(key_field + bodies[0])] + [_chunk(b) for b in bodies[1:]]
        row_size = sum(map(len, chunks))
        if row_size <= max_message:  # the row goes whole into one message
            if out and size + row_size > max_message:
                yield b"".join(out)
                out, size = [], 0
            out.extend(chunks)
            size += row_size
            continue
        if out:  # a row over a message starts one, and its key starts every message after
            yield b"".join(out)
        out, size = [chunks[0]], len(chunks[0])
        for body in bodies[1:]:
            if size + len(body) + len(key_field) + 8 > max_message:
                yield b"".join(out)
                piece = _chunk(key_field + body)
                out, size = [piece], len(piece)
            else:
                piece = _chunk(body)
                out.append(piece)
                size += len(piece)
    if out:
        yield b"".join(out)


def encode_mutate_rows_response(statuses: list) -> bytes:
    """A serialized ``MutateRowsResponse``: ``statuses`` is one ``(code, message)`` per
    entry, in order, or None for an applied one (so is ``(0, "")``). Encoded by hand as
    ReadRows is: a bulk write of 100 rows answers 100 entries, most of them OK, and an
    OK entry's bytes depend on its index alone (they are made once, ``_ok_entries``).

        entry := 0x0A len (0x08 index) (0x12 len Status)    Status := [0x08 code] [0x12 len message]
    """
    ok = _ok_entries(len(statuses))
    out = []
    for i, status in enumerate(statuses):
        if status is None or not status[0]:
            out.append(ok[i])
            continue
        code, message = status
        text = message.encode()
        body = b"\x08" + varint(code) + (b"\x12" + varint(len(text)) + text if text else b"")
        body = (b"\x08" + varint(i) if i else b"") + b"\x12" + varint(len(body)) + body
        out.append(b"\x0a" + varint(len(body)) + body)
    return b"".join(out)


def _ok_entry(i: int) -> bytes:
    body = (b"\x08" + varint(i) if i else b"") + b"\x12\x00"
    return b"\x0a" + varint(len(body)) + body


_OK_ENTRIES: list[bytes] = [_ok_entry(i) for i in range(1024)]  # never changed: replaced


def _ok_entries(n: int) -> list[bytes]:
    """The OK entries of indexes 0 to ``n - 1`` at least. A longer list replaces the
    module's whole (a thread holding the old one reads it unchanged)."""
    global _OK_ENTRIES
    ok = _OK_ENTRIES
    if len(ok) < n:
        ok = ok + [_ok_entry(i) for i in range(len(ok), max(n, 2 * len(ok)))]
        _OK_ENTRIES = ok
    return ok


class InvalidChunk(WidetableError):
    """A ReadRows stream that breaks the chunk protocol (a server's fault)."""


def merge_rows(responses: Iterable) -> Iterator[BigtableRow]:
    """Parsed ``ReadRowsResponse`` messages -> rows, as a client merges them: family and
    qualifier carry over within a row, split values are joined, ``reset_row`` drops the
    row so far, ``commit_row`` ends it. InvalidChunk if the stream breaks the protocol."""
    key = None
    cells: list[Cell] = []
    family = qualifier = None
    pending: list[bytes] | None = None  # the pieces of a split value
    cur = None  # (timestamp, labels) of the cell being split
    for resp in responses:
        for c in resp.chunks:
            if c.reset_row:
                key, cells, family, qualifier, pending = None, [], None, None, None
                continue
            if key is None:
                if not c.row_key:
                    raise InvalidChunk("a row's first chunk has no row key")
                key = c.row_key
            elif c.row_key and c.row_key != key:
                raise InvalidChunk(f"row key changed from {key!r} to {c.row_key!r} mid row")
            if pending is None:
                if c.HasField("family_name"):
                    family = c.family_name.value
                    if not c.HasField("qualifier"):
                        raise InvalidChunk("a new family without a qualifier")
                if c.HasField("qualifier"):
                    if family is None:
                        raise InvalidChunk("a qualifier without a family")
                    qualifier = c.qualifier.value
                if family is None or qualifier is None:
                    raise InvalidChunk("a cell without family or qualifier")
                cur = (c.timestamp_micros, tuple(c.labels))
                if c.value_size > 0:
                    pending = [c.value]
                else:
                    cells.append(Cell(family, qualifier, cur[0], c.value, cur[1]))
            else:
                pending.append(c.value)
                if c.value_size <= 0:
                    cells.append(Cell(family, qualifier, cur[0], b"".join(pending), cur[1]))
                    pending = None
            if c.commit_row:
                if pending is not None:
                    raise InvalidChunk("commit_row in the middle of a split cell")
                yield BigtableRow(key, tuple(cells))
                key, cells, family, qualifier = None, [], None, None
    if key is not None or pending is not None:
        raise InvalidChunk(f"the stream ended inside row {key!r}")


__all__ = ["MAX_MESSAGE", "MAX_PIECE", "InvalidChunk", "encode_mutate_rows_response",
           "encode_rows", "merge_rows", "varint"]
