"""Stored sessions: list, read the history (typed), fork from any earlier turn, delete, and
resume or continue — for local engines and for a `soulwire serve`.

    local = LocalSessions(work_dir=".")                  # the engine's share dir
    for stored in await local.list(): print(stored.id, stored.title, stored.turns)
    for turn in await local.history(stored.id): print(turn.user_input, turn.messages)
    fork = await local.fork(stored.id, turn=2)           # a new session: turns 1-2 only
    async with local.resume(fork.id) as session: ...     # a Session on that history
    await local.delete(fork.id)

    remote = ServerSessions("http://127.0.0.1:7437", token)   # the same methods, over HTTP

The SDK speaks to engines only through their public interfaces: a local catalog runs the
engine's `sessions` command (`soulwire sessions … --json`; other engines lack it), a server
catalog uses the server's HTTP API. Histories are the recorded Wire messages, folded into
the same typed messages `query()` yields, one `HistoryTurn` per prompt."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from soulwire.sdk.engine import decode_event
from soulwire.sdk.errors import SessionNotFoundError, SessionStoreError
from soulwire.sdk.messages import Message, MessageFolder
from soulwire.sdk.options import Options, resolve_executable
from soulwire.sdk.session import Session


@dataclass(frozen=True)
class StoredSession:
    """A stored session as listed: `turns` is the number of prompts it holds."""

    id: str
    title: str | None
    created: float | None
    updated: float | None
    turns: int
    work_dir: str | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    """Everything the store reported (size, is_last, live, busy, …)."""

    @classmethod
    def from_json(cls, data: dict[str, Any], work_dir: str | None = None) -> StoredSession:
        def number(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, int | float) else None

        turns = data.get("turns")
        return cls(
            id=str(data.get("id")),
            title=data.get("title") if isinstance(data.get("title"), str) else None,
            created=number("created"),
            updated=number("updated"),
            turns=turns if isinstance(turns, int) else 0,
            work_dir=data.get("work_dir") if isinstance(data.get("work_dir"), str) else work_dir,
            raw=data,
        )


@dataclass(frozen=True)
class HistoryTurn:
    """One prompt of a stored session and what followed it. `number` counts from 1 (fork
    at it to keep it and everything before); `finished` is False for a turn that never
    ended (the engine was stopped in the middle)."""

    number: int
    user_input: Any
    messages: list[Message]
    finished: bool


def parse_history(records: Iterable[dict[str, Any]]) -> list[HistoryTurn]:
    """Recorded Wire messages (`{"type", "payload"}`) as turns of typed messages. Nested
    turns (slash commands, flows) stay inside their outer turn."""
    turns: list[HistoryTurn] = []
    folder: MessageFolder | None = None
    messages: list[Message] = []
    user_input: Any = None
    depth = 0

    def close(finished: bool) -> None:
        assert folder is not None
        messages.extend(folder.flush())
        turns.append(HistoryTurn(len(turns) + 1, user_input, list(messages), finished))

    for record in records:
        kind = record.get("type")
        payload = record.get("payload")
        if kind == "TurnBegin":
            depth += 1
            if depth == 1:
                if folder is not None:  # the previous turn never ended
                    close(False)
                folder, messages = MessageFolder(), []
                user_input = payload.get("user_input") if isinstance(payload, dict) else None
                continue
        elif kind == "TurnEnd":
            depth = max(depth - 1, 0)
            if depth == 0 and folder is not None:
                close(True)
                folder = None
                continue
        if folder is not None:
            messages.extend(folder.feed(decode_event(kind, payload)))
    if folder is not None:
        close(False)
    return turns


class LocalSessions:
    """The sessions of one work dir on this machine, through the engine's `sessions`
    command. Settings as for `Session` (`work_dir`, `share_dir`, `executable`, `env`, …);
    `resume`/`continue_last` give Sessions with the same settings."""

    def __init__(self, options: Options | None = None, /, **settings: Any) -> None:
        self.options = replace(options, **settings) if options is not None else Options(**settings)

    async def _run(self, *args: str) -> str:
        launch = self.options
        argv = [*resolve_executable(launch.executable), "sessions"]
        work_dir = launch.resolved_work_dir()
        if work_dir is not None:
            argv += ["--work-dir", str(work_dir)]
        done = await anyio.run_process([*argv, *args], env=launch.environment(), check=False)
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip().splitlines()
            reason = message[-1] if message else f"exit code {done.returncode}"
            reason = reason.removeprefix("soulwire sessions: ")
            if reason.startswith("no session") or " matches " in reason:
                raise SessionNotFoundError(reason)
            raise SessionStoreError(f"`{' '.join(argv[-3:])} {' '.join(args)}` failed: {reason}")
        return done.stdout.decode("utf-8")

    async def list(self) -> list[StoredSession]:
        """The work dir's sessions, most recently updated first."""
        work_dir = self.options.resolved_work_dir()
        return [
            StoredSession.from_json(d, str(work_dir) if work_dir else None)
            for d in json.loads(await self._run("list", "--json"))
        ]

    async def history(self, session_id: str) -> list[HistoryTurn]:
        out = await self._run("history", session_id)
        return parse_history(json.loads(line) for line in out.splitlines() if line.strip())

    async def fork(
        self, session_id: str, *, turn: int | None = None, title: str | None = None
    ) -> StoredSession:
        """A new session with this one's history up to the end of turn `turn` (None: all)."""
        args = ["fork", session_id, "--json"]
        if turn is not None:
            args += ["--turn", str(turn)]
        if title is not None:
            args += ["--title", title]
        return StoredSession.from_json(json.loads(await self._run(*args)))

    async def delete(self, session_id: str) -> None:
        await self._run("delete", session_id, "--json")

    def resume(self, session_id: str, **overrides: Any) -> Session:
        """A Session (not started: `async with` it) on the stored session's history."""
        return Session(replace(self.options, session_id=session_id, continue_session=False), **overrides)

    def continue_last(self, **overrides: Any) -> Session:
        """A Session on the work dir's most recent session."""
        return Session(replace(self.options, session_id=None, continue_session=True), **overrides)


class ServerSessions:
    """The sessions of a `soulwire serve`, through its HTTP API (`httpx2`, imported here).
    `websocket_url(id)` is where a Wire client attaches to one of them."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx2

        from soulwire.tls import shared_tls_context

        headers = {"Authorization": f"Bearer {self._token}"}
        try:
            # The process's one TLS context, not a new one (the CA bundle, ~40 ms) per request.
            async with httpx2.AsyncClient(
                base_url=self.url, timeout=self._timeout, headers=headers, verify=shared_tls_context(httpx2)
            ) as http:
                response = await http.request(method, path, **kwargs)
        except httpx2.HTTPError as exc:
            raise SessionStoreError(f"{method} {self.url}{path}: {exc}") from exc
        if response.status_code == 404:
            raise SessionNotFoundError(_detail(response))
        if response.status_code >= 400:
            raise SessionStoreError(f"{method} {path}: HTTP {response.status_code}: {_detail(response)}")
        return response.json() if response.content else None

    async def list(self, work_dir: str | None = None) -> list[StoredSession]:
        params = {"work_dir": work_dir} if work_dir else None
        return [
            StoredSession.from_json(d) for d in await self._request("GET", "/api/sessions", params=params)
        ]

    async def get(self, session_id: str) -> StoredSession:
        return StoredSession.from_json(await self._request("GET", f"/api/sessions/{session_id}"))

    async def create(
        self,
        work_dir: str | None = None,
        *,
        title: str | None = None,
        model: str | None = None,
        yolo: bool = False,
        plan_mode: bool = False,
        sandbox: str | None = None,
        checkpoints: bool | None = None,
        overlay: str | None = None,
    ) -> StoredSession:
        """A new session on the server; `model` is an alias of its `GET /api/models`, `yolo`
        and `plan_mode` the state it starts in; `sandbox`, `checkpoints` and `overlay` as the
        engine's flags (an overlay the server cannot run is refused: SessionStoreError)."""
        given = {"work_dir": work_dir, "title": title, "model": model, "sandbox": sandbox, "overlay": overlay}
        body: dict[str, Any] = {k: v for k, v in given.items() if v}
        if checkpoints is not None:
            body["checkpoints"] = checkpoints
        body.update({k: True for k, v in {"yolo": yolo, "plan_mode": plan_mode}.items() if v})
        return StoredSession.from_json(await self._request("POST", "/api/sessions", json=body))

    async def history(self, session_id: str, *, page: int = 5000) -> list[HistoryTurn]:
        records: list[dict[str, Any]] = []
        while True:
            params = {"since": len(records), "limit": page}
            chunk = await self._request("GET", f"/api/sessions/{session_id}/history", params=params)
            records.extend(chunk["records"])
            if not chunk["records"] or len(records) >= chunk["total"]:
                return parse_history(records)

    async def fork(
        self, session_id: str, *, turn: int | None = None, title: str | None = None
    ) -> StoredSession:
        body = {k: v for k, v in {"turn": turn, "title": title}.items() if v is not None}
        return StoredSession.from_json(
            await self._request("POST", f"/api/sessions/{session_id}/fork", json=body)
        )

    async def delete(self, session_id: str) -> None:
        await self._request("DELETE", f"/api/sessions/{session_id}")

    def websocket_url(self, session_id: str) -> str:
        scheme, rest = self.url.split("://", 1)
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws/sessions/{session_id}"


def _detail(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)


__all__ = [
    "HistoryTurn",
    "LocalSessions",
    "ServerSessions",
    "StoredSession",
    "parse_history",
]
