"""Malformed requests of both protocols, made by mutating recorded seeds.

Each :class:`Case` is one request's bytes and what the fuzzer knows of it: its
class (for the tallies), whether it is signed, and whether it *must* be
rejected. A case must be rejected when its mutation makes it invalid whatever
the bytes it hit: no signature, a wrong signature or MD5, broken framing, a
PlainBuffer checksum that does not match, truncated MessagePack, a frame over
the size limit. The other mutations (a field changed, a value's type
changed with its checksum fixed, an argument swapped) may by chance give a
valid request; those the runner checks by what they wrote (``run.py``).

Mutation levels, from the outside in:

* HTTP framing and headers: request line, method, version, Content-Length,
  chunked, header lines, dates, MD5, access key, instance, signatures;
* protobuf: a field cleared, set to an edge value, repeated, or a field number
  appended with another wire type or an out-of-range varint (protobuf keeps the
  last value), bodies truncated or sent to another API;
* PlainBuffer: rows read into cells (``plainbuffer.py``) and changed with
  their checksums kept right (bad type tags, wrong lengths, too many cells,
  missing key columns) or broken; truncated; oversized values;
* native frames: bad lengths (short, long and half-closed, over 5 MB, zero),
  MessagePack bytes flipped or truncated, the array's elements replaced by
  values of other types, arities changed, unknown ops and extension types.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from types import MappingProxyType

import msgpack
from google.protobuf.message import DecodeError, Message

from . import plainbuffer as pbuf
from . import wire
from .record import ABSENT, LIVE, TABLES, HttpSeed, NativeSeed

MAX_BODY = 5 * 2**20
DDL = frozenset({"CreateTable", "DeleteTable", "UpdateTable", "CreateIndex", "DropIndex"})
WRITE_APIS = frozenset({"PutRow", "UpdateRow", "DeleteRow", "BatchWriteRow", "CommitTransaction",
                        *DDL})
NATIVE_WRITES = frozenset({3, 4, 5, 7})  # PUT_ROW, UPDATE_ROW, DELETE_ROW, BATCH_WRITE_ROW
# What a read-only key must never get done: writes, and changes to the catalog.
REFUSED_TO_READERS = frozenset({"PutRow", "UpdateRow", "DeleteRow", "BatchWriteRow", *DDL,
                                "CreateSearchIndex", "UpdateSearchIndex", "DeleteSearchIndex"})


@dataclass(slots=True)
class Case:
    protocol: str  # "http" or "native"
    kind: str  # the mutation's class
    data: bytes  # the bytes to send on the connection
    must_reject: bool
    api: str | None = None  # HTTP: the API named in the path
    body: bytes = b""  # HTTP: the body as sent
    half_close: bool = False  # shut the sending side after the bytes (an input cut short)
    fresh: bool = False  # on a connection of its own (framing that poisons a connection)
    frame: bytes | None = None  # native: the MessagePack as sent
    parts: list[Case] | None = None  # pipelined: the requests in ``data``, one answer each
    upgrade: bytes = b""  # native: an upgrade request sent before ``data``, in one write
    abort: bool = False  # reset the connection right after sending, without reading
    reader: bool = False  # signed (or upgraded) with the read-only key
    trickle: bool = False  # sent a few bytes at a time, so the server reads it in pieces


def _pb_class(api: str):
    from tablestore.protobuf import search_pb2, table_store_pb2

    return getattr(table_store_pb2, f"{api}Request", None) or getattr(search_pb2, f"{api}Request",
                                                                       None)


# -- byte-level mutations -----------------------------------------------------------------

def mutate_bytes(rng: random.Random, data: bytes, others: list[bytes] | None = None) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3, 8))):
        what = rng.randrange(9)
        pos = rng.randrange(len(out) + 1)
        if what == 0 and out:
            out[min(pos, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif what == 1 and out:
            out[min(pos, len(out) - 1)] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif what == 2:
            out[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif what == 3 and out:
            del out[pos:pos + rng.randint(1, 16)]
        elif what == 4:
            out = out[:pos]
        elif what == 5 and out:
            start = rng.randrange(len(out))
            out[pos:pos] = out[start:start + rng.randint(1, 32)]
        elif what == 6:
            out[pos:pos] = struct.pack("<I", rng.choice(pbuf.INTERESTING_U32))
        elif what == 7 and others:
            other = rng.choice(others)
            cut = rng.randrange(len(other) + 1)
            out = out[:pos] + other[cut:]
        else:
            out[pos:pos] = bytes((rng.choice((0x08, 0x10, 0x12, 0x1A, 0x22, 0x2A, 0xFF)),))
    return bytes(out)


# -- protobuf ------------------------------------------------------------------------------

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def wire_field(rng: random.Random, number: int) -> bytes:
    """One field of ``number`` in any wire type, value at an edge."""
    wt = rng.choice((0, 1, 2, 5, 3, 7))
    tag = _varint((number << 3) | wt)
    if wt == 0:
        return tag + _varint(rng.choice((0, 1, 2**31, 2**32 + 1, 2**63, 2**64 - 1, 99, 7)))
    if wt == 1:
        return tag + rng.randbytes(8)
    if wt == 5:
        return tag + rng.randbytes(4)
    if wt == 2:
        n = rng.choice((0, 1, 5, 2**31, 2**32 - 1))
        return tag + _varint(n) + rng.randbytes(min(n, rng.randint(0, 20)))
    return tag  # group start / invalid wire type: never valid in proto2 messages here


def _names(api: str | None) -> list[str]:
    names = ["", "x", ABSENT, "a" * 256, "é", "fz_a\0", " fz_a", "1abc", "fz-a"]
    if api not in DDL:
        names += [*TABLES, LIVE]
    return names


def _scalar(rng: random.Random, fd, api: str | None) -> object:
    t = fd.type
    if t == fd.TYPE_STRING:
        return rng.choice(_names(api) + ["k", "s", "i", "\u202e", "x" * 70000, *REGEXES])
    if t == fd.TYPE_BYTES:
        return rng.choice((b"", rng.randbytes(rng.randint(1, 40)), b"\x75\0\0\0", b"\x75\0\0\0\x01"))
    if t == fd.TYPE_BOOL:
        return rng.random() < 0.5
    if t in (fd.TYPE_DOUBLE, fd.TYPE_FLOAT):
        return rng.choice((0.0, -1.0, float("nan"), float("inf"), 1e300))
    if t == fd.TYPE_ENUM:
        return rng.choice([v.number for v in fd.enum_type.values])
    bits = 32 if t in (fd.TYPE_INT32, fd.TYPE_SINT32, fd.TYPE_SFIXED32) else 64
    unsigned = t in (fd.TYPE_UINT32, fd.TYPE_UINT64, fd.TYPE_FIXED32, fd.TYPE_FIXED64)
    edges = [0, 1, 2, 3, 100, 101, 1000, 5001, 2**(bits - 1) - 1]
    if not unsigned:
        edges += [-1, -(2**(bits - 1))]
    return rng.choice(edges)


def _bytes_field(rng: random.Random, data: bytes) -> bytes:
    if data[:4] == b"\x75\0\0\0":
        return mutate_plainbuffer(rng, data)[0]
    if data and rng.random() < 0.5:
        return mutate_bytes(rng, data)
    return _scalar_bytes(rng)


def _scalar_bytes(rng: random.Random) -> bytes:
    return rng.choice((b"", rng.randbytes(rng.randint(1, 40)), b"\x75\0\0\0", b"\x08\x99\x01"))


def mutate_message(rng: random.Random, msg: Message, api: str | None, depth: int = 0) -> None:
    fields = msg.DESCRIPTOR.fields
    if not fields:
        return
    fd = rng.choice(fields)
    name = fd.name
    repeated = fd.label == fd.LABEL_REPEATED
    if fd.type == fd.TYPE_MESSAGE:
        if repeated:
            box = getattr(msg, name)
            what = rng.randrange(4)
            if what == 0 or not len(box):
                box.add()
            elif what == 1:
                box.add().CopyFrom(box[rng.randrange(len(box))])
            elif what == 2:
                del box[rng.randrange(len(box))]
            else:
                mutate_message(rng, box[rng.randrange(len(box))], api, depth + 1)
        elif msg.HasField(name) and rng.random() < 0.7 and depth < 6:
            mutate_message(rng, getattr(msg, name), api, depth + 1)
        elif rng.random() < 0.5:
            msg.ClearField(name)
        else:
            getattr(msg, name).SetInParent()
        return
    if repeated:
        box = getattr(msg, name)
        if len(box) and rng.random() < 0.4:
            del box[rng.randrange(len(box))]
        elif len(box) and fd.type == fd.TYPE_BYTES and rng.random() < 0.6:
            i = rng.randrange(len(box))
            box[i] = _bytes_field(rng, box[i])
        else:
            for _ in range(rng.choice((1, 1, 3, 150))):
                box.append(_scalar_bytes(rng) if fd.type == fd.TYPE_BYTES else _scalar(rng, fd, api))
        return
    if rng.random() < 0.2:
        msg.ClearField(name)
    elif fd.type == fd.TYPE_BYTES and _nested_class(msg, name) and rng.random() < 0.8:
        inner = _nested_class(msg, name)()
        try:
            inner.MergeFromString(getattr(msg, name))
        except DecodeError:
            pass
        if depth < 8:
            mutate_message(rng, inner, api, depth + 1)
        setattr(msg, name, inner.SerializePartialToString())
    elif fd.type == fd.TYPE_BYTES and name in FILTER_FIELDS and rng.random() < 0.8:
        setattr(msg, name, mutate_filter(rng, getattr(msg, name) or base_filter(rng), depth + 1))
    elif fd.type == fd.TYPE_BYTES and msg.HasField(name) and rng.random() < 0.7:
        setattr(msg, name, _bytes_field(rng, getattr(msg, name)))
    else:
        setattr(msg, name, _scalar(rng, fd, api))


# -- messages inside bytes fields (search queries) -----------------------------------------

def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _by_type(enum: str, name_of) -> object:
    def pick(msg: Message):
        from tablestore.protobuf import search_pb2

        try:
            label = getattr(search_pb2, enum).Name(msg.type)
        except ValueError:
            return None
        return getattr(search_pb2, name_of(label), None)
    return pick


_NESTED = {  # (message, bytes field) -> the message class its bytes hold, from the message
    ("SearchRequest", "search_query"): lambda msg: _search_class("SearchQuery"),
    ("ParallelScanRequest", "scan_query"): lambda msg: _search_class("ScanQuery"),
    ("Query", "query"): _by_type("QueryType", _camel),
    ("Aggregation", "body"): _by_type("AggregationType",
                                      lambda n: _camel(n[4:]) + "Aggregation"),  # AGG_AVG
    ("GroupBy", "body"): _by_type("GroupByType", _camel),  # GROUP_BY_FIELD -> GroupByField
}


def _search_class(name: str):
    from tablestore.protobuf import search_pb2

    return getattr(search_pb2, name)


def _nested_class(msg: Message, name: str):
    pick = _NESTED.get((msg.DESCRIPTOR.name, name))
    return None if pick is None else pick(msg)


# -- filters and conditions ----------------------------------------------------------------

FILTER_FIELDS = frozenset({"filter", "column_condition"})
REGEXES = ("v(\\d+)", "(.*)", "", "(", "[a-", "(a+)+$", "(?P<x>\\w)", "\\", "x" * 1025,
           "(\\d+)" * 50, "\u00e9(.)", "(?i)V(\\d)")


def _filter_pb():
    from tablestore.protobuf import table_store_filter_pb2

    return table_store_filter_pb2


def base_filter(rng: random.Random) -> bytes:
    """A valid filter: one column compared with a value, or two of them combined."""
    from tablestore.plainbuffer.plain_buffer_builder import PlainBufferBuilder

    f = _filter_pb()
    single = f.SingleColumnValueFilter(
        comparator=rng.choice((1, 2, 3, 4, 5, 6)), column_name=rng.choice(("i", "s", "v", "x")),
        column_value=bytes(PlainBufferBuilder.serialize_column_value(rng.choice((1, "v1", 2.5)))),
        filter_if_missing=rng.random() < 0.5, latest_version_only=True)
    if rng.random() < 0.2:  # a regex value-transfer rule (SingleColumnValueRegexFilter)
        single.value_trans_rule.regex = rng.choice(REGEXES)
        single.value_trans_rule.cast_type = rng.choice((0, 1, 3, 6, 7))
    out = f.Filter(type=1, filter=single.SerializeToString())
    if rng.random() < 0.4:
        both = f.CompositeColumnValueFilter(combinator=rng.choice((1, 2, 3)))
        both.sub_filters.add().CopyFrom(out)
        both.sub_filters.add().CopyFrom(out)
        out = f.Filter(type=2, filter=both.SerializeToString())
    elif rng.random() < 0.2:
        out = f.Filter(type=3, filter=f.ColumnPaginationFilter(offset=0, limit=2).SerializeToString())
    return out.SerializeToString()


def nested_filter(depth: int) -> bytes:
    """A composite filter ``depth`` levels deep (each level parsed apart: no protobuf limit)."""
    f = _filter_pb()
    data = base_filter(random.Random(depth))
    for _ in range(depth):
        both = f.CompositeColumnValueFilter(combinator=3)  # NOT
        both.sub_filters.add().MergeFromString(data)
        data = f.Filter(type=2, filter=both.SerializeToString()).SerializeToString()
    return data


def mutate_filter(rng: random.Random, data: bytes, depth: int = 0) -> bytes:
    """A filter (a ``Filter`` message, its inner message by its type) mutated."""
    f = _filter_pb()
    if rng.random() < 0.03:
        return nested_filter(rng.choice((20, 200, 1200)))
    outer = f.Filter()
    try:
        outer.MergeFromString(data)
    except DecodeError:
        return mutate_bytes(rng, data)
    inner_cls = {1: f.SingleColumnValueFilter, 2: f.CompositeColumnValueFilter,
                 3: f.ColumnPaginationFilter}.get(outer.type)
    what = rng.randrange(5)
    if what == 0 or inner_cls is None or depth > 8:
        mutate_message(rng, outer, None, depth + 1)
        return outer.SerializePartialToString()
    if what == 1:
        outer.type = rng.choice((1, 2, 3))  # the inner message read as another type
        return outer.SerializePartialToString()
    inner = inner_cls()
    try:
        inner.MergeFromString(outer.filter)
    except DecodeError:
        return mutate_bytes(rng, data)
    if outer.type == 2 and inner.sub_filters and what == 2:
        sub = inner.sub_filters[rng.randrange(len(inner.sub_filters))]
        new = mutate_filter(rng, sub.SerializePartialToString(), depth + 1)
        sub.Clear()
        try:
            sub.MergeFromString(new)
        except DecodeError:
            pass
    elif outer.type == 2 and what == 3:
        for _ in range(rng.choice((9, 11, 300))):
            inner.sub_filters.add().MergeFromString(base_filter(rng))
    else:
        mutate_message(rng, inner, None, depth + 1)
    outer.filter = inner.SerializePartialToString()
    return outer.SerializePartialToString()


def condition(rng: random.Random) -> bytes:
    """A ``Condition`` message: a row existence and perhaps a column condition, mutated."""
    from tablestore.protobuf import table_store_pb2 as p

    c = p.Condition(row_existence=rng.choice((0, 1, 2)))
    if rng.random() < 0.7:
        c.column_condition = mutate_filter(rng, base_filter(rng))
    if rng.random() < 0.3:
        mutate_message(rng, c, None, 1)
    return c.SerializePartialToString()


def mutate_proto(rng: random.Random, api: str, body: bytes) -> bytes:
    cls = _pb_class(api)
    if cls is None:
        return mutate_bytes(rng, body)
    msg = cls()
    try:
        msg.MergeFromString(body)
    except DecodeError:
        return mutate_bytes(rng, body)
    for _ in range(rng.choice((1, 1, 2, 4))):
        mutate_message(rng, msg, api)
    out = msg.SerializePartialToString()
    if rng.random() < 0.25:  # a field again, as another wire type or an edge value
        out += wire_field(rng, rng.choice([f.number for f in cls.DESCRIPTOR.fields] + [99]))
    return out


def plainbuffer_fields(msg: Message):
    """``(message, field name, index or None)`` of every PlainBuffer inside ``msg``."""
    for fd, value in msg.ListFields():
        if fd.type == fd.TYPE_MESSAGE:
            items = value if fd.label == fd.LABEL_REPEATED else [value]
            for item in items:
                yield from plainbuffer_fields(item)
        elif fd.type == fd.TYPE_BYTES:
            if fd.label == fd.LABEL_REPEATED:
                for i, v in enumerate(value):
                    if v[:4] == b"\x75\0\0\0":
                        yield msg, fd.name, i
            elif value[:4] == b"\x75\0\0\0":
                yield msg, fd.name, None


# -- PlainBuffer ---------------------------------------------------------------------------

def mutate_plainbuffer(rng: random.Random, data: bytes) -> tuple[bytes, bool]:
    """A mutated buffer, and whether it must be rejected whatever it says."""
    what = rng.randrange(10)
    try:
        rows = pbuf.decode(data)
    except ValueError:
        return mutate_bytes(rng, data), False
    if what < 5:
        return pbuf.encode(pbuf.mutate_rows(rng, rows)), False
    if what == 5 and rows:  # a checksum that does not match
        row = rng.choice(rows)
        cells = row.pk + (row.data or [])
        if cells and rng.random() < 0.6:
            cell = rng.choice(cells)
            cell.crc = cell.checksum() ^ rng.randint(1, 255)
        else:
            row.crc = pbuf.row_checksum(row) ^ rng.randint(1, 255)
        return pbuf.encode(rows), True
    if what == 6:  # cut inside the last row: a row without its checksum
        cut = rng.randrange(max(1, len(data) - _last_row_len(rows)), len(data))
        return data[:cut], True
    if what == 7:
        return pbuf.encode(rows, header=rng.choice((0, 0x74, 0x76, 0x75000000, 0xFFFFFFFF))), True
    if what == 8 and rows:  # an oversized value, checksum right
        row = rng.choice(rows)
        big = rng.choice((2 * 2**20 + 1, 64 * 1024, 1025, 4 * 2**20))
        target = row.data if row.data is not None and rng.random() < 0.7 else row.pk
        target.append(pbuf.Cell(b"big", pbuf.STRING, struct.pack("<I", big) + b"z" * big))
        return pbuf.encode(rows), False
    return mutate_bytes(rng, data), False


def _last_row_len(rows: list[pbuf.Row]) -> int:
    return len(pbuf.encode(rows[-1:])) - 4 if rows else 1


# -- HTTP cases ----------------------------------------------------------------------------

class HttpMutator:
    """Cases of Tablestore's protocol from the recorded (and generated) seeds."""

    KINDS = ("body_bytes", "body_random", "proto", "plainbuffer", "plainbuffer_reject", "truncated",
             "wrong_api", "headers", "unsigned", "bad_signature", "bad_md5", "framing",
             "oversized", "upgrade", "pipelined", "abort")
    WEIGHTS = (12, 4, 20, 16, 8, 5, 4, 6, 4, 3, 3, 8, 1, 3, 4, 2)
    POOLED = frozenset({"BatchWriteRow", "BatchGetRow", "GetRange", "CreateTable", "DeleteTable",
                        "StartLocalTransaction", "GetStreamRecord"})  # may run on the pool
    PIPELINED = ("body_bytes", "proto", "plainbuffer", "plainbuffer_reject", "unsigned", "bad_md5")

    def __init__(self, account: wire.Account, seeds: list[HttpSeed],
                 reader: wire.Account | None = None) -> None:
        self.account, self.reader = account, reader
        self.seeds = seeds + generated_seeds()
        self.bodies = [s.body for s in self.seeds]
        self.with_rows = [s for s in self.seeds if _has_plainbuffer(s)]
        self._rng = random.Random(0)
        self._v4 = True  # a share of signed cases signs with V4

    def case(self, rng: random.Random) -> Case:
        self._rng = rng
        kind = rng.choices(self.KINDS, self.WEIGHTS)[0]
        seed = rng.choice(self.with_rows if kind.startswith("plainbuffer") else self.seeds)
        return getattr(self, "_" + kind)(rng, seed)

    def _signed(self, kind: str, api: str, body: bytes, must_reject: bool = False,
                extra: dict | None = None, path: str | None = None) -> Case:
        reader = self.reader is not None and self._rng.random() < 0.1
        account = self.reader if reader else self.account
        headers = wire.ots_headers(account, api, body)
        headers = wire.sign(account, api, headers, v4=self._v4 and self._rng.random() < 0.3)
        headers.update(extra or {})
        data = wire.http_request(path or "/" + api, headers, body)
        must_reject = must_reject or (reader and api in REFUSED_TO_READERS)
        return Case("http", kind, data, must_reject, api=api, body=body, reader=reader)

    def _body_bytes(self, rng, seed):
        return self._signed("body_bytes", seed.api, mutate_bytes(rng, seed.body, self.bodies))

    def _body_random(self, rng, seed):
        return self._signed("body_random", seed.api, rng.randbytes(rng.choice((0, 1, 5, 40, 300))))

    def _proto(self, rng, seed):
        return self._signed("proto", seed.api, mutate_proto(rng, seed.api, seed.body))

    def _plainbuffer(self, rng, seed, reject: bool = False):
        msg = _pb_class(seed.api)()
        msg.MergeFromString(seed.body)
        spots = list(plainbuffer_fields(msg))
        owner, name, index = rng.choice(spots)
        data = getattr(owner, name) if index is None else getattr(owner, name)[index]
        for _ in range(20 if reject else 1):
            new, must = mutate_plainbuffer(rng, data)
            if must or not reject:
                break
        if index is None:
            setattr(owner, name, new)
        else:
            getattr(owner, name)[index] = new
        kind = "plainbuffer_reject" if must else "plainbuffer"
        return self._signed(kind, seed.api, msg.SerializePartialToString(), must_reject=must)

    def _plainbuffer_reject(self, rng, seed):
        return self._plainbuffer(rng, seed, reject=True)

    def _truncated(self, rng, seed):
        return self._signed("truncated", seed.api, seed.body[:rng.randrange(len(seed.body) + 1)])

    def _wrong_api(self, rng, seed):
        api = rng.choice(self.seeds).api
        return self._signed("wrong_api", api, seed.body)

    def _headers(self, rng, seed):
        api, body = seed.api, seed.body
        headers = wire.ots_headers(self.account, api, body)
        what = rng.randrange(8)
        if what == 0:
            headers["x-ots-date"] = rng.choice(("", "yesterday", "2020-01-01T00:00:00.000Z",
                                                "9999-12-31T23:59:59.999Z", wire.ots_date(-3600),
                                                "2026-13-45T99:99:99.000Z", "\xff" * 4))
        elif what == 1:
            headers["x-ots-accesskeyid"] = rng.choice(("", "nobody", "x" * 1000, "\u00e9"))
        elif what == 2:
            headers["x-ots-instancename"] = rng.choice(("", "other", "x" * 300))
        elif what == 3:
            del headers[rng.choice(list(headers))]
        elif what == 4:
            headers["x-ots-apiversion"] = rng.choice(("", "2014-08-08", "x"))
        elif what == 5:
            headers["x-ots-signaturev4"] = rng.randbytes(8).hex()
            headers["x-ots-signdate"] = rng.choice(("20260101", "", "x"))
            headers["x-ots-signregion"] = rng.choice(("cn-test", ""))
        elif what == 6:
            for i in range(rng.choice((5, 101, 200))):
                headers[f"x-ots-junk{i}"] = "v"
        else:
            headers[rng.choice(("content-type", "x-ots-contenttype", "host", "expect"))] = \
                rng.choice(("", "100-continue", "\x01", "a" * 70000))
        must = what in (0, 1, 2)
        signed = wire.sign(self.account, api, headers)
        if what == 6 and len(headers) > 100:
            must = True  # over the header count limit
        data = wire.http_request("/" + api, signed, body)
        return Case("http", "headers", data, must, api=api, body=body, fresh=True)

    def _unsigned(self, rng, seed):
        body = mutate_bytes(rng, seed.body) if rng.random() < 0.5 else seed.body
        headers = wire.ots_headers(self.account, seed.api, body)
        return Case("http", "unsigned", wire.http_request("/" + seed.api, headers, body), True,
                    api=seed.api, body=body)

    def _bad_signature(self, rng, seed):
        headers = wire.ots_headers(self.account, seed.api, seed.body)
        headers["x-ots-signature"] = rng.choice(("", "AAAA", wire.sign_v2("wrong", seed.api, headers),
                                                 wire.sign_v2(self.account.secret, "Other", headers)))
        return Case("http", "bad_signature", wire.http_request("/" + seed.api, headers, seed.body),
                    True, api=seed.api, body=seed.body)

    def _bad_md5(self, rng, seed):
        body = mutate_bytes(rng, seed.body)
        while body == seed.body:  # a mutation may undo itself (cut a last 0 byte, add it back)
            body += b"\0"
        headers = wire.sign(self.account, seed.api, wire.ots_headers(self.account, seed.api, seed.body))
        return Case("http", "bad_md5", wire.http_request("/" + seed.api, headers, body), True,
                    api=seed.api, body=body)

    def _framing(self, rng, seed):
        api, body = seed.api, seed.body
        headers = wire.sign(self.account, api, wire.ots_headers(self.account, api, body))
        head = wire.http_request("/" + api, headers, b"")[:-4]
        what = rng.randrange(12)
        half = False
        if what == 0:
            data = rng.choice((b"GET /", b"PUT /", b"POST", b"\x16\x03\x01", b"PRI * HTTP/2.0",
                               b"POST /x HTTP/1.1 extra", b"POST /PutRow HTTP/9.9")) + b"\r\n\r\n"
        elif what == 1:
            data = head.replace(b"POST ", rng.choice((b"GET ", b"DELETE ", b"post ", b"P\0ST ")), 1)
            data += b"\r\n\r\n" + body
        elif what == 2:
            data = head.replace(b"HTTP/1.1", rng.choice((b"HTTP/2.0", b"HTTP/1.2", b"HTTP/0.9",
                                                          b"http/1.1", b"HTTP/1")), 1) + b"\r\n\r\n" + body
        elif what == 3:
            data = head + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + b"5\r\nhello\r\n0\r\n\r\n"
        elif what == 4:
            data = head + b"\r\nContent-Length: " + rng.choice((b"1", b"-1", b"x", b"99999999999")) + \
                b"\r\n\r\n" + body
        elif what == 5:
            data = head.replace(b"\r\n", b"\n") + b"\n\n" + body
        elif what == 6:
            data = head + b"\r\nno colon here\r\n\r\n" + body
        elif what == 7:
            data = head + b"\r\nx-big: " + b"a" * 70000 + b"\r\n\r\n" + body
        elif what == 8:  # a body shorter than its Content-Length, then the end of input
            data = wire.http_request("/" + api, headers, body, len(body) + rng.randint(1, 1000))
            half = True
        elif what == 9:  # a head cut short
            full = head + b"\r\n\r\n" + body
            data, half = full[:rng.randrange(len(full))], True
        elif what == 10:
            data = head.replace(b"/" + api.encode(), rng.choice(
                (b"/", b"", b"/Nope", b"/../PutRow", b"/PutRow?x=1", b"//PutRow", b"/%00",
                 b"/" + b"A" * 5000)), 1) + b"\r\n\r\n" + body
        else:
            data = head + b"\r\n Folded: line\r\n\r\n" + body
        must = what not in (9,)  # a head cut short may never answer: the client gave up
        return Case("http", "framing", data, must and not half, api=api, body=body,
                    half_close=half, fresh=True)

    def _oversized(self, rng, seed):
        api = seed.api
        if rng.random() < 0.5:  # refused from Content-Length, before the body is read
            headers = wire.sign(self.account, api, wire.ots_headers(self.account, api, b""))
            data = wire.http_request("/" + api, headers, b"", MAX_BODY + rng.choice((1, 10**6)))
            return Case("http", "oversized", data, True, api=api, half_close=True, fresh=True)
        body = seed.body + b"\x12" + _varint(4 * 2**20) + b"z" * (4 * 2**20)
        return self._signed("oversized", api, body)

    def _upgrade(self, rng, seed):
        api = wire.NATIVE_API
        body = rng.choice((b"", b"x", seed.body))
        headers = wire.ots_headers(self.account, api, body)
        extra = {"Upgrade": rng.choice(("widetable-native/3", "widetable-native/99", "h2c", "",
                                        wire.NATIVE_UPGRADE)),
                 "Connection": rng.choice(("Upgrade", "close", "keep-alive"))}
        if rng.random() < 0.5:
            headers = wire.sign(self.account, api, headers)
        data = wire.http_request("/" + api, {**extra, **headers}, body)
        return Case("http", "upgrade", data, False, api=api, body=body, fresh=True)


    def _pipelined_part(self, rng: random.Random) -> Case:
        kind = rng.choice(self.PIPELINED)
        seed = rng.choice(self.with_rows if kind.startswith("plainbuffer") else self.seeds)
        return getattr(self, "_" + kind)(rng, seed)

    def _pipelined(self, rng, seed):
        """Two or three requests in one write on a kept connection, answered in order."""
        parts = [self._pipelined_part(rng) for _ in range(rng.randint(2, 3))]
        return Case("http", "pipelined", b"".join(p.data for p in parts),
                    any(p.must_reject for p in parts), parts=parts)


    def _abort(self, rng, seed):
        """A request that may run on the worker pool, the connection reset before it is
        answered: the answer then goes to a connection that is gone."""
        seed = rng.choice([s for s in self.seeds if s.api in self.POOLED] or self.seeds)
        body = seed.body if rng.random() < 0.5 else mutate_proto(rng, seed.api, seed.body)
        case = self._signed("abort", seed.api, body)
        case.abort = case.fresh = True
        return case


def _has_plainbuffer(seed: HttpSeed) -> bool:
    cls = _pb_class(seed.api)
    if cls is None:
        return False
    msg = cls()
    try:
        msg.MergeFromString(seed.body)
    except DecodeError:
        return False
    return any(True for _ in plainbuffer_fields(msg))


def generated_seeds() -> list[HttpSeed]:
    """Seeds of APIs the recorded workload does not call, built from the SDK's messages."""
    from tablestore.protobuf import table_store_pb2 as p

    out = []
    m = p.ComputeSplitPointsBySizeRequest(table_name="fz_a", split_size=1)
    out.append(("ComputeSplitPointsBySize", m))
    m = p.CreateIndexRequest(main_table_name=ABSENT)
    m.index_meta.name = "ix"
    m.index_meta.primary_key.append("i")
    m.index_meta.index_update_mode = 1
    m.index_meta.index_type = 1
    out.append(("CreateIndex", m))
    out.append(("ListStream", p.ListStreamRequest(table_name="fz_a")))
    out.append(("DescribeStream", p.DescribeStreamRequest(stream_id="fz_a_stream",
                                                          inclusive_start_shard_id="0",
                                                          shard_limit=10)))
    out.append(("GetShardIterator", p.GetShardIteratorRequest(stream_id="x", shard_id="0")))
    out.append(("GetStreamRecord", p.GetStreamRecordRequest(shard_iterator="abc", limit=10)))
    return [HttpSeed(api, {}, m.SerializePartialToString()) for api, m in out]


# -- native cases --------------------------------------------------------------------------

def _random_value(rng: random.Random, depth: int = 0) -> object:
    what = rng.randrange(14 if depth < 3 else 10)
    if what == 0:
        return None
    if what == 1:
        return rng.choice((True, False))
    if what == 2:
        return rng.choice((0, -1, 1, 2**63 - 1, -(2**63), 2**64 - 1, 2**31, 101, 5001))
    if what == 3:
        return rng.choice((0.0, float("nan"), float("inf"), -1.5))
    if what == 4:
        return rng.choice(("", "x", *TABLES, LIVE, ABSENT, "put", "delete", "update", "é", "a" * 2000))
    if what == 5:
        return rng.choice((b"", b"\0", rng.randbytes(rng.randint(1, 30)), b"\x08\x01"))
    if what == 6:
        return msgpack.ExtType(rng.choice((1, 2, 3, 0, 127, -1)), rng.choice((b"", b"x")))
    if what == 7:
        return rng.choice(("EXPECT_EXIST", "IGNORE", "forward", "backward", "TRIM_HORIZON"))
    if what == 8:
        return rng.choice(((), ("k1", 1), (1,), ("k1", 1, 2), (msgpack.ExtType(1, b""),)))
    if what == 9:
        return {}
    if what == 10:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    if what == 11:
        return {_random_value(rng, 3): _random_value(rng, depth + 1) for _ in range(rng.randint(1, 4))}
    if what == 12:
        return [(rng.choice([*TABLES, "x"]), rng.choice(("put", "update", "delete", "x")),
                 _random_value(rng, depth + 1), _random_value(rng, depth + 1))]
    return {"s": _random_value(rng, depth + 1), "i": (_random_value(rng, 3), _random_value(rng, 3))}


def _nodes(value: object, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            out += _nodes(v, (*path, i))
    elif isinstance(value, dict):
        for k in list(value):
            out += _nodes(value[k], (*path, k))
    return out


def _replace(value: object, path: tuple, new: object) -> object:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out = dict(value)
        out[head] = _replace(value[head], rest, new)
        return out
    out = list(value)
    out[head] = _replace(value[head], rest, new)
    return out


def _get(value: object, path: tuple) -> object:
    for p in path:
        value = value[p]
    return value


def mutate_tree(rng: random.Random, value: object) -> object:
    for _ in range(rng.choice((1, 1, 2, 3))):
        path = rng.choice(_nodes(value))
        node = _get(value, path)
        what = rng.randrange(6)
        if what < 3 or not isinstance(node, (list, tuple, dict)):
            value = _replace(value, path, _random_value(rng))
        elif what == 3 and isinstance(node, (list, tuple)) and node:
            i = rng.randrange(len(node))
            value = _replace(value, path, [*node[:i], *node[i + 1:]])
        elif what == 4 and isinstance(node, (list, tuple)):
            value = _replace(value, path, [*node, _random_value(rng)])
        else:
            value = _replace(value, path, [node] * rng.choice((2, 101, 201)))
    return value


def _deep(n: int) -> bytes:
    return b"\x91" * n + b"\xc0"


FILTER_ARG = MappingProxyType({1: 6, 2: 9})  # op -> its filter's index (GET_ROW, GET_RANGE)
CONDITION_ARG = MappingProxyType({3: 4, 4: 7, 5: 3})  # op -> its condition's (PUT, UPDATE, DELETE)


class NativeMutator:
    """Cases of widetable's native protocol: frames on an upgraded connection."""

    KINDS = ("frame_bytes", "frame_struct", "frame_random", "frame_truncated", "frame_length",
             "frame_oversized", "frame_deep", "frame_op", "frame_filter", "frame_pipelined",
             "frame_abort")
    WEIGHTS = (20, 35, 5, 8, 8, 1, 2, 6, 12, 5, 2)
    PIPELINED = ("frame_bytes", "frame_struct", "frame_truncated", "frame_op", "frame_filter")
    FILTER_ARG = FILTER_ARG
    CONDITION_ARG = CONDITION_ARG

    def __init__(self, seeds: list[NativeSeed]) -> None:
        self.frames = [s.frame for s in seeds]
        self.trees = [msgpack.unpackb(f, strict_map_key=False) for f in self.frames]

    def case(self, rng: random.Random) -> Case:
        kind = rng.choices(self.KINDS, self.WEIGHTS)[0]
        i = rng.randrange(len(self.frames))
        return getattr(self, "_" + kind)(rng, self.frames[i], self.trees[i])

    @staticmethod
    def _framed(kind: str, frame: bytes, must: bool = False, length: int | None = None,
                half: bool = False, fresh: bool = False) -> Case:
        n = len(frame) if length is None else length
        return Case("native", kind, wire.FRAME_HEADER.pack(n & 0xFFFFFFFF) + frame, must,
                    frame=frame, half_close=half, fresh=fresh)

    def _frame_bytes(self, rng, frame, tree):
        return self._framed("frame_bytes", mutate_bytes(rng, frame, self.frames))

    def _frame_struct(self, rng, frame, tree):
        try:
            data = msgpack.packb(mutate_tree(rng, tree))
        except (TypeError, ValueError, OverflowError):
            data = frame
        return self._framed("frame_struct", data)

    def _frame_random(self, rng, frame, tree):
        return self._framed("frame_random", rng.randbytes(rng.choice((0, 1, 3, 20, 200))))

    def _frame_truncated(self, rng, frame, tree):
        return self._framed("frame_truncated", frame[:rng.randrange(len(frame))], must=True)

    def _frame_length(self, rng, frame, tree):
        what = rng.randrange(3)
        if what == 0:  # longer than what follows, then the end of input
            return self._framed("frame_length", frame, length=len(frame) + rng.randint(1, 500),
                                half=True, fresh=True)
        if what == 1:  # shorter: the rest reads as the next frame's length
            return self._framed("frame_length", frame, length=rng.randrange(len(frame)), fresh=True)
        return self._framed("frame_length", b"", length=0, must=True)

    def _frame_oversized(self, rng, frame, tree):
        if rng.random() < 0.7:
            return self._framed("frame_oversized", b"", length=MAX_BODY + rng.choice((1, 2**31)),
                                must=True, fresh=True, half=True)
        return self._framed("frame_oversized", msgpack.packb([3, "fz_a", ["k0", 0],
                                                              {"v": "z" * (2 * 2**20 + 1)}, None,
                                                              None]))

    def _frame_deep(self, rng, frame, tree):
        return self._framed("frame_deep", _deep(rng.choice((100, 2000, 100000))), must=True)

    def _frame_filter(self, rng, frame, tree):
        tree = list(tree)
        index = self.FILTER_ARG.get(tree[0]) or self.CONDITION_ARG.get(tree[0])
        if index is None or index >= len(tree):
            return self._frame_struct(rng, frame, tree)
        if tree[0] in self.FILTER_ARG:
            tree[index] = mutate_filter(rng, base_filter(rng))
        else:
            tree[index] = condition(rng)
        return self._framed("frame_filter", msgpack.packb(tree))

    def _frame_pipelined(self, rng, frame, tree):
        """Two or three frames in one write, answered in order; half the time right behind
        the upgrade request, in the same write (the server hands them over at the switch)."""
        parts = []
        for _ in range(rng.randint(2, 3)):
            i = rng.randrange(len(self.frames))
            parts.append(getattr(self, "_" + rng.choice(self.PIPELINED))(
                rng, self.frames[i], self.trees[i]))
        case = Case("native", "frame_pipelined", b"".join(p.data for p in parts),
                    any(p.must_reject for p in parts), parts=parts)
        if rng.random() < 0.5:
            case.upgrade, case.fresh = b"upgrade", True  # the sender writes the request
        return case

    def _frame_abort(self, rng, frame, tree):
        """Frames of calls that run on the pool (batches, stream reads, describe), the
        connection reset before they are answered."""
        pooled = [i for i, t in enumerate(self.trees) if t[0] in (6, 7, 9, 11, 12)]
        parts = []
        for _ in range(rng.randint(1, 3)):
            i = rng.choice(pooled or range(len(self.frames)))
            kind = rng.choice(("frame_struct", "frame_filter", "frame_op"))
            parts.append(getattr(self, "_" + kind)(rng, self.frames[i], self.trees[i]))
        for part in parts:
            part.abort = True
        return Case("native", "frame_abort", b"".join(p.data for p in parts), False,
                    fresh=True, abort=True, parts=parts)

    def _frame_op(self, rng, frame, tree):
        tree = list(tree)
        tree[0] = rng.choice((0, 13, 99, -1, 2**40, "1", None, 1.0, 6, 7))
        return self._framed("frame_op", msgpack.packb(tree))


@dataclass(slots=True)
class Mix:
    """Both mutators, drawn from in a fixed proportion."""

    http: HttpMutator
    native: NativeMutator
    native_share: float = 0.45
    counts: dict = field(default_factory=dict)

    def case(self, rng: random.Random) -> Case:
        case = self._case(rng)
        if len(case.data) < 600 and not case.abort and rng.random() < 0.03:
            case.trickle = True
        return case

    def _case(self, rng: random.Random) -> Case:
        if rng.random() >= self.native_share:
            return self.http.case(rng)
        case = self.native.case(rng)
        if self.http.reader is not None and rng.random() < 0.1:  # on a read-only connection
            case.reader = True
            for part in case.parts or [case]:
                part.reader = True
                part.must_reject = part.must_reject or _native_write(part.frame)
            case.must_reject = any(p.must_reject for p in case.parts or [case])
        return case


def _native_write(frame: bytes | None) -> bool:
    try:
        return msgpack.unpackb(frame, use_list=False, strict_map_key=False)[0] in NATIVE_WRITES
    except Exception:  # noqa: BLE001 - not a call at all: refused whoever sends it
        return False
