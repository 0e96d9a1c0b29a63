"""`soulwire doctor`: what works on this machine and what does not, each problem with its fix.

Checks: the configuration (and which file or variable each value came from), the model and
its API key (one cheap authenticated request, skipped with `--offline`), the share dir's
permissions, the session store (torn lines, damaged files; `--fix` repairs them), the MCP
servers (each started, its tools listed), the optional extras installed, ripgrep, bubblewrap,
the sandbox's overlay (and what `--overlay` falls back to) and the terminal. Exit status 1
when a check fails (a warning does not fail).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from soulwire.config.loader import ConfigError, load_raw_config, share_dir
from soulwire.usage import CommandParser

Status = Literal["ok", "warn", "fail", "skip"]
KEY_CHECK_TIMEOUT_S = 10.0
MCP_CHECK_TIMEOUT_S = 20.0
# Variables that change the configuration (llm/env.py), reported with where they came from.
ENV_PREFIXES = ("SOULWIRE_", "KIMI_")
ENV_VENDOR_NAMES = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
    "GEMINI_API_KEY", "GOOGLE_API_KEY",
)  # fmt: skip
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""
    data: Any = None

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "status": self.status, "detail": self.detail}
        if self.fix:
            out["fix"] = self.fix
        if self.data is not None:
            out["data"] = self.data
        return out


def _mask(name: str, value: str) -> str:
    if any(word in name.upper() for word in SECRET_WORDS) and value:
        return f"set ({len(value)} characters)"
    return value


def _flatten(raw: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            rows.extend(_flatten(value, name + "."))
        else:
            rows.append((name, value))
    return rows


def check_config(config_file: str | None, share: Path) -> tuple[Check, dict[str, Any] | None, Path | None]:
    """The configuration: readable, valid, and where each value came from."""
    try:
        raw, path = load_raw_config(config_file=config_file, config_text=None, share=share)
    except ConfigError as exc:
        fix = "correct the file, or move it aside to start from the defaults"
        return Check("config", "fail", str(exc).splitlines()[0], fix), None, None
    origin = str(path) if path else "defaults"
    values = [
        {"key": key, "value": _mask(key, str(value)) if isinstance(value, str) else value, "from": origin}
        for key, value in _flatten(raw)
    ]
    env_names = sorted(k for k in os.environ if k.startswith(ENV_PREFIXES) or k in ENV_VENDOR_NAMES)
    values += [{"key": k, "value": _mask(k, os.environ[k]), "from": "environment"} for k in env_names]
    try:
        from soulwire.config.model import validate_config
        from soulwire.config.precheck import check_raw_config

        check_raw_config(raw, origin=origin, model_alias=None)
        validate_config(raw, origin)
    except ConfigError as exc:
        fix = f"edit {origin}: the message names the key" if path else "fix the value the message names"
        return Check("config", "fail", str(exc).splitlines()[0], fix, values), None, path
    where = str(path) if path else f"no config file in {share} (defaults and environment)"
    return Check("config", "ok", where, data=values), raw, path


def _model_endpoint(raw: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """(alias, provider config, model config) of the default model with the environment
    applied, as the engine resolves it; None when nothing is configured."""
    from soulwire.config.model import validate_config
    from soulwire.llm.env import apply_env, env_model

    config = validate_config(raw)
    env = dict(os.environ)
    if config.default_model:
        model = config.models[config.default_model]
        provider = config.providers[model.provider]
        provider, model = apply_env(provider, model, {**env, **provider.env})
        return config.default_model, provider, model
    found = env_model(env)
    return None if found is None else (found[1].model, found[0], found[1])


def check_model(raw: dict[str, Any] | None, config_path: Path | None, share: Path, *, offline: bool) -> Check:
    """The model sessions use and whether its provider accepts the key (GET …/models)."""
    if raw is None:
        return Check("model", "skip", "the configuration has a problem (above)")
    from soulwire.llm.env import DEFAULT_BASE_URLS, configuration_hint, missing_key_problem

    found = _model_endpoint(raw)
    if found is None:
        hint = configuration_hint(config_path, share).split(". ", 1)[-1]
        return Check("model", "fail", "no model is configured", hint)
    alias, provider, model = found
    described = f"{alias} → {provider.type} model {model.model!r}"
    if provider.type.startswith("_"):
        return Check("model", "ok", f"{described} (offline, no key needed)")
    problem = missing_key_problem(provider, model)
    if problem is not None:
        return Check(
            "model", "fail", problem, "set the key as the message says, then run soulwire doctor again"
        )
    if offline:
        return Check("model", "skip", f"{described}; key not checked (--offline)")
    base = (provider.base_url or DEFAULT_BASE_URLS.get(provider.type, "")).rstrip("/")
    return _probe_key(described, provider.type, base, provider.api_key, dict(provider.custom_headers))


def _probe_key(described: str, kind: str, base: str, key: str, headers: dict[str, str]) -> Check:
    import httpx2

    if kind == "anthropic":
        url = f"{base}/v1/models"
        headers = {**headers, "x-api-key": key, "anthropic-version": "2023-06-01"}
    else:
        url = f"{base}/models"
        headers = {**headers, **({"Authorization": f"Bearer {key}"} if key else {})}
    try:
        response = httpx2.get(url, headers=headers, timeout=KEY_CHECK_TIMEOUT_S)
    except httpx2.HTTPError as exc:
        fix = "check the network, or the provider's base_url"
        return Check("model", "fail", f"{described}: cannot reach {url}: {type(exc).__name__}", fix)
    code = response.status_code
    if code in (401, 403):
        fix = "the provider rejected the key: replace it (config `api_key` or the environment variable)"
        return Check("model", "fail", f"{described}: HTTP {code} from {url}", fix)
    if code >= 400:
        return Check("model", "warn", f"{described}: key not verified (HTTP {code} from {url})")
    return Check("model", "ok", f"{described}: the provider accepted the key")


def check_share_dir(share: Path) -> Check:
    if not share.exists():
        return Check("share dir", "ok", f"{share} (created at the first session)")
    if not share.is_dir():
        return Check(
            "share dir", "fail", f"{share} is not a directory", "move it aside or set SOULWIRE_SHARE_DIR"
        )
    if not os.access(share, os.R_OK | os.W_OK | os.X_OK):
        return Check("share dir", "fail", f"{share} is not writable by you", f"chown -R $USER {share}")
    mode = stat.S_IMODE(share.stat().st_mode)
    if mode & 0o077:
        fix = f"chmod 700 {share}  (sessions and tokens live there)"
        return Check("share dir", "warn", f"{share} is readable by others (mode {mode:o})", fix)
    return Check("share dir", "ok", f"{share} (mode {mode:o})")


def check_sessions(share: Path, *, fix: bool) -> Check:
    from soulwire.cli.doctor_store import repair, scan

    report = scan(share)
    if not report.damaged:
        return Check("sessions", "ok", f"{report.sessions} sessions, no damaged files")
    if fix:
        repair(share, report)
    data = [
        {"file": str(d.path), "bad_lines": d.bad_lines, "good_lines": d.good_lines} for d in report.damaged
    ]
    left = [d for d in report.damaged if d.path not in report.repaired]
    if not left:
        detail = f"repaired {len(report.repaired)} files (originals kept as *.damaged)"
        return Check("sessions", "ok", detail, data=data)
    names = ", ".join(str(d.path) for d in left[:3]) + (" …" if len(left) > 3 else "")
    detail = f"{len(left)} damaged files in {report.sessions} sessions: {names}"
    hint = "run soulwire doctor --fix (keeps the good lines; the original stays as *.damaged)"
    if report.skipped_busy:
        hint = "close the sessions in use, then run soulwire doctor --fix"
    return Check("sessions", "warn", detail, hint, data)


def check_mcp(share: Path) -> Check:
    from soulwire.tools.mcp_config import load_mcp_servers

    try:
        servers = load_mcp_servers([], [], share)
    except ConfigError as exc:
        return Check("mcp", "fail", str(exc).splitlines()[0], f"correct {share / 'mcp.json'}")
    if not servers:
        return Check("mcp", "ok", f"no MCP servers configured ({share / 'mcp.json'})")
    import anyio

    from soulwire.cli.doctor_mcp import probe_servers

    results = anyio.run(probe_servers, servers, MCP_CHECK_TIMEOUT_S)
    failed = [r for r in results if r["status"] != "connected"]
    summary = ", ".join(f"{r['name']} ({len(r['tools'])} tools)" for r in results if r not in failed)
    if failed:
        names = ", ".join(f"{r['name']}: {r['error'] or r['status']}" for r in failed)
        return Check("mcp", "fail", names, f"check the command/url of each in {share / 'mcp.json'}", results)
    return Check("mcp", "ok", summary, data=results)


def extras() -> dict[str, dict[str, bool]]:
    """Each optional extra of the installed distribution → its requirements → installed."""
    import re
    from importlib import metadata

    found: dict[str, dict[str, bool]] = {}
    try:
        requirements = metadata.requires("soulwire") or []
    except metadata.PackageNotFoundError:
        return found
    for requirement in requirements:
        marker = re.search(r"extra\s*==\s*['\"]([\w.-]+)['\"]", requirement)
        if marker is None:
            continue
        name = re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0]
        try:
            metadata.version(name)
            installed = True
        except metadata.PackageNotFoundError:
            installed = False
        found.setdefault(marker.group(1), {})[name] = installed
    return found


def check_extras() -> Check:
    found = {name: reqs for name, reqs in extras().items() if name not in ("dev", "docs")}
    present = sorted(name for name, reqs in found.items() if all(reqs.values()))
    missing = sorted(name for name in found if name not in present)
    detail = f"installed: {', '.join(present) or 'none'}; not installed: {', '.join(missing) or 'none'}"
    detail += "; acp: built in"
    fix = f"pip install 'soulwire[{','.join(missing)}]' if you want them" if missing else ""
    return Check("extras", "ok", detail, fix, {name: all(reqs.values()) for name, reqs in found.items()})


def check_tools(raw: dict[str, Any] | None = None) -> list[Check]:
    from soulwire.tools.builtin.search import ripgrep
    from soulwire.tools.sandbox import bubblewrap_problem

    rg = ripgrep()
    checks = [
        Check("ripgrep", "ok", rg)
        if rg
        else Check(
            "ripgrep", "fail", "`rg` not found", "pip install ripgrep, or install the `ripgrep` package"
        )
    ]
    problem = bubblewrap_problem()
    if problem is None:
        checks.append(
            Check("sandbox", "ok", "bubblewrap can sandbox commands (--sandbox read-only | workspace-write)")
        )
    else:
        checks.append(Check("sandbox", "fail", problem, "needed only for --sandbox; sessions run without it"))
    checks.append(check_overlay(raw, problem))
    return checks


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def overlay_facts() -> dict[str, Any]:
    """What the overlay needs, as found here: bubblewrap's version, the kernel's release and
    overlayfs, user namespaces (and the switches some distributions add), `nsenter`."""
    import shutil
    import subprocess

    bwrap, version = shutil.which("bwrap"), None
    if bwrap is not None:
        try:
            done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
            version = done.stdout.strip().removeprefix("bubblewrap ") or None
        except (OSError, subprocess.TimeoutExpired):
            version = None
    try:
        listed = Path("/proc/filesystems").read_text().split()
        overlayfs = "overlay" in listed
    except OSError:
        overlayfs = False
    return {
        "bwrap": version,
        "kernel": os.uname().release,
        "overlayfs": overlayfs,  # (a module not loaded yet is loaded by the first mount)
        "max_user_namespaces": _read_int("/proc/sys/user/max_user_namespaces"),
        "unprivileged_userns_clone": _read_int("/proc/sys/kernel/unprivileged_userns_clone"),
        "apparmor_restrict_unprivileged_userns": _read_int(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
        ),
        "nsenter": shutil.which("nsenter"),
    }


def check_overlay(raw: dict[str, Any] | None, sandbox_problem: str | None) -> Check:
    """Whether a turn can run in the sandbox's overlay (`--overlay`), proved by mounting one,
    and what `--overlay` falls back to where it cannot."""
    from soulwire.tools.overlay import overlay_problem

    facts = overlay_facts()
    problem = "it needs the sandbox, which cannot run here (above)" if sandbox_problem else overlay_problem()
    checkpoints = bool(((raw or {}).get("checkpoints") or {}).get("enabled"))
    facts["available"] = problem is None
    facts["fallback"] = None if problem is None else "checkpoints" if checkpoints else "direct"
    parts = [f"bubblewrap {facts['bwrap'] or 'missing'}", f"Linux {facts['kernel'].split('-')[0]}"]
    if problem is None:
        detail = f"turns can run in an overlay here (--overlay ask|commit|discard): {', '.join(parts)}"
        detail += ", overlayfs mounted in a user namespace, nsenter"
        return Check("overlay", "ok", detail, data=facts)
    fallback = (
        "checkpoints: turns write the work dir directly, each recorded (rewind works)"
        if checkpoints
        else "direct writes: turns write the work dir, unrecorded ([checkpoints] enabled = true to rewind)"
    )
    detail = f"not available: {problem}; --overlay falls back to {fallback}"
    fix = (
        "needed only for --overlay: Linux ≥ 5.11 with unprivileged user namespaces, bubblewrap and "
        "nsenter (util-linux); see docs/guides/checkpoints.md#transactional-turns-the-overlay"
    )
    return Check("overlay", "warn", detail, fix, facts)


def check_terminal() -> Check:
    tty = sys.stdout.isatty()
    encoding = (sys.stdout.encoding or "").lower()
    colour = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    columns = os.get_terminal_size().columns if tty else None
    data = {
        "tty": tty,
        "term": os.environ.get("TERM", ""),
        "colour": colour,
        "no_color": bool(os.environ.get("NO_COLOR")),
        "encoding": encoding,
        "columns": columns,
    }
    detail = f"{'a terminal' if tty else 'not a terminal'}, TERM={data['term'] or '(unset)'}, "
    detail += f"colour {'on' if colour else 'off'}, {encoding or 'unknown'} output"
    if "utf" not in encoding:
        return Check("terminal", "warn", detail, "use a UTF-8 locale (export LANG=C.UTF-8)", data)
    return Check("terminal", "ok", detail, data=data)


def run_checks(*, offline: bool, fix: bool, config_file: str | None) -> list[Check]:
    share = share_dir()
    config, raw, path = check_config(config_file, share)
    found = [config, check_model(raw, path, share, offline=offline), check_share_dir(share)]
    found += [
        check_sessions(share, fix=fix),
        check_mcp(share),
        check_extras(),
        *check_tools(raw),
        check_terminal(),
    ]
    return found


def _print(found: list[Check]) -> None:
    tty = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    colours = {"ok": "32", "warn": "33", "fail": "31", "skip": "2"}
    for check in found:
        mark = check.status.upper() if check.status != "ok" else "ok"
        label = f"\x1b[{colours[check.status]}m{mark:5}\x1b[0m" if tty else f"{mark:5}"
        sys.stdout.write(f"{label} {check.name}: {check.detail}\n")
        if check.fix and check.status in ("fail", "warn"):
            sys.stdout.write(f"      fix: {check.fix}\n")
    failed = sum(not c.ok for c in found)
    sys.stdout.write("all good\n" if not failed else f"{failed} problem{'s' * (failed > 1)} found\n")


def run_doctor(argv: list[str]) -> int:
    parser = CommandParser(
        prog="soulwire doctor",
        description=(
            "Check what Soulwire needs here: configuration, model and API key, share dir, session "
            "store, MCP servers, extras, ripgrep, bubblewrap and its overlay, terminal. Each problem "
            "comes with its fix."
        ),
        examples=(
            "soulwire doctor",
            "soulwire doctor --offline          # no network: the API key is not tried",
            "soulwire doctor --fix              # repair damaged session files",
            "soulwire doctor --json | jq '.[] | select(.ok | not)'",
        ),
    )
    parser.add_argument("--json", action="store_true", help="one JSON object: check name → result")
    parser.add_argument("--offline", action="store_true", help="do not call the provider to check the key")
    parser.add_argument(
        "--fix", action="store_true", help="repair damaged session files (keeps the originals)"
    )
    parser.add_argument("--config-file", metavar="PATH", help="check this configuration file instead")
    args = parser.parse_args(argv)
    found = run_checks(offline=args.offline, fix=args.fix, config_file=args.config_file)
    if args.json:
        sys.stdout.write(json.dumps({c.name: c.to_json() for c in found}, indent=2) + "\n")
    else:
        _print(found)
    return 0 if all(c.ok for c in found) else 1
