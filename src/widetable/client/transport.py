"""The client's HTTP side: signed Tablestore requests over keep-alive connections.

One connection per thread (``http.client``), reused while the server keeps it
open. Requests are signed with V2 (HMAC-SHA1); responses are checked for
their MD5 and their ``Authorization`` signature. Throttling errors
(``OTSServerBusy``, ``OTSPartitionUnavailable``) are retried with backoff and
jitter by the partition layer's :class:`~widetable.partition.retry.Retrier`.
"""

from __future__ import annotations

import datetime
import http.client
import ssl
import threading
from urllib.parse import urlsplit

from .. import errors as errs
from ..errors import WidetableError
from ..partition.retry import Retrier
from ..server.auth import content_md5, sign_response, sign_v2
from ..server.proto import pb

API_VERSION = "2015-12-31"
_CLASSES: dict[str, type[WidetableError]] = {
    cls.code: cls
    for cls in (
        errs.ParameterInvalid, errs.InvalidPK, errs.ObjectNotExist, errs.ObjectAlreadyExist,
        errs.ConditionCheckFail, errs.OutOfColumnCountLimit, errs.OutOfRowSizeLimit,
        errs.ServerBusy, errs.PartitionUnavailable, errs.RowOperationConflict,
        errs.SessionNotExist, errs.NotSupported,
    )
}


def error_of(code: str, message: str) -> WidetableError:
    """The library's error class for ``code`` (WidetableError for codes it has no class for)."""
    cls = _CLASSES.get(code)
    if cls is None:
        return WidetableError(message, code)
    return cls(message)


class Transport:
    """Sends one API call and returns the response body, or raises its WidetableError."""

    def __init__(self, endpoint: str, access_key_id: str, access_key_secret: str,
                 instance: str, timeout: float = 30.0, retrier: Retrier | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise errs.ParameterInvalid(f"endpoint {endpoint!r} must look like http://host:port")
        self.endpoint = endpoint
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._id = access_key_id
        self._secret = access_key_secret
        self._key = access_key_secret.encode("utf-8")
        self._instance = instance
        self._timeout = timeout
        self._ssl = ssl_context
        self._local = threading.local()
        self._all: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.retrier = retrier or Retrier()

    def call(self, api: str, request) -> bytes:
        """POST ``request`` to ``/api``; throttling errors are retried."""
        body = request.SerializeToString()
        return self.retrier.call(self._send, api, body)

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._https:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout,
                                                   context=self._ssl)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _headers(self, api: str, body: bytes) -> dict[str, str]:
        now = datetime.datetime.now(datetime.UTC)
        headers = {
            "x-ots-date": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
            "x-ots-apiversion": API_VERSION,
            "x-ots-accesskeyid": self._id,
            "x-ots-instancename": self._instance,
            "x-ots-contentmd5": content_md5(body),
        }
        headers["x-ots-signature"] = sign_v2(self._secret, api, headers)
        return headers

    def _send(self, api: str, body: bytes) -> bytes:
        headers = self._headers(api, body)
        for attempt in (0, 1):
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request("POST", "/" + api, body, headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if not reused or attempt:
                    raise WidetableError(f"the server at {self.endpoint} closed the connection",
                                         errs.INTERNAL_SERVER_ERROR) from None
            except OSError as exc:
                conn.close()
                raise WidetableError(f"cannot reach {self.endpoint}: {exc}",
                                     errs.INTERNAL_SERVER_ERROR) from None
        status = response.status
        got = {k.lower(): v for k, v in response.getheaders()}
        if got.get("x-ots-contentmd5") != content_md5(data):
            raise WidetableError(f"{api}: the response's MD5 does not match its body",
                                 errs.INTERNAL_SERVER_ERROR)
        if 200 <= status < 300:
            self._check_signature(api, got)
            return data
        try:
            error = pb.Error.FromString(data)
        except Exception:  # noqa: BLE001 - any undecodable body is the same failure
            raise WidetableError(f"{api}: HTTP {status} {response.reason}",
                                 errs.INTERNAL_SERVER_ERROR) from None
        raise error_of(error.code, error.message)

    def _check_signature(self, api: str, headers: dict[str, str]) -> None:
        auth = headers.get("authorization", "")
        ots = {k: v for k, v in headers.items() if k.startswith("x-ots-")}
        expected = f"OTS {self._id}:{sign_response(self._key, api, ots)}"
        if auth != expected:
            raise WidetableError(f"{api}: the response is not signed by the server holding "
                                 "this access key", errs.INTERNAL_SERVER_ERROR)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()
