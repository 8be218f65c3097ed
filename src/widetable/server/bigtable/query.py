"""PrepareQuery and ExecuteQuery (``google.bigtable.v2.Bigtable``): GoogleSQL over the
store's Bigtable tables, answered by ``db.bigtable.sql`` (``widetable.sql.googlesql``).

PrepareQuery checks the query and answers its columns' types, the ``prepared_query``
bytes and ``valid_until``. ExecuteQuery runs a prepared query with its parameters and
streams the rows as ``PartialResultSet`` batches (``wire/bigtable/query.py``); a
``resume_token`` continues a stream after its last complete batch. Both are reads (the
Bigtable port keeps no read/write lists: its one shared token allows every call).
ExecuteQuery starts on the worker pool (``pooled``): a query may scan and aggregate for a
while before its first batch, and the loop keeps serving meanwhile; its later batches are
pulled on the loop as the client reads them (never the whole answer in memory); so does the first PrepareQuery of a text
(it runs DuckDB to type the answer), later ones answer from the plan cache on the loop.
"""

from __future__ import annotations

from ...errors import NotSupported, ParameterInvalid
from ...wire.bigtable import DATA, v2
from ...wire.bigtable.query import (
    decode_params,
    decode_resume_token,
    decode_type,
    encode_metadata,
    encode_results,
    encode_timestamp,
)
from .service import Registry, instance_name


class QueryService:
    """The SQL handlers over ``bt`` (a BigtableInstance; its ``sql`` runs the queries)."""

    def __init__(self, bt) -> None:
        self.bt = bt
        self._loaded = False  # the SQL engine imported (sqlglot, pyarrow): never on the loop

    def register(self, reg: Registry) -> None:
        # a query prepared before answers from the plan cache: on the loop
        reg.add(DATA, "PrepareQuery", self.prepare_query,
                pooled=lambda req: not (self._loaded and self.bt.sql.knows(req.query)))
        reg.add(DATA, "ExecuteQuery", self.execute_query, raw_response=True, pooled=_always)

    def prepare_query(self, req, context):
        instance_name(req.instance_name, "instance_name")
        types = {name: decode_type(t, f"param_types[{name!r}]") for name, t in req.param_types.items()}
        prepared = self.bt.sql.prepare(req.query, types)
        self._loaded = True
        return v2.PrepareQueryResponse(metadata=encode_metadata(prepared.columns),
                                       prepared_query=prepared.token(),
                                       valid_until=encode_timestamp(prepared.valid_until))

    def execute_query(self, req, context):
        """The answer's messages, lazily."""
        from ...sql.googlesql.types import Typed  # here: pyarrow loads with the first query
        instance_name(req.instance_name, "instance_name")
        if req.view_parameters:
            raise NotSupported("ExecuteQuery: view_parameters are not supported (views are not served)")
        if not req.prepared_query:
            raise ParameterInvalid("ExecuteQuery needs prepared_query (from PrepareQuery); "
                                   "a query text alone is not accepted")
        sql = self.bt.sql
        prepared = sql.from_token(req.prepared_query)
        skip = decode_resume_token(req.resume_token)
        params = {name: Typed(value, t) for name, (value, t) in decode_params(req.params).items()}
        result = sql.execute(prepared, params)
        return _closing(encode_results(iter(result), result.types, skip), result)


def _always(req) -> bool:
    return True


def _closing(messages, result):
    try:
        yield from messages
    finally:
        result.close()
