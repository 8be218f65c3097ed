"""tests/table/test_regex_filters.py again, through widetable.connect against the session
server, on both protocols (tests/server/conftest.py overrides ``db``): the regex filter's
ValueTransferRule crosses Tablestore's protobuf and widetable's own frames."""

from table.test_regex_filters import *  # type: ignore[import-not-found]

from .remote import local_only

pytestmark = local_only(globals())
