"""The health endpoint: ``GET /health``, unauthenticated, on the server's HTTP port.

It answers JSON: ``{"status": "ok", "connections": n, "requests_on_pool": n,
"background": [{"name": "purge", "ok": true, ...}, ...]}`` with 200 (a failing
background loop is reported, not a reason to stop serving), or ``{"status": "draining", ...}`` with 503 once ``drain()`` has begun,
so that a load balancer stops sending new work. It names no table and no key:
anyone who can reach the port may ask.
"""

from __future__ import annotations

import json

from .dispatch import Dispatcher

PATH = "/health"


def report(core: Dispatcher) -> dict:
    """What the endpoint answers, as a dict. (The store's background work, once
    ``Database.background_status()`` exists, joins it here as ``"background"``.)"""
    return {
        "status": "draining" if core.draining else "ok",
        "connections": len(core.open),
        "requests_on_pool": core.jobs,
        "background": background(core),
    }


def background(core: Dispatcher) -> list[dict]:
    """The store's background loops (``Database.background_state``): each one's name, ok,
    running, failures so far, and the type of its last error and when (unix seconds). The
    error's text may name tables or keys, so it stays in ``describe_table`` and the log."""
    try:
        states = core.db.background_state()
    except Exception:  # noqa: BLE001 - a store closing under the request: report none
        return []
    return [{"name": s.name, "ok": s.ok, "running": s.running, "errors": s.errors,
             "error_type": None if s.error is None else s.error.split(":", 1)[0],
             "error_at": s.error_at} for s in states]


def answer(core: Dispatcher) -> tuple[int, bytes]:
    """``(HTTP status, JSON body)`` of a health request."""
    state = report(core)
    return (503 if core.draining else 200), json.dumps(state).encode()
