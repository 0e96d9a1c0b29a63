"""Soulwire: a coding-agent engine that speaks the Wire protocol."""

__version__ = "0.1.0"
