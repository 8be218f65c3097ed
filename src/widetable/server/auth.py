"""Request signatures (V2 and V4), response signatures, and the access-key store.

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

A response is signed with the same key (HMAC-SHA1) over its own x-ots-*
headers and the API path: ``Authorization: OTS <id>:<signature>``.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import os
import secrets
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import AUTH_FAILED, ProtocolError

MAX_SKEW = datetime.timedelta(minutes=15)
SIGNATURE_HEADERS = ("x-ots-signature", "x-ots-signaturev4")
ENV_ID = "WIDETABLE_ACCESS_KEY_ID"
ENV_SECRET = "WIDETABLE_ACCESS_KEY_SECRET"


def canonical_headers(headers: dict[str, str]) -> str:
    items = sorted(
        f"{k}:{v.strip()}" for k, v in headers.items()
        if k.startswith("x-ots-") and k not in SIGNATURE_HEADERS
    )
    return "\n".join(items)


def string_to_sign(api: str, headers: dict[str, str]) -> str:
    return f"/{api}\nPOST\n\n{canonical_headers(headers)}\n"


def _hmac(key: bytes, text: str, algo) -> bytes:
    return hmac.new(key, text.encode("utf-8"), algo).digest()


@lru_cache(maxsize=256)
def v4_key(secret: str, date: str, region: str) -> bytes:
    key = _hmac(("aliyun_v4" + secret).encode("utf-8"), date, hashlib.sha256)
    for part in (region, "ots", "aliyun_v4_request"):
        key = _hmac(key, part, hashlib.sha256)
    return base64.b64encode(key)


def sign_v2(secret: str, api: str, headers: dict[str, str]) -> str:
    return base64.b64encode(
        _hmac(secret.encode("utf-8"), string_to_sign(api, headers), hashlib.sha1)
    ).decode()


def sign_v4(key: bytes, api: str, headers: dict[str, str]) -> str:
    return base64.b64encode(_hmac(key, string_to_sign(api, headers) + "ots", hashlib.sha256)).decode()


def sign_response(key: bytes, api: str, headers: dict[str, str]) -> str:
    text = canonical_headers(headers) + "\n/" + api
    return base64.b64encode(_hmac(key, text, hashlib.sha1)).decode()


def content_md5(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode()


def _fail(message: str) -> ProtocolError:
    return ProtocolError(message, AUTH_FAILED)


def parse_date(text: str) -> datetime.datetime:
    for fmt in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.UTC)
        except ValueError:
            continue
    raise _fail(f"x-ots-date {text[:64]!r} is not a date like 2024-01-31T12:00:00.000Z")


@dataclass(frozen=True, slots=True)
class Verified:
    """Who signed a request, and the key its response is signed with."""

    access_key_id: str
    signing_key: bytes


class KeyStore:
    """Access key id -> secret. Thread-safe (read-only after construction)."""

    def __init__(self, keys: dict[str, str]) -> None:
        if not keys:
            raise ValueError("at least one access key is needed")
        self._keys = dict(keys)

    @property
    def ids(self) -> list[str]:
        return sorted(self._keys)

    def secret(self, access_key_id: str) -> str:
        return self._keys[access_key_id]

    def verify(self, api: str, headers: dict[str, str], instance: str,
               now: datetime.datetime | None = None) -> Verified:
        """Check a request's identity, instance, date and signature; raise ``OTSAuthFailed``."""
        key_id = headers.get("x-ots-accesskeyid")
        if not key_id:
            raise _fail("the request is not signed: x-ots-accesskeyid is missing")
        for name in ("x-ots-date", "x-ots-contentmd5", "x-ots-instancename"):
            if name not in headers:
                raise _fail(f"header {name} is missing")
        if headers["x-ots-instancename"] != instance:
            raise _fail(
                f"instance {headers['x-ots-instancename'][:64]!r} is not served here; "
                f"this server's instance is {instance!r}"
            )
        now = now or datetime.datetime.now(datetime.UTC)
        if abs(now - parse_date(headers["x-ots-date"])) > MAX_SKEW:
            raise _fail("x-ots-date is more than 15 minutes away from the server's clock")
        secret = self._keys.get(key_id)
        if secret is None:
            raise _fail(f"access key id {key_id[:64]!r} is unknown")
        if "x-ots-signaturev4" in headers:
            date, region = headers.get("x-ots-signdate", ""), headers.get("x-ots-signregion", "")
            if not region or len(date) != 8 or not date.isdigit():
                raise _fail("a V4 signature needs x-ots-signdate (YYYYMMDD) and x-ots-signregion")
            try:
                day = datetime.datetime.strptime(date, "%Y%m%d").replace(tzinfo=datetime.UTC)
            except ValueError:
                raise _fail(f"x-ots-signdate {date!r} is not a date") from None
            if abs(now - day) > datetime.timedelta(days=2):
                raise _fail(f"x-ots-signdate {date!r} is too far from today")
            key = v4_key(secret, date, region)
            expected = sign_v4(key, api, headers)
            got = headers["x-ots-signaturev4"]
        elif "x-ots-signature" in headers:
            key = secret.encode("utf-8")
            expected = sign_v2(secret, api, headers)
            got = headers["x-ots-signature"]
        else:
            raise _fail("the request is not signed: no x-ots-signature or x-ots-signaturev4")
        if not hmac.compare_digest(expected.encode(), got.encode("utf-8", "replace")):
            raise _fail("the request signature does not match; check the access key secret")
        return Verified(key_id, key)


def load_keys(config: str | os.PathLike | None = None,
              environ: dict[str, str] | None = None) -> tuple[KeyStore, bool]:
    """Access keys from a TOML file (``[access_keys] id = "secret"``) and/or the
    environment (``WIDETABLE_ACCESS_KEY_ID`` / ``WIDETABLE_ACCESS_KEY_SECRET``).

    With neither, one random key pair is made for this run. Returns the store
    and whether the keys were generated.
    """
    env = os.environ if environ is None else environ
    keys: dict[str, str] = {}
    if config is not None:
        data = tomllib.loads(Path(config).read_text())
        table = data.get("access_keys", {})
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in table.items()
        ):
            raise ValueError(f"{config}: [access_keys] must map key ids to secret strings")
        keys.update(table)
    if env.get(ENV_ID) and env.get(ENV_SECRET):
        keys[env[ENV_ID]] = env[ENV_SECRET]
    if keys:
        return KeyStore(keys), False
    return KeyStore({"WT" + secrets.token_hex(8).upper(): secrets.token_urlsafe(24)}), True
