"""HPACK decoding against an independent encoder (``hpack``'s), over sequences of blocks
that fill, evict and resize the dynamic table, Huffman-coded or not, indexed or not; and
the server's own header encodings, status messages and timeouts."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

import pytest
from hpack import Decoder, Encoder, NeverIndexedHeaderTuple
from hypothesis import given, settings
from hypothesis import strategies as st

from widetable.server.http2.headers import (
    RESPONSE,
    HeaderDecoder,
    HeaderError,
    grpc_status,
    percent_encode,
    timeout_seconds,
)

names = st.sampled_from([b"content-type", b"grpc-timeout", b"x-goog-request-params",
                         b":path", b"user-agent", b"authorization", b"x-a", b"x-b"]) | \
    st.binary(min_size=1, max_size=30).map(lambda b: b.lower())
values = st.binary(max_size=300)
header = st.tuples(names, values, st.booleans())  # (name, value, never indexed)
block = st.lists(header, max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(block, st.booleans(), st.sampled_from([None, 0, 256, 4096])),
                min_size=1, max_size=12))
def test_decodes_what_an_independent_encoder_encodes(blocks):
    enc, ours = Encoder(), HeaderDecoder(1 << 30)
    for headers, huffman, table_size in blocks:
        if table_size is not None:
            enc.header_table_size = table_size  # announced at the start of the next block
        items = [NeverIndexedHeaderTuple(n, v) if never else (n, v) for n, v, never in headers]
        data = enc.encode(items, huffman=huffman)
        assert ours.decode(data) == [(n, v) for n, v, _ in headers]


@settings(max_examples=200, deadline=None)
@given(st.lists(block, min_size=2, max_size=6))
def test_a_repeated_block_is_decoded_against_the_current_table(blocks):
    """The block cache never answers for a table that has changed: the same bytes, after
    other blocks, decode as an independent decoder decodes them."""
    enc, theirs, ours = Encoder(), Decoder(), HeaderDecoder(1 << 30)
    encoded = [enc.encode([(n, v) for n, v, _ in b]) for b in blocks]
    for data in encoded + encoded[:1]:
        try:
            expect = theirs.decode(data, raw=True)
        except Exception:  # noqa: BLE001 - replaying a block that adds entries may not decode
            return
        assert ours.decode(data) == [tuple(h) for h in expect]


def test_bad_blocks_are_header_errors():
    for bad in (b"\x80", b"\xbf", b"\xff\xff\xff\xff\xff\xff\xff", b"\x40\x05ab",
                b"\x00\x81\xff", b"\x3f\xe1\x7f", b"\x82\x3f\xe1\x1f"):
        try:
            HeaderDecoder(1 << 16).decode(bad)
        except HeaderError:
            continue
        raise AssertionError(f"{bad!r} decoded")


def test_the_header_list_size_is_capped():
    data = Encoder().encode([(b"x-a", b"v" * 5000)])
    try:
        HeaderDecoder(4096).decode(data)
    except HeaderError as exc:
        assert "4096" in str(exc)
    else:
        raise AssertionError("an oversized header list decoded")


def test_our_encodings_decode():
    dec = Decoder()
    assert dec.decode(RESPONSE, raw=True) == [(b":status", b"200"),
                                              (b"content-type", b"application/grpc")]
    assert dec.decode(grpc_status(5, "table 'x%' not found: é"), raw=True) == [
        (b"grpc-status", b"5"), (b"grpc-message", b"table 'x%25' not found: %C3%A9")]


@given(st.text(max_size=200))
def test_percent_encoding_round_trips(text):
    raw = percent_encode(text)
    assert all(0x20 <= b < 0x7F for b in raw)
    assert unquote_to_bytes(raw.decode()) == text.encode("utf-8", "replace")


def test_timeouts():
    assert timeout_seconds(b"2S") == 2
    assert timeout_seconds(b"2010m") == pytest.approx(2.01)
    assert timeout_seconds(b"1H") == 3600
    assert timeout_seconds(b"99999999n") == 99999999e-9
    for bad in (b"", b"S", b"123456789S", b"1x", b"-1S", b"1.5S"):
        assert timeout_seconds(bad) is None, bad
