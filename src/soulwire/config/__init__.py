"""Configuration: the kimi-compatible config format (TOML or JSON), share directory and
command-line overrides. `loader` is light (no pydantic); `model` holds the typed schema."""
