"""The built-in tools of the default agent (spec §9)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulwire.tools.base import Tool
from soulwire.tools.names import MEDIA_CAPABILITIES

if TYPE_CHECKING:
    from soulwire.config.model import ServicesConfig
    from soulwire.tools.builtin.background import BackgroundTasks


def default_tools(
    tasks: BackgroundTasks | None = None,
    *,
    capabilities: frozenset[str] = frozenset(),
    sandboxed: bool = False,
    services: ServicesConfig | None = None,
) -> list[Tool]:
    """A fresh set of the built-in tools, in the order the model sees them. With `tasks`,
    Shell can start background tasks and the Task* tools manage them. `capabilities` are the
    model's: ReadMediaFile is offered only to a model that takes images or videos. In a
    `sandboxed` session Shell offers `sandbox_escape`. SearchWeb is offered only with a
    `[services.moonshot_search]` service; FetchURL uses `moonshot_fetch` when there is one."""
    from soulwire.tools.builtin.edit import StrReplaceFile, WriteFile
    from soulwire.tools.builtin.fetch import FetchURL
    from soulwire.tools.builtin.read import ReadFile
    from soulwire.tools.builtin.search import Glob, Grep
    from soulwire.tools.builtin.shell import Shell
    from soulwire.tools.builtin.tasks import TaskList, TaskOutput, TaskStop
    from soulwire.tools.builtin.todo import SetTodoList

    task_tools: list[Tool] = [TaskList(tasks), TaskOutput(tasks), TaskStop(tasks)] if tasks else []
    media: list[Tool] = []
    if capabilities & MEDIA_CAPABILITIES:  # the module is loaded only for such a model
        from soulwire.tools.builtin.media import ReadMediaFile

        media.append(ReadMediaFile(capabilities))
    web: list[Tool] = []
    if services is not None and services.moonshot_search is not None:
        from soulwire.tools.builtin.web_service import SearchWeb

        web.append(SearchWeb(services.moonshot_search))
    return [
        SetTodoList(),
        Shell(tasks, sandboxed=sandboxed),
        *task_tools,
        ReadFile(),
        *media,
        Glob(),
        Grep(),
        WriteFile(),
        StrReplaceFile(),
        *web,
        FetchURL(services.moonshot_fetch if services is not None else None),
    ]
