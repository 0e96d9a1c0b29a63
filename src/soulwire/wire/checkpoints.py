"""Workspace checkpoints on the Wire (a negotiated extension: a client that declares
`capabilities.supports_checkpoints` in `initialize` gets `CheckpointTaken` events and may call
the `checkpoints`, `changes`, `rewind` and `fork` methods; others see today's protocol)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from soulwire.wire.types import WireModel

CAPABILITY = "supports_checkpoints"
METHODS = ("checkpoints", "changes", "rewind", "fork", "overlay_changes", "overlay_commit", "overlay_discard")

OverlayPolicy = Literal["ask", "commit", "discard"]
"""What happens to an overlay turn's changes when it ends: `ask` keeps them pending until a
face commits or discards them (`overlay_commit`, `overlay_discard`)."""
OVERLAY_POLICIES: tuple[str, ...] = ("ask", "commit", "discard")


class SkippedFile(WireModel):
    path: str
    reason: str
    """Why its bytes were not stored (a size cap): a rewind leaves such a file as it is."""


class CheckpointTaken(WireModel):
    """The engine recorded the workspace (at a turn's start and end, before a step's writing
    tools, around a rewind)."""

    id: str
    turn: int
    kind: Literal["turn", "step", "end", "rewind-before", "rewind", "overlay"] | str
    step: int | None = None
    files: int = 0
    """Files the checkpoint holds."""
    files_changed: int = 0
    """Files whose content or mode differ from the previous checkpoint."""
    bytes_stored: int = 0
    """New bytes the checkpoint stored (contents seen before are stored once)."""
    skipped: list[SkippedFile] = Field(default_factory=list)


class CheckpointsResult(WireModel):
    """`checkpoints`: every checkpoint and rewind of the session, oldest first."""

    enabled: bool
    checkpoints: list[dict[str, Any]] = Field(default_factory=list)


class ChangesParams(WireModel):
    turn: int = Field(ge=1)
    diffs: bool = True


class FileChange(WireModel):
    path: str
    status: Literal["added", "modified", "deleted", "mode"]
    kind: Literal["file", "symlink"] = "file"
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False
    diff: str | None = None
    """A unified diff when both sides are text."""


class StepChanges(WireModel):
    step: int | None = None
    checkpoint: str
    paths: list[str]


class ChangesResult(WireModel):
    """`changes`: what one turn changed, and which step changed which files."""

    turn: int
    checkpoint: str
    files: list[FileChange]
    steps: list[StepChanges] = Field(default_factory=list)


class RewindParams(WireModel):
    """`rewind`: back to the start of `turn` (files, conversation or both), or `undo` the last
    rewind. Refused with error data `{"conflicts": [paths]}` when files changed by hand since
    the session recorded them would be overwritten, unless `force` (a copy of each is kept in
    the checkpoint taken just before, so the rewind can be undone)."""

    turn: int | None = Field(default=None, ge=1)
    files: bool = True
    context: bool = True
    force: bool = False
    undo: bool = False


class RewindResult(WireModel):
    id: str
    files: bool
    context: bool
    restored: list[str]
    """Paths the rewind wrote or deleted."""
    forced: list[str] = Field(default_factory=list)
    """Paths changed by hand that `force` overwrote (kept in checkpoint `before`)."""
    before: str
    """The checkpoint of the workspace just before the rewind."""
    checkpoint: str
    stopped_tasks: list[str] = Field(default_factory=list)
    """Background tasks of the session stopped first."""
    to_turn: int | None = None
    undo_of: str | None = None


class ForkParams(WireModel):
    """`fork`: a new session holding this one's first `turn` turns (all when absent);
    `work_dir`: a new directory for it, holding the files as at the end of that turn (a git
    worktree when the work dir is a git repository, else a copy)."""

    turn: int | None = Field(default=None, ge=0)
    work_dir: str | None = None
    title: str | None = None
    checkpoint: str | None = None
    """Fork at this checkpoint (an id of `checkpoints`) instead of a turn: the new work dir
    holds the files it recorded, the conversation the turns finished before it (all of its
    turn for an `end` checkpoint). Not with `turn`."""


class ForkResult(WireModel):
    session_id: str
    work_dir: str
    files: int = 0
    """Files written into the new work dir."""
    git_worktree: bool = False


class OverlayFile(WireModel):
    path: str
    """Relative to the work dir (absolute in an added dir)."""
    status: Literal["added", "modified", "deleted"]


class OverlayPending(WireModel):
    """A turn ran in an overlay and its changes wait for `overlay_commit` or `overlay_discard`
    (sent just before the turn's `TurnEnd`; a next turn continues in the same overlay)."""

    files: list[OverlayFile]


class OverlayApplied(WireModel):
    """An overlay's changes were committed to the work dir or discarded (by the policy or a
    face). Also the result of `overlay_commit` / `overlay_discard`."""

    action: Literal["commit", "discard"]
    files: list[OverlayFile]
    checkpoint: str | None = None
    """The checkpoint that records a commit (when checkpoints are on)."""
    stopped_tasks: list[str] = Field(default_factory=list)
    """Background tasks of the session stopped first (they ran in the overlay)."""


class OverlayChangesParams(WireModel):
    diffs: bool = True


class OverlayChangesResult(WireModel):
    """`overlay_changes`: the pending overlay's files as a turn's changes are shown (the work
    dir's file against the overlay's, each with a unified diff for text)."""

    files: list[FileChange]


OverlayCommitResult = OverlayApplied
"""`overlay_commit`: what was applied (the reference page finds results by method name)."""
OverlayDiscardResult = OverlayApplied


__all__ = [
    "CAPABILITY",
    "METHODS",
    "OVERLAY_POLICIES",
    "ChangesParams",
    "ChangesResult",
    "CheckpointTaken",
    "CheckpointsResult",
    "FileChange",
    "ForkParams",
    "ForkResult",
    "OverlayApplied",
    "OverlayChangesParams",
    "OverlayChangesResult",
    "OverlayFile",
    "OverlayPending",
    "OverlayPolicy",
    "RewindParams",
    "RewindResult",
    "SkippedFile",
    "StepChanges",
]  # fmt: skip
