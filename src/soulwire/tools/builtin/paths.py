"""Where the file tools may act.

* The workspace is the work dir plus the added dirs (`--add-dir`). Anything else — reads
  included — needs the user's approval.
* Paths are judged by where they really lead: a symlink inside the workspace that points out
  of it counts as outside, so links cannot be used to escape.
* Secret files (dotenv files, SSH keys, cloud and tool credentials, private keys) are never
  read, searched or edited in place, whatever the approval (WriteFile may still replace
  one: that reveals nothing of it).
* In a sandbox (`ctx.sandbox`) the file tools obey the policy Shell commands run under: what
  the sandbox hides cannot be read or searched at all; reads elsewhere stay inside the
  sandbox (`confined`); a write the sandbox would not allow crosses its boundary and only a
  person can approve it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import NamedTuple

from soulwire.tools.base import PLAN_FILE_KEY, ActionRequest, ToolContext, refused
from soulwire.wire.types import BriefDisplayBlock, ToolReturnValue, tool_error

"""Set in the session state (`ctx.state`) by the engine while plan mode is on: the plan file's
path, then the only file WriteFile and StrReplaceFile may change (and without asking)."""

EDIT_INSIDE = "edit file"
EDIT_OUTSIDE = "edit file outside of working directory"
READ_OUTSIDE = "read file outside of working directory"
SEARCH_OUTSIDE = "search outside of working directory"

_SECRET_NAMES = frozenset(
    {
        ".env",
        ".netrc",
        ".pgpass",
        ".git-credentials",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "id_ecdsa_sk",
        "id_ed25519_sk",
        "application_default_credentials.json",  # gcloud
        "credentials.db",  # gcloud
        "access_tokens.db",  # gcloud
        "accessTokens.json",  # azure
        "msal_token_cache.json",  # azure
        "msal_token_cache.bin",  # azure
    }
)
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".ppk")
# Files that only make sense as credentials when they sit in a tool's own directory.
_SECRET_IN_DIR = frozenset({(".aws", "credentials"), (".kube", "config"), (".docker", "config.json")})
# `.env.example` and friends document variables without holding their values.
_DOTENV_TEMPLATES = frozenset({"example", "sample", "template", "dist", "defaults"})
_SSH_PUBLIC = frozenset({"known_hosts", "known_hosts.old", "authorized_keys", "config"})


def is_sensitive(path: PurePath | str) -> bool:
    """True for files that typically hold credentials or private keys."""
    path = PurePath(path)
    name = path.name
    if name in _SECRET_NAMES or name.lower().endswith(_SECRET_SUFFIXES):
        return True
    if name.startswith(".env.") and name.rsplit(".", 1)[-1] not in _DOTENV_TEMPLATES:
        return True
    parent = path.parent.name
    if (parent, name) in _SECRET_IN_DIR:
        return True
    if parent == ".ssh" and not name.endswith(".pub") and name not in _SSH_PUBLIC:
        return True
    return "legacy_credentials" in path.parts  # gcloud


class Target(NamedTuple):
    """A path named by the model, judged against the workspace."""

    path: Path
    """Absolute and normalised, symlinks kept: how the user knows it."""
    real: Path
    """Symlinks resolved: what is actually read or written."""
    inside: bool
    at: Path | None = None
    """Where this process reads and writes it, when not `real` itself: inside the turn's
    overlay (see `SandboxPolicy.view`)."""

    @property
    def io(self) -> Path:
        """The path to read and write (`real`, or its place in the turn's overlay)."""
        return self.real if self.at is None else self.at

    @property
    def quoted(self) -> str:
        """The path for messages, in backticks, with the link target when it differs."""
        return f"`{self.path}` (→ `{self.real}`)" if self.real != self.path else f"`{self.path}`"

    def sensitive(self) -> bool:
        return is_sensitive(self.path) or is_sensitive(self.real)


def workspace_roots(ctx: ToolContext) -> list[Path]:
    return [Path(os.path.realpath(d)) for d in (ctx.work_dir, *ctx.additional_dirs)]


def is_inside(real: Path, roots: Sequence[Path]) -> bool:
    return any(real == root or real.is_relative_to(root) for root in roots)


def resolve(raw: str, ctx: ToolContext) -> Target:
    """Judge `raw` (absolute, `~`-relative, or relative to the work dir)."""
    candidate = Path(raw).expanduser()
    if not candidate.is_absolute():
        candidate = ctx.work_dir / candidate
    path = Path(os.path.normpath(candidate))
    real = Path(os.path.realpath(path))
    at = ctx.sandbox.view(real) if ctx.sandbox is not None else real
    return Target(path, real, is_inside(real, workspace_roots(ctx)), None if at == real else at)


def in_sandbox(ctx: ToolContext) -> bool:
    return ctx.sandbox is not None and ctx.sandbox.active


def hidden_by_sandbox(ctx: ToolContext, target: Target) -> bool:
    """The sandbox hides `target` from the file tools (never the plan file, which plan mode
    lets the model read and write although it lives in the hidden share dir)."""
    return ctx.sandbox is not None and target.real != plan_file(ctx) and ctx.sandbox.hides(target.real)


def hidden_refusal(raw: str) -> ToolReturnValue:
    return tool_error(
        f"`{raw}` is hidden by the sandbox (it holds the user's credentials); neither commands nor "
        "file tools can see it. Ask the user for what you need instead.",
        brief="Hidden by the sandbox",
    )


def write_crossing(ctx: ToolContext, target: Target) -> str | None:
    """The sandbox boundary a write to `target` would cross, or None (no sandbox, or allowed)."""
    return None if ctx.sandbox is None else ctx.sandbox.write_boundary(target.real)


def sensitive_refusal(raw: str) -> ToolReturnValue:
    return tool_error(
        f"`{raw}` looks like a secret (credentials or a private key), so it is not read. "
        "Ask the user for the specific value you need instead.",
        brief="Sensitive file",
    )


def plan_file(ctx: ToolContext) -> Path | None:
    """The plan file while plan mode is on, else None."""
    value = ctx.state.get(PLAN_FILE_KEY)
    return Path(value) if isinstance(value, str) and value else None


def plan_mode_refusal(target: Target, plan: Path) -> ToolReturnValue:
    return tool_error(
        f"Plan mode is on: {target.quoted} cannot be changed. The only file you may write now is the "
        f"plan file `{plan}`; the user approves the plan (ExitPlanMode) before anything else changes.",
        brief="Blocked in plan mode",
    )


async def approve_outside(
    ctx: ToolContext, target: Target, *, sender: str, action: str, description: str
) -> ToolReturnValue | None:
    """Ask before touching a path outside the workspace; None when allowed (or inside)."""
    if target.inside or target.real == plan_file(ctx):
        return None
    return await refused(
        ctx,
        ActionRequest(
            tool_call_id=ctx.tool_call_id,
            sender=sender,
            action=action,
            description=description,
            display=[BriefDisplayBlock(text=f"{description} (outside the workspace)")],
            scope_key=str(target.real),
            confined=in_sandbox(ctx),  # the sandbox lets commands read there too
        ),
    )


async def file_to_read(
    raw: str, ctx: ToolContext, *, sender: str, not_a_file: tuple[str, str]
) -> Target | ToolReturnValue:
    """The checks every reading tool makes, in order: secrets refused, the file must exist and
    be a regular file (`not_a_file` is the tool's (message, brief) otherwise), and a path
    outside the workspace needs approval. Returns the target, or the error result."""
    target = resolve(raw, ctx)
    if target.sensitive():
        return sensitive_refusal(raw)
    if hidden_by_sandbox(ctx, target):
        return hidden_refusal(raw)
    if not target.io.exists():
        return tool_error(f"`{raw}` does not exist.", brief="File not found")
    if not target.io.is_file():
        return tool_error(not_a_file[0], brief=not_a_file[1])
    refused = await approve_outside(
        ctx, target, sender=sender, action=READ_OUTSIDE, description=f"Read file {target.quoted}"
    )
    return target if refused is None else refused
