"""Tablestore's request and response signatures (V2 and V4), shared by the server and the client.

A request carries ``x-ots-date``, ``x-ots-apiversion``, ``x-ots-accesskeyid``,
``x-ots-instancename`` and ``x-ots-contentmd5`` (base64 MD5 of the body), and
one signature over the canonical string::

    "/<Api>\\nPOST\\n\\n" + sorted "name:value" lines of every x-ots-* header
    except the signatures, joined by "\\n" + "\\n"

* V2: ``x-ots-signature`` = base64(HMAC-SHA1(secret, string)).
* V4: ``x-ots-signdate`` (YYYYMMDD) and ``x-ots-signregion`` join the headers;
  ``x-ots-signaturev4`` = base64(HMAC-SHA256(key, string + "ots")), where key =
  base64(HMAC-SHA256 chain: "aliyun_v4" + secret -> date -> region -> "ots" ->
  "aliyun_v4_request").

``x-ots-date`` is ``YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z`` (UTC) and must be within
15 minutes of the server's clock; it is read by slicing, the seconds part
through a small cache, since every request carries one.

A response is signed with the same key (HMAC-SHA1) over its own x-ots-*
headers and the API path: ``Authorization: OTS <id>:<signature>``.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from binascii import b2a_base64
from email.utils import formatdate
from functools import lru_cache

try:  # CPython's own MD5: about half the cost of OpenSSL's on small bodies, the same on large
    from _md5 import md5 as _md5
except ImportError:  # pragma: no cover - a build without it
    from hashlib import md5 as _md5

SIGNATURE_HEADERS = ("x-ots-signature", "x-ots-signaturev4")
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


class Hmac:
    """HMAC (RFC 2104) of one key, its padded key states hashed once: a digest then
    costs two hash copies instead of OpenSSL's per-call key setup (a few µs each)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes, algo: str) -> None:
        new = getattr(hashlib, algo)
        if len(key) > 64:  # the block size of SHA-1 and SHA-256
            key = new(key).digest()
        key = key.ljust(64, b"\0")
        self._inner = new(key.translate(_IPAD))
        self._outer = new(key.translate(_OPAD))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()

    def sign(self, text: str) -> str:
        """base64 of the digest of ``text`` (UTF-8)."""
        return b2a_base64(self.digest(text.encode("utf-8")), newline=False).decode("ascii")


@lru_cache(maxsize=256)
def hmac_of(key: bytes, algo: str) -> Hmac:
    return Hmac(key, algo)


class DateClock:
    """The time of a request or answer: ``(x-ots-date value, HTTP Date value)`` for now,
    UTC, ``x-ots-date`` with milliseconds. Both are formatted once a second; safe to
    share between threads (one tuple holds a second and its texts)."""

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second: tuple[int, str, str] = (-1, "", "")

    def now(self) -> tuple[str, str]:
        t = time.time()
        second = int(t)
        cached = self._second
        if cached[0] != second:
            cached = self._second = (
                second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)),
                formatdate(second, usegmt=True),
            )
        return f"{cached[1]}.{int((t - second) * 1000):03d}Z", cached[2]


def canonical_headers(headers: dict[str, str]) -> str:
    items = [f"{k}:{v.strip()}" for k, v in headers.items()
             if k.startswith("x-ots-") and k not in SIGNATURE_HEADERS]
    items.sort()
    return "\n".join(items)


def string_to_sign(api: str, headers: dict[str, str]) -> str:
    return f"/{api}\nPOST\n\n{canonical_headers(headers)}\n"


@lru_cache(maxsize=256)
def v4_key(secret: str, date: str, region: str) -> bytes:
    key = hmac.digest(("aliyun_v4" + secret).encode("utf-8"), date.encode("utf-8"), "sha256")
    for part in (region, "ots", "aliyun_v4_request"):
        key = hmac.digest(key, part.encode("utf-8"), "sha256")
    return b2a_base64(key, newline=False)


def sign_v2(secret: str, api: str, headers: dict[str, str]) -> str:
    return hmac_of(secret.encode("utf-8"), "sha1").sign(string_to_sign(api, headers))


def sign_v4(key: bytes, api: str, headers: dict[str, str]) -> str:
    return hmac_of(key, "sha256").sign(string_to_sign(api, headers) + "ots")


def sign_response(key: bytes, api: str, headers: dict[str, str]) -> str:
    return hmac_of(key, "sha1").sign(canonical_headers(headers) + "\n/" + api)


def content_md5(body: bytes) -> str:
    return b2a_base64(_md5(body).digest(), newline=False).decode("ascii")
