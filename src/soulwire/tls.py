"""The process's one TLS context for outgoing HTTPS (provider clients, FetchURL, SearchWeb).

Building a context reads the whole CA bundle: ~30-40 ms of CPU each time, paid per client
(a `serve` process builds one per session, a tool call one per call) when each makes its own.
Outside the layers so the model providers and the tools can share it."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_context: Any = None


def shared_tls_context(httpx: Any) -> Any:
    """The shared context, built at first use as `httpx` (the httpx2 module) builds its
    default: the CA bundle, `SSL_CERT_FILE`/`SSL_CERT_DIR`."""
    global _context
    with _lock:
        if _context is None:
            _context = httpx.create_ssl_context()
        return _context


__all__ = ["shared_tls_context"]
