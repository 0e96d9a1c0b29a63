"""From configuration to a provider instance. Adapters are imported only when selected, so an
unused provider SDK never costs start-up time."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from soulwire.config.model import Config, ModelConfig, ProviderConfig
from soulwire.llm.provider import ChatProvider

# provider `type` → "module:factory"; a factory takes (ProviderConfig, ModelConfig, env).
ADAPTERS: dict[str, str] = {
    "_scripted_echo": "soulwire.llm.registry:scripted_factory",
    "_echo": "soulwire.llm.registry:echo_factory",
}

ProviderFactory = Callable[[ProviderConfig, ModelConfig, dict[str, str]], ChatProvider]


@dataclass
class ResolvedModel:
    """The model a session talks to, with what the engine needs to know about it."""

    alias: str
    provider: ChatProvider
    max_context_size: int
    capabilities: frozenset[str]
    thinking: bool

    @property
    def model_name(self) -> str:
        return self.provider.model_name


def _capabilities(model: ModelConfig) -> frozenset[str]:
    caps = set(model.capabilities)
    name = model.model.lower()
    if "thinking" in name or "reason" in name:
        caps |= {"thinking", "always_thinking"}
    return frozenset(caps)


def scripted_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> ChatProvider:
    from soulwire.llm.scripted import TRACE_ENV, ScriptedEchoProvider, load_scripts

    trace = any(env.get(k, "").lower() in ("1", "true", "yes", "on") for k in TRACE_ENV)
    return ScriptedEchoProvider(load_scripts(env), capabilities=_capabilities(model), trace=trace)


def echo_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> ChatProvider:
    from soulwire.llm.scripted import EchoProvider

    return EchoProvider(capabilities=_capabilities(model))


def _factory(kind: str) -> ProviderFactory | None:
    target = ADAPTERS.get(kind)
    if target is None:
        return None
    module_name, _, attr = target.partition(":")
    factory: Any = getattr(importlib.import_module(module_name), attr)
    return factory


def resolve_model(
    config: Config, *, model_alias: str | None, thinking: bool | None, env: dict[str, str] | None = None
) -> ResolvedModel | None:
    """The configured model (``--model`` alias, else ``default_model``), or None when no
    usable model is configured (prompts then fail with "LLM is not set")."""
    alias = model_alias if model_alias and model_alias in config.models else config.default_model
    if not alias:
        return None
    model = config.models[alias]
    provider_cfg = config.providers[model.provider]
    if provider_cfg.env:
        # The scripted provider (and some SDKs) read their settings from the environment.
        os.environ.update(provider_cfg.env)
    factory = _factory(provider_cfg.type)
    if factory is None:
        return None
    base_env = dict(os.environ) if env is None else env
    provider = factory(provider_cfg, model, {**base_env, **provider_cfg.env})
    caps = provider.capabilities
    wants = config.default_thinking if thinking is None else thinking
    use_thinking = "always_thinking" in caps or (wants and "thinking" in caps)
    return ResolvedModel(
        alias=alias,
        provider=provider,
        max_context_size=model.max_context_size,
        capabilities=caps,
        thinking=use_thinking,
    )
