"""stream tail: print a table's change records as JSON lines, shard by shard, from a
store or (``--endpoint``) from a running server, which holds the store's lock."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer

from ..errors import TrimmedDataAccess
from .app import DataOpt, EndpointOpt, app, guarded, open_target
from .literals import CliError, pk_to_json, to_json

stream_app = typer.Typer(help="Change streams: read a table's change records.", no_args_is_help=True)
app.add_typer(stream_app, name="stream")


@stream_app.command("tail")
@guarded
def tail(
    ctx: typer.Context,
    table: Annotated[str, typer.Argument(help="Table whose stream to read.")],
    latest: Annotated[bool, typer.Option("--latest", help="Start after the newest record.")] = False,
    follow: Annotated[bool, typer.Option("--follow", help="Keep polling for new records.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Stop after this many records.")] = 1_000_000,
    data: DataOpt = None,
    endpoint: EndpointOpt = None,
) -> None:
    """Print the change records of TABLE as JSON lines: parents' shards before children's.

    A store served by `widetable serve` is locked by the server: read its stream
    with --endpoint. --follow needs --endpoint too: this command locks a local
    store, so no other process could write the records it waits for. Records
    trimmed past retention before they were read are reported on stderr, and the
    shard goes on from its oldest kept record."""
    if follow and endpoint is None:
        raise CliError("--follow needs --endpoint (a served store): a local store is locked by "
                       "this command, so no other process can write to it while it follows")
    with open_target(ctx, data, endpoint) as db:
        streams = db.list_stream(table)
        if not streams:
            raise CliError(f"table {table!r} has no stream; enable it with stream=True")
        sid = streams[0].stream_id
        iterators: dict[int, str | None] = {}
        # --latest skips what the shards held at the start; shards that appear later
        # (split or merge children) are read from their first record.
        at_start: set[int] | None = None
        printed = 0
        while printed < limit:
            desc = db.describe_stream(sid)
            if at_start is None:
                at_start = {s.shard_id for s in desc.shards} if latest else set()
            progressed = False
            for shard in desc.shards:
                if any(iterators.get(p, "") is not None for p in shard.parents):
                    continue  # a parent is not drained yet: keep each key's order
                it = iterators.get(shard.shard_id, "")
                if it is None:
                    continue
                if it == "":
                    start = "LATEST" if shard.shard_id in at_start else "TRIM_HORIZON"
                    it = db.get_shard_iterator(sid, shard.shard_id, start)
                try:
                    page = db.get_stream_record(it, limit=min(1000, limit - printed))
                except TrimmedDataAccess as exc:  # fell behind retention: say so, go on
                    print(f"warning: shard {shard.shard_id}: {exc.message}; records were missed",
                          file=sys.stderr)
                    iterators[shard.shard_id] = db.get_shard_iterator(sid, shard.shard_id)
                    progressed = True
                    continue
                for rec in page.records:
                    print(json.dumps({
                        "seq": rec.sequence, "shard": rec.shard, "op": rec.operation,
                        "pk": pk_to_json(rec.primary_key), "ts": rec.timestamp,
                        "columns": [[c.name, c.kind, to_json(c.value), c.timestamp] for c in rec.columns],
                    }))
                    printed += 1
                iterators[shard.shard_id] = page.next_iterator
                progressed = progressed or bool(page.records) or page.next_iterator is None
            if not progressed:
                if not follow:
                    return
                time.sleep(0.2)
