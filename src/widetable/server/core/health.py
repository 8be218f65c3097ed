"""The health endpoint: ``GET /health``, unauthenticated, on the server's HTTP port.

It answers JSON: ``{"status": "ok", "connections": n, "requests_on_pool": n}``
with 200, or ``{"status": "draining", ...}`` with 503 once ``drain()`` has begun,
so that a load balancer stops sending new work. It names no table and no key:
anyone who can reach the port may ask.
"""

from __future__ import annotations

import json

from .dispatch import Dispatcher

PATH = "/health"


def report(core: Dispatcher) -> dict:
    """What the endpoint answers, as a dict."""
    return {
        "status": "draining" if core.draining else "ok",
        "connections": len(core.open),
        "requests_on_pool": core.jobs,
    }


def answer(core: Dispatcher) -> tuple[int, bytes]:
    """``(HTTP status, JSON body)`` of a health request."""
    state = report(core)
    return (503 if core.draining else 200), json.dumps(state).encode()
