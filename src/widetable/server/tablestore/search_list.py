"""ListSearchIndex before search indexes are served: a table's list is empty.

Clean-up code written against Tablestore lists the search indexes of every table
(and drops them) before it drops the table, so the call answers as the service
does for a table without any: an empty list, and ``OTSObjectNotExist`` for a
table that does not exist. Its messages (Tablestore's ``search.proto``:
``ListSearchIndexRequest {table_name = 1}``, ``ListSearchIndexResponse {indices
= 1}``, ``IndexInfo {table_name = 1, index_name = 2}``) are declared here, in a
private descriptor pool of their own, until the search index vendors that file.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from ...db import Database
from ...wire.proto import PACKAGE

_F = descriptor_pb2.FieldDescriptorProto


def _messages() -> tuple[type, type]:
    file = descriptor_pb2.FileDescriptorProto(
        name="widetable_list_search_index.proto", package=PACKAGE, syntax="proto2")
    request = file.message_type.add(name="ListSearchIndexRequest")
    request.field.add(name="table_name", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    info = file.message_type.add(name="IndexInfo")
    info.field.add(name="table_name", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    info.field.add(name="index_name", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    response = file.message_type.add(name="ListSearchIndexResponse")
    response.field.add(name="indices", number=1, type=_F.TYPE_MESSAGE,
                       type_name=f".{PACKAGE}.IndexInfo", label=_F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
                 for name in ("ListSearchIndexRequest", "ListSearchIndexResponse"))  # type: ignore[return-value]


ListSearchIndexRequest, ListSearchIndexResponse = _messages()


def list_search_index(db: Database, req) -> object:
    """ListSearchIndex: no search index on any table yet; a named table must exist."""
    if req.HasField("table_name"):
        db.table(req.table_name)  # OTSObjectNotExist, in the service's wording
    return ListSearchIndexResponse()
