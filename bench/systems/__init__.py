"""The registry of benchmarked systems.

To add a system, write a :class:`~bench.systems.base.System` subclass in a module
of this package and add one line to :data:`REGISTRY` mapping its ``--systems`` name
to ``"module:Class"``. Modules are imported only when their system is selected, so
a missing optional dependency affects that system alone. A system that cannot run
here raises :class:`~bench.systems.base.SystemUnavailable` from ``start()`` and is
skipped with its message.
"""

from __future__ import annotations

import importlib

from .base import System, SystemUnavailable, TableSpec

REGISTRY: dict[str, str] = {
    "widetable": "bench.systems.widetable_embedded:WidetableSystem",
    # The hook for the server: fill in bench/systems/widetable_server.py.
    "widetable-server": "bench.systems.widetable_server:WidetableServerSystem",
    "rocksdict": "bench.systems.rocksdict_raw:RocksdictSystem",
    "sqlite": "bench.systems.sqlite:SqliteSystem",
    "postgresql": "bench.systems.postgresql:PostgresSystem",
}


def create(name: str) -> System:
    """A new instance of the system registered as ``name``.

    Raises KeyError for an unknown name and SystemUnavailable when its module
    cannot be imported (a missing dependency).
    """
    module_name, class_name = REGISTRY[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SystemUnavailable(f"cannot import {module_name}: {exc}") from exc
    system: System = getattr(module, class_name)()
    return system


__all__ = ["REGISTRY", "System", "SystemUnavailable", "TableSpec", "create"]
