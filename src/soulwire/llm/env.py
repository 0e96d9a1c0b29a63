"""The environment's say in model selection (spec §8.3): overrides of the configured provider,
a model that works from an API key alone, and the hint shown when no model can be used.

Precedence, highest first:
1. `SOULWIRE_BASE_URL`, `SOULWIRE_API_KEY`, `SOULWIRE_MODEL_NAME`, `SOULWIRE_MODEL_MAX_CONTEXT_SIZE`,
   `SOULWIRE_MODEL_CAPABILITIES` — any provider type;
2. the reference's `KIMI_BASE_URL`, `KIMI_API_KEY`, `KIMI_MODEL_NAME`, `KIMI_MODEL_MAX_CONTEXT_SIZE`,
   `KIMI_MODEL_CAPABILITIES` — `kimi` providers (environment > config, as in the reference);
3. the configuration file;
4. the vendors' own variables (`OPENAI_API_KEY`/`OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`/
   `ANTHROPIC_BASE_URL`, `GEMINI_API_KEY`/`GOOGLE_API_KEY`) fill in only what the configuration
   leaves empty — what their official SDKs do, so a key exported for other tools never
   redirects a provider configured for a local server."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # stdlib only at import: the ACP start-up path reads `capability_variables`
    from soulwire.config.model import ModelConfig, ProviderConfig

KIMI_DEFAULT_BASE_URL = "https://api.moonshot.ai/v1"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com"
GEMINI_DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"

DEFAULT_BASE_URLS = {
    "kimi": KIMI_DEFAULT_BASE_URL,
    "openai_legacy": OPENAI_DEFAULT_BASE_URL,
    "openai_responses": OPENAI_DEFAULT_BASE_URL,
    "anthropic": ANTHROPIC_DEFAULT_BASE_URL,
    "gemini": GEMINI_DEFAULT_BASE_URL,
    "google_genai": GEMINI_DEFAULT_BASE_URL,
}


class EnvDefault(NamedTuple):
    """The model used when only an API key is in the environment."""

    model: str
    max_context_size: int
    capabilities: tuple[str, ...]


ENV_DEFAULTS = {
    "kimi": EnvDefault("kimi-k2.6", 262_144, ("thinking", "image_in", "video_in")),
    "openai_responses": EnvDefault("gpt-5", 400_000, ("thinking", "image_in")),
    "openai_legacy": EnvDefault("gpt-5", 400_000, ("thinking", "image_in")),
    "anthropic": EnvDefault("claude-sonnet-4-5", 200_000, ("thinking", "image_in")),
    "gemini": EnvDefault("gemini-2.5-pro", 1_048_576, ("thinking", "image_in")),
}

_OVERRIDE_FIELDS = ("BASE_URL", "API_KEY", "MODEL_NAME", "MODEL_MAX_CONTEXT_SIZE", "MODEL_CAPABILITIES")
_VENDOR_FALLBACKS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # provider type → (API key variables, base URL variables), first set wins
    "openai_legacy": (("OPENAI_API_KEY",), ("OPENAI_BASE_URL",)),
    "openai_responses": (("OPENAI_API_KEY",), ("OPENAI_BASE_URL",)),
    "anthropic": (("ANTHROPIC_API_KEY",), ("ANTHROPIC_BASE_URL",)),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), ()),
    "google_genai": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), ()),
}
KEY_VARIABLES = {
    "kimi": "KIMI_API_KEY",
    "openai_legacy": "OPENAI_API_KEY",
    "openai_responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "google_genai": "GEMINI_API_KEY",
}
GENERIC_KEY_VARIABLE = "SOULWIRE_API_KEY"
"""The API key of any provider type (beside its vendor's variable, `KEY_VARIABLES`)."""
ENV_PROVIDER_NAME = "environment"


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str:
    return next((env[n] for n in names if env.get(n)), "")


def capability_list(text: str) -> list[str]:
    """A `*_MODEL_CAPABILITIES` value as its capabilities (comma-separated, blanks ignored)."""
    return [c.strip() for c in text.split(",") if c.strip()]


def override_prefixes(provider_type: str | None) -> list[str]:
    """The prefixes of the override variables a provider of this type reads, lowest first."""
    return (["KIMI_"] if provider_type == "kimi" else []) + ["SOULWIRE_"]


def capability_variables(provider_type: str | None) -> list[str]:
    """The variables that set a model's capabilities for a provider of this type, highest first."""
    return [prefix + "MODEL_CAPABILITIES" for prefix in reversed(override_prefixes(provider_type))]


def apply_env(
    provider: ProviderConfig, model: ModelConfig, env: Mapping[str, str]
) -> tuple[ProviderConfig, ModelConfig]:
    """The provider and model with the environment applied (see the module docstring)."""
    p: dict[str, object] = {}
    m: dict[str, object] = {}
    keys, urls = _VENDOR_FALLBACKS.get(provider.type, ((), ()))
    if not provider.api_key and _first(env, keys):
        p["api_key"] = _first(env, keys)
    if not provider.base_url and _first(env, urls):
        p["base_url"] = _first(env, urls)
    for prefix in override_prefixes(provider.type):
        values = {f: env.get(prefix + f, "") for f in _OVERRIDE_FIELDS}
        if values["BASE_URL"]:
            p["base_url"] = values["BASE_URL"]
        if values["API_KEY"]:
            p["api_key"] = values["API_KEY"]
        if values["MODEL_NAME"]:
            m["model"] = values["MODEL_NAME"]
        if values["MODEL_MAX_CONTEXT_SIZE"].strip().isdigit() and int(values["MODEL_MAX_CONTEXT_SIZE"]) > 0:
            m["max_context_size"] = int(values["MODEL_MAX_CONTEXT_SIZE"])
        if values["MODEL_CAPABILITIES"]:
            m["capabilities"] = capability_list(values["MODEL_CAPABILITIES"])
    return provider.model_copy(update=p), model.model_copy(update=m)


def env_provider_type(env: Mapping[str, str]) -> str | None:
    """Which provider the environment alone can drive: `SOULWIRE_PROVIDER_TYPE` if set, else
    the first vendor whose key is present (Kimi, OpenAI, Anthropic, Gemini), else an
    OpenAI-compatible server named by `SOULWIRE_BASE_URL` + `SOULWIRE_MODEL_NAME`."""
    explicit = env.get("SOULWIRE_PROVIDER_TYPE", "").strip()
    if explicit:
        return explicit
    if env.get("KIMI_API_KEY") or (env.get("KIMI_BASE_URL") and env.get("KIMI_MODEL_NAME")):
        return "kimi"
    if env.get("OPENAI_API_KEY"):
        base = env.get("SOULWIRE_BASE_URL") or env.get("OPENAI_BASE_URL") or ""
        # Only OpenAI itself is known to serve the Responses API; compatible servers speak Chat.
        return "openai_responses" if not base or "api.openai.com" in base else "openai_legacy"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("GEMINI_API_KEY") or env.get("GOOGLE_API_KEY"):
        return "gemini"
    if env.get("SOULWIRE_BASE_URL") and env.get("SOULWIRE_MODEL_NAME"):
        return "openai_legacy"
    return None


def env_model(
    env: Mapping[str, str], model_name: str | None = None
) -> tuple[ProviderConfig, ModelConfig] | None:
    """A provider and model from the environment alone, or None. `model_name` (an unknown
    `--model`) names the model unless a `*_MODEL_NAME` variable does."""
    from soulwire.config.model import ModelConfig, ProviderConfig

    kind = env_provider_type(env)
    if kind is None:
        return None
    default = ENV_DEFAULTS.get(kind, ENV_DEFAULTS["openai_legacy"])
    provider = ProviderConfig(type=kind)
    model = ModelConfig(
        provider=ENV_PROVIDER_NAME,
        model=model_name or default.model,
        max_context_size=default.max_context_size,
        capabilities=list(default.capabilities),
    )
    return apply_env(provider, model, env)


def model_capabilities(model: ModelConfig) -> frozenset[str]:
    """Configured capabilities plus what the model name implies (spec §8.2)."""
    caps = set(model.capabilities)
    name = model.model.lower()
    if "thinking" in name or "reason" in name:
        caps |= {"thinking", "always_thinking"}
    if name in ("kimi-for-coding", "kimi-code"):
        caps |= {"thinking", "image_in", "video_in"}
    return frozenset(caps)


def missing_key_problem(provider: ProviderConfig, model: ModelConfig) -> str | None:
    """Why the provider cannot work without more configuration, or None. A custom base URL
    may point at a server that needs no key (vLLM, llama.cpp, Ollama …)."""
    if not model.model:
        return f"model {model.provider!r} has no model name (set `model` or SOULWIRE_MODEL_NAME)"
    needs_key = provider.type == "kimi" or provider.base_url in ("", DEFAULT_BASE_URLS.get(provider.type))
    if needs_key and not provider.api_key and not provider.oauth:
        variable = KEY_VARIABLES.get(provider.type, GENERIC_KEY_VARIABLE)
        return (
            f"provider {model.provider!r} ({provider.type}) has no API key: set `api_key` in its "
            f"[providers] entry, or {variable} / {GENERIC_KEY_VARIABLE} in the environment"
        )
    return None


def configuration_hint(config_path: Path | None, share_dir: Path) -> str:
    """The -32001 message when nothing usable is configured: how to configure a model."""
    where = config_path or share_dir / "config.toml"
    return (
        "LLM is not set: no model is configured. Export an API key (KIMI_API_KEY, OPENAI_API_KEY "
        "or ANTHROPIC_API_KEY; SOULWIRE_MODEL_NAME picks the model, SOULWIRE_BASE_URL the server), "
        f"or add [providers.<name>] and [models.<alias>] with default_model to {where}, or pass --config."
    )
