"""Agent files (`--agent-file PATH`, `--agent default|okabe`): the reference's YAML format.

```yaml
version: 1
agent:
  extend: default            # or a path, relative to this file
  name: reviewer
  system_prompt_path: ./system.md
  system_prompt_args: {ROLE_ADDITIONAL: "You review code."}
  tools: ["kimi_cli.tools.shell:Shell", "ReadFile", ...]   # module paths or plain names
  exclude_tools: [Shell]
  subagents:
    fixer: {path: ./fixer.yaml, description: "Fixes what the review found."}
  acp_agents:                # other ACP agents as sub-agent types (as `[acp_agents]` in config)
    kimi: {command: [kimi, acp], description: "The Kimi CLI."}
```

`extend` starts from another file: every key given here replaces the base's, except
`system_prompt_args`, which are merged. The system prompt is a template: `${NAME}` takes a
`system_prompt_args` entry or a built-in argument (`KIMI_WORK_DIR`, `KIMI_NOW`, `KIMI_OS`,
`KIMI_SHELL`, `KIMI_WORK_DIR_LS`, `KIMI_ADDITIONAL_DIRS_INFO`, `KIMI_AGENTS_MD`,
`KIMI_SKILLS`), and `{% if %}` blocks work as in the reference (Jinja, loaded only then).

Anything wrong — a missing file, bad YAML, an unknown key type or tool name, a missing
template argument — is an `AgentSpecError` whose message names the file: the command line
reports it on one line and exits 2."""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from soulwire.config.loader import ConfigError

AGENTS_DIR = Path(__file__).with_name("agents")
BUILTIN_AGENTS = {
    "default": AGENTS_DIR / "default" / "agent.yaml",
    "okabe": AGENTS_DIR / "okabe" / "agent.yaml",
}
SPEC_VERSIONS = ("1",)
KNOWN_TOOLS = frozenset(
    {
        "Agent", "AskUserQuestion", "SetTodoList", "Shell", "TaskList", "TaskOutput", "TaskStop",
        "ReadFile", "ReadMediaFile", "Glob", "Grep", "WriteFile", "StrReplaceFile", "SearchWeb",
        "FetchURL", "ExitPlanMode", "EnterPlanMode", "SendDMail", "Think",
    }
)  # fmt: skip
"""Tool names an agent file may list. `SearchWeb` is offered only with its service
configured; `ReadMediaFile` only to a model that takes images or video."""
_KEYS = {
    "extend", "name", "system_prompt_path", "system_prompt_args", "model", "when_to_use", "tools",
    "allowed_tools", "exclude_tools", "subagents", "acp_agents",
}  # fmt: skip
_VARIABLE = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")


class AgentSpecError(ConfigError):
    """An agent file that cannot be used (the message names the file and the problem)."""


@dataclass(frozen=True)
class SubagentRef:
    path: Path
    description: str


@dataclass
class AgentSpec:
    """An agent file with `extend` resolved."""

    file: Path
    name: str = ""
    system_prompt_path: Path | None = None
    system_prompt_args: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    when_to_use: str = ""
    tools: list[str] = field(default_factory=list)
    allowed_tools: list[str] | None = None
    exclude_tools: list[str] = field(default_factory=list)
    subagents: dict[str, SubagentRef] = field(default_factory=dict)
    acp_agents: dict[str, Any] = field(default_factory=dict[str, Any])
    """Other ACP agents as sub-agent types; checked where they are used (`acp_delegate`)."""

    def tool_names(self) -> list[str]:
        """The tools this agent offers, in its order."""
        names = self.allowed_tools if self.allowed_tools is not None else self.tools
        return [n for n in names if n not in self.exclude_tools]


def tool_name(entry: str) -> str:
    """`kimi_cli.tools.shell:Shell` → `Shell`; a plain name stays as it is."""
    return entry.rsplit(":", 1)[-1].strip()


def agent_file_for(agent: str | None, agent_file: Path | None) -> Path | None:
    """The file of `--agent NAME` or `--agent-file PATH` (None: the built-in default, fast)."""
    if agent_file is not None:
        return Path(os.path.abspath(agent_file.expanduser()))
    return BUILTIN_AGENTS[agent] if agent else None


def load_agent_spec(path: Path) -> AgentSpec:
    """Read an agent file, resolving `extend`; raises AgentSpecError."""
    spec = _load(path, seen=())
    if spec.system_prompt_path is None:
        raise AgentSpecError(
            f"agent file {path}: no system_prompt_path (set it, or extend an agent that has one)"
        )
    for ref in spec.subagents.values():
        _load(ref.path, seen=())  # checked now: a broken sub-agent file is a start-up error
    return spec


def _load(path: Path, *, seen: tuple[Path, ...]) -> AgentSpec:
    if path in seen:
        raise AgentSpecError(f"agent file {path}: `extend` loops back to itself")
    if not path.exists():
        raise AgentSpecError(f"agent file {path}: not found")
    if not path.is_file():
        raise AgentSpecError(f"agent file {path}: not a file")
    import yaml  # agent files only

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentSpecError(f"agent file {path}: cannot be read ({exc.__class__.__name__})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise AgentSpecError(
            f"agent file {path}: invalid YAML{where}: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(data, dict):
        raise AgentSpecError(f"agent file {path}: expected a mapping with `version` and `agent`")
    version = str(data.get("version", "1"))
    if version not in SPEC_VERSIONS:
        raise AgentSpecError(f"agent file {path}: unsupported version {version!r} (supported: 1)")
    raw = data.get("agent") or {}
    if not isinstance(raw, dict):
        raise AgentSpecError(f"agent file {path}: `agent` must be a mapping")
    agent: dict[str, Any] = {str(k): v for k, v in raw.items()}
    unknown = sorted(set(agent) - _KEYS)
    if unknown:
        raise AgentSpecError(f"agent file {path}: unknown key `agent.{unknown[0]}`")
    check = _Checker(path)
    base = AgentSpec(file=path)
    extend = agent.get("extend")
    if extend is not None:
        target = (
            BUILTIN_AGENTS[extend] if extend in BUILTIN_AGENTS else path.parent / check.text("extend", extend)
        )
        base = _load(Path(os.path.abspath(target)), seen=(*seen, path))
        base.file = path
    if "name" in agent:
        if not isinstance(agent["name"], str):
            raise check.fail("`name` must be text")
        base.name = agent["name"]
    if "system_prompt_path" in agent:
        base.system_prompt_path = Path(
            os.path.abspath(path.parent / check.text("system_prompt_path", agent["system_prompt_path"]))
        )
    args = agent.get("system_prompt_args") or {}
    if not isinstance(args, dict):
        raise AgentSpecError(f"agent file {path}: `system_prompt_args` must be a mapping of names to text")
    base.system_prompt_args = {**base.system_prompt_args, **{str(k): str(v) for k, v in args.items()}}
    if agent.get("model") is not None:
        base.model = check.text("model", agent["model"])
    if agent.get("when_to_use") is not None:
        base.when_to_use = check.text("when_to_use", agent["when_to_use"])
    if "tools" in agent:
        base.tools = check.tools("tools", agent["tools"]) or []
    if "allowed_tools" in agent:
        base.allowed_tools = check.tools("allowed_tools", agent["allowed_tools"])
    if "exclude_tools" in agent:
        base.exclude_tools = check.tools("exclude_tools", agent["exclude_tools"]) or []
    if "subagents" in agent:
        base.subagents = check.subagents(agent["subagents"])
    if "acp_agents" in agent:
        if not isinstance(agent["acp_agents"], dict):
            raise check.fail("`acp_agents` must map names to {command, description}")
        base.acp_agents = dict(agent["acp_agents"])
    return base


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, text: str) -> AgentSpecError:
        return AgentSpecError(f"agent file {self.path}: {text}")

    def text(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"`{key}` must be a non-empty text")
        return value

    def tools(self, key: str, value: Any) -> list[str] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"`{key}` must be a list of tool names")
        names = [tool_name(v) for v in value]
        for name in names:
            if name not in KNOWN_TOOLS:
                raise self.fail(f"unknown tool {name!r} in `{key}` (known: {', '.join(sorted(KNOWN_TOOLS))})")
        return names

    def subagents(self, value: Any) -> dict[str, SubagentRef]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail("`subagents` must map names to {path, description}")
        out: dict[str, SubagentRef] = {}
        for name, entry in value.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
                raise self.fail(f"sub-agent {name!r} needs a `path` (and a `description`)")
            description = entry.get("description", "")
            path = Path(os.path.abspath(self.path.parent / str(entry["path"])))
            out[str(name)] = SubagentRef(path, str(description))
        return out


# ---------------------------------------------------------------- the system prompt


def builtin_args(work_dir: Path, additional_dirs: list[Path], skills_text: str) -> dict[str, str]:
    """The arguments every system prompt template may use (the reference's names)."""
    try:
        entries = sorted(os.scandir(work_dir), key=lambda e: e.name)
        listing = "\n".join(e.name + ("/" if e.is_dir() else "") for e in entries[:200])
    except OSError:
        listing = ""
    agents_md = ""
    for name in ("AGENTS.md", "agents.md"):
        try:
            agents_md = (work_dir / name).read_text(encoding="utf-8")[:32_000]
            break
        except (OSError, UnicodeDecodeError):
            continue
    extra = "\n".join(f"- {d}" for d in additional_dirs)
    return {
        "KIMI_NOW": datetime.now().astimezone().isoformat(),
        "KIMI_OS": platform.system() or "Linux",
        "KIMI_SHELL": "bash (`/bin/bash`)",
        "KIMI_WORK_DIR": str(work_dir),
        "KIMI_WORK_DIR_LS": listing,
        "KIMI_ADDITIONAL_DIRS_INFO": extra,
        "KIMI_AGENTS_MD": agents_md,
        "KIMI_SKILLS": skills_text or "No skills found.",
    }


def render_system_prompt(spec: AgentSpec, arguments: dict[str, str]) -> str:
    """The agent's system prompt with its template filled in; raises AgentSpecError."""
    path = spec.system_prompt_path
    assert path is not None
    try:
        template = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentSpecError(
            f"system prompt {path} (agent file {spec.file}): cannot be read ({exc})"
        ) from None
    values = {**arguments, **spec.system_prompt_args}
    if "{%" not in template and "{#" not in template:  # plain `${NAME}` substitution, no Jinja
        missing = sorted({m for m in _VARIABLE.findall(template) if m not in values})
        if missing:
            raise AgentSpecError(
                f"system prompt {path}: no value for ${{{missing[0]}}} (add it to system_prompt_args)"
            )
        return _VARIABLE.sub(lambda m: values[m.group(1)], template)
    import jinja2  # only for templates with {% … %} blocks

    env = jinja2.Environment(
        keep_trailing_newline=True,
        lstrip_blocks=True,
        trim_blocks=True,
        variable_start_string="${",
        variable_end_string="}",
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )
    try:
        return env.from_string(template).render(values)
    except jinja2.UndefinedError as exc:
        raise AgentSpecError(f"system prompt {path}: {exc} (add it to system_prompt_args)") from None
    except jinja2.TemplateError as exc:
        raise AgentSpecError(f"system prompt {path}: invalid template: {exc}") from None
