"""The built-in tools of the default agent (spec §9)."""

from __future__ import annotations

from soulwire.tools.base import Tool


def default_tools() -> list[Tool]:
    """A fresh set of the built-in tools, in the order the model sees them."""
    from soulwire.tools.builtin.edit import StrReplaceFile, WriteFile
    from soulwire.tools.builtin.read import ReadFile
    from soulwire.tools.builtin.search import Glob, Grep
    from soulwire.tools.builtin.shell import Shell
    from soulwire.tools.builtin.think import Think
    from soulwire.tools.builtin.todo import SetTodoList

    return [SetTodoList(), Shell(), ReadFile(), Glob(), Grep(), WriteFile(), StrReplaceFile(), Think()]
