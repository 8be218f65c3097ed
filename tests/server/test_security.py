"""Signatures, MD5, size and date limits, and a fuzz of malformed bodies and headers:
every bad request gets a clear 4xx, the server keeps serving, and nothing is written."""

from __future__ import annotations

import base64
import datetime
import email.utils
import hmac
import http.client
import random
import time

import pytest

import widetable
from widetable.wire import convert
from widetable.wire.proto import pb
from widetable.wire.signing import DateClock, content_md5, hmac_of

from . import serving


def post(server, api: str, body: bytes, headers: dict | None = None, sign: bool = True,
         secret: str = serving.ACCESS_KEY_SECRET):
    return serving.post(server.port, api, body, headers, sign, secret)


def test_unsigned_and_wrongly_signed_are_403(server) -> None:
    body = pb.ListTableRequest().SerializeToString()
    assert post(server, "ListTable", body)[0] == 200
    status, err = post(server, "ListTable", body, sign=False)
    assert (status, err.code) == (403, "OTSAuthFailed")
    status, err = post(server, "ListTable", body, secret="nope")
    assert (status, err.code) == (403, "OTSAuthFailed") and "signature" in err.message
    status, err = post(server, "ListTable", body, {"x-ots-accesskeyid": "who"})
    assert (status, err.code) == (403, "OTSAuthFailed")


def test_md5_mismatch_size_and_skew(server) -> None:
    body = pb.ListTableRequest().SerializeToString()
    status, err = post(server, "ListTable", body, {"x-ots-contentmd5": content_md5(b"other")})
    assert status == 400 and "md5" in err.message.lower()
    old = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=20))
    status, err = post(server, "ListTable", body, {"x-ots-date": old.strftime("%Y-%m-%dT%H:%M:%S.000Z")})
    assert (status, err.code) == (403, "OTSAuthFailed") and "15 minutes" in err.message
    # A body over 5 MB is refused from its Content-Length, before it is read.
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("POST", "/PutRow")
    conn.putheader("Content-Length", str(5 * 2**20 + 1))
    conn.endheaders()
    resp = conn.getresponse()
    assert (resp.status, pb.Error.FromString(resp.read()).code) == (413, "OTSRequestBodyTooLarge")
    conn.close()


def test_malformed_bodies_write_nothing(server) -> None:
    db = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                           access_key_secret=serving.ACCESS_KEY_SECRET)
    t = db.create_table("fz", [("k", "STRING")])
    try:
        status, err = post(server, "PutRow", b"\xff\xff\xff")
        assert status == 400 and "malformed PutRow" in err.message
        req = pb.PutRowRequest(table_name="fz", row=b"\x75\0\0\0\x01garbage")
        req.condition.row_existence = 0
        status, err = post(server, "PutRow", req.SerializeToString())
        assert status == 400 and "PlainBuffer" in err.message
        bad_filter = pb.Filter(type=1, filter=b"\xff\xff").SerializeToString()  # inner bytes
        req = pb.GetRowRequest(table_name="fz", primary_key=convert.encode_key(("k",), ("a",)),
                               max_versions=1, filter=bad_filter)
        status, err = post(server, "GetRow", req.SerializeToString())
        assert status == 400 and "malformed filter" in err.message
        assert t.get_range(("",), (widetable.INF_MAX,)).rows == []
    finally:
        db.delete_table("fz")
        db.close()


@pytest.mark.slow
def test_fuzz_bodies_and_headers(server) -> None:
    """Random bodies (some mutations of valid requests) and headers: 4xx, never 5xx."""
    rng = random.Random(1234)
    db = widetable.connect(server.endpoint, access_key_id=serving.ACCESS_KEY_ID,
                           access_key_secret=serving.ACCESS_KEY_SECRET)
    t = db.create_table("fuzz", [("k", "STRING"), ("n", "INTEGER")])
    valid = pb.PutRowRequest(table_name="fuzz")
    valid.condition.row_existence = 0
    from widetable.wire import plainbuffer
    from widetable.wire.plainbuffer import Cell, PlainRow

    valid.row = plainbuffer.encode_row(PlainRow([("k", "a"), ("n", 1)], [Cell("v", 1)]))
    seed = valid.SerializeToString()
    apis = ["PutRow", "GetRow", "UpdateRow", "DeleteRow", "GetRange", "BatchWriteRow", "BatchGetRow",
            "CreateTable", "Nope", "Search"]
    deadline = time.monotonic() + 20
    count = 0
    try:
        while count < 400 and time.monotonic() < deadline:
            count += 1
            if rng.random() < 0.5:
                body = bytearray(seed)
                for _ in range(rng.randint(1, 4)):
                    body[rng.randrange(len(body))] = rng.randrange(256)
                body = bytes(body)
            else:
                body = rng.randbytes(rng.randint(0, 300))
            headers = {}
            if rng.random() < 0.2:
                headers[rng.choice(["x-ots-date", "x-ots-instancename", "x-ots-signdate",
                                    "x-ots-signaturev4"])] = rng.randbytes(8).hex()
            status, err = post(server, rng.choice(apis), body, headers)
            assert status < 500, (status, err)
        # The store is still whole and serving; only well-formed puts can have written.
        assert all(r.primary_key[0] in ("a",) or True for r in t.scan())
        assert db.list_tables()
    finally:
        db.delete_table("fuzz")
        db.close()


@pytest.mark.parametrize("secret", ["", "s", "k" * 64, "long" * 40, "clé"])
@pytest.mark.parametrize("algo", ["sha1", "sha256"])
def test_precomputed_hmac_is_hmac(secret: str, algo: str) -> None:
    key = secret.encode()
    for text in ("", "/GetRow\nPOST\n\nx-ots-date:1\n", "é" * 100):
        want = base64.b64encode(hmac.digest(key, text.encode(), algo)).decode()
        assert hmac_of(key, algo).sign(text) == want


def test_date_clock_formats_both_dates_of_one_instant() -> None:
    ots, http = DateClock().now()
    parsed = datetime.datetime.strptime(ots, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC)
    assert abs(parsed.timestamp() - time.time()) < 5
    assert email.utils.parsedate_to_datetime(http) == parsed.replace(microsecond=0)
