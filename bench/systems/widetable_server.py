"""widetable through its server: the hook, to be filled in once ``widetable.server`` exists.

What to write here when the server lands (nothing else in bench/ needs to change):

* ``start(root)``: start the server on a free loopback port with its data under
  ``root`` (in-process thread or a subprocess), and connect a client to it.
* ``stop()``: close the client and stop the server, also after errors.
* ``open``/``close`` and the six operations: the same calls as
  :mod:`bench.systems.widetable_embedded`, made through the client.
* ``server_memory_mb()``: the server's RSS from ``bench.memory.tree_pss_mb(pid)``
  when it runs in another process.

Until then ``start`` raises :class:`SystemUnavailable` and the run skips it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from .base import Row, System, SystemUnavailable, TableSpec


def _server_exists() -> bool:
    try:
        return importlib.util.find_spec("widetable.server") is not None
    except ImportError:
        return False


class WidetableServerSystem(System):
    name = "widetable-server"

    def start(self, root: Path) -> None:
        if not _server_exists():
            raise SystemUnavailable("not available yet: the module widetable.server does not exist")
        raise SystemUnavailable(
            "widetable.server exists but its bench adapter is not written yet: "
            "fill in bench/systems/widetable_server.py"
        )

    def open(self, workdir: Path, spec: TableSpec) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def load(self, rows: Sequence[Row]) -> None:
        raise NotImplementedError

    def read(self, key: str) -> object | None:
        raise NotImplementedError

    def update(self, key: str, values: dict[str, bytes]) -> None:
        raise NotImplementedError

    def put(self, key: str, values: dict[str, bytes]) -> None:
        raise NotImplementedError

    def scan(self, start: str, count: int) -> int:
        raise NotImplementedError
