"""Access keys and the check of a request's identity: who signed it, with which key.

The signatures themselves (``wire/signing.py``) are shared with the client; this
module holds the server's side: the key store, the date and signature checks
(``OTSAuthFailed``), and ``load_keys`` for ``widetable serve``.
"""

from __future__ import annotations

import calendar
import datetime
import hmac
import os
import secrets
import time
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ...wire.errors import AUTH_FAILED, ProtocolError
from ...wire.signing import Hmac, hmac_of, sign_v4, string_to_sign, v4_key

MAX_SKEW = datetime.timedelta(minutes=15)
_MAX_SKEW_SECONDS = MAX_SKEW.total_seconds()
MAX_SIGNDATE_SKEW = 2 * 86400  # seconds between x-ots-signdate (a day) and now
ENV_ID = "WIDETABLE_ACCESS_KEY_ID"
ENV_SECRET = "WIDETABLE_ACCESS_KEY_SECRET"


def _fail(message: str) -> ProtocolError:
    return ProtocolError(message, AUTH_FAILED)


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


@lru_cache(maxsize=64)
def _epoch_second(text: str) -> int:
    """Seconds since the epoch of ``YYYY-MM-DDTHH:MM:SS`` (UTC); ValueError if it is not one."""
    if (len(text) != 19 or text[4] != "-" or text[7] != "-" or text[10] != "T"
            or text[13] != ":" or text[16] != ":"):
        raise ValueError(text)
    parts = (text[0:4], text[5:7], text[8:10], text[11:13], text[14:16], text[17:19])
    if not all(_digits(p) for p in parts):
        raise ValueError(text)
    year, month, day, hour, minute, second = (int(p) for p in parts)
    datetime.datetime(year, month, day, hour, minute, second)  # ValueError for a month 13, ...
    return calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))


def date_seconds(text: str) -> int:
    """Seconds since the epoch of an ``x-ots-date``, its fraction dropped (the skew
    allowed is minutes); raises ``OTSAuthFailed`` if it is not such a date."""
    rest = text[19:]
    try:
        if rest != "Z" and not (rest[:1] == "." and rest[-1:] == "Z" and 3 <= len(rest) <= 8
                                and _digits(rest[1:-1])):
            raise ValueError(text)
        return _epoch_second(text[:19])
    except ValueError:
        raise _fail(f"x-ots-date {text[:64]!r} is not a date like 2024-01-31T12:00:00.000Z") from None


@lru_cache(maxsize=16)
def _signdate_seconds(date: str) -> int:
    """Seconds since the epoch of an ``x-ots-signdate`` (YYYYMMDD); ValueError if it is not one."""
    if len(date) != 8 or not _digits(date):
        raise ValueError(date)
    day = datetime.date(int(date[:4]), int(date[4:6]), int(date[6:]))
    return calendar.timegm(day.timetuple())


@dataclass(frozen=True, slots=True)
class Verified:
    """Who signed a request, and the key its response is signed with; ``hmac_sha1``
    is that key's HMAC-SHA1 (responses, and V2 requests, whose key is the secret).
    ``read_only``: the key may read but not write or change the catalog."""

    access_key_id: str
    signing_key: bytes
    hmac_sha1: Hmac = field(repr=False, compare=False)
    read_only: bool = False


def _verified(access_key_id: str, signing_key: bytes, read_only: bool) -> Verified:
    return Verified(access_key_id, signing_key, hmac_of(signing_key, "sha1"), read_only)


@lru_cache(maxsize=256)
def _v4_verified(access_key_id: str, secret: str, date: str, region: str,
                 read_only: bool) -> Verified:
    return _verified(access_key_id, v4_key(secret, date, region), read_only)


class KeyStore:
    """Access key id -> secret, and which keys are read-only. Thread-safe (read-only
    after construction but for caches)."""

    def __init__(self, keys: dict[str, str], read_only: frozenset[str] | set[str] = frozenset()
                 ) -> None:
        """``read_only``: ids of keys that may read but not write or change the catalog
        (their writes and DDL are answered 403 ``OTSNoPermissionAccess``)."""
        if not keys:
            raise ValueError("at least one access key is needed")
        unknown = set(read_only) - set(keys)
        if unknown:
            raise ValueError(f"read-only key ids {sorted(unknown)} have no secret")
        self._keys = dict(keys)
        self.read_only = frozenset(read_only)
        self._v2 = {k: _verified(k, s.encode("utf-8"), k in self.read_only)
                    for k, s in self._keys.items()}

    @property
    def ids(self) -> list[str]:
        return sorted(self._keys)

    def secret(self, access_key_id: str) -> str:
        return self._keys[access_key_id]

    def verify(self, api: str, headers: dict[str, str], instance: str,
               now: datetime.datetime | None = None) -> Verified:
        """Check a request's identity, instance, date and signature; raise ``OTSAuthFailed``.

        ``headers`` are by lower-cased name, values stripped."""
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
        clock = time.time() if now is None else now.timestamp()
        if abs(clock - date_seconds(headers["x-ots-date"])) > _MAX_SKEW_SECONDS:
            raise _fail("x-ots-date is more than 15 minutes away from the server's clock")
        secret = self._keys.get(key_id)
        if secret is None:
            raise _fail(f"access key id {key_id[:64]!r} is unknown")
        if "x-ots-signaturev4" in headers:
            verified = self._v4(key_id, secret, headers, clock)
            expected = sign_v4(verified.signing_key, api, headers)
            got = headers["x-ots-signaturev4"]
        elif "x-ots-signature" in headers:
            verified = self._v2[key_id]
            expected = verified.hmac_sha1.sign(string_to_sign(api, headers))
            got = headers["x-ots-signature"]
        else:
            raise _fail("the request is not signed: no x-ots-signature or x-ots-signaturev4")
        if not hmac.compare_digest(expected.encode(), got.encode("utf-8", "replace")):
            raise _fail("the request signature does not match; check the access key secret")
        return verified

    def _v4(self, key_id: str, secret: str, headers: dict[str, str], clock: float) -> Verified:
        """The V4 signing key of a request, after checking its sign date and region."""
        date, region = headers.get("x-ots-signdate", ""), headers.get("x-ots-signregion", "")
        if not region or len(date) != 8 or not _digits(date):
            raise _fail("a V4 signature needs x-ots-signdate (YYYYMMDD) and x-ots-signregion")
        try:
            day = _signdate_seconds(date)
        except ValueError:
            raise _fail(f"x-ots-signdate {date!r} is not a date") from None
        if abs(clock - day) > MAX_SIGNDATE_SKEW:
            raise _fail(f"x-ots-signdate {date!r} is too far from today")
        return _v4_verified(key_id, secret, date, region, key_id in self.read_only)


def load_keys(config: str | os.PathLike | None = None,
              environ: dict[str, str] | None = None) -> tuple[KeyStore, bool]:
    """Access keys from a TOML file and/or the environment (``WIDETABLE_ACCESS_KEY_ID``
    / ``WIDETABLE_ACCESS_KEY_SECRET``, a read-write key). The file's ``[access_keys]``
    maps each key id to its secret, or to a table naming the secret and whether the
    key is read-only::

        [access_keys]
        admin = "secret one"
        reports = { secret = "secret two", read_only = true }

    With neither, one random key pair is made for this run. Returns the store
    and whether the keys were generated. ValueError names a malformed entry.
    """
    env = os.environ if environ is None else environ
    keys: dict[str, str] = {}
    read_only: set[str] = set()
    if config is not None:
        data = tomllib.loads(Path(config).read_text())
        table = data.get("access_keys", {})
        if not isinstance(table, dict):
            raise ValueError(f"{config}: [access_keys] must map key ids to secrets")
        for key_id, entry in table.items():
            secret, ro = _key_entry(config, key_id, entry)
            keys[key_id] = secret
            if ro:
                read_only.add(key_id)
    if env.get(ENV_ID) and env.get(ENV_SECRET):
        keys[env[ENV_ID]] = env[ENV_SECRET]
        read_only.discard(env[ENV_ID])
    if keys:
        return KeyStore(keys, read_only), False
    return KeyStore({"WT" + secrets.token_hex(8).upper(): secrets.token_urlsafe(24)}), True


def _key_entry(config: object, key_id: str, entry: object) -> tuple[str, bool]:
    """``(secret, read_only)`` of one ``[access_keys]`` entry: a secret string, or a table
    ``{ secret = "...", read_only = true | false }``."""
    if isinstance(entry, str) and entry:
        return entry, False
    if isinstance(entry, dict):
        secret, ro = entry.get("secret"), entry.get("read_only", False)
        extra = set(entry) - {"secret", "read_only"}
        if isinstance(secret, str) and secret and type(ro) is bool and not extra:
            return secret, ro
    raise ValueError(f"{config}: access key {key_id!r} must be a secret string or "
                     f"{{ secret = \"...\", read_only = true }}, got a {type(entry).__name__}")
