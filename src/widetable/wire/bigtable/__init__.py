"""Bigtable's protobuf messages and services, in a private descriptor pool.

``descriptors.pb`` is a compiled ``FileDescriptorSet`` of Bigtable's protocol
definitions: the data API (``google.bigtable.v2``), the table and instance admin APIs
(``google.bigtable.admin.v2``), ``google.longrunning`` and ``google.rpc``. It is made at
development time from the pinned official client (``regenerate.py``) and committed::

    python src/widetable/wire/bigtable/regenerate.py

At run time it is loaded into a private pool, not protobuf's default one: the official
client registers the same symbols in the default pool, and one process may hold both
(the tests, or an application using both). Only ``protobuf`` is needed at run time; the
classes are protobuf's own (upb), not proto-plus wrappers.

``v2.ReadRowsRequest``, ``admin.CreateTableRequest``, ``lro.Operation``, ``rpc.Status``:
the message classes. ``methods(service)``: a service's methods, for a server or a stub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

DATA = "google.bigtable.v2.Bigtable"
TABLE_ADMIN = "google.bigtable.admin.v2.BigtableTableAdmin"
INSTANCE_ADMIN = "google.bigtable.admin.v2.BigtableInstanceAdmin"
OPERATIONS = "google.longrunning.Operations"

_pool = descriptor_pool.DescriptorPool()
for _file in descriptor_pb2.FileDescriptorSet.FromString(
        (Path(__file__).parent / "descriptors.pb").read_bytes()).file:
    _pool.Add(_file)


def message(full_name: str) -> type:
    """The message class of ``full_name`` (``google.bigtable.v2.ReadRowsRequest``)."""
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName(full_name))


class _Package:
    """Attribute access to a package's messages: ``v2.ReadRowsRequest``, ``v2.RowFilter.Chain``."""

    def __init__(self, package: str) -> None:
        self._package = package

    def __getattr__(self, name: str) -> type:
        if name.startswith("_"):
            raise AttributeError(name)
        cls = message(f"{self._package}.{name}")
        setattr(self, name, cls)
        return cls


v2 = _Package("google.bigtable.v2")
admin = _Package("google.bigtable.admin.v2")
lro = _Package("google.longrunning")
rpc = _Package("google.rpc")
protobuf = _Package("google.protobuf")


@dataclass(frozen=True, slots=True)
class Method:
    name: str  # "ReadRows"
    path: str  # "/google.bigtable.v2.Bigtable/ReadRows"
    request: type
    response: type
    client_streaming: bool
    server_streaming: bool


def methods(service: str) -> dict[str, Method]:
    """Every method of ``service`` (a full name: ``DATA``, ``TABLE_ADMIN`` ...) by name."""
    desc = _pool.FindServiceByName(service)
    return {m.name: Method(m.name, f"/{service}/{m.name}",
                           message_factory.GetMessageClass(m.input_type),
                           message_factory.GetMessageClass(m.output_type),
                           m.client_streaming, m.server_streaming)
            for m in desc.methods}


__all__ = ["DATA", "INSTANCE_ADMIN", "OPERATIONS", "TABLE_ADMIN", "Method", "admin",
           "lro", "message", "methods", "protobuf", "rpc", "v2"]
