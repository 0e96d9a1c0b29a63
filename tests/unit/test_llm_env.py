"""Which model a session gets from configuration + environment (spec §8.2-8.3), and the
errors that explain why none can be used. No SDK is imported by any of this."""

from __future__ import annotations

import pytest

from soulwire.config.model import Config, ModelConfig, ProviderConfig
from soulwire.llm.env import apply_env, env_model, env_provider_type
from soulwire.llm.errors import LLMNotSet
from soulwire.llm.registry import resolve_model
from soulwire.llm.transport import Redactor, retry_after


def configured(kind: str, **provider: str) -> Config:
    return Config.model_validate(
        {
            "default_model": "main",
            "models": {"main": {"provider": "p", "model": "configured-model", "max_context_size": 1000}},
            "providers": {"p": {"type": kind, **provider}},
        }
    )


def test_kimi_variables_override_a_kimi_provider_and_soulwire_ones_override_everything():
    provider = ProviderConfig(type="kimi", base_url="https://config", api_key="config-key")
    model = ModelConfig(provider="p", model="config-model")
    env = {
        "KIMI_API_KEY": "kimi-key",
        "KIMI_MODEL_NAME": "kimi-model",
        "KIMI_MODEL_CAPABILITIES": "thinking, image_in",
    }
    p, m = apply_env(provider, model, env)
    assert (p.base_url, p.api_key, m.model, m.capabilities) == (
        "https://config",
        "kimi-key",
        "kimi-model",
        ["thinking", "image_in"],
    )
    p, m = apply_env(
        provider, model, {**env, "SOULWIRE_API_KEY": "ours", "SOULWIRE_MODEL_MAX_CONTEXT_SIZE": "4096"}
    )
    assert (p.api_key, m.max_context_size) == ("ours", 4096)


def test_kimi_variables_leave_other_provider_types_alone():
    p, m = apply_env(
        ProviderConfig(type="anthropic"), ModelConfig(provider="p", model="c"), {"KIMI_API_KEY": "k"}
    )
    assert (p.api_key, m.model) == ("", "c")


def test_vendor_variables_only_fill_what_the_config_leaves_empty():
    local = ProviderConfig(type="openai_legacy", base_url="http://localhost:8000/v1", api_key="local")
    env = {"OPENAI_API_KEY": "sk-openai", "OPENAI_BASE_URL": "https://elsewhere/v1"}
    p, _ = apply_env(local, ModelConfig(provider="p", model="m"), env)
    assert (p.base_url, p.api_key) == ("http://localhost:8000/v1", "local")
    p, _ = apply_env(ProviderConfig(type="openai_responses"), ModelConfig(provider="p", model="m"), env)
    assert (p.base_url, p.api_key) == ("https://elsewhere/v1", "sk-openai")


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({}, None),
        ({"KIMI_API_KEY": "k", "OPENAI_API_KEY": "o"}, "kimi"),
        ({"OPENAI_API_KEY": "o"}, "openai_responses"),
        ({"OPENAI_API_KEY": "o", "OPENAI_BASE_URL": "http://localhost:11434/v1"}, "openai_legacy"),
        ({"ANTHROPIC_API_KEY": "a"}, "anthropic"),
        ({"GEMINI_API_KEY": "g"}, "gemini"),
        ({"SOULWIRE_BASE_URL": "http://127.0.0.1:8080/v1", "SOULWIRE_MODEL_NAME": "qwen"}, "openai_legacy"),
        ({"SOULWIRE_PROVIDER_TYPE": "anthropic", "OPENAI_API_KEY": "o"}, "anthropic"),
    ],
)
def test_the_environment_alone_picks_a_provider(env, kind):
    assert env_provider_type(env) == kind


def test_env_model_names_a_default_model_unless_told_otherwise():
    found = env_model({"ANTHROPIC_API_KEY": "a"})
    assert found is not None and found[1].model.startswith("claude") and found[0].api_key == "a"
    found = env_model({"ANTHROPIC_API_KEY": "a", "SOULWIRE_MODEL_NAME": "claude-opus-4-1"}, "ignored-alias")
    assert found is not None and found[1].model == "claude-opus-4-1"


def test_resolve_model_builds_an_adapter_without_importing_its_sdk():
    model = resolve_model(configured("openai_legacy", api_key="k"), model_alias=None, thinking=None, env={})
    assert model is not None and model.model_name == "configured-model" and model.max_context_size == 1000


def test_unknown_model_alias_uses_the_environment_provider_or_says_why_not():
    config = configured("openai_legacy", api_key="k")
    model = resolve_model(config, model_alias="gpt-4.1-mini", thinking=None, env={"OPENAI_API_KEY": "o"})
    assert model is not None and model.model_name == "gpt-4.1-mini"
    with pytest.raises(LLMNotSet, match=r"--model 'nope' is not a model alias.*aliases: main"):
        resolve_model(config, model_alias="nope", thinking=None, env={})


def test_missing_key_and_unsupported_type_are_explained():
    with pytest.raises(LLMNotSet, match="KIMI_API_KEY"):
        resolve_model(configured("kimi"), model_alias=None, thinking=None, env={})
    with pytest.raises(LLMNotSet, match="'vertexai' is not supported"):
        resolve_model(configured("vertexai"), model_alias=None, thinking=None, env={})
    # A custom server may need no key at all.
    local = configured("openai_legacy", base_url="http://localhost:8000/v1")
    assert resolve_model(local, model_alias=None, thinking=None, env={}) is not None


def test_nothing_configured_is_none():
    assert resolve_model(Config(), model_alias=None, thinking=None, env={}) is None


def test_thinking_follows_flag_config_and_capabilities():
    config = Config.model_validate(
        {
            "default_model": "m",
            "default_thinking": True,
            "models": {"m": {"provider": "p", "model": "x", "capabilities": ["thinking"]}},
            "providers": {"p": {"type": "anthropic", "api_key": "k"}},
        }
    )
    assert resolve_model(config, model_alias=None, thinking=None, env={}).thinking is True  # type: ignore[union-attr]
    assert resolve_model(config, model_alias=None, thinking=False, env={}).thinking is False  # type: ignore[union-attr]


def test_retry_after_in_seconds_milliseconds_and_dates():
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after({"retry-after": "soon"}) is None and retry_after(None) is None


def test_redactor_hides_the_key_and_sensitive_header_values_only():
    redact = Redactor.for_provider("sk-abc123", {"X-Api-Token": "tok-999", "X-Title": "my app"})
    assert redact("sk-abc123 tok-999 my app") == "*** *** my app"
