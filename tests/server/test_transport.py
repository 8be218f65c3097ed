"""The client's HTTP exchange against a scripted loopback server: the forms of
HTTP/1.1 answers it must read (chunked, bare LF, 100 Continue, close, HTTP/1.0),
stale keep-alive connections, and the response checks (MD5, signature) it must
keep making; its request signature is the one ``auth`` computes."""

from __future__ import annotations

import socket
import threading

import pytest

from widetable.client.transport import Transport
from widetable.errors import WidetableError
from widetable.server import KeyStore
from widetable.wire.proto import pb
from widetable.wire.signing import content_md5, sign_response, sign_v2

KEY_ID, SECRET, INSTANCE = "id", "secret", "inst"


def _signed_head(api: str, body: bytes, md5: str | None = None, secret: str = SECRET) -> list[str]:
    ots = {"x-ots-contentmd5": md5 or content_md5(body), "x-ots-requestid": "r1",
           "x-ots-date": "2024-01-31T12:00:00.000Z", "x-ots-contenttype": "protocol buffer"}
    lines = [f"{k}: {v}" for k, v in ots.items()]
    lines.append(f"Authorization: OTS {KEY_ID}:{sign_response(secret.encode(), api, ots)}")
    return lines


class Scripted:
    """Answers each request on a connection with the next scripted response."""

    def __init__(self, answers: list) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[dict, bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while self.answers:
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    if b"\r\n\r\n" not in data:
                        break
                    head, _, data = data.partition(b"\r\n\r\n")
                    lines = head.decode("latin-1").split("\r\n")
                    pairs = (line.partition(":") for line in lines[1:])
                    headers = {k.lower(): v.strip() for k, _, v in pairs}
                    n = int(headers["content-length"])
                    while len(data) < n:
                        data += conn.recv(65536)
                    body, data = data[:n], data[n:]
                    self.requests.append((headers, body))
                    answer = self.answers.pop(0)
                    if answer is None:  # close without answering: a stale keep-alive connection
                        break
                    conn.sendall(answer)
                    if b"Connection: close" in answer or answer.startswith(b"HTTP/1.0"):
                        break

    def close(self) -> None:
        self.sock.close()


def _transport(served: Scripted) -> Transport:
    return Transport(f"http://127.0.0.1:{served.port}", KEY_ID, SECRET, INSTANCE, timeout=5)


BODY = pb.ListTableResponse(table_names=["a", "b"]).SerializeToString()


def _ok(body: bytes = BODY, *extra: str, eol: str = "\r\n", md5: str | None = None,
        secret: str = SECRET, length: bool = True) -> bytes:
    lines = ["HTTP/1.1 200 OK", *_signed_head("ListTable", body, md5, secret), *extra]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    return (eol.join(lines) + eol + eol).encode("latin-1") + body


def _call(answers: list) -> tuple[bytes | Exception, Scripted]:
    served = Scripted(answers)
    t = _transport(served)
    try:
        return t.call("ListTable", pb.ListTableRequest()), served
    except WidetableError as exc:
        return exc, served
    finally:
        t.close()
        served.close()


def test_request_is_signed_as_auth_signs_it() -> None:
    got, served = _call([_ok()])
    assert got == BODY
    headers, body = served.requests[0]
    assert headers["x-ots-contentmd5"] == content_md5(body)
    assert headers["x-ots-signature"] == sign_v2(SECRET, "ListTable", headers)
    KeyStore({KEY_ID: SECRET}).verify("ListTable", headers, INSTANCE)  # the server's own check


@pytest.mark.parametrize("answer", [
    _ok(),
    _ok(eol="\n"),  # bare LF line ends
    b"HTTP/1.1 100 Continue\r\n\r\n" + _ok(),
    _ok(BODY, "Transfer-Encoding: chunked", length=False).replace(
        BODY, b"%x\r\n%s\r\n%x;ext=1\r\n%s\r\n0\r\nTrailer: x\r\n\r\n"
        % (3, BODY[:3], len(BODY) - 3, BODY[3:])),
    _ok(BODY, "Connection: close"),
    _ok(BODY, length=False).replace(b"HTTP/1.1", b"HTTP/1.0"),  # the body runs to the close
])
def test_answer_forms_are_read(answer: bytes) -> None:
    assert _call([answer])[0] == BODY


def test_keep_alive_reuses_one_connection_and_retries_a_stale_one() -> None:
    served = Scripted([_ok(), _ok(), None, _ok()])
    t = _transport(served)
    try:
        assert [t.call("ListTable", b"") for _ in range(2)] == [BODY, BODY]
        assert t.call("ListTable", b"") == BODY  # closed without answer: sent again, once
    finally:
        t.close()
        served.close()
    assert len(served.requests) == 4


@pytest.mark.parametrize("answer, message", [
    (_ok(md5=content_md5(b"other")), "MD5"),
    (_ok(secret="other"), "not signed"),
    (_ok().replace(b"Authorization", b"X-Nope"), "not signed"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "ended early"),
    (b"HTTP/2 200 OK\r\n\r\n", "outside HTTP/1.1"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "outside HTTP/1.1"),
])
def test_bad_answers_are_errors(answer: bytes, message: str) -> None:
    got, _ = _call([answer])
    assert isinstance(got, WidetableError) and message in got.message


def test_error_bodies_raise_their_code() -> None:
    body = pb.Error(code="OTSObjectNotExist", message="gone").SerializeToString()
    lines = ["HTTP/1.1 404 Not Found", *_signed_head("ListTable", body),
             f"Content-Length: {len(body)}"]
    got, _ = _call([("\r\n".join(lines) + "\r\n\r\n").encode() + body])
    assert isinstance(got, WidetableError)
    assert (got.code, got.message) == ("OTSObjectNotExist", "gone")
