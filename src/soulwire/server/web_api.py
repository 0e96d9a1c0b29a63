"""The HTTP endpoints a browser needs beyond the session API: recorded events with their
times (the trace view), search, recent work dirs, the configuration file, uploads, the git diff
of a session's work dir, and opening a file in the local editor. Public and token-guarded like
every other route; the web app has no back door."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from soulwire.server.access import user_of, visible
from soulwire.server.blobs import BlobStore, preview
from soulwire.server.registry import ServeSettings, SessionRegistry
from soulwire.sessions.jsonl import iter_lines
from soulwire.sessions.paths import INDEX_FILE, WIRE_FILE

MAX_UPLOAD = 20 << 20
MAX_DIFF = 2 << 20
OPEN_COMMAND_ENV = "SOULWIRE_OPEN_COMMAND"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
RECORD_HEAD = b'{"timestamp"'
"""How a message record of wire.jsonl starts (the metadata header does not)."""


class Records(BaseModel):
    id: str
    since: int
    total: int
    records: list[dict[str, Any]] = Field(description="`{timestamp, message: {type, payload}}` as recorded")


class WorkDirs(BaseModel):
    default: str
    recent: list[str]


class ConfigFile(BaseModel):
    path: str
    exists: bool
    text: str
    format: str


class ConfigForm(BaseModel):
    path: str
    exists: bool
    format: str
    secret: str = Field(description="stands for a stored secret; sent back, it keeps the stored value")
    values: dict[str, Any] = Field(
        description="default_model, default_thinking, default_yolo, default_plan_mode, approval, "
        "approval_scope, sandbox, sandbox_network, loop_control {…}, providers {name: {type, base_url, "
        "api_key, custom_headers, env}}, models {alias: {provider, model, max_context_size, "
        "capabilities, display_name}}"
    )


class ConfigFormWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    values: dict[str, Any]


class ConfigWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=1 << 20)


class SearchHit(BaseModel):
    id: str
    work_dir: str
    title: str | None = None
    updated: float | None = None
    match: str = Field(description="'title' or 'text'")
    snippet: str = ""
    archived: bool = False


class Upload(BaseModel):
    path: str
    name: str
    size: int


class GitDiff(BaseModel):
    repo: bool
    status: str = ""
    diff: str = ""
    truncated: bool = False


class OpenFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=4096)
    line: int | None = Field(default=None, ge=1)


def web_router(settings: ServeSettings, registry: Callable[[], SessionRegistry]) -> APIRouter:
    """The browser's extra endpoints, over the same registry as the session API."""
    router = APIRouter()

    @router.get("/api/sessions/{session_id}/records", response_model=Records)
    async def records(
        session_id: str,
        since: int = Query(0, ge=0),
        limit: int = Query(1_000_000, ge=1, le=10_000_000),
        max_record_bytes: int | None = Query(
            None,
            ge=1024,
            description="a larger record comes with its payload cut to its small members and the whole "
            "payload as `message.blob: {blob_id, size, preview}` (GET /api/blobs/{blob_id})",
        ),
    ) -> Response:
        """The recorded messages with their timestamps, `since` counting message records. The
        stored lines are sent as they are (a 10,000-event session is one quick read)."""
        found = registry().locate(session_id)
        blobs = settings.hub.blobs
        shared = registry().shared

        def read() -> bytes:
            chosen: list[bytes] = []
            total = 0
            lines = (
                enumerate(shared.record_lines(found.id))
                if shared is not None
                else iter_lines(found.dir / WIRE_FILE)
            )
            for _, line in lines:
                if not line.startswith(RECORD_HEAD):
                    continue
                if total >= since and len(chosen) < limit:
                    if max_record_bytes is not None and blobs is not None and len(line) > max_record_bytes:
                        line = _by_reference(line, blobs)
                    chosen.append(line)
                total += 1
            if chosen and not _whole(chosen[-1]):  # only the last line can be torn (a killed writer)
                chosen.pop()
                total -= 1
            head = f'{{"id":{json.dumps(found.id)},"since":{since},"total":{total},"records":['.encode()
            return head + b",".join(chosen) + b"]}"

        return Response(await anyio.to_thread.run_sync(read), media_type="application/json")

    @router.get("/api/web/work-dirs", response_model=WorkDirs)
    async def work_dirs(request: Request) -> WorkDirs:
        """The server's default work dir and the recent ones of the share dir (newest first);
        a named user who is not an admin sees only those of sessions they may see."""
        user = user_of(request.scope)
        allowed: set[str] | None = None
        if user is not None and user.role != "admin":
            listed = await anyio.to_thread.run_sync(registry().list)
            allowed = {str(i.get("work_dir")) for i in visible(user, listed)}
        recent: list[str] = []
        try:
            index = json.loads((settings.share / INDEX_FILE).read_text(encoding="utf-8"))
            for entry in reversed(index.get("work_dirs") or []):
                if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                    path = entry["path"]
                    if path not in recent and (allowed is None or path in allowed) and Path(path).is_dir():
                        recent.append(path)
        except (OSError, ValueError, AttributeError):
            pass
        return WorkDirs(default=str(settings.work_dir), recent=recent)

    @router.get("/api/web/search", response_model=list[SearchHit])
    async def search(
        request: Request,
        q: str = Query(min_length=1, max_length=200),
        work_dir: str | None = None,
        archived: bool | None = Query(None, description="true: only archived; false: only the others"),
    ) -> list[SearchHit]:
        """Sessions whose title or recorded text contains `q` (case-insensitive)."""
        listed = await registry().off_loop(lambda: registry().list(work_dir, archived))
        sessions = visible(user_of(request.scope), listed)
        return await anyio.to_thread.run_sync(_search, sessions, q)

    def config_path() -> Path:
        return settings.config_path or settings.share / "config.toml"

    @router.get("/api/web/config", response_model=ConfigFile)
    async def read_config() -> ConfigFile:
        """The configuration file's text, secrets replaced by `<secret: unchanged>`."""
        from soulwire.server.config_form import masked_text

        path = config_path()
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        shown = masked_text(text, path)
        return ConfigFile(path=str(path), exists=path.is_file(), text=shown, format=_format(path))

    @router.put("/api/web/config", response_model=ConfigFile)
    async def write_config(body: ConfigWrite) -> ConfigFile:
        """Validate and save the configuration file (a `<secret: unchanged>` keeps the stored
        value); sessions opened from now on use it."""
        from soulwire.config.loader import ConfigError, parse_config_text
        from soulwire.config.model import validate_config
        from soulwire.server.config_form import FormError, masked_text, text_to_save

        path = config_path()
        try:
            text = text_to_save(body.text, path)
            raw = parse_config_text(text, origin=str(path))
            if _format(path) == "json" and not text.lstrip().startswith("{"):
                raise ConfigError(f"{path}: a .json configuration must be a JSON object")
            validate_config(raw, path)
        except FormError as exc:
            raise HTTPException(422, exc.message) from None
        except (ConfigError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None
        save(path, text, raw)
        return ConfigFile(path=str(path), exists=True, text=masked_text(text, path), format=_format(path))

    @router.get("/api/web/config/form", response_model=ConfigForm)
    async def read_config_form() -> ConfigForm:
        """The settings of the form (defaults filled in), secrets as `secret`."""
        from soulwire.server.config_form import SECRET, FormError, form_values, load, plain

        path = config_path()
        try:
            _, document = load(path)
        except FormError as exc:
            raise HTTPException(422, exc.message) from None
        values = form_values(plain(document))
        exists = path.is_file()
        return ConfigForm(path=str(path), exists=exists, format=_format(path), secret=SECRET, values=values)

    @router.put("/api/web/config/form", response_model=ConfigForm)
    async def write_config_form(body: ConfigFormWrite) -> ConfigForm:
        """Write the form's values into the file (comments and keys the form does not know are
        kept), validated by the engine's model: 422 `{message, errors: [{field, message}]}`."""
        from soulwire.server.config_form import (
            SECRET,
            FormError,
            apply_form,
            check,
            dump,
            form_values,
            load,
            plain,
        )

        path = config_path()
        try:
            _, document = load(path)
            document = apply_form(document, body.values)
            raw = plain(document)
            check(raw, path)
        except FormError as exc:
            raise HTTPException(422, {"message": exc.message, "errors": exc.errors}) from None
        save(path, dump(document, path), raw)
        values = form_values(raw)
        return ConfigForm(path=str(path), exists=True, format=_format(path), secret=SECRET, values=values)

    def save(path: Path, text: str, raw: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
        settings.raw_config = raw
        settings.config_path = path

    @router.post("/api/sessions/{session_id}/uploads", response_model=Upload, status_code=201)
    async def upload(
        request: Request, session_id: str, name: str = Query(min_length=1, max_length=200)
    ) -> Upload:
        """The request body saved as `<session dir>/uploads/<name>`; a prompt names the path."""
        found = registry().locate(session_id)
        safe = _SAFE_NAME.sub("_", Path(name).name).strip(" .") or "upload"
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_UPLOAD:
                raise HTTPException(413, f"an upload may be at most {MAX_UPLOAD >> 20} MiB")
        folder = found.dir / "uploads"
        folder.mkdir(mode=0o700, exist_ok=True)
        target = folder / safe
        stem, suffix, n = target.stem, target.suffix, 1
        while target.exists():
            n += 1
            target = folder / f"{stem}-{n}{suffix}"
        target.write_bytes(bytes(data))
        return Upload(path=str(target), name=target.name, size=len(data))

    @router.get("/api/sessions/{session_id}/git-diff", response_model=GitDiff)
    async def git_diff(session_id: str) -> GitDiff:
        """`git status --short` and `git diff HEAD` of the session's work dir."""
        found = registry().locate(session_id)
        return await anyio.to_thread.run_sync(_git_diff, Path(found.work_dir))

    @router.post("/api/sessions/{session_id}/open", status_code=204)
    async def open_in_editor(session_id: str, body: OpenFile) -> None:
        """Open a file of the session's work dir in the local editor (`$SOULWIRE_OPEN_COMMAND`,
        e.g. `code -g {path}:{line}`, else VS Code or the desktop's opener)."""
        found = registry().locate(session_id)
        root = Path(found.work_dir).resolve()
        target = (root / body.path).resolve()
        if not target.is_relative_to(root) or not target.exists():
            raise HTTPException(404, "no such file in the session's work dir")
        argv = _open_command(target, body.line)
        if argv is None:
            raise HTTPException(501, f"no editor found: set {OPEN_COMMAND_ENV}")
        subprocess.Popen(  # noqa: ASYNC220  (a detached editor: fork + exec, never waited for)
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, cwd=root,
        )  # fmt: skip

    return router


STUB_MEMBER_BYTES = 256


def _stub(value: Any, depth: int = 0) -> Any:
    """The small members of a payload (ids, names, statuses): what a timeline needs without
    the large ones (outputs, file contents), which stay in the blob."""
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, member in value.items():
            if len(json.dumps(member)) <= STUB_MEMBER_BYTES:
                kept[str(key)] = member
            elif isinstance(member, dict) and depth < 2:
                kept[str(key)] = _stub(member, depth + 1)
        return kept
    return None


def _by_reference(line: bytes, blobs: BlobStore) -> bytes:
    """A record line with its payload stored as a blob and cut to its small members."""
    try:
        record = json.loads(line)
        message = record["message"]
        payload = message["payload"]
    except (ValueError, KeyError, TypeError):
        return line
    data = json.dumps(payload, ensure_ascii=False).encode()
    message["blob"] = {"blob_id": blobs.put(data), "size": len(data), "preview": preview(data)}
    message["payload"] = _stub(payload)
    return json.dumps(record, ensure_ascii=False).encode()


def _whole(line: bytes) -> bool:
    """A record line that is complete JSON (a torn last line of a killed process is not)."""
    if not line.rstrip().endswith(b"}"):
        return False
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _format(path: Path) -> str:
    return "json" if path.suffix == ".json" else "toml"


def _search(sessions: list[dict[str, Any]], query: str) -> list[SearchHit]:
    needle = query.casefold()
    hits: list[SearchHit] = []
    for info in sessions:
        title: str = info.get("title") or ""
        hit = SearchHit(
            id=info["id"],
            work_dir=info["work_dir"],
            title=title or None,
            updated=info.get("updated"),
            match="title",
            archived=info.get("archived") is True,
        )
        if needle in title.casefold():
            hits.append(hit)
            continue
        snippet = _text_match(Path(info.get("dir") or "") / WIRE_FILE, needle)
        if snippet is not None:
            hits.append(hit.model_copy(update={"match": "text", "snippet": snippet}))
    return hits


def _text_match(wire: Path, needle: str) -> str | None:
    """A snippet around the first user or assistant text containing `needle`."""
    try:
        handle = wire.open(encoding="utf-8", errors="replace")
    except OSError:
        return None
    with handle:
        for line in handle:
            if needle not in line.casefold():
                continue
            try:
                message = json.loads(line).get("message") or {}
            except ValueError:
                continue
            payload = message.get("payload") or {}
            texts: list[str] = []
            if message.get("type") in ("TurnBegin", "SteerInput"):
                value = payload.get("user_input")
                texts = [value] if isinstance(value, str) else [p.get("text", "") for p in value or []]
            elif message.get("type") == "ContentPart" and payload.get("type") == "text":
                texts = [payload.get("text", "")]
            for text in texts:
                at = text.casefold().find(needle)
                if at >= 0:
                    return text[max(0, at - 40) : at + len(needle) + 40]
    return None


# What the work dir's own git config may not run here (the agent may have written that config).
_GIT_SAFE = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def _git_diff(work_dir: Path) -> GitDiff:
    """The work dir's git state, read by a git that cannot act for the agent. The repository's
    config is the agent's to write (`.git/` is in the workspace), and git runs commands it
    names (an fsmonitor, filters, textconv drivers): so git runs in a read-only sandbox
    without network where bubblewrap can (a sandboxed session cannot run elsewhere), with
    those settings off."""
    from soulwire.tools.sandbox import SandboxPolicy, bubblewrap_problem

    git = shutil.which("git")
    if git is None:
        return GitDiff(repo=False)
    policy = None if bubblewrap_problem() else SandboxPolicy.create("read-only", work_dir=work_dir)

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        argv = [git, *_GIT_SAFE, "-C", str(work_dir), *args]
        if policy is not None:
            argv = policy.command_argv(argv, cwd=work_dir)
        env = policy.command_env(None) if policy is not None else None
        return subprocess.run(argv, capture_output=True, timeout=20, stdin=subprocess.DEVNULL, env=env)

    try:
        if run("rev-parse", "--is-inside-work-tree").returncode != 0:
            return GitDiff(repo=False)
        status = run("status", "--short").stdout.decode("utf-8", "replace")
        diff = run("diff", "HEAD", "--no-color", "--no-ext-diff", "--no-textconv")
        if diff.returncode != 0:  # no commit yet: the index against the empty tree
            diff = run("diff", "--no-color", "--no-ext-diff", "--no-textconv")
    finally:
        if policy is not None:
            policy.close()
    text = diff.stdout[:MAX_DIFF].decode("utf-8", "replace")
    return GitDiff(repo=True, status=status, diff=text, truncated=len(diff.stdout) > MAX_DIFF)


def _open_command(target: Path, line: int | None) -> list[str] | None:
    template = os.environ.get(OPEN_COMMAND_ENV)
    location = f"{target}:{line}" if line else str(target)
    if template:
        values = {"{path}": str(target), "{line}": str(line or 1), "{location}": location}
        argv = shlex.split(template)
        for key, value in values.items():
            argv = [part.replace(key, value) for part in argv]
        return argv
    if shutil.which("code"):
        return ["code", "-g", location]
    opener = shutil.which("xdg-open") or shutil.which("open")
    return [opener, str(target)] if opener else None


__all__ = ["web_router"]
