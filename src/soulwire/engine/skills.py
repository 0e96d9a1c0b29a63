"""Skills: folders with a `SKILL.md` (or flat `<name>.md` files) that teach the agent a task,
found where kimi and other agents keep them, offered as `/skill:<name>` (and `/flow:<name>`
for flow skills), and listed in the system prompt.

Where they are looked for, the first found of a name winning (spec §10):

1. `--skills-dir` directories — given, they replace 2 and 3;
2. the project: `.kimi|.claude|.codex/skills` and `.agents/skills` in the work dir and each
   directory above it up to the git root (the nearest first);
3. the user: `<share>/skills`, `~/.kimi|.claude|.codex/skills`, then the first of
   `~/.config/agents/skills` and `~/.agents/skills`;
4. `extra_skill_dirs` of the config (relative entries are relative to the git root);
5. the built-in skills shipped with Soulwire.

Of the brand directories (kimi, claude, codex) all are used, or with
`merge_all_available_skills = false` only the first that exists.

The front matter (YAML between `---` lines) is checked: a skill whose front matter cannot be
read, whose `name` could not be typed as a command, whose `type` is unknown or whose flow
diagram is broken is skipped, and reported once (`problems`), never stopping the engine.

Standard library only: the start-up path lists skills while it answers `initialize`. Plain
`key: value` front matter is read here; anything richer goes to PyYAML, loaded then."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from soulwire.engine.flows import Flow

Scope = Literal["project", "user", "extra", "builtin"]
BUILTIN_SKILLS_DIR = Path(__file__).with_name("skills_builtin")
BRANDS = (".kimi", ".claude", ".codex")
SKILL_PREFIX = "skill:"
FLOW_PREFIX = "flow:"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
MAX_DESCRIPTION = 1024
_HEADINGS = (("project", "Project"), ("user", "User"), ("extra", "Extra"), ("builtin", "Built-in"))
FALLBACK_DESCRIPTION_CHARS = 240


# Plain classes and string methods rather than dataclasses and regular expressions: this
# module runs on the start-up path, where building those costs more than the discovery.


def usable_name(name: object) -> bool:
    """A name that can follow `/skill:` (1-64 letters, digits, `-`, `_`)."""
    return isinstance(name, str) and 0 < len(name) <= 64 and set(name) <= _NAME_CHARS


def _plain_line(line: str) -> tuple[str, str] | None:
    """`key: value` of a plain front matter line, or None when YAML must read it."""
    key, colon, value = line.partition(":")
    if not colon or not key or key != key.strip() or not set(key) <= _NAME_CHARS or key[0] in "-0123456789":
        return None
    if value and not value[0].isspace():
        return None
    return key, value.strip()


class Skill:
    """One skill: `path` is the markdown file that holds it (`<dir>/SKILL.md` or a flat
    `<name>.md`); `flow` its diagram when it is a flow skill."""

    __slots__ = ("description", "flow", "name", "path", "scope")

    def __init__(
        self, name: str, description: str, path: Path, scope: Scope, flow: Flow | None = None
    ) -> None:
        self.name = name
        self.description = description
        self.path = path
        self.scope: Scope = scope
        self.flow = flow

    @property
    def is_flow(self) -> bool:
        return self.flow is not None

    def text(self) -> str:
        """The whole file, as the model gets it when the skill runs."""
        return self.path.read_text(encoding="utf-8").strip()


class SkillProblem:
    """A skill that was skipped, and why."""

    __slots__ = ("name", "path", "reason")

    def __init__(self, name: str, path: Path, reason: str) -> None:
        self.name = name
        self.path = path
        self.reason = reason

    def line(self) -> str:
        return f'skipped skill "{self.name}" ({self.path}): {self.reason}'


class SkillCatalog:
    """The skills found (highest priority first) and the ones skipped."""

    def __init__(self) -> None:
        self.skills: list[Skill] = []
        self.problems: list[SkillProblem] = []

    def find(self, name: str) -> Skill | None:
        key = name.casefold()
        return next((s for s in self.skills if s.name.casefold() == key), None)

    def commands(self) -> list[tuple[str, str, Skill]]:
        """(command name, description, skill): `skill:<name>` for every skill, then
        `flow:<name>` for the flow skills, each group by name."""
        ordered = sorted(self.skills, key=lambda s: s.name)
        out = [(SKILL_PREFIX + s.name, s.description, s) for s in ordered]
        return out + [(FLOW_PREFIX + s.name, s.description, s) for s in ordered if s.is_flow]

    def describe(self) -> list[dict[str, object]]:
        """The `initialize.slash_commands` entries of the skills."""
        return [{"name": n, "description": d, "aliases": []} for n, d, _ in self.commands()]

    def prompt_section(self) -> str:
        """The skills as the system prompt lists them, grouped by where they come from."""
        if not self.skills:
            return ""
        lines = [
            "## Skills",
            "Skills are instructions for particular tasks. When a task matches one, read its "
            "file with ReadFile first and follow it. The user runs one with /skill:<name>.",
        ]
        for scope, heading in (
            ("project", "Project"),
            ("user", "User"),
            ("extra", "Extra"),
            ("builtin", "Built-in"),
        ):
            group = sorted((s for s in self.skills if s.scope == scope), key=lambda s: s.name)
            if group:
                lines.append(f"### {heading}")
                lines.extend(f"- {s.name} ({s.path}): {s.description}" for s in group)
        return "\n".join(lines)


# ---------------------------------------------------------------- where to look


def git_root(work_dir: Path) -> Path | None:
    for directory in (work_dir, *work_dir.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _project_levels(work_dir: Path) -> list[Path]:
    """The work dir and each directory above it up to the git root (only the work dir
    outside a repository: never unrelated parent trees)."""
    root = git_root(work_dir)
    if root is None:
        return [work_dir]
    levels = [work_dir]
    for parent in work_dir.parents:
        if len(parent.parts) < len(root.parts):
            break
        levels.append(parent)
    return levels


def _brand_dirs(base: Path, merge: bool) -> list[Path]:
    found = [base / brand / "skills" for brand in BRANDS if (base / brand / "skills").is_dir()]
    return found if merge else found[:1]


def skill_roots(
    work_dir: Path,
    share_dir: Path,
    *,
    skills_dirs: Sequence[Path] = (),
    extra_dirs: Iterable[Any] = (),
    merge_brands: bool = True,
    home: Path | None = None,
) -> list[tuple[Path, Scope]]:
    """The directories to look in, highest priority first (see the module docstring)."""
    home = home or Path(os.path.expanduser("~"))
    roots: list[tuple[Path, Scope]] = []

    def add(paths: Iterable[Path], scope: Scope) -> None:
        roots.extend((path, scope) for path in paths)

    if skills_dirs:
        add((Path(os.path.abspath(Path(d).expanduser())) for d in skills_dirs), "extra")
    else:
        for level in _project_levels(work_dir):
            add(_brand_dirs(level, merge_brands), "project")
            add([d for d in [level / ".agents" / "skills"] if d.is_dir()], "project")
        add([share_dir / "skills", *_brand_dirs(home, merge_brands)], "user")
        generic = [home / ".config" / "agents" / "skills", home / ".agents" / "skills"]
        add([d for d in generic if d.is_dir()][:1], "user")
    base = git_root(work_dir) or work_dir
    for entry in extra_dirs:
        if isinstance(entry, str) and entry:
            path = Path(entry).expanduser()
            add([path if path.is_absolute() else base / path], "extra")
    add([BUILTIN_SKILLS_DIR], "builtin")
    unique: list[tuple[Path, Scope]] = []
    seen: set[str] = set()
    for path, scope in roots:
        key = os.path.realpath(path)
        if key not in seen:
            seen.add(key)
            unique.append((path, scope))
    return unique


# ---------------------------------------------------------------- reading one skill


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(front matter text or None, body). Raises ValueError for an unclosed block."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, text
    for index in range(1, len(lines)):
        if lines[index].strip() in ("---", "..."):
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    raise ValueError("the front matter has no closing `---` line")


def parse_front_matter(block: str) -> dict[str, Any]:
    """The front matter as a mapping. Plain `key: value` lines are read directly; anything
    else (lists, block scalars, nesting) by PyYAML. Raises ValueError when it is not a
    mapping or not YAML."""
    plain: dict[str, Any] = {}
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pair = _plain_line(line)
        value = pair[1] if pair else ""
        if (
            pair is None
            or not value
            or value[0] in "|>[{&*!#%@`\\"
            or ": " in value
            or " #" in value
            or (value[0] in "\"'" and not (len(value) >= 2 and value[-1] == value[0] and "\\" not in value))
        ):
            return _yaml_mapping(block)  # anything YAML could read otherwise than as plain text
        if value[0] in "\"'":
            value = value[1:-1]
        plain[pair[0]] = value
    return plain


def _yaml_mapping(block: str) -> dict[str, Any]:
    import yaml  # only for front matter the plain reader does not cover

    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 2}" if where is not None else ""
        raise ValueError(f"the front matter is not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("the front matter is not a mapping of keys to values")
    return {str(k): v for k, v in data.items()}


def read_skill(path: Path, default_name: str, scope: Scope) -> Skill:
    """One skill from its markdown file. Raises ValueError naming what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot be read ({exc.__class__.__name__})") from None
    block, body = split_front_matter(text)
    meta = parse_front_matter(block) if block is not None else {}
    name = meta.get("name", default_name)
    if not isinstance(name, str) or not usable_name(name):
        raise ValueError(
            f"name {name!r} cannot be a command: use 1-64 letters, digits, '-' or '_' (no spaces)"
        )
    description = meta.get("description")
    if description is None or description == "":
        first = next((ln.strip() for ln in body.splitlines() if ln.strip() and ln.strip() != "---"), "")
        first = first.lstrip("# ").strip()
        if len(first) > FALLBACK_DESCRIPTION_CHARS:
            first = first[: FALLBACK_DESCRIPTION_CHARS - 1].rstrip() + "…"
        description = first or "No description provided."
    if not isinstance(description, str):
        raise ValueError("description must be text")
    if len(description) > MAX_DESCRIPTION:
        raise ValueError(f"description is longer than {MAX_DESCRIPTION} characters")
    kind = meta.get("type", "standard") or "standard"
    if kind not in ("standard", "flow"):
        raise ValueError(f"type {kind!r} is unknown (standard or flow)")
    flow = None
    if kind == "flow":
        from soulwire.engine.flows import FlowError, flow_from_markdown  # flow skills only

        try:
            flow = flow_from_markdown(body)
        except FlowError as exc:
            raise ValueError(f"flow diagram: {exc}") from None
    return Skill(name, " ".join(description.split()), path, scope, flow)


def _scan(root: Path, scope: Scope, catalog: SkillCatalog, taken: set[str]) -> None:
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    found: dict[str, Skill] = {}
    flat: list[os.DirEntry[str]] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if not is_dir:
            if entry.name.lower().endswith(".md") and entry.name.upper() != "SKILL.MD":
                flat.append(entry)
            continue
        path = Path(entry.path) / "SKILL.md"
        if path.is_file():
            _add(path, entry.name, scope, catalog, found)
    for entry in flat:  # `<name>.md`, unless a folder of the same name is a skill
        if entry.name[:-3].casefold() not in found:
            _add(Path(entry.path), entry.name[:-3], scope, catalog, found)
    for key, skill in found.items():
        if key not in taken:  # a higher-priority directory has it already
            taken.add(key)
            catalog.skills.append(skill)


def _add(path: Path, default_name: str, scope: Scope, catalog: SkillCatalog, found: dict[str, Skill]) -> None:
    try:
        skill = read_skill(path, default_name, scope)
    except ValueError as exc:
        catalog.problems.append(SkillProblem(default_name, path, str(exc)))
        return
    found.setdefault(skill.name.casefold(), skill)


_CACHE: dict[tuple[Any, ...], tuple[SkillCatalog, list[tuple[Path, int]]]] = {}
_LOCK = threading.Lock()


def _stamp(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def discover_skills(roots: Sequence[tuple[Path, Scope]]) -> SkillCatalog:
    """The skills under `roots` (highest priority first). The start-up path and the engine
    share one discovery; a later call (another session of a server) finds it again only
    while no root directory and no skill file has changed since."""
    key = tuple(roots)
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None and all(_stamp(path) == stamp for path, stamp in cached[1]):
            return cached[0]
        catalog = SkillCatalog()
        taken: set[str] = set()
        for root, scope in roots:
            _scan(root, scope, catalog, taken)
        files = [s.path for s in catalog.skills] + [p.path for p in catalog.problems]
        _CACHE[key] = (catalog, [(path, _stamp(path)) for path in [*(r for r, _ in roots), *files]])
        return catalog


def session_skills(
    work_dir: Path, share_dir: Path, skills_dirs: Sequence[Path], raw_config: dict[str, Any]
) -> SkillCatalog:
    """The skills of a session, from its options and its raw (unvalidated) configuration."""
    extra = raw_config.get("extra_skill_dirs")
    merge = raw_config.get("merge_all_available_skills", True)
    roots = skill_roots(
        work_dir,
        share_dir,
        skills_dirs=skills_dirs,
        extra_dirs=extra if isinstance(extra, list) else (),
        merge_brands=merge is not False,
    )
    return discover_skills(roots)
