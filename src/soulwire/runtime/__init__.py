"""Builds one session's engine from explicit parts (no service locator)."""
