"""Tablestore's protobuf messages (package ``com.aliyun.tablestore.protocol``).

The ``.proto`` files beside this module are Tablestore's protocol definitions,
vendored from the official Python SDK (``tablestore/protobuf``).
``descriptors.pb`` is their compiled ``FileDescriptorSet``, made at
development time and committed::

    python -m grpc_tools.protoc -I src/widetable/wire/proto \\
        --descriptor_set_out=src/widetable/wire/proto/descriptors.pb \\
        table_store.proto table_store_filter.proto

At run time the set is loaded into a private descriptor pool, not protobuf's
default one: the official SDK registers the same symbols in the default pool,
and a process may hold both (tests, or an application using both clients).
Neither grpcio-tools nor the SDK is needed at run time, only ``protobuf``.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor

from ...errors import ParameterInvalid

PACKAGE = "com.aliyun.tablestore.protocol"

_pool = descriptor_pool.DescriptorPool()
_files = descriptor_pb2.FileDescriptorSet.FromString(
    (Path(__file__).parent / "descriptors.pb").read_bytes()
)
for _file in _files.file:
    _pool.Add(_file)


def message(name: str) -> type:
    """The message class ``com.aliyun.tablestore.protocol.<name>``."""
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))


def enum_value(enum: str, name: str) -> int:
    return _pool.FindEnumTypeByName(f"{PACKAGE}.{enum}").values_by_name[name].number


class _Messages:
    """Attribute access to every message: ``pb.GetRowRequest``."""

    def __getattr__(self, name: str) -> type:
        cls = message(name)
        setattr(self, name, cls)
        return cls


pb = _Messages()


def check_text(msg, path: str = "") -> None:
    """OTSParameterInvalid naming the field if a ``string`` field of ``msg`` (or of a
    message inside it) is not valid UTF-8.

    Tablestore's messages are proto2, and protobuf hands a proto2 ``string`` field
    that holds invalid UTF-8 back as ``bytes`` instead of refusing it; code that
    treats the field as ``str`` would then fail with a TypeError far from the wire."""
    for field, value in msg.ListFields():
        name = f"{path}{field.name}"
        if field.type == FieldDescriptor.TYPE_STRING:
            values = value if field.label == FieldDescriptor.LABEL_REPEATED else (value,)
            for v in values:
                if not isinstance(v, str):
                    raise ParameterInvalid(f"field {name} is not valid UTF-8: {bytes(v)[:64]!r}")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            values = value if field.label == FieldDescriptor.LABEL_REPEATED else (value,)
            for v in values:
                check_text(v, f"{name}.")


__all__ = ["PACKAGE", "check_text", "enum_value", "message", "pb"]
