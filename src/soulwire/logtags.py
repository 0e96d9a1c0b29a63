"""Tags a log record may carry, shared by every layer that logs (a leaf: it imports nothing)."""

from __future__ import annotations

FILE_ONLY = "soulwire_file_only"
"""A log record with this attribute set (`extra={FILE_ONLY: True}`) goes to the log file only."""

__all__ = ["FILE_ONLY"]
