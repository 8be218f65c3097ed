"""What every Bigtable RPC shares: resource names, status answers, the shared token, and
the table of methods the gRPC transport (``server/http2``) serves.

Requests arrive as bytes and are parsed here, so that a malformed message is answered
INVALID_ARGUMENT naming the message, not INTERNAL. A ``WidetableError`` leaves as the
status Bigtable gives the same failure (``wire/bigtable/errors.py``); anything else is
INTERNAL and logged.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable

from google.protobuf.message import DecodeError

from ...errors import NotSupported, ParameterInvalid, WidetableError, describe
from ...wire.bigtable import Method, methods
from ...wire.bigtable.errors import INTERNAL, status_of
from ..http2 import Method as Served

log = logging.getLogger("widetable.server.bigtable")

MAX_DETAILS = 2000  # characters of a status message: it travels in a header (8 KiB cap)


def details(message: str) -> str:
    """A status message short enough for the trailers (a value it names may be huge)."""
    return message if len(message) <= MAX_DETAILS else message[:MAX_DETAILS - 3] + "..."


# why some methods are not served, added to their UNIMPLEMENTED message
WHY_NOT = {
    "ReadChangeStream": ": change streams of Bigtable tables are not served",
    "GenerateInitialChangeStreamPartitions": ": change streams of Bigtable tables are not served",
}


def table_id(name: str, field: str = "table_name") -> str:
    """``projects/{p}/instances/{i}/tables/{t}`` -> ``t``; ParameterInvalid naming the value.

    The project and instance are not checked: one store is one instance, whatever the
    client calls it (as Google's emulator answers any)."""
    parts = name.split("/")
    if len(parts) != 6 or parts[0] != "projects" or parts[2] != "instances" \
            or parts[4] != "tables" or not all(parts[1::2]):
        raise ParameterInvalid(
            f"{field} {describe(name, 200)} is not of the form projects/<project>/instances/<instance>/tables/<table>")
    return parts[5]


def instance_name(name: str, field: str = "parent") -> str:
    """Checks ``projects/{p}/instances/{i}`` and returns it."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "projects" or parts[2] != "instances" \
            or not parts[1] or not parts[3]:
        raise ParameterInvalid(
            f"{field} {describe(name, 200)} is not of the form projects/<project>/instances/<instance>")
    return name


def no_views(request, what: str) -> None:
    """NotSupported if the request reads through an authorized or materialized view."""
    for field in ("authorized_view_name", "materialized_view_name"):
        if getattr(request, field, ""):
            raise NotSupported(f"{what}: {field} is not supported (views are not served)")


def status(exc: BaseException, what: str = "call") -> tuple[int, str]:
    """``(gRPC status code, message)`` of a failure."""
    if isinstance(exc, WidetableError):
        return status_of(exc), details(exc.message)
    log.exception("%s failed", what, exc_info=exc)
    return INTERNAL, f"{what}: internal error: {type(exc).__name__}"


class Registry:
    """The methods the Bigtable port serves, by path (``/google.bigtable.v2.Bigtable/
    ReadRows``): ``add(service, name, fn)``; every method of a registered service without
    a handler answers UNIMPLEMENTED naming it. What the transport asks of its service:
    ``method(path)``, ``authorized(authorization header)``, ``status(exception)``."""

    def __init__(self, token: str | None = None) -> None:
        self.token = None if token is None else f"Bearer {token}".encode()
        self._methods: dict[str, dict[str, Method]] = {}
        self._served: dict[str, Served] = {}

    def service(self, service: str) -> None:
        self._methods[service] = methods(service)
        for name, method in self._methods[service].items():
            self._served.setdefault(f"/{service}/{name}", self._unimplemented(service, method))

    def add(self, service: str, name: str, fn: Callable, raw_response: bool = False,
            pooled: Callable | None = None) -> None:
        """``fn(request, context)`` returns the answer (a message; for a streamed method
        an iterable of them; ``context`` is None: handlers need nothing from the
        transport). ``raw_response``: the messages are serialized bytes.
        ``pooled(request)``: true when the call may run long (it goes to the worker
        pool, so that the loop keeps serving)."""
        method = self._methods[service][name]
        serialize = None if raw_response else method.response.SerializeToString
        if method.server_streaming:
            def run(req):
                answer = fn(req, None)
                return answer if serialize is None else (serialize(m) for m in answer)
        elif serialize is None:
            def run(req):
                return fn(req, None)
        else:
            def run(req):
                return serialize(fn(req, None))
        self._served[f"/{service}/{name}"] = Served(method.server_streaming, self._parser(method),
                                                    run, pooled)

    def method(self, path: str) -> Served | None:
        return self._served.get(path)

    def authorized(self, authorization: bytes | None) -> bool:
        if self.token is None:
            return True
        return authorization is not None and hmac.compare_digest(authorization, self.token)

    @staticmethod
    def status(exc: BaseException) -> tuple[int, str]:
        return status(exc, "Bigtable call")

    @staticmethod
    def _parser(method: Method) -> Callable:
        parse = method.request.FromString

        def request_of(data: bytes):
            try:
                return parse(data)
            except (DecodeError, RuntimeError, ValueError) as exc:
                raise ParameterInvalid(
                    f"malformed {method.request.DESCRIPTOR.name}: {exc}") from None
        return request_of

    @staticmethod
    def _unimplemented(service: str, method: Method) -> Served:
        message = f"{service.rpartition('.')[2]}.{method.name} is not implemented by widetable"
        message += WHY_NOT.get(method.name, "")

        def refuse(data: bytes):
            raise NotSupported(message)

        return Served(method.server_streaming, refuse, refuse)
