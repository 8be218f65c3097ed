"""PrepareQuery and ExecuteQuery messages <-> GoogleSQL types and values.

Types are the plain values of ``widetable.sql.googlesql.types`` (``"BYTES"``, ``("MAP", k,
v)`` ...), spelled here again so this module imports nothing above ``wire``.

An answer travels as ``ExecuteQueryResponse.results`` (``PartialResultSet``) messages.
Rows are cut into batches; a batch is one serialized ``ProtoRows`` (every value of every
row, row after row), sent in one or more messages of at most ``MAX_CHUNK`` bytes of
``batch_data``. The last message of a batch carries ``batch_checksum`` (CRC32C of the
whole batch) and a ``resume_token``; the client yields a batch's rows only then. The
token is the number of rows sent so far: a stream resumed with it re-runs the query and
skips them (the first message of a resumed stream says ``reset``). ``metadata`` messages
are never sent: the client takes the columns from PrepareQuery's answer and rejects them.

Values are hand-encoded (one ``Value`` per cell, fields by number); a NULL is a ``Value``
with no kind set. Composite values (``Value.array_value``): an ARRAY's elements, a MAP's
entries (each a two-element array: key, value), a STRUCT's fields in order.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections.abc import Callable, Iterable, Iterator

from fastcrc import crc32

from ...errors import NotSupported, ParameterInvalid, WidetableError
from . import protobuf, v2
from .rows import varint

MAX_CHUNK = 1 << 20  # bytes of batch_data per message (the client's receive limit is 4 MiB)
BATCH_BYTES = 1 << 20  # a batch ends past this many bytes ...
BATCH_ROWS = 10_000  # ... or rows
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_KIND_OF = {"bytes_type": "BYTES", "string_type": "STRING", "int64_type": "INT64",
            "float32_type": "FLOAT32", "float64_type": "FLOAT64", "bool_type": "BOOL",
            "timestamp_type": "TIMESTAMP", "date_type": "DATE"}
_FIELD_OF = {v: k for k, v in _KIND_OF.items()}


# -- types ----------------------------------------------------------------------------------

def encode_type(t: object):
    """A GoogleSQL type -> ``google.bigtable.v2.Type``."""
    out = v2.Type()
    if isinstance(t, str):
        getattr(out, _FIELD_OF[t]).SetInParent()
    elif t[0] == "ARRAY":  # type: ignore[index]
        out.array_type.element_type.CopyFrom(encode_type(t[1]))  # type: ignore[index]
    elif t[0] == "MAP":  # type: ignore[index]
        out.map_type.key_type.CopyFrom(encode_type(t[1]))  # type: ignore[index]
        out.map_type.value_type.CopyFrom(encode_type(t[2]))  # type: ignore[index]
    else:
        for name, ft in t[1]:  # type: ignore[index]
            out.struct_type.fields.add(field_name=name, type=encode_type(ft))
    return out


def decode_type(msg, what: str) -> object:
    """``google.bigtable.v2.Type`` -> a GoogleSQL type (ParameterInvalid naming ``what``)."""
    kind = msg.WhichOneof("kind")
    if kind in _KIND_OF:
        return _KIND_OF[kind]
    if kind == "array_type":
        return ("ARRAY", decode_type(msg.array_type.element_type, what))
    if kind == "map_type":
        return ("MAP", decode_type(msg.map_type.key_type, what),
                decode_type(msg.map_type.value_type, what))
    if kind == "struct_type":
        return ("STRUCT", tuple((f.field_name, decode_type(f.type, what))
                                for f in msg.struct_type.fields))
    if kind is None:
        raise ParameterInvalid(f"{what} has no type")
    raise ParameterInvalid(f"{what}: type {kind} is not supported")


def encode_metadata(columns: Iterable[tuple[str, object]]):
    """``ResultSetMetadata`` of the answer's ``(name, type)`` columns."""
    out = v2.ResultSetMetadata()
    for name, t in columns:
        out.proto_schema.columns.add(name=name, type=encode_type(t))
    return out


def encode_timestamp(seconds: float):
    whole = int(seconds)
    return protobuf.Timestamp(seconds=whole, nanos=round((seconds - whole) * 1e9))


# -- parameter values -----------------------------------------------------------------------

def decode_value(msg, t: object, what: str) -> object:
    """A ``Value`` of type ``t`` -> its Python value (None for NULL)."""
    kind = msg.WhichOneof("kind")
    if kind is None:
        return None
    want = {"BYTES": "bytes_value", "STRING": "string_value", "INT64": "int_value",
            "FLOAT32": "float_value", "FLOAT64": "float_value", "BOOL": "bool_value",
            "TIMESTAMP": "timestamp_value", "DATE": "date_value"}.get(t) if isinstance(t, str) \
        else "array_value"
    if kind != want:
        raise ParameterInvalid(f"{what}: a {kind} is not a value of its type")
    if t == "TIMESTAMP":
        ts = msg.timestamp_value
        return _EPOCH + dt.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
    if t == "DATE":
        d = msg.date_value
        try:
            return dt.date(d.year, d.month, d.day)
        except ValueError:
            raise ParameterInvalid(f"{what}: {d.year}-{d.month}-{d.day} is not a date") from None
    if isinstance(t, tuple):
        items = msg.array_value.values
        if t[0] == "ARRAY":
            return [decode_value(v, t[1], what) for v in items]
        if t[0] == "MAP":  # [(key, value)], as Arrow lists a map
            out = []
            for entry in items:
                pair = entry.array_value.values
                if len(pair) != 2:
                    raise ParameterInvalid(f"{what}: a map entry of {len(pair)} values")
                out.append((decode_value(pair[0], t[1], what), decode_value(pair[1], t[2], what)))
            return out
        if len(items) != len(t[1]):
            raise ParameterInvalid(f"{what}: a struct of {len(items)} values for {len(t[1])} fields")
        return {name: decode_value(v, ft, what) for (name, ft), v in zip(t[1], items)}
    return getattr(msg, want)


def decode_params(params, what: str = "parameter") -> dict:
    """ExecuteQueryRequest.params -> {name: (value, type)}; each value carries its type."""
    out = {}
    for name, value in params.items():
        label = f"{what} @{name}"
        if not value.HasField("type"):
            raise ParameterInvalid(f"{label} has no type")
        t = decode_type(value.type, label)
        if isinstance(t, tuple) and t[0] != "ARRAY":
            raise NotSupported(f"{label}: parameters of type {t[0]} are not supported")
        out[name] = (decode_value(value, t, label), t)
    return out


def decode_rows(batch: bytes, types: list, checksum: int | None = None) -> list[tuple]:
    """One batch (a serialized ``ProtoRows``) -> its rows (a client's side); ``checksum``:
    the batch's CRC-32C, checked."""
    if checksum is not None and crc32.iscsi(batch) != checksum:
        raise WidetableError(f"ExecuteQuery batch of {len(batch)} bytes fails its checksum")
    values = v2.ProtoRows.FromString(batch).values
    n = len(types)
    if n == 0 or len(values) % n:
        raise ParameterInvalid(f"a batch of {len(values)} values for {n} columns")
    return [tuple(decode_value(values[i + j], types[j], f"column {j}") for j in range(n))
            for i in range(0, len(values), n)]


def type_text(t: object) -> str:
    """``MAP<BYTES, INT64>``: a type as GoogleSQL spells it."""
    if isinstance(t, str):
        return t
    if t[0] == "ARRAY":  # type: ignore[index]
        return f"ARRAY<{type_text(t[1])}>"  # type: ignore[index]
    if t[0] == "MAP":  # type: ignore[index]
        return f"MAP<{type_text(t[1])}, {type_text(t[2])}>"  # type: ignore[index]
    return "STRUCT<" + ", ".join(f"{n} {type_text(ft)}" if n else type_text(ft)
                                 for n, ft in t[1]) + ">"  # type: ignore[index]


def encode_param(value: object, t: object):
    """A parameter's ``Value`` with its ``type`` set (a client's side)."""
    out = v2.Value.FromString(value_encoder(t)(value))
    out.type.CopyFrom(encode_type(t))
    return out


# -- answer rows ----------------------------------------------------------------------------

def _field(tag: int, body: bytes) -> bytes:
    return bytes([tag]) + varint(len(body)) + body


def value_encoder(t: object) -> Callable[[object], bytes]:
    """A function: Python value of type ``t`` -> the ``Value`` message's bytes."""
    if t == "BYTES":
        return lambda v: b"" if v is None else _field(0x12, v)  # type: ignore[arg-type]
    if t == "STRING":
        return lambda v: b"" if v is None else _field(0x1A, v.encode("utf-8"))  # type: ignore[union-attr]
    if t == "INT64":
        return lambda v: b"" if v is None else b"\x30" + varint(int(v))  # type: ignore[call-overload]
    if t in ("FLOAT32", "FLOAT64"):
        return lambda v: b"" if v is None else b"\x59" + struct.pack("<d", v)
    if t == "BOOL":
        return lambda v: b"" if v is None else (b"\x50\x01" if v else b"\x50\x00")
    if t == "TIMESTAMP":
        return _timestamp
    if t == "DATE":
        return lambda v: b"" if v is None else _field(0x6A, b"\x08" + varint(v.year) + b"\x10"  # type: ignore[union-attr]
                                                      + varint(v.month) + b"\x18" + varint(v.day))  # type: ignore[union-attr]
    if t[0] == "ARRAY":  # type: ignore[index]
        item = value_encoder(t[1])  # type: ignore[index]
        return lambda v: b"" if v is None else _array(item(x) for x in v)  # type: ignore[union-attr]
    if t[0] == "MAP":  # type: ignore[index]
        key, val = value_encoder(t[1]), value_encoder(t[2])  # type: ignore[index]
        return lambda v: b"" if v is None else _array(
            _array((key(k), val(x))) for k, x in (v.items() if isinstance(v, dict) else v))  # type: ignore[union-attr]
    fields = [(name, value_encoder(ft)) for name, ft in t[1]]  # type: ignore[index]
    return lambda v: b"" if v is None else _array(  # type: ignore[union-attr]
        enc(v[name] if isinstance(v, dict) else v[i]) for i, (name, enc) in enumerate(fields))


def _array(items: Iterable[bytes]) -> bytes:
    return _field(0x22, b"".join(_field(0x0A, x) for x in items))


def _timestamp(v) -> bytes:
    if v is None:
        return b""
    if v.tzinfo is None:
        v = v.replace(tzinfo=dt.UTC)
    delta = v - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    body = (b"\x08" + varint(seconds) if seconds else b"") + (
        b"\x10" + varint(delta.microseconds * 1000) if delta.microseconds else b"")
    return _field(0x62, body)


def row_encoder(types: list) -> Callable[[tuple], bytes]:
    """A function: one row (a value per column) -> its ``ProtoRows.values`` entries."""
    encoders = [value_encoder(t) for t in types]

    def encode(row: tuple) -> bytes:
        return b"".join(_field(0x12, enc(v)) for enc, v in zip(encoders, row))
    return encode


# -- the stream -----------------------------------------------------------------------------

def encode_resume_token(rows: int) -> bytes:
    return json.dumps({"rows": rows}).encode()


def decode_resume_token(token: bytes) -> int:
    """The rows a resumed stream skips (0 for no token)."""
    if not token:
        return 0
    try:
        rows = json.loads(bytes(token))["rows"]
        if isinstance(rows, int) and rows >= 0:
            return rows
    except (ValueError, KeyError, TypeError):
        pass
    raise ParameterInvalid(f"resume_token {bytes(token)[:40]!r} is not one ExecuteQuery sent")


def encode_results(rows: Iterable[tuple], types: list, skip: int = 0) -> Iterator[bytes]:
    """The serialized ``ExecuteQueryResponse`` messages of an answer's rows, skipping the
    first ``skip`` (a resumed stream)."""
    encode = row_encoder(types)
    batch: list[bytes] = []
    size = count = 0
    sent = skip
    first = bool(skip)
    for n, row in enumerate(rows):
        if n < skip:
            continue
        data = encode(row)
        batch.append(data)
        size += len(data)
        count += 1
        if size >= BATCH_BYTES or count >= BATCH_ROWS:
            sent += count
            yield from _batch_messages(b"".join(batch), sent, first)
            batch, size, count, first = [], 0, 0, False
    if batch:
        sent += count
        yield from _batch_messages(b"".join(batch), sent, first)


def _batch_messages(data: bytes, sent: int, reset: bool) -> Iterator[bytes]:
    for start in range(0, len(data), MAX_CHUNK):
        chunk = data[start:start + MAX_CHUNK]
        results = v2.PartialResultSet(proto_rows_batch=v2.ProtoRowsBatch(batch_data=chunk),
                                      reset=reset and start == 0)
        if start == 0:
            results.estimated_batch_size = len(data)
        if start + MAX_CHUNK >= len(data):
            results.batch_checksum = crc32.iscsi(data)  # CRC-32C (Castagnoli)
            results.resume_token = encode_resume_token(sent)
        yield v2.ExecuteQueryResponse(results=results).SerializeToString()


__all__ = [
    "decode_params",
    "decode_resume_token",
    "decode_rows",
    "decode_type",
    "decode_value",
    "encode_metadata",
    "encode_param",
    "encode_results",
    "encode_resume_token",
    "encode_timestamp",
    "encode_type",
    "row_encoder",
    "type_text",
    "value_encoder",
]
