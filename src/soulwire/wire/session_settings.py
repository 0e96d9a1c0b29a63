"""The settings a host gives a session it starts, defined once for every face: the command
line (`soulwire --wire`, `soulwire serve`), the SDK's `Options`, a server's defaults and a
fleet task's engine all compose `SessionSettings`, and `engine_flags` is the one table from a
setting to the engine flag that carries it. Standard library only: the fleet reads it before
pydantic is imported."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal, get_args

SandboxMode = Literal["off", "read-only", "workspace-write"]
"""Where Shell and the file tools may act (`--sandbox`)."""
ApprovalMode = Literal["ask", "on-escape"]
"""`on-escape`: what stays inside the sandbox runs without asking (`--approval`)."""
OverlayMode = Literal["off", "ask", "commit", "discard"]
"""Transactional turns in the sandbox (`--overlay`): each turn's writes land in an overlay,
then committed to the work dir, discarded, or kept pending until the user says (`ask`)."""
SANDBOX_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)
OVERLAY_MODES: tuple[OverlayMode, ...] = get_args(OverlayMode)
APPROVAL_MODES: tuple[ApprovalMode, ...] = get_args(ApprovalMode)


@dataclass(kw_only=True)
class SessionSettings:
    """What every host of sessions may set on each one it starts."""

    model: str | None = None
    """A model alias of the engine's configuration (`--model`); None: its default model."""
    thinking: bool | None = None
    """Thinking on or off (`--thinking`, `--no-thinking`); None: the model's default."""
    yolo: bool = False
    """Approve every tool call without asking (`--yolo`)."""
    max_steps_per_turn: int | None = None
    """The engine's step limit per turn (`--max-steps-per-turn`); None: the config's."""
    sandbox: SandboxMode | None = None
    """Soulwire only: `--sandbox`; None: the session's stored mode, else the config's."""
    sandbox_network: bool | None = None
    """Soulwire only: network inside the sandbox (`--sandbox-network on|off`); None: stored,
    else the config's (default off)."""
    approval: ApprovalMode | None = None
    """Soulwire only: `--approval`; None: the config's `approval`."""
    plan_mode: bool = False
    """Start in plan mode (`--plan`)."""
    checkpoints: bool | None = None
    """Soulwire only: checkpoints of the work dir at every turn (rewind, fork with its files,
    changes; `--checkpoints`, `--no-checkpoints`); None: the config's `[checkpoints] enabled`."""
    overlay: OverlayMode | None = None
    """Soulwire only: with the sandbox on, each turn runs in an overlay and its changes are
    committed, discarded or kept pending for the user (`--overlay`); None: the config's."""

    def engine_flags(self) -> list[str]:
        """The engine's command-line options that carry these settings (the unset ones are left
        out, so an engine that lacks an option is only given it when it is asked for)."""
        flags: list[str] = []
        if self.model is not None:
            flags += ["--model", self.model]
        if self.thinking is not None:
            flags.append("--thinking" if self.thinking else "--no-thinking")
        if self.yolo:
            flags.append("--yolo")
        if self.max_steps_per_turn is not None:
            flags += ["--max-steps-per-turn", str(self.max_steps_per_turn)]
        if self.sandbox is not None:
            flags += ["--sandbox", self.sandbox]
        if self.sandbox_network is not None:
            flags += ["--sandbox-network", "on" if self.sandbox_network else "off"]
        if self.approval is not None:
            flags += ["--approval", self.approval]
        if self.plan_mode:
            flags.append("--plan")
        if self.checkpoints is not None:
            flags.append("--checkpoints" if self.checkpoints else "--no-checkpoints")
        if self.overlay is not None:
            flags += ["--overlay", self.overlay]
        return flags

    def session_settings(self) -> SessionSettings:
        """These settings alone (of a subclass that adds its own), e.g. to start another
        session with them."""
        return SessionSettings(**{f.name: getattr(self, f.name) for f in fields(SessionSettings)})


__all__ = ["APPROVAL_MODES", "SANDBOX_MODES", "ApprovalMode", "SandboxMode", "SessionSettings"]
