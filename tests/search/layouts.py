"""Stores whose search index is of an older layout, as an older release left it.

``as_layout`` rewrites an index's catalogued definition to ``layout`` (an older one; 1
drops the entry, as a definition catalogued before layouts had none) and removes its
tantivy shards, so that on the next open the index backfills again in that layout, which
is what a store written by that release holds."""

from __future__ import annotations

import json
import shutil

import widetable
from widetable.keys import layout as keys
from widetable.search.schema import IndexMeta
from widetable.storage import open_engine


def as_layout(path: str, table: str, index: str, layout: int):
    """Close nothing: ``path`` must not be open. Returns the database opened again, the
    index caught up in ``layout``."""
    db = widetable.open(path, purge_interval=None)
    table_id = db.table(table).schema.table_id
    db.close()
    eng = open_engine(path)
    k = keys.search_index_key(table_id, index)
    d = json.loads(eng.get(k))
    if layout == 1:
        d.pop("layout", None)
    else:
        d["layout"] = layout
    eng.put(k, json.dumps(d).encode())
    eng.close()
    shutil.rmtree(f"{path}/search/{IndexMeta.from_dict(d).index_id}")
    db = widetable.open(path, purge_interval=None)
    assert db.wait_for_search_indexes(table, index, timeout=60)
    assert db.describe_search_index(table, index).meta.layout == layout
    return db
