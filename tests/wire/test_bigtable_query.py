"""hypothesis: ExecuteQuery's hand-encoded values (``wire/bigtable/query.py``) read back
as they were by our decoder and by the official client's own parser (2.39.0), for every
type an answer may hold; types round-trip; the batch stream's checksums are CRC-32C."""

from __future__ import annotations

import datetime as dt

import google_crc32c
from google.cloud.bigtable.data.execute_query._query_result_parsing_utils import (
    _parse_pb_value_to_python_value,
)
from google.cloud.bigtable.data.execute_query.metadata import _pb_type_to_metadata_type
from google.cloud.bigtable_v2 import Value as ClientValue
from google.cloud.bigtable_v2.types import Type as ClientType
from hypothesis import given, settings
from hypothesis import strategies as st

from widetable.wire.bigtable import v2
from widetable.wire.bigtable.query import (
    decode_resume_token,
    decode_rows,
    decode_type,
    decode_value,
    encode_param,
    encode_results,
    encode_type,
    row_encoder,
    type_text,
    value_encoder,
)

UTC = dt.UTC
scalar_types = st.sampled_from(["BYTES", "STRING", "INT64", "FLOAT64", "BOOL", "TIMESTAMP", "DATE"])
# (GoogleSQL has no arrays of arrays, and the client rejects them and arrays of maps)
types = st.recursive(scalar_types, lambda inner: st.one_of(
    st.tuples(st.just("ARRAY"), inner.filter(lambda e: not (isinstance(e, tuple) and e[0] in ("ARRAY", "MAP")))),
    st.tuples(st.just("MAP"), st.sampled_from(["BYTES", "STRING", "INT64"]), inner),
    st.tuples(st.just("STRUCT"), st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), inner),
                                          min_size=1, max_size=3, unique_by=lambda f: f[0])
              .map(tuple))), max_leaves=4)


def values_of(t):
    """A strategy of values of type ``t`` (None: NULL) as the SQL layer hands them over."""
    if t == "BYTES":
        v = st.binary(max_size=8)
    elif t == "STRING":
        v = st.text(max_size=6)
    elif t == "INT64":
        v = st.integers(-(2**63), 2**63 - 1)
    elif t == "FLOAT64":
        v = st.floats(allow_nan=False)
    elif t == "BOOL":
        v = st.booleans()
    elif t == "TIMESTAMP":
        v = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1),
                         timezones=st.just(UTC))
    elif t == "DATE":
        v = st.dates()
    elif t[0] == "ARRAY":
        v = st.lists(values_of(t[1]), max_size=3)
    elif t[0] == "MAP":
        v = st.dictionaries(values_of(t[1]).filter(lambda k: k is not None), values_of(t[2]),
                            max_size=3).map(lambda d: list(d.items()))
    else:
        v = st.tuples(*[values_of(ft) for _, ft in t[1]]).map(
            lambda vals, t=t: {name: x for (name, _), x in zip(t[1], vals)})
    return st.none() | v


typed_values = types.flatmap(lambda t: st.tuples(st.just(t), values_of(t)))


def _client_form(value, t):
    """What the official client returns for ``value`` of type ``t``."""
    if value is None:
        return None
    if t == "DATE":
        return (value.year, value.month, value.day)
    if t == "TIMESTAMP":
        return value
    if isinstance(t, tuple) and t[0] == "ARRAY":
        return [_client_form(v, t[1]) for v in value]
    if isinstance(t, tuple) and t[0] == "MAP":
        return {_client_form(k, t[1]): _client_form(v, t[2]) for k, v in value}
    if isinstance(t, tuple):
        return [(n, _client_form(value[n], ft)) for n, ft in t[1]]
    return value


def _from_client(parsed, t):
    if parsed is None:
        return None
    if t == "DATE":
        return (parsed.year, parsed.month, parsed.day)
    if t == "TIMESTAMP":
        return dt.datetime(parsed.year, parsed.month, parsed.day, parsed.hour, parsed.minute,
                           parsed.second, parsed.microsecond, tzinfo=UTC)
    if isinstance(t, tuple) and t[0] == "ARRAY":
        return [_from_client(v, t[1]) for v in parsed]
    if isinstance(t, tuple) and t[0] == "MAP":
        return {k if t[1] != "DATE" else _from_client(k, t[1]): _from_client(v, t[2])
                for k, v in parsed.items()}
    if isinstance(t, tuple):
        return [(n, _from_client(parsed[n], ft)) for n, ft in t[1]]
    return parsed


@settings(max_examples=300, deadline=None)
@given(typed_values)
def test_values_read_back_by_us_and_by_the_official_client(tv) -> None:
    t, value = tv
    data = value_encoder(t)(value)
    ours = decode_value(v2.Value.FromString(data), t, "v")
    assert ours == value
    client_type = _pb_type_to_metadata_type(ClientType.deserialize(encode_type(t).SerializeToString()))
    parsed = _parse_pb_value_to_python_value(ClientValue.pb().FromString(data), client_type, "c")
    assert _from_client(parsed, t) == _client_form(value, t)
    assert decode_type(encode_type(t), "t") == t


def test_type_names_and_params() -> None:
    assert type_text(("MAP", "BYTES", ("ARRAY", ("STRUCT", (("timestamp", "TIMESTAMP"),
                                                            ("value", "INT64")))))) == \
        "MAP<BYTES, ARRAY<STRUCT<timestamp TIMESTAMP, value INT64>>>"
    p = encode_param([1, None], ("ARRAY", "INT64"))
    assert p.type.array_type.element_type.HasField("int64_type")
    assert decode_value(p, ("ARRAY", "INT64"), "p") == [1, None]


def test_a_stream_is_batches_with_checksums_and_resume_tokens() -> None:
    rows = [(b"k%05d" % i, i) for i in range(25_000)]
    messages = [v2.ExecuteQueryResponse.FromString(m)
                for m in encode_results(iter(rows), ["BYTES", "INT64"])]
    got, buffer, tokens = [], b"", []
    for m in messages:
        assert len(m.results.proto_rows_batch.batch_data) <= 1 << 20
        buffer += m.results.proto_rows_batch.batch_data
        if m.results.HasField("batch_checksum"):
            assert m.results.batch_checksum == google_crc32c.value(buffer)
            got += decode_rows(buffer, ["BYTES", "INT64"])
            tokens.append(decode_resume_token(m.results.resume_token))
            buffer = b""
    assert got == rows and tokens == [10_000, 20_000, 25_000]
    resumed = [v2.ExecuteQueryResponse.FromString(m)
               for m in encode_results(iter(rows), ["BYTES", "INT64"], skip=20_000)]
    assert resumed[0].results.reset
    assert decode_rows(b"".join(m.results.proto_rows_batch.batch_data for m in resumed),
                       ["BYTES", "INT64"]) == rows[20_000:]
    assert row_encoder(["BYTES"])((None,)) == b"\x12\x00"  # a NULL: a Value with no kind
