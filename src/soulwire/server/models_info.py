"""The models a server's sessions may use (the configuration's `[models]`, plus the server's
`--model`), which one is the default, and what each costs: prices come from the one price
table of the project (`soulwire.sdk.pricing`, as fleets and `--print` use it); a model
without a price there has none here either (the trace view then says the cost is unknown)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from soulwire.errors import SoulwireError

if TYPE_CHECKING:
    from soulwire.server.registry import ServeSettings


class UnknownModel(SoulwireError, ValueError):
    """A session asked for a model the server does not offer."""


class Price(BaseModel):
    """USD per million tokens (cache prices default to the input price)."""

    input: float
    output: float
    cache_read: float
    cache_write: float


class ModelInfo(BaseModel):
    alias: str
    model: str = Field(description="the provider's name of the model (what prices are listed by)")
    provider: str | None = None
    display_name: str | None = None
    max_context_size: int | None = None
    capabilities: list[str] = Field(default_factory=list[str])
    price: Price | None = Field(default=None, description="null: no price is known for this model")


class ModelList(BaseModel):
    default: str | None = Field(description="the alias sessions use unless they name another")
    models: list[ModelInfo]


def price_of(model_name: str | None) -> Price | None:
    # The table lives in the SDK package, whose __init__ costs ~0.1 s to import: loaded at
    # first use (the server warms it in the background once it listens).
    from soulwire.sdk.pricing import price_for

    found = price_for(model_name)
    if found is None:
        return None
    return Price(
        input=found.input,
        output=found.output,
        cache_read=found.input if found.cache_read is None else found.cache_read,
        cache_write=found.input if found.cache_write is None else found.cache_write,
    )


def _configured(settings: ServeSettings) -> dict[str, dict[str, Any]]:
    models = settings.raw_config.get("models")
    if not isinstance(models, dict):
        return {}
    return {str(k): v for k, v in models.items() if isinstance(v, dict)}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def default_model(settings: ServeSettings) -> str | None:
    """The server's `--model`, else the configuration's `default_model`."""
    chosen = settings.model or settings.raw_config.get("default_model")
    return chosen if isinstance(chosen, str) and chosen else None


def list_models(settings: ServeSettings, *, priced: bool = True) -> ModelList:
    configured = _configured(settings)
    infos: list[ModelInfo] = []
    for alias, entry in configured.items():
        name = _text(entry.get("model")) or alias
        caps = entry.get("capabilities")
        if isinstance(caps, dict):
            caps = [k for k, v in caps.items() if v]
        size = entry.get("max_context_size")
        infos.append(
            ModelInfo(
                alias=alias,
                model=name,
                provider=_text(entry.get("provider")),
                display_name=_text(entry.get("display_name")),
                max_context_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
                capabilities=[str(c) for c in caps] if isinstance(caps, list) else [],
                price=price_of(name) if priced else None,
            )
        )
    default = default_model(settings)
    if default is not None and default not in configured:  # a --model the environment serves
        infos.insert(0, ModelInfo(alias=default, model=default, price=price_of(default) if priced else None))
    return ModelList(default=default, models=infos)


def check_model(settings: ServeSettings, alias: str) -> None:
    """UnknownModel unless `alias` is one of the models this server offers."""
    known = [m.alias for m in list_models(settings, priced=False).models]
    if alias not in known:
        offered = ", ".join(known) or "none are configured"
        raise UnknownModel(f"unknown model {alias!r}: the configured models are {offered}")


def session_model(settings: ServeSettings, state: dict[str, Any], *, priced: bool = True) -> ModelInfo | None:
    """The model a session runs with: the one it was created with, else the server's default."""
    stored = state.get("model")
    alias = stored if isinstance(stored, str) and stored else default_model(settings)
    if alias is None:
        return None
    for info in list_models(settings, priced=priced).models:
        if info.alias == alias:
            return info
    return ModelInfo(alias=alias, model=alias, price=price_of(alias) if priced else None)


__all__ = ["ModelInfo", "ModelList", "Price", "UnknownModel", "check_model", "list_models", "session_model"]
