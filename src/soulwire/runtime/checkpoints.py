"""Checkpoints in a live session: the book built from the configuration, the soul's
workspace hooks, and the operations a face asks for (rewind, undo, fork) with what they
need around them — background tasks stopped first, the in-memory context read again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from soulwire.config.model import CheckpointsConfig
from soulwire.sessions.checkpoints.book import CheckpointBook, CheckpointError, CheckpointsOff
from soulwire.sessions.checkpoints.ignore import DEFAULT_EXCLUDES
from soulwire.sessions.store import SessionStore

if TYPE_CHECKING:
    from soulwire.runtime.builder import Runtime

STOP_REASON = "Stopped before a rewind"
SHOWN_PATHS = 6


def paths_summary(changes: dict[str, Any]) -> str:
    """The paths a `changes` answer names, a few of them ("a.txt, b.txt and 3 more")."""
    paths = [str(f["path"]) for f in changes["files"]]
    if not paths:
        return "no files"
    shown = ", ".join(paths[:SHOWN_PATHS])
    return shown + (f" and {len(paths) - SHOWN_PATHS} more" if len(paths) > SHOWN_PATHS else "")


def turn_prompts(runtime: Runtime) -> list[str]:
    """The prompt of each turn of the session (turn 1 first), as recorded."""
    return prompts_of(runtime.session.store.wire_records())


def prompts_of(messages: Iterable[dict[str, Any]]) -> list[str]:
    """The prompt of each turn (turn 1 first) of Wire messages (`type`, `payload`) as
    recorded or replayed: the text of its text parts, for a prompt of parts."""
    prompts: list[str] = []
    depth = 0
    for message in messages:
        kind = message.get("type")
        if kind == "TurnBegin":
            if depth == 0:
                raw = message.get("payload", {}).get("user_input")
                parts: list[Any] = raw if isinstance(raw, list) else []
                texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
                prompts.append(raw if isinstance(raw, str) else " ".join(str(t) for t in texts))
            depth += 1
        elif kind == "TurnEnd":
            depth = max(depth - 1, 0)
    return prompts


def checkpoint_book(
    store: SessionStore, work_dir: str | Path, add_dirs: Sequence[str | Path], config: CheckpointsConfig
) -> CheckpointBook:
    return CheckpointBook(
        store,
        str(work_dir),
        [str(d) for d in add_dirs],
        excludes=DEFAULT_EXCLUDES if config.exclude is None else config.exclude,
        max_file_bytes=config.max_file_bytes,
        max_checkpoint_bytes=config.max_checkpoint_bytes,
    )


def stored_book(share: Path, work_dir: str, session_id: str) -> CheckpointBook:
    """The checkpoints of a session on disk (not running here), with the configuration's
    `[checkpoints]` settings."""
    from soulwire.config.loader import load_raw_config
    from soulwire.sessions.store import FileSessionStore

    raw, _ = load_raw_config(config_file=None, config_text=None, share=share)
    section = raw.get("checkpoints")
    config = CheckpointsConfig.model_validate(section if isinstance(section, dict) else {})
    store = FileSessionStore(share, work_dir, session_id, protocol_version="")
    add_dirs = [d for d in store.load_state().get("additional_dirs") or [] if isinstance(d, str)]
    return checkpoint_book(store, work_dir, add_dirs, config)


def enable_checkpoints(runtime: Runtime) -> None:
    """Give the soul its workspace hooks (the configuration turned checkpoints on)."""
    from soulwire.engine.workspace import Workspace

    config = runtime.config.checkpoints
    book = checkpoint_book(
        runtime.session.store, runtime.options.work_dir, runtime.soul.additional_dirs, config
    )
    runtime.soul.workspace = Workspace(book, runtime.bus, writing_tools=config.writing_tools)


def book_of(runtime: Runtime) -> CheckpointBook:
    workspace = runtime.soul.workspace
    if workspace is None:
        raise CheckpointsOff("checkpoints are off for this session (--checkpoints, or [checkpoints] enabled)")
    return workspace.book


async def stop_background(runtime: Runtime) -> list[str]:
    tasks = runtime.tasks
    if tasks is None:
        return []
    running = tasks.running()
    for task in running:
        tasks.request_stop(task, STOP_REASON)
    with anyio.move_on_after(tasks.limits.kill_grace_s + 5):
        for task in running:
            await task.ended.wait()
    return [t.id for t in running]


async def rewind(
    runtime: Runtime,
    *,
    turn: int | None,
    files: bool = True,
    context: bool = True,
    force: bool = False,
    undo: bool = False,
) -> dict[str, Any]:
    """Rewind the session (or undo its last rewind) while no turn runs."""
    book = book_of(runtime)
    workspace = runtime.soul.workspace
    assert workspace is not None
    if not undo and turn is None:
        raise CheckpointError("rewind needs a turn (or undo)")
    stopped = await stop_background(runtime)
    runtime.bus.flush()
    if undo:
        job = partial(book.undo, force=force, current_turn=workspace.turn)
    else:
        assert turn is not None
        job = partial(
            book.rewind, turn, files=files, context=context, force=force, current_turn=workspace.turn
        )
    result = await anyio.to_thread.run_sync(job)
    runtime.soul.context.reload()
    workspace.after_rewind()
    return {**result, "stopped_tasks": stopped}


async def fork(
    runtime: Runtime,
    *,
    turn: int | None,
    work_dir: str | None = None,
    title: str | None = None,
    checkpoint: str | None = None,
) -> dict[str, Any]:
    """A new session from this one's first `turn` turns (and its checkpoints up to there),
    optionally with its own work dir holding the files as at the end of that turn; or at a
    `checkpoint` (its files, the turns finished before it)."""
    from soulwire.sessions.checkpoints.forking import fork_with_files
    from soulwire.sessions.fork import fork_from_store

    store = runtime.session.store
    runtime.bus.flush()
    store.sync()
    if runtime.soul.workspace is None and work_dir is None and checkpoint is None:
        job = partial(fork_from_store, store, store.work_dir, turns=turn, title=title)
        new_id = await anyio.to_thread.run_sync(job)  # a directory copied, or a database's rows
        return {"session_id": new_id, "work_dir": store.work_dir, "files": 0, "git_worktree": False}
    job = partial(
        fork_with_files,
        book_of(runtime),
        store.share,
        store.dir,
        turns=turn,
        new_work_dir=work_dir,
        title=title,
        checkpoint=checkpoint,
    )
    return await anyio.to_thread.run_sync(job)
