"""Provider errors. The engine decides retries from `retryable` (spec §4.5)."""

from __future__ import annotations

import re

from soulwire.errors import SoulwireError

# 529 is Anthropic's "overloaded": transient like a 503, so it is retried too.
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504, 529})


class ProviderError(SoulwireError):
    """A model call failed. Not retried unless a subclass says so. (The SDK's
    `ChatProviderError` is what a client receives for it: JSON-RPC -32003.)"""

    retryable = False
    status_code: int | None = None

    @property
    def error_type(self) -> str:
        """The name clients (`StepRetry.error_type`) and StopFailure hooks see: the class's, the
        root's under the reference's name."""
        cls = type(self)
        return "ChatProviderError" if cls is ProviderError else cls.__name__


class APIStatusError(ProviderError):
    """The provider answered with an HTTP error status."""

    def __init__(self, status_code: int, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return self.status_code in RETRYABLE_STATUS


class AuthenticationError(APIStatusError):
    """401/403: the key or login is not accepted. `oauth` marks a provider that logs in with
    OAuth, whose 401 the Wire server reports as an expired login (-32004)."""

    def __init__(self, status_code: int, message: str, *, oauth: bool = False) -> None:
        super().__init__(status_code, message)
        self.oauth = oauth


class ContextLengthExceededError(APIStatusError):
    """The request does not fit the model's context window (an HTTP 400 of a known shape).
    The engine may compact the context and try once more."""


_CONTEXT_OVERFLOW = re.compile(
    r"context[_ ]length|context window|maximum context|prompt is too long|too many tokens|"
    r"input is too long|token limit|exceeds? the (?:model'?s? )?(?:context|maximum)|reduce the length",
    re.I,
)


def status_error(status_code: int, message: str, *, retry_after: float | None = None) -> APIStatusError:
    """The error for an HTTP status: a 400/413 that says the context is too long becomes
    ContextLengthExceededError (the engine compacts and tries once more)."""
    if status_code in (400, 413) and _CONTEXT_OVERFLOW.search(message):
        return ContextLengthExceededError(status_code, message)
    return APIStatusError(status_code, message, retry_after=retry_after)


class APIConnectionError(ProviderError):
    retryable = True


class APITimeoutError(APIConnectionError):
    retryable = True


class APIEmptyResponseError(ProviderError):
    """The model produced no text and no tool call (thinking alone counts as empty)."""

    retryable = True


class MalformedResponseError(ProviderError):
    """The provider sent something that is not its documented format (never retried)."""


class LLMNotSet(SoulwireError):
    """No usable model is configured."""


class LLMNotSupported(SoulwireError):
    """The input needs capabilities the model lacks."""

    def __init__(self, model: str, missing: list[str]) -> None:
        noun = "capability" if len(missing) == 1 else "capabilities"
        super().__init__(f"LLM model '{model}' does not support required {noun}: {', '.join(missing)}.")
        self.missing = missing
