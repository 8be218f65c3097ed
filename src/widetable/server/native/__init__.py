"""widetable's own protocol on the server (``service.py``); its codec is ``wire/native.py``."""

from .service import upgrade

__all__ = ["upgrade"]
