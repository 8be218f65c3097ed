"""tests/table/test_filter_input.py again, through widetable.connect against the session server
(tests/server/conftest.py overrides ``db``; see remote.py for what stays local)."""

from table.test_filter_input import *  # type: ignore[import-not-found]

from .remote import local_only

pytestmark = local_only(globals())
