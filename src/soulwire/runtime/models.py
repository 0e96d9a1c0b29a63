"""The models a session resolves: its own, its sub-agents' (by alias, each once) and those it
switched away from, so that each provider's HTTP client is closed when the session ends."""

from __future__ import annotations

from soulwire.config.model import Config
from soulwire.llm.registry import ResolvedModel, resolve_model
from soulwire.runtime.options import SessionOptions


class SessionModels:
    """Called with a model alias of the configuration (the Agent tool's `model`), the resolved
    model (LookupError for an alias the configuration does not have); `aclose` closes every
    provider the session used."""

    def __init__(self, config: Config, options: SessionOptions, main: ResolvedModel | None) -> None:
        self._config = config
        self._options = options
        self._by_alias: dict[str, ResolvedModel] = {}
        self._held: list[ResolvedModel] = [main] if main is not None else []

    def __call__(self, alias: str) -> ResolvedModel:
        if alias not in self._config.models:
            raise LookupError(alias)
        if alias not in self._by_alias:
            model = resolve_model(self._config, model_alias=alias, thinking=self._options.thinking)
            assert model is not None  # (an alias of the configuration always names a model)
            self._by_alias[alias] = model
            self._held.append(model)
        return self._by_alias[alias]

    def hold(self, model: ResolvedModel | None) -> None:
        """A model the session switched to (its provider is closed with the others)."""
        if model is not None and all(held is not model for held in self._held):
            self._held.append(model)

    async def aclose(self) -> None:
        """Close each provider's connections (the session has ended)."""
        held, self._held = self._held, []
        self._by_alias.clear()
        for model in held:
            await model.provider.aclose()


__all__ = ["SessionModels"]
