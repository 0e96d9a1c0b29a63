"""Session approval rules as data: exact strings and tool patterns.

Two kinds of rule live side by side in a session's rule set (and in `state.json`):

* **Exact rules**, as `approve_for_session` records them (engine/approvals.py): an action
  (`"run command"`) or an action plus the tool's scope key (`"run command: make test"`,
  `"edit file: /repo/app.py"`).
* **Pattern rules**, `Tool(glob)`, added by a person or a UI: the tool's name and a shell-style
  glob (`fnmatch`: `*` also matches `/`) over the same scope key — the command line for
  Shell, the resolved absolute path for the file tools. `Shell(git status*)`,
  `WriteFile(/repo/src/*)`, `StrReplaceFile(*.py)`.

A pattern never approves an action that leaves the sandbox (a person approves each escape,
or an exact rule they granted for it), and a Shell pattern with a wildcard never matches a
command line that chains, pipes, redirects or substitutes (`;`, `&`, `|`, `<`, `>`, a
backquote, `$(`, a newline): `Shell(git status*)` must not approve `git status; rm -rf ~`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from soulwire.errors import SoulwireError

_PATTERN_RULE = re.compile(r"(?P<tool>[A-Za-z_][A-Za-z0-9_.:-]*)\((?P<glob>.*)\)", re.DOTALL)
_SHELL_CONTROL = re.compile(r"[;&|<>`\n]|\$\(")
_GLOB_CHARS = frozenset("*?[")
SHELL_TOOL = "Shell"


class RuleError(SoulwireError, ValueError):
    """A rule that cannot be understood (the message says why)."""


@dataclass(frozen=True, slots=True)
class ToolPattern:
    """`Tool(glob)`: calls of `tool` whose scope key matches `glob`."""

    tool: str
    glob: str

    def matches(self, sender: str, scope_key: str | None) -> bool:
        if sender != self.tool or scope_key is None:
            return False
        if not _GLOB_CHARS.intersection(self.glob):
            return scope_key == self.glob
        if self.tool == SHELL_TOOL and _SHELL_CONTROL.search(scope_key):
            return False
        return fnmatchcase(scope_key, self.glob)


def parse_pattern(rule: str) -> ToolPattern | None:
    """The pattern a rule states, or None for an exact rule. Raises `RuleError` for a rule
    that starts like a pattern but is not one (`Shell(git status`)."""
    found = _PATTERN_RULE.fullmatch(rule)
    if found is None:
        if re.match(r"[A-Za-z_][A-Za-z0-9_.:-]*\(", rule):
            raise RuleError(f"not a pattern rule: {rule!r} (expected Tool(glob), e.g. Shell(git status*))")
        return None
    glob = found["glob"]
    if not glob.strip():
        raise RuleError(f"empty pattern in {rule!r} (use {found['tool']}(*) for every call)")
    return ToolPattern(found["tool"], glob)


def check_rule(rule: str) -> str:
    """`rule` as given, once it is known to be a valid rule (else `RuleError`)."""
    if not rule.strip() or rule != rule.strip():
        raise RuleError("a rule is a non-empty string without surrounding spaces")
    parse_pattern(rule)
    return rule


__all__ = ["RuleError", "ToolPattern", "check_rule", "parse_pattern"]
