"""`WriteFile` and `StrReplaceFile`: file changes the user approves from the exact diff.

The change is computed first, shown as diff blocks in the approval request, and written only
if the file is still what the diff was computed from. Text is handled with the
`surrogateescape` error handler, so bytes that are not UTF-8 survive an edit unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import anyio.to_thread
from pydantic import Field

from soulwire.tools.base import ActionRequest, ToolContext, ToolParams, TypedTool, refused
from soulwire.tools.builtin.diff import diff_blocks
from soulwire.tools.builtin.paths import (
    EDIT_INSIDE,
    EDIT_OUTSIDE,
    Target,
    hidden_by_sandbox,
    hidden_refusal,
    in_sandbox,
    plan_file,
    plan_mode_refusal,
    resolve,
    sensitive_refusal,
    write_crossing,
)
from soulwire.tools.sandbox import leaving_action
from soulwire.wire.types import DiffDisplayBlock, ToolReturnValue, tool_error, tool_ok

_ENCODING = "utf-8"
_DIFF_INLINE_CHARS = 100_000
_ERRORS = "surrogateescape"


def _read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist."""
    try:
        return path.read_bytes().decode(_ENCODING, _ERRORS)
    except FileNotFoundError:
        return None


async def _text_now(ctx: ToolContext, target: Target) -> str | None:
    """The file's text as the user sees it: the editor's buffer when the front end routes file
    access through an editor, else the disk. None when it does not exist."""
    if ctx.files is not None:
        return await ctx.files.read_text(target.real)
    return _read_text(target.io)


async def _current_text(ctx: ToolContext, target: Target, shown: str) -> ToolReturnValue | str | None:
    """The file's text (None when it does not exist), or the error result for a directory or a
    file that cannot be read."""
    if target.io.is_dir():
        return tool_error(f"`{shown}` is a directory.", brief="Not a file")
    try:
        return await _text_now(ctx, target)
    except OSError as exc:
        return tool_error(f"Could not read `{shown}`: {exc.strerror or exc}", brief="Read failed")


def _for_display(text: str) -> str:
    """`text` with undecodable bytes shown as U+FFFD (lone surrogates cannot travel as JSON)."""
    try:
        text.encode(_ENCODING)
    except UnicodeEncodeError:
        return text.encode(_ENCODING, _ERRORS).decode(_ENCODING, "replace")
    return text


def _diff(target: Target, old: str, new: str) -> list[DiffDisplayBlock]:
    return diff_blocks(str(target.path), _for_display(old), _for_display(new))


async def _approve_and_write(
    ctx: ToolContext, *, sender: str, verb: str, target: Target, old: str | None, new: str
) -> ToolReturnValue | list[DiffDisplayBlock]:
    """Ask with the diff, re-check the file, write. Returns the diff, or an error result.
    In plan mode only the plan file may be written, and that needs no approval."""
    plan = plan_file(ctx)
    if plan is not None and target.real != plan:
        return plan_mode_refusal(target, plan)
    if len(old or "") + len(new) > _DIFF_INLINE_CHARS:  # keep the event loop responsive
        blocks = await anyio.to_thread.run_sync(_diff, target, old or "", new, abandon_on_cancel=True)
    else:
        blocks = _diff(target, old or "", new)
    if plan is None:
        action = EDIT_INSIDE if target.inside else EDIT_OUTSIDE
        description = f"{verb} file {target.quoted}"
        crossing = write_crossing(ctx, target)
        if crossing is not None:
            action = leaving_action(EDIT_INSIDE, "write")
            description = f"{description} — it leaves the sandbox: {crossing}"
        refusal = await refused(
            ctx,
            ActionRequest(
                tool_call_id=ctx.tool_call_id,
                sender=sender,
                action=action,
                description=description,
                display=blocks,
                scope_key=str(target.real),
                confined=in_sandbox(ctx) and crossing is None,
                crossing=crossing,
            ),
        )
        if refusal is not None:
            return refusal
    try:
        if await _text_now(ctx, target) != old:
            return tool_error(
                f"`{target.path}` changed while waiting for approval; read it again and redo the change.",
                brief="File changed",
            )
        if ctx.files is not None:
            await ctx.files.write_text(target.real, new)
        else:
            target.io.write_bytes(new.encode(_ENCODING, _ERRORS))
    except OSError as exc:
        return tool_error(f"Could not write `{target.path}`: {exc.strerror or exc}", brief="Write failed")
    return blocks


class WriteFileParams(ToolParams):
    path: str = Field(description="The file: absolute, or relative to the working directory.")
    content: str = Field(description="The text to write.")
    mode: Literal["overwrite", "append"] = Field(
        default="overwrite",
        description="`overwrite` replaces the file (or creates it); `append` adds to its end.",
    )


class WriteFile(TypedTool[WriteFileParams]):
    name = "WriteFile"
    description = (
        "Create a file, replace its whole content, or append to it. The parent directory must "
        "exist. For changes to part of an existing file prefer StrReplaceFile. The user "
        "approves each write from its diff."
    )
    params = WriteFileParams

    async def execute(self, params: WriteFileParams, ctx: ToolContext) -> ToolReturnValue:
        target = resolve(params.path, ctx)
        if hidden_by_sandbox(ctx, target):
            return hidden_refusal(params.path)
        if not target.io.parent.is_dir():
            return tool_error(
                f"The parent directory of `{params.path}` does not exist; create it first.",
                brief="Parent directory not found",
            )
        old = await _current_text(ctx, target, params.path)
        if isinstance(old, ToolReturnValue):
            return old
        append = params.mode == "append"
        new = (old or "") + params.content if append else params.content
        written = await _approve_and_write(
            ctx, sender=self.name, verb="Write", target=target, old=old, new=new
        )
        if isinstance(written, ToolReturnValue):
            return written
        size = len(new.encode(_ENCODING, _ERRORS))
        done = "appended to" if append else "overwritten"
        return tool_ok(
            message=f"File successfully {done}. Current size: {size} bytes.", display=list(written)
        )


class Edit(ToolParams):
    old: str = Field(
        min_length=1, description="The exact text to replace, whitespace and indentation included."
    )
    new: str = Field(description="The replacement text.")
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence. When false, `old` must occur exactly once.",
    )


class StrReplaceFileParams(ToolParams):
    path: str = Field(description="The file: absolute, or relative to the working directory.")
    edit: Edit | Annotated[list[Edit], Field(min_length=1)] = Field(
        description="One edit, or a list of edits applied in order (each sees the result of the previous)."
    )


def apply_edits(text: str, edits: list[Edit]) -> tuple[str, int] | str:
    """The edited text and the number of replacements, or why an edit cannot apply."""
    replacements = 0
    for index, edit in enumerate(edits, start=1):
        label = f"Edit {index}: " if len(edits) > 1 else ""
        old, new = edit.old, edit.new
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
            # The file uses CRLF line endings and the model wrote LF.
            crlf_old = old.replace("\n", "\r\n")
            if crlf_old in text:
                old, new = crlf_old, new.replace("\r\n", "\n").replace("\n", "\r\n")
                count = text.count(old)
        if count == 0:
            earlier = " after the earlier edits" if index > 1 else ""
            return (
                f"{label}`old` was not found in the file{earlier}. Copy it exactly from the file "
                "(whitespace and indentation included); read the file again if unsure."
            )
        if count > 1 and not edit.replace_all:
            return (
                f"{label}`old` occurs {count} times. Include more surrounding text to make it unique, "
                "or set replace_all to true to replace every occurrence."
            )
        text = text.replace(old, new) if edit.replace_all else text.replace(old, new, 1)
        replacements += count if edit.replace_all else 1
    return text, replacements


class StrReplaceFile(TypedTool[StrReplaceFileParams]):
    name = "StrReplaceFile"
    description = (
        "Edit an existing file by replacing exact text. Each edit's `old` must occur exactly once "
        "unless replace_all is set; several edits can be given as a list and are applied in "
        "order, all or nothing. The user approves the change from its diff."
    )
    params = StrReplaceFileParams

    async def execute(self, params: StrReplaceFileParams, ctx: ToolContext) -> ToolReturnValue:
        target = resolve(params.path, ctx)
        if target.sensitive():
            # Its errors ("not found", "occurs 2 times") would let a model probe the secret.
            return sensitive_refusal(params.path)
        if hidden_by_sandbox(ctx, target):
            return hidden_refusal(params.path)
        old = await _current_text(ctx, target, params.path)
        if isinstance(old, ToolReturnValue):
            return old
        if old is None:
            return tool_error(
                f"`{params.path}` does not exist (use WriteFile to create it).", brief="File not found"
            )
        if "\0" in old:
            return tool_error(f"`{params.path}` looks like a binary file.", brief="Binary file")
        edits = params.edit if isinstance(params.edit, list) else [params.edit]
        applied = apply_edits(old, edits)
        if isinstance(applied, str):
            return tool_error(applied, brief="Edit not applied")
        new, replacements = applied
        if new == old:
            return tool_error("The edits leave the file unchanged.", brief="No change")
        written = await _approve_and_write(
            ctx, sender=self.name, verb="Edit", target=target, old=old, new=new
        )
        if isinstance(written, ToolReturnValue):
            return written
        return tool_ok(
            message=f"File successfully edited: {len(edits)} edit(s), {replacements} replacement(s).",
            display=list(written),
        )
