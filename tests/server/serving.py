"""Start and stop ``widetable serve`` as a subprocess on a free loopback port."""

from __future__ import annotations

import datetime
import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ACCESS_KEY_ID = "test-key"
ACCESS_KEY_SECRET = "test-secret"
INSTANCE = "widetable"


def signed_headers(api: str, body: bytes, headers: dict | None = None, sign: bool = True,
                   secret: str = ACCESS_KEY_SECRET) -> dict[str, str]:
    """The x-ots-* headers of a request, ``headers`` laid over them, then V2-signed."""
    from widetable.wire.signing import content_md5, sign_v2

    h = {
        "x-ots-date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "x-ots-apiversion": "2015-12-31",
        "x-ots-accesskeyid": ACCESS_KEY_ID,
        "x-ots-instancename": INSTANCE,
        "x-ots-contentmd5": content_md5(body),
    }
    h.update(headers or {})
    if sign:
        h["x-ots-signature"] = sign_v2(secret, api, h)
    return h


def post(port: int, api: str, body: bytes, headers: dict | None = None, sign: bool = True,
         secret: str = ACCESS_KEY_SECRET):
    """POST /<api> with http.client: ``(status, Error message or None)``."""
    from widetable.wire.proto import pb

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/" + api, body, signed_headers(api, body, headers, sign, secret))
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    return resp.status, (pb.Error.FromString(data) if resp.status >= 400 else None)


def official_client(endpoint: str, signing: str, logger_name: str, **options):
    """The official SDK's OTSClient on ``endpoint``, signing with V2 or V4 (``signing``),
    its log quiet."""
    import logging

    from tablestore import OTSClient

    logging.getLogger(logger_name).setLevel(logging.CRITICAL)
    return OTSClient(endpoint, ACCESS_KEY_ID, ACCESS_KEY_SECRET, INSTANCE,
                     region="cn-test" if signing == "v4" else None, logger_name=logger_name,
                     **options)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    proc: subprocess.Popen
    port: int
    data: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def start(data: Path, *extra: str, port: int | None = None, wait: float = 30) -> Served:
    """Run ``widetable serve`` on ``data`` and wait until it accepts connections."""
    port = port or free_port()
    env = dict(os.environ, WIDETABLE_ACCESS_KEY_ID=ACCESS_KEY_ID,
               WIDETABLE_ACCESS_KEY_SECRET=ACCESS_KEY_SECRET)
    proc = subprocess.Popen(
        [sys.executable, "-m", "widetable", "serve", "--data", str(data), "--port", str(port), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"widetable serve exited early:\n{proc.stdout.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return Served(proc, port, data)
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("widetable serve did not start in time")
