"""What the SDK-backed adapters share: their settings, the client (built lazily, no SDK retries),
the streaming loop, timeouts, headers, secret redaction, and the mapping of SDK / HTTP exceptions
onto `soulwire.llm.errors` (so the engine's retry loop, not the SDK's, decides what happens next).
Imports no SDK at module level: an adapter names its SDK, imported at the first request."""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import json
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Self, TypeVar

import anyio.to_thread

from soulwire.config.model import ModelConfig, ProviderConfig
from soulwire.llm.convert import check_media
from soulwire.llm.env import DEFAULT_BASE_URLS, GENERIC_KEY_VARIABLE, KEY_VARIABLES, model_capabilities
from soulwire.llm.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    MalformedResponseError,
    ProviderError,
    status_error,
)
from soulwire.llm.provider import ChatRequest, StreamResult
from soulwire.llm.sdk_import import import_sdk
from soulwire.tls import shared_tls_context
from soulwire.wire.types import WireModel

TIMEOUT_ENV = "SOULWIRE_LLM_TIMEOUT"
DEFAULT_READ_TIMEOUT_S = 300.0
"""Longest silence tolerated from a streaming response before the attempt counts as timed out."""
CONNECT_TIMEOUT_S = 15.0

_SENSITIVE_HEADER = re.compile(r"auth|key|token|secret|cookie|session|signature|password", re.I)
# Error types some providers send in a 200 stream; mapped to the status they stand for.
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "overloaded": 529,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "service_unavailable": 503,
    "timeout_error": 504,
}


def read_timeout(env: Mapping[str, str]) -> float:
    """Seconds of silence before a streaming attempt is abandoned (`SOULWIRE_LLM_TIMEOUT`)."""
    try:
        value = float(env.get(TIMEOUT_ENV, "") or DEFAULT_READ_TIMEOUT_S)
    except ValueError:
        return DEFAULT_READ_TIMEOUT_S
    return value if value > 0 else DEFAULT_READ_TIMEOUT_S


def sdk_timeout(httpx: Any, env: Mapping[str, str]) -> Any:
    """An `httpx2.Timeout`: bounded connect, long but finite reads, no overall limit (a long
    answer may legitimately stream for minutes)."""
    read = read_timeout(env)
    return httpx.Timeout(read, connect=min(CONNECT_TIMEOUT_S, read))


@dataclass
class Redactor:
    """Removes secrets (API keys, sensitive header values) from text that leaves the adapter."""

    secrets: list[str] = field(default_factory=list)

    @classmethod
    def for_provider(cls, api_key: str, headers: Mapping[str, str]) -> Redactor:
        values = [api_key, *(v for k, v in headers.items() if _SENSITIVE_HEADER.search(k))]
        # Longest first, so a secret that contains another is removed whole.
        return cls(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True))

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, or `retry-after` in seconds or as
    an HTTP date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_detail(body: object) -> str:
    """The human part of an error body: `error.message` in the OpenAI and Anthropic shapes."""
    if isinstance(body, Mapping):
        inner: Any = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message")
            if isinstance(message, str) and message:
                return message
        if isinstance(inner, str) and inner:
            return inner
        return json.dumps(body, ensure_ascii=False, default=str)[:500]
    if isinstance(body, str):
        return body.strip()[:500]
    return ""


def _error_kind(body: object) -> str | int | None:
    if not isinstance(body, Mapping):
        return None
    inner: Any = body.get("error", body)
    if not isinstance(inner, Mapping):
        return None
    for key in ("code", "type"):
        value = inner.get(key)
        if isinstance(value, int | str) and value:
            return value
    return None


@dataclass
class ErrorMapper:
    """Turns whatever an SDK raised into a ProviderError with a clean, secret-free text."""

    label: str
    """Names the provider in messages, e.g. "provider 'moonshot' (model 'kimi-k2.6')"."""
    redact: Redactor
    sdk: Any
    httpx: Any
    oauth: bool = False
    key_hint: str = ""

    def __call__(self, exc: BaseException) -> ProviderError:
        if isinstance(exc, ProviderError):
            return exc
        sdk, httpx = self.sdk, self.httpx
        if isinstance(exc, sdk.APITimeoutError | httpx.TimeoutException):
            return APITimeoutError(f"The request to {self.label} timed out.")
        if isinstance(exc, sdk.APIConnectionError | httpx.TransportError):
            cause = exc.__cause__ or exc
            reason = str(cause) or type(cause).__name__
            return APIConnectionError(self.redact(f"Could not reach {self.label}: {reason}"))
        raised: Any = exc
        if isinstance(exc, sdk.APIStatusError):
            headers = getattr(raised.response, "headers", None)
            return self.status(int(raised.status_code), raised.body, headers, fallback=str(raised.message))
        if isinstance(exc, sdk.APIError):  # an error object inside a 200 stream
            return self.stream_error(raised.body, fallback=str(raised.message))
        if isinstance(exc, ValueError):  # undecodable SSE data
            return MalformedResponseError(self.redact(f"Malformed response from {self.label}: {exc}"))
        return ProviderError(self.redact(f"{type(exc).__name__} from {self.label}: {exc}"))

    def status(
        self, status: int, body: object, headers: Mapping[str, str] | None, *, fallback: str = ""
    ) -> ProviderError:
        if status < 400:
            return self.stream_error(body, fallback=fallback)
        detail = self.redact(error_detail(body) or fallback or "no details")
        if status in (401, 403):
            hint = f" {self.key_hint}" if self.key_hint else ""
            return AuthenticationError(
                status,
                f"Authentication failed (HTTP {status}) at {self.label}: {detail}.{hint}",
                oauth=self.oauth,
            )
        text = f"HTTP {status} from {self.label}: {detail}"
        return status_error(status, text, retry_after=retry_after(headers))

    def stream_error(self, body: object, *, fallback: str = "") -> ProviderError:
        """An error reported inside a stream that started with HTTP 200."""
        kind = _error_kind(body)
        detail = self.redact(error_detail(body) or fallback or "unknown error")
        status = kind if isinstance(kind, int) else _STREAM_ERROR_STATUS.get(str(kind or ""))
        if status is not None and status >= 400:
            return self.status(status, body, None, fallback=fallback)
        return ProviderError(f"{self.label} reported an error while streaming: {detail}")


class SharedClients:
    """SDK clients shared by the sessions of one process that talk to the same endpoint with
    the same key: a server hosting many sessions (a fleet's engine) then keeps one connection
    pool per provider instead of one per session, so a session's first request neither
    connects (TCP and TLS handshakes) nor builds a client and its resources. Off unless the
    process turns it on (`enable`): an async client's pool belongs to one event loop, and only
    a host that runs every session on one loop may share it."""

    def __init__(self) -> None:
        self.enabled = False
        self._clients: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def enable(self) -> None:
        self.enabled = True

    def get(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = build()
            return client

    def forget(self, key: tuple[Any, ...], client: Any) -> None:
        """Stop handing out `client` (its connections failed); sessions using it keep it
        until they reset, and it is closed once none holds it."""
        with self._lock:
            if self._clients.get(key) is client:
                del self._clients[key]

    async def aclose(self) -> None:
        """Close every client handed out (the host's sessions have ended)."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await _close_quietly(client)


SHARED_CLIENTS = SharedClients()


class LazyClient:
    """One SDK client per adapter, built at first use (that is when the SDK is imported) and
    rebuilt after a connection failure so a dead keep-alive connection is not reused. It may
    be built from another thread (a preload) while the event loop waits for it. With
    `SHARED_CLIENTS` on and a `key`, adapters with the same key get the same client."""

    def __init__(self, build: Callable[[], Any], key: Callable[[], tuple[Any, ...]] | None = None) -> None:
        self._build = build
        self._key = key
        self._client: Any = None
        self._shared: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    @property
    def built(self) -> bool:
        return self._client is not None

    def get(self) -> Any:
        with self._lock:
            if self._client is None:
                if SHARED_CLIENTS.enabled and self._key is not None:
                    self._shared = self._key()
                    self._client = SHARED_CLIENTS.get(self._shared, self._build)
                else:
                    self._client = self._build()
            return self._client

    async def reset(self) -> None:
        """Drop the client after a connection failure: the next request builds a new one."""
        await self._drop(failed=True)

    async def aclose(self) -> None:
        """Close the client's connections; a shared client stays open for the other sessions
        (`SHARED_CLIENTS.aclose` closes it)."""
        await self._drop(failed=False)

    async def _drop(self, *, failed: bool) -> None:
        with self._lock:
            client, self._client = self._client, None
            shared, self._shared = self._shared, None
        if client is None:
            return
        if shared is not None:  # others may be streaming on it
            if failed:  # no new session gets it; the finalizer closes it once none holds it
                SHARED_CLIENTS.forget(shared, client)
            return
        await _close_quietly(client)


async def _close_quietly(client: Any) -> None:
    """Close an SDK client; closing a broken pool must not mask the error being handled."""
    try:
        await client.close()
    except Exception:
        pass


def _needs_tls(base_url: str) -> bool:
    """Whether requests to `base_url` go over TLS (anything but plain `http://`)."""
    return base_url[:7].lower() != "http://"


def _load_tls() -> None:
    """The shared TLS context, built now (the CA bundle read)."""
    shared_tls_context(importlib.import_module("httpx2"))


_NO_CA: list[Any] = []


def _no_ca_context() -> Any:
    """The TLS context of a client whose base URL is plain HTTP: nothing to verify, so no CA
    bundle is read (a first request's largest cost after the SDK's import). It trusts no
    certificate, so a redirect or proxy that would need TLS fails instead of going unchecked."""
    if not _NO_CA:
        import ssl

        _NO_CA.append(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))  # verifies, with no CA to trust
    return _NO_CA[0]


def _close_soon(http_client: Any) -> None:
    """Close a dropped client's connections on the running loop, as the SDKs do for the HTTP
    client they build themselves (a finalizer has no task group to start a task in)."""
    if http_client.is_closed:
        return
    try:
        asyncio.get_running_loop().create_task(http_client.aclose())
    except RuntimeError:
        pass  # no loop running: the sockets close when the pool is collected


def provider_label(provider_name: str, model_name: str) -> str:
    return f"provider {provider_name!r} (model {model_name!r})"


def env_float(env: Mapping[str, str], *names: str) -> float | None:
    """The first of `names` that holds a number, or None."""
    for name in names:
        try:
            return float(env[name])
        except (KeyError, ValueError):
            continue
    return None


@dataclass(kw_only=True)
class AdapterSettings:
    """Everything an SDK-backed adapter needs, resolved from configuration and environment."""

    provider_name: str
    model_name: str
    base_url: str
    api_key: str
    headers: dict[str, str]
    capabilities: frozenset[str]
    key_variable: str
    """The vendor's API-key variable, named in the hint after an authentication failure."""
    oauth: bool = False
    oauth_ref: Mapping[str, Any] | None = None
    """The provider's `oauth` reference: its token is re-read (and refreshed when due) before
    each request, so a session outlives the token it started with."""
    env: Mapping[str, str] = field(default_factory=dict[str, str])

    @classmethod
    def resolve(
        cls, kind: str, provider: ProviderConfig, model: ModelConfig, env: Mapping[str, str], **extra: Any
    ) -> Self:
        """Settings for a provider of `kind` (which picks the default base URL and key variable);
        `extra` fills the fields a subclass adds."""
        return cls(
            provider_name=model.provider,
            model_name=model.model,
            base_url=provider.base_url or DEFAULT_BASE_URLS[kind],
            api_key=provider.api_key or _oauth_key(provider),
            headers=dict(provider.custom_headers),
            capabilities=model_capabilities(model),
            key_variable=KEY_VARIABLES.get(kind, GENERIC_KEY_VARIABLE),
            oauth=provider.oauth is not None,
            oauth_ref=provider.oauth if not provider.api_key else None,
            env=env,
            **extra,
        )


def _oauth_key(provider: ProviderConfig) -> str:
    """The access token of `soulwire login` for a provider with an `oauth` reference."""
    if provider.oauth is None:
        return ""
    from soulwire.config.credentials import access_token

    return access_token(provider.oauth)


SettingsT = TypeVar("SettingsT", bound=AdapterSettings)


@dataclass(frozen=True)
class Attempt:
    """One streaming request: how to open it on a client, and the parts each SDK event yields."""

    open: Callable[[Any], Awaitable[Any]]
    parts: Callable[[Any], Iterable[WireModel]]


class SDKAdapter(ABC, Generic[SettingsT]):
    """A ChatProvider backed by an official SDK. A subclass names the SDK module and its async
    client class, and builds an `Attempt` per request; the loop here maps every failure (also
    one raised while turning events into parts) onto `soulwire.llm.errors`."""

    sdk_module: ClassVar[str]
    client_class: ClassVar[str]
    platform_in_headers: ClassVar[bool] = False
    """The SDK's first request describes the platform with `platform.platform()` (which runs
    `uname -p` in a child process): the preload asks first, beside the import."""

    def __init__(self, settings: SettingsT) -> None:
        self.settings = settings
        self._client = LazyClient(self._build_client, self._client_key)
        self._preload_lock = threading.Lock()
        self._preloading = False
        self._redact = Redactor.for_provider(settings.api_key, settings.headers)

    @property
    def model_name(self) -> str:
        return self.settings.model_name

    @property
    def capabilities(self) -> frozenset[str]:
        return self.settings.capabilities

    def preload(self) -> None:
        """Import the SDK and build its client: the import, the HTTP stack and the TLS
        context are most of a first request's own cost. Two waits that let other threads run
        go in a thread of their own while this one imports the SDK: the platform description
        of an SDK that sends `platform.platform()` in its headers (the stdlib runs `uname -p`
        in a child process for it, once per process) and the TLS context (OpenSSL reads the
        CA bundle). A request goes through the client's generic `post`, so none of the SDK's
        lazily imported resources (and their types) is needed after that. Once per adapter:
        a later call returns at once (the Wire server asks again at its start, after the
        warm-up did it)."""
        with self._preload_lock:
            again, self._preloading = self._preloading, True
        if again:  # under way (or done): a request waits for the client itself
            return
        side: threading.Thread | None = None
        if self.platform_in_headers or _needs_tls(self.settings.base_url):
            side = threading.Thread(target=self._preload_waits, name="soulwire-sdk-preload", daemon=True)
            side.start()
        self._client.get()
        if side is not None:
            side.join()

    def _preload_waits(self) -> None:
        if self.platform_in_headers:
            import platform

            platform.platform()  # (cached by the stdlib; the SDK's first request reads it)
        if _needs_tls(self.settings.base_url):
            _load_tls()

    async def aclose(self) -> None:
        await self._client.aclose()

    def _client_key(self) -> tuple[Any, ...]:
        """What the built client depends on (adapters with the same key may share one)."""
        s = self.settings
        return (
            self.sdk_module,
            self.client_class,
            s.base_url,
            s.api_key,
            tuple(sorted(s.headers.items())),
            read_timeout(s.env),
        )

    def _build_client(self) -> Any:
        sdk = import_sdk(self.sdk_module)
        httpx = importlib.import_module("httpx2")
        s = self.settings
        timeout = sdk_timeout(httpx, s.env)
        # The SDK's own HTTP client class (its connection limits, redirects, keep-alive), with
        # the shared TLS context instead of a new one per client.
        verify = shared_tls_context(httpx) if _needs_tls(s.base_url) else _no_ca_context()
        http_client = sdk.DefaultAsyncHttpxClient(verify=verify, timeout=timeout)
        client = getattr(sdk, self.client_class)(
            api_key=s.api_key or "EMPTY",  # servers without auth still get a well-formed header
            base_url=s.base_url,
            max_retries=0,  # the engine retries, with StepRetry events
            timeout=timeout,
            default_headers=s.headers or None,
            http_client=http_client,
        )
        weakref.finalize(client, _close_soon, http_client)
        return client

    async def _follow_login_token(self, oauth: Mapping[str, Any]) -> None:
        """A refreshed login token replaces the client's key (the client is rebuilt)."""
        from soulwire.config.credentials import access_token

        key = await anyio.to_thread.run_sync(access_token, dict(oauth))
        if key and key != self.settings.api_key:
            self.settings.api_key = key
            self._redact = Redactor.for_provider(key, self.settings.headers)
            await self._client.reset()

    def _stream_error(self, data: Any) -> BaseException:
        """An error reported inside a stream (an `error` member or `event: error`): the
        `on_error` of `post_events`."""
        return self._errors().stream_error(data)

    def _unloadable(self, exc: Exception) -> ProviderError:
        """The SDK or its client could not be set up (a broken or partial install): said as
        such, since the SDK's own error mapping may be what is missing."""
        label = provider_label(self.settings.provider_name, self.settings.model_name)
        text = f"Cannot set up the {self.sdk_module!r} SDK for {label}: {type(exc).__name__}: {exc}"
        return ProviderError(self._redact(text))

    def _errors(self) -> ErrorMapper:
        s = self.settings
        return ErrorMapper(
            label=provider_label(s.provider_name, s.model_name),
            redact=self._redact,
            sdk=import_sdk(self.sdk_module),
            httpx=importlib.import_module("httpx2"),
            oauth=s.oauth,
            key_hint=f"Check the provider's api_key (or {s.key_variable} / {GENERIC_KEY_VARIABLE}).",
        )

    @abstractmethod
    def _attempt(self, request: ChatRequest, result: StreamResult) -> Attempt:
        """Build the request body and the per-attempt parsing state."""

    async def stream(self, request: ChatRequest, result: StreamResult) -> AsyncIterator[WireModel]:
        s = self.settings
        check_media(request.history, s.capabilities, s.model_name)
        attempt = self._attempt(request, result)
        if s.oauth_ref is not None:
            await self._follow_login_token(s.oauth_ref)
        if not self._client.built:
            # The first import of an SDK takes 0.5 to 1.5 s: in a worker thread the event loop
            # keeps serving (events go out, a `cancel` is answered) while it runs.
            try:
                await anyio.to_thread.run_sync(self._client.get, abandon_on_cancel=True)
            except Exception as exc:
                raise self._unloadable(exc) from None
        try:
            stream = await attempt.open(self._client.get())
            async with stream:
                async for event in stream:
                    for part in attempt.parts(event):
                        yield part
        except Exception as exc:
            error = self._errors()(exc)
            if isinstance(error, APIConnectionError):
                await self._client.reset()
            raise error from None
