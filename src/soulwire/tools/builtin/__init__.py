"""The built-in tools of the default agent (spec §9)."""

from __future__ import annotations

from soulwire.tools.base import Tool


def default_tools(*, capabilities: frozenset[str] = frozenset()) -> list[Tool]:
    """A fresh set of the built-in tools, in the order the model sees them. `capabilities` are
    the model's: ReadMediaFile is offered only to a model that takes images or videos."""
    from soulwire.tools.builtin.edit import StrReplaceFile, WriteFile
    from soulwire.tools.builtin.fetch import FetchURL
    from soulwire.tools.builtin.media import MEDIA_CAPABILITIES, ReadMediaFile
    from soulwire.tools.builtin.read import ReadFile
    from soulwire.tools.builtin.search import Glob, Grep
    from soulwire.tools.builtin.shell import Shell
    from soulwire.tools.builtin.think import Think
    from soulwire.tools.builtin.todo import SetTodoList

    media: list[Tool] = [ReadMediaFile(capabilities)] if capabilities & MEDIA_CAPABILITIES else []
    return [
        SetTodoList(),
        Shell(),
        ReadFile(),
        *media,
        Glob(),
        Grep(),
        WriteFile(),
        StrReplaceFile(),
        FetchURL(),
        Think(),
    ]
