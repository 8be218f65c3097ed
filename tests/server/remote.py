"""Running tests/table's behaviour tests remotely: what differs, in one place.

``rejects`` (tests/table/helpers.py) compares the engine's bytes before and
after a rejected call; remotely the same check reads every row of every table
with all versions through the protocol. Tests that need the embedded engine
itself (physical rows, purge, crash helpers) are skipped here by name.
"""

from __future__ import annotations

import pytest
from table import helpers  # type: ignore[import-not-found]

from widetable import INF_MAX, INF_MIN
from widetable.client import RemoteDatabase

_engine_state = helpers.engine_state


def remote_state(db) -> list:
    if not isinstance(db, RemoteDatabase):
        return _engine_state(db)
    state = []
    for name in db.list_tables():
        t = db.table(name)
        n = len(t.schema.primary_key)
        for row in t.scan((INF_MIN,) * n, (INF_MAX,) * n, max_versions=2**31 - 1):
            state.append((name, row.primary_key, row.cells))
    return state


helpers.engine_state = remote_state

# Tests that inspect the embedded engine or call APIs with no wire form.
LOCAL_ONLY = {
    "test_purge_expired_removes_expired_rows_physically": "purge_expired is embedded-only",
    "test_purge_trims_versions_past_max_versions": "purge_expired is embedded-only",
    "test_versions_past_lowered_max_versions_stay_hidden_from_every_read": "reads the engine",
    "test_batch_get_per_row_errors": "a malformed key fails in the client before the batch is sent",
    "test_page_cut_by_rows_and_bytes": "shrinks the embedded store's page limits; reads stored bytes",
}


def local_only(namespace: dict) -> list:
    for name, reason in LOCAL_ONLY.items():
        if name in namespace:
            namespace[name] = pytest.mark.skip(reason=reason)(namespace[name])
    return []
