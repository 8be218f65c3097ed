"""The client side of both protocols, written from their public definitions only.

The fuzzer talks to ``widetable serve`` over plain sockets: it must keep working
however the server's code is laid out, and it must be able to send what no
well-behaved client would (a body that does not match its Content-Length, a
frame longer than what follows it). Nothing here imports widetable.

* Tablestore's HTTP protocol: ``POST /<Api>``, a protobuf body, ``x-ots-*``
  headers signed with V2 (HMAC-SHA1 of ``/<Api>\\nPOST\\n\\n`` and the sorted
  ``x-ots-`` headers but the signature itself, each ``name:value``, one a line).
* widetable's native protocol: a signed ``POST /WidetableNative`` with
  ``Upgrade: widetable-native/4``, answered ``101``; then frames both ways, a
  4-byte little-endian length and one MessagePack array.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import socket
import struct
import time
from dataclasses import dataclass

NATIVE_API = "WidetableNative"
NATIVE_UPGRADE = "widetable-native/4"
FRAME_HEADER = struct.Struct("<I")
SIGNATURE_HEADERS = ("x-ots-signature", "x-ots-signaturev4")


@dataclass(frozen=True, slots=True)
class Account:
    """Who the fuzzer signs as, and where the server is."""

    host: str
    port: int
    key_id: str
    secret: str
    instance: str


def content_md5(body: bytes) -> str:
    return base64.b64encode(hashlib.md5(body).digest()).decode("ascii")


def ots_date(offset_s: float = 0.0) -> str:
    now = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=offset_s)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def sign_v2(secret: str, api: str, headers: dict[str, str]) -> str:
    items = sorted(f"{k}:{v.strip()}" for k, v in headers.items()
                   if k.startswith("x-ots-") and k not in SIGNATURE_HEADERS)
    text = f"/{api}\nPOST\n\n" + "\n".join(items) + "\n"
    digest = hmac.digest(secret.encode("utf-8"), text.encode("utf-8"), "sha1")
    return base64.b64encode(digest).decode("ascii")


def sign_v4(secret: str, api: str, headers: dict[str, str]) -> str:
    """V4: HMAC-SHA256 of the V2 text and "ots", keyed by a key derived from the secret,
    ``x-ots-signdate`` and ``x-ots-signregion`` (which must be among ``headers``)."""
    key = hmac.digest(("aliyun_v4" + secret).encode(), headers["x-ots-signdate"].encode(), "sha256")
    for part in (headers["x-ots-signregion"], "ots", "aliyun_v4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    items = sorted(f"{k}:{v.strip()}" for k, v in headers.items()
                   if k.startswith("x-ots-") and k not in SIGNATURE_HEADERS)
    text = f"/{api}\nPOST\n\n" + "\n".join(items) + "\nots"
    digest = hmac.digest(base64.b64encode(key), text.encode("utf-8"), "sha256")
    return base64.b64encode(digest).decode("ascii")


def ots_headers(account: Account, api: str, body: bytes) -> dict[str, str]:
    """The ``x-ots-*`` headers of a request, unsigned."""
    return {
        "x-ots-date": ots_date(),
        "x-ots-apiversion": "2015-12-31",
        "x-ots-accesskeyid": account.key_id,
        "x-ots-instancename": account.instance,
        "x-ots-contentmd5": content_md5(body),
    }


def sign(account: Account, api: str, headers: dict[str, str], v4: bool = False) -> dict[str, str]:
    """``headers`` with a valid signature of ``api`` added, V2 or V4."""
    out = dict(headers)
    if v4:
        out.setdefault("x-ots-signdate", datetime.datetime.now(datetime.UTC).strftime("%Y%m%d"))
        out.setdefault("x-ots-signregion", "cn-fuzz")
        out["x-ots-signaturev4"] = sign_v4(account.secret, api, out)
    else:
        out["x-ots-signature"] = sign_v2(account.secret, api, out)
    return out


def http_request(api_path: str, headers: dict[str, str], body: bytes,
                 content_length: int | None = None) -> bytes:
    """The bytes of ``POST <api_path>``; ``content_length`` may lie about the body."""
    length = len(body) if content_length is None else content_length
    head = [f"POST {api_path} HTTP/1.1", "Host: fuzz", f"Content-Length: {length}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body


@dataclass(slots=True)
class Reply:
    """What came back for one request: an HTTP answer, a native answer frame, or nothing."""

    status: int | None = None  # HTTP status; None for a native answer or no answer
    headers: dict[str, str] | None = None
    body: bytes = b""
    frame: bytes | None = None  # a native answer's MessagePack bytes
    closed: bool = False  # the server closed the connection (after answering, or instead)
    timed_out: bool = False  # neither an answer nor a close within the timeout


class Conn:
    """One socket with a read buffer; reads whole HTTP answers or native frames."""

    def __init__(self, account: Account, timeout: float) -> None:
        self.sock = socket.create_connection((account.host, account.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.dead = False
        self.timeout = timeout

    def close(self) -> None:
        self.dead = True
        try:
            self.sock.close()
        except OSError:
            pass

    def reset(self) -> None:
        """Close with a TCP reset (SO_LINGER 0): the server's next write meets a dead peer."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close()

    def send(self, data: bytes, half_close: bool = False, trickle: bool = False) -> bool:
        """Send ``data`` (a few bytes at a time with ``trickle``); False if the server
        closed first (a refusal before the body: its answer is still to be read)."""
        try:
            if trickle:
                for i in range(0, len(data), 5):
                    self.sock.sendall(data[i:i + 5])
                    time.sleep(0.0002)
            else:
                self.sock.sendall(data)
            if half_close:
                self.sock.shutdown(socket.SHUT_WR)
            return True
        except OSError:  # the server closed first (a refusal before the body): read its answer
            return False

    def _fill(self, deadline: float) -> str:
        """Read more: "" on data, "closed" or "timeout"."""
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return "timeout"
        except OSError:
            return "closed"
        if not data:
            return "closed"
        self.buf += data
        return ""

    def read_http(self) -> Reply:
        deadline = time.monotonic() + self.timeout
        while b"\r\n\r\n" not in self.buf:
            why = self._fill(deadline)
            if why:
                return self._nothing(why)
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        self.buf = rest
        while len(self.buf) < length:
            why = self._fill(deadline)
            if why:
                return self._nothing(why)
        body, self.buf = self.buf[:length], self.buf[length:]
        closed = headers.get("connection", "").lower() == "close"  # the caller closes
        return Reply(status=status, headers=headers, body=body, closed=closed)

    def read_frame(self) -> Reply:
        deadline = time.monotonic() + self.timeout
        while len(self.buf) < 4 or len(self.buf) < 4 + FRAME_HEADER.unpack_from(self.buf)[0]:
            why = self._fill(deadline)
            if why:
                return self._nothing(why)
        size = FRAME_HEADER.unpack_from(self.buf)[0]
        data, self.buf = self.buf[4:4 + size], self.buf[4 + size:]
        return Reply(frame=data)

    def wait_closed(self, seconds: float) -> bool:
        """Whether the server closes the connection within ``seconds`` (data is dropped)."""
        deadline = time.monotonic() + seconds
        while True:
            why = self._fill(deadline)
            if why == "closed":
                self.close()
                return True
            if why == "timeout":
                return False

    def _nothing(self, why: str) -> Reply:
        if why == "closed":
            self.close()
            return Reply(closed=True)
        return Reply(timed_out=True)


def upgrade_request(account: Account) -> bytes:
    """The bytes of a signed request to upgrade to the native protocol."""
    headers = sign(account, NATIVE_API, ots_headers(account, NATIVE_API, b""))
    return http_request("/" + NATIVE_API,
                        {"Upgrade": NATIVE_UPGRADE, "Connection": "Upgrade", **headers}, b"")


def upgrade(account: Account, timeout: float) -> Conn:
    """A connection upgraded to the native protocol (raises if the server refuses)."""
    conn = Conn(account, timeout)
    conn.send(upgrade_request(account))
    reply = conn.read_http()
    if reply.status != 101:
        conn.close()
        raise ConnectionError(f"native upgrade refused: {reply.status} {reply.body[:200]!r}")
    return conn
