"""From configuration to a provider instance. Adapters are imported only when selected, so an
unused provider SDK never costs start-up time."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from soulwire.config.model import Config, ModelConfig, ProviderConfig
from soulwire.llm.env import apply_env, env_model, missing_key_problem, model_capabilities
from soulwire.llm.errors import LLMNotSet
from soulwire.llm.provider import ChatProvider
from soulwire.llm.sdk_import import import_names

# provider `type` → "module:factory"; a factory takes (ProviderConfig, ModelConfig, env).
ADAPTERS: dict[str, str] = {
    "_scripted_echo": "soulwire.llm.registry:scripted_factory",
    "_echo": "soulwire.llm.registry:echo_factory",
    "kimi": "soulwire.llm.openai_chat:kimi_factory",
    "openai_legacy": "soulwire.llm.openai_chat:openai_legacy_factory",
    # Gemini through Google's OpenAI-compatible endpoint: no google-genai dependency.
    "gemini": "soulwire.llm.openai_chat:gemini_factory",
    "google_genai": "soulwire.llm.openai_chat:gemini_factory",
    "openai_responses": "soulwire.llm.openai_responses:openai_responses_factory",
    "anthropic": "soulwire.llm.anthropic:anthropic_factory",
}
_OFFLINE = frozenset({"_scripted_echo", "_echo"})

ProviderFactory = Callable[[ProviderConfig, ModelConfig, dict[str, str]], ChatProvider]


class ResolvedModel(NamedTuple):
    """The model a session talks to, with what the engine needs to know about it."""

    alias: str
    provider: ChatProvider
    max_context_size: int
    capabilities: frozenset[str]
    thinking: bool

    @property
    def model_name(self) -> str:
        return self.provider.model_name


def scripted_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> ChatProvider:
    from soulwire.llm.scripted import TRACE_ENV, ScriptedEchoProvider, ScriptError, load_scripts

    trace = any(env.get(k, "").lower() in ("1", "true", "yes", "on") for k in TRACE_ENV)
    try:
        scripts = load_scripts(env)
    except ScriptError as exc:  # the prompt answers -32001 with why, instead of a crash
        raise LLMNotSet(f"LLM is not set: {exc}") from None
    return ScriptedEchoProvider(scripts, capabilities=model_capabilities(model), trace=trace)


def echo_factory(provider: ProviderConfig, model: ModelConfig, env: dict[str, str]) -> ChatProvider:
    from soulwire.llm.scripted import EchoProvider

    return EchoProvider(capabilities=model_capabilities(model))


def _factory(kind: str) -> ProviderFactory | None:
    target = ADAPTERS.get(kind)
    if target is None:
        return None
    module_name, _, attr = target.partition(":")
    factory: Any = getattr(importlib.import_module(module_name), attr)
    return factory


def preload_sdk(kind: str) -> None:
    """Import the adapter of provider type `kind`, its SDK and the shared TLS context: what a
    first request of that type would load (a server about to fork copies of itself does it
    once for all of them). An SDK that cannot be imported is left to that request to report."""
    target = ADAPTERS.get(kind)
    if target is None or kind in _OFFLINE:
        return
    module = importlib.import_module(target.partition(":")[0])
    adapters = [v for v in vars(module).values() if isinstance(getattr(v, "sdk_module", None), str)]
    if not import_names(sorted({a.sdk_module for a in adapters})):
        return
    from soulwire.tls import shared_tls_context

    shared_tls_context(importlib.import_module("httpx2"))
    # The SDKs describe the platform in their request headers; the stdlib answers
    # `platform.platform()` by running `uname -p` once per process and caching it. Once here,
    # not in every forked copy's first request.
    import platform

    platform.platform()


def resolve_model(
    config: Config, *, model_alias: str | None, thinking: bool | None, env: dict[str, str] | None = None
) -> ResolvedModel | None:
    """The model of this session: the ``--model`` alias, else ``default_model``, with the
    environment applied (spec §8.3); without either, a model from the environment alone.
    None when nothing is configured at all; LLMNotSet (with the reason) when a model is
    named but cannot be used. No provider SDK is imported here."""
    base_env = dict(os.environ) if env is None else env
    if model_alias and model_alias not in config.models:
        # An unknown alias names a model of the provider the environment configures.
        found = env_model(base_env, model_alias)
        if found is None:
            known = ", ".join(sorted(config.models)) or "none"
            raise LLMNotSet(
                f"LLM is not set: --model {model_alias!r} is not a model alias of the configuration "
                f"(aliases: {known}) and no API key in the environment says which provider serves it; "
                "use one of those aliases, or export the provider's API key (soulwire doctor lists them)"
            )
        alias, (provider_cfg, model) = model_alias, found
    elif model_alias or config.default_model:
        alias = model_alias or config.default_model
        model = config.models[alias]
        provider_cfg = config.providers[model.provider]
        provider_cfg, model = apply_env(provider_cfg, model, {**base_env, **provider_cfg.env})
    else:
        found = env_model(base_env)
        if found is None:
            return None
        provider_cfg, model = found
        alias = model.model
    if provider_cfg.env:
        # The scripted provider (and some SDKs) read their settings from the environment.
        os.environ.update(provider_cfg.env)
    factory = _factory(provider_cfg.type)
    if factory is None:
        known = ", ".join(sorted(k for k in ADAPTERS if not k.startswith("_")))
        raise LLMNotSet(
            f"LLM is not set: provider type {provider_cfg.type!r} is not supported (use one of: {known})"
        )
    if provider_cfg.type not in _OFFLINE:
        problem = missing_key_problem(provider_cfg, model)
        if problem is not None:
            raise LLMNotSet(f"LLM is not set: {problem}")
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
