"""Audio for models that cannot hear it: an `audio_url` part is never a reason to refuse a
prompt. A model that declares `audio_in` gets the audio; any other model gets, in its place,
a short note saying an audio clip was attached and not passed on. The context keeps the
audio itself, so switching to a model that takes audio later passes it on after all."""

from __future__ import annotations

from collections.abc import Sequence

from soulwire.llm.message import Message
from soulwire.wire.types import AudioURLPart, TextPart

AUDIO_CAPABILITY = "audio_in"


def audio_note(model_name: str) -> str:
    return (
        f"<system>The user attached an audio clip here. It was not passed on: the model "
        f"`{model_name}` does not take audio input. If its content matters, ask the user "
        "for a transcript or a summary.</system>"
    )


def holds_audio(message: Message) -> bool:
    """Whether the message has an audio part."""
    content = message.content
    return not isinstance(content, str) and any(isinstance(p, AudioURLPart) for p in content)


def for_hearing(history: Sequence[Message], capabilities: frozenset[str], model_name: str) -> list[Message]:
    """`history` as the model may receive it: unchanged for a model with `audio_in`, else
    every audio part replaced by the note (messages without audio are the same objects)."""
    if AUDIO_CAPABILITY in capabilities:
        return list(history)
    out: list[Message] = []
    for message in history:
        if not holds_audio(message):
            out.append(message)
            continue
        note = TextPart(text=audio_note(model_name))
        parts = [note if isinstance(p, AudioURLPart) else p for p in message.content]
        out.append(message.model_copy(update={"content": parts}))
    return out
