"""The sessions a server knows: found on disk in the CLI's share-dir layout (so either side can
continue the other's), created, renamed, forked and deleted, and opened as live sessions on
demand — one runtime per session, closed again after it has been idle for a while."""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from soulwire.config.loader import ConfigError
from soulwire.runtime.options import SessionOptions
from soulwire.server.hub import LiveSession
from soulwire.server.messages import HubSettings
from soulwire.sessions.fork import ForkError, fork_session
from soulwire.sessions.index import update_work_dir_index
from soulwire.sessions.jsonl import iter_lines
from soulwire.sessions.listing import summarise_session
from soulwire.sessions.lock import is_locked
from soulwire.sessions.paths import (
    CONTEXT_FILE,
    INDEX_FILE,
    WIRE_FILE,
    is_valid_session_id,
    normalise_work_dir,
    work_dir_hash,
)
from soulwire.sessions.store import FileSessionStore, new_session_id, read_state
from soulwire.wire import PROTOCOL_VERSION

log = logging.getLogger("soulwire.server")

_REMEMBER_CREATED = 4096
"""The newest sessions created here that `locate` finds without a scan."""
_DISK_THREADS = 2

WORK_DIR_KEY = "work_dir"
"""Kept in state.json by the server: the work dir a session's directory hash stands for."""
MODEL_KEY = "model"
"""Kept in state.json by the server: the model alias the session was created with."""


class SessionError(Exception):
    """A request about a session that cannot be done; `status` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class ServeSettings:
    share: Path
    work_dir: Path
    raw_config: dict[str, Any] = field(default_factory=dict)
    config_path: Path | None = None
    model_alias: str | None = None
    yolo: bool = False
    thinking: bool | None = None
    max_steps_per_turn: int | None = None
    sandbox: str | None = None
    sandbox_network: bool | None = None
    idle_timeout_s: float = 300.0
    hub: HubSettings = field(default_factory=HubSettings)


@dataclass
class Located:
    id: str
    dir: Path
    work_dir: str


def content_digest(path: Path) -> tuple[str, int]:
    """(sha256 of the file, number of message records in it): what a resume proves it loaded."""
    digest = hashlib.sha256()
    records = 0
    for _, line in iter_lines(path):
        digest.update(line)
        digest.update(b"\n")
        if line.startswith(b'{"timestamp"'):
            records += 1
    return digest.hexdigest(), records


class SessionRegistry:
    """Every session of the share dir, and the live ones of this process."""

    def __init__(self, settings: ServeSettings, group: anyio.abc.TaskGroup) -> None:
        self.settings = settings
        self._group = group
        self.live: dict[str, LiveSession] = {}
        self._opening: dict[str, anyio.Lock] = {}
        self._created: dict[str, Located] = {}
        """Sessions this process created: found without reading the index and looking into
        every work dir's bucket (a fleet creates hundreds, each in its own work dir)."""
        self.disk_limiter = anyio.CapacityLimiter(_DISK_THREADS)
        """Worker threads for session files (creating and opening sessions). Few on purpose:
        a burst of fifty creations on fifty threads spent more CPU handing the GIL between
        them than on the files (bench/RESULTS.md §11e)."""

    # -- finding sessions ---------------------------------------------------------------
    def _work_dirs(self) -> dict[str, str]:
        """Directory hash → work dir, for every work dir the share dir knows."""
        import json

        paths = [normalise_work_dir(self.settings.work_dir)]
        try:
            index = json.loads((self.settings.share / INDEX_FILE).read_text(encoding="utf-8"))
            entries = index.get("work_dirs") if isinstance(index, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                    paths.append(entry["path"])
        except (OSError, ValueError):
            pass
        return {work_dir_hash(p): p for p in paths}

    def _session_dirs(self) -> Iterator[Located]:
        root = self.settings.share / "sessions"
        if not root.is_dir():
            return
        known = self._work_dirs()
        for bucket in root.iterdir():
            if not bucket.is_dir():
                continue
            for directory in bucket.iterdir():
                if not directory.is_dir() or not is_valid_session_id(directory.name):
                    continue
                work_dir = known.get(bucket.name) or read_state(directory).get(WORK_DIR_KEY)
                if isinstance(work_dir, str):
                    yield Located(directory.name, directory, work_dir)

    def locate(self, session_id: str) -> Located:
        """The session with this id; an unknown id is an error, never a fresh session."""
        live = self.live.get(session_id)
        if live is not None:
            store = live.runtime.session.store
            return Located(session_id, store.dir, store.work_dir)
        created = self._created.get(session_id)
        if created is not None and (created.dir / CONTEXT_FILE).exists():
            return created
        if is_valid_session_id(session_id):
            root = self.settings.share / "sessions"
            for bucket, work_dir in self._work_dirs().items():  # the usual case: no scan
                directory = root / bucket / session_id
                if (directory / CONTEXT_FILE).exists() or (directory / WIRE_FILE).exists():
                    return Located(session_id, directory, work_dir)
            for found in self._session_dirs():
                if found.id == session_id and (
                    (found.dir / CONTEXT_FILE).exists() or (found.dir / WIRE_FILE).exists()
                ):
                    return found
        raise SessionError(404, f"no session {session_id!r}")

    def describe(self, found: Located, *, priced: bool = True) -> dict[str, Any]:
        """A session's facts; `priced` adds its model's price (the list leaves it out: the price
        table's first import is not worth a page load)."""
        summary = summarise_session(found.dir)
        info: dict[str, Any] = summary.to_json() if summary else {"id": found.id, "dir": str(found.dir)}
        live = self.live.get(found.id)
        info["work_dir"] = found.work_dir
        info["live"] = live is not None
        info["busy"] = live.busy if live else False
        info["clients"] = len(live.clients) if live else 0
        info["last_seq"] = live.seq if live else None
        info["held_elsewhere"] = live is None and is_locked(self.settings.share, found.work_dir, found.id)
        state = read_state(found.dir)
        stored = state.get("sandbox")
        if isinstance(stored, dict):
            info["sandbox"] = stored
        info["archived"] = state.get("archived") is True
        at = state.get("archived_at")
        info["archived_at"] = at if info["archived"] and isinstance(at, int | float) else None
        approval = state.get("approval")
        info["yolo"] = (
            self.settings.yolo
            or self.settings.raw_config.get("default_yolo") is True
            or (isinstance(approval, dict) and approval.get("yolo") is True)
        )
        info["plan_mode"] = state.get("plan_mode") is True
        from soulwire.server.models_info import session_model

        model = session_model(self.settings, state, priced=priced)
        if model is not None:
            info["model"] = model.alias
            info["model_name"] = model.model
            if priced:
                info["price"] = model.price.model_dump() if model.price else None
        return info

    def list(self, work_dir: str | None = None, archived: bool | None = None) -> list[dict[str, Any]]:
        """Sessions, newest first; `archived` True or False keeps only those (None: all)."""
        wanted = normalise_work_dir(work_dir) if work_dir else None
        found = [f for f in self._session_dirs() if wanted is None or f.work_dir == wanted]
        infos = [
            self.describe(f, priced=False)
            for f in found
            if (f.dir / CONTEXT_FILE).exists() or (f.dir / WIRE_FILE).exists()
        ]
        if archived is not None:
            infos = [i for i in infos if i["archived"] is archived]
        return sorted(infos, key=lambda i: i.get("updated", 0), reverse=True)

    # -- changing sessions --------------------------------------------------------------
    def _store(self, session_id: str, work_dir: str) -> FileSessionStore:
        return FileSessionStore(self.settings.share, work_dir, session_id, protocol_version=PROTOCOL_VERSION)

    def create(
        self,
        work_dir: str | None,
        title: str | None,
        sandbox: str | None = None,
        sandbox_network: bool | None = None,
        *,
        model: str | None = None,
        yolo: bool = False,
        plan_mode: bool = False,
        create_dir: bool = False,
    ) -> Located:
        """A new session; `sandbox`/`sandbox_network` are recorded in its state, where the
        runtime finds them whenever the session is opened (here or by the CLI), as are
        `yolo` and `plan_mode` (the state it starts in) and `model` (used whenever this
        server opens it; 422 for a model the configuration does not offer). `create_dir`
        makes a missing (absolute) work dir first."""
        path = Path(work_dir).expanduser() if work_dir else self.settings.work_dir
        if create_dir and path.is_absolute() and not path.exists():
            try:
                path.mkdir(parents=True)
            except OSError as exc:
                raise SessionError(422, f"cannot create the work dir {path}: {exc.strerror}") from None
        if not path.is_absolute() or not path.is_dir():
            raise SessionError(422, f"work_dir must be an existing absolute directory: {path}")
        if model is not None:
            from soulwire.server.models_info import UnknownModel, check_model

            try:
                check_model(self.settings, model)
            except UnknownModel as exc:
                raise SessionError(422, str(exc)) from None
        if sandbox not in (None, "off"):
            from soulwire.tools.sandbox import bubblewrap_problem

            problem = bubblewrap_problem()
            if problem is not None:
                raise SessionError(422, f"cannot sandbox the session: {problem}")
        normal = normalise_work_dir(path)
        session_id = new_session_id()
        store = self._store(session_id, normal)
        state: dict[str, Any] = {WORK_DIR_KEY: normal}
        if title:
            state["custom_title"] = title
        if model is not None:
            state[MODEL_KEY] = model
        if yolo:
            state["approval"] = {"yolo": True, "afk": False, "auto_approve_actions": []}
        if plan_mode:
            state["plan_mode"] = True
        if sandbox is not None or sandbox_network is not None:
            from soulwire.runtime.sandbox import STATE_KEY

            state[STATE_KEY] = {"mode": sandbox or "off", "network": bool(sandbox_network)}
        store.save_state(state)
        (store.dir / CONTEXT_FILE).touch(mode=0o600)
        update_work_dir_index(self.settings.share, normal, session_id)
        found = self._created[session_id] = Located(session_id, store.dir, normal)
        if len(self._created) > _REMEMBER_CREATED:
            del self._created[next(iter(self._created))]
        return found

    def _not_held_elsewhere(self, found: Located) -> None:
        if found.id not in self.live and is_locked(self.settings.share, found.work_dir, found.id):
            raise SessionError(409, f"session {found.id} is in use by another process")

    def rename(self, session_id: str, title: str) -> Located:
        return self._update_state(session_id, {"custom_title": title, "title_generated": True})

    def archive(self, session_id: str, archived: bool) -> Located:
        """Archive or unarchive (kimi's `archived`, `archived_at`, `auto_archive_exempt`). An
        archived session is hidden from the default listing and can still be opened and read;
        a prompt to it unarchives it (engine/state.py)."""
        changes: dict[str, Any] = {
            "archived": archived,
            "archived_at": time.time() if archived else None,
            "auto_archive_exempt": not archived,
        }
        return self._update_state(session_id, changes)

    def _update_state(self, session_id: str, changes: dict[str, Any]) -> Located:
        """Change keys of a session's state.json: through its live keeper when it runs here
        (which would otherwise write its own copy over them), else on disk."""
        found = self.locate(session_id)
        live = self.live.get(session_id)
        if live is not None:
            live.runtime.state.state.update(changes)
            live.runtime.save_state()
            return found
        self._not_held_elsewhere(found)
        state = read_state(found.dir)
        state.update(changes)
        state.setdefault(WORK_DIR_KEY, found.work_dir)
        self._store(found.id, found.work_dir).save_state(state)
        return found

    def fork(self, session_id: str, title: str | None, turn: int | None = None) -> Located:
        """A new session with a copy of this one's history (up to the end of turn `turn`)."""
        found = self.locate(session_id)
        live = self.live.get(session_id)
        if live is not None:
            if live.busy:
                raise SessionError(409, f"session {session_id} is running a turn; fork it when idle")
            live.runtime.bus.flush()
            live.runtime.session.store.sync()
            live.runtime.save_state()
        try:
            new_id, target = fork_session(
                self.settings.share, found.work_dir, found.dir, turns=turn, title=title
            )
        except ForkError as exc:
            raise SessionError(422, str(exc)) from None
        return Located(new_id, target, found.work_dir)

    async def delete(self, session_id: str) -> None:
        found = self.locate(session_id)
        live = self.live.get(session_id)
        if live is not None:
            if live.clients or live.busy:
                raise SessionError(409, f"session {session_id} has clients attached or a turn running")
            live.close()
            await live.finished.wait()
        self._not_held_elsewhere(found)
        self._created.pop(session_id, None)
        shutil.rmtree(found.dir, ignore_errors=True)
        update_work_dir_index(self.settings.share, found.work_dir, None, only_if=found.id)

    def history(self, session_id: str, since: int, limit: int) -> dict[str, Any]:
        """Recorded messages (merged, as in wire.jsonl) from index `since` on."""
        found = self.locate(session_id)
        store = self._store(found.id, found.work_dir)
        records: list[dict[str, Any]] = []
        total = 0
        for number, message in enumerate(store.wire_records()):
            total = number + 1
            if number >= since and len(records) < limit:
                records.append(message)
        return {"id": found.id, "since": since, "records": records, "total": total}

    # -- live sessions ------------------------------------------------------------------
    async def open(self, session_id: str) -> LiveSession:
        """The live session (its runtime built now if needed); 404 unknown, 409 held elsewhere."""
        live = self.live.get(session_id)
        if live is not None and not live.closed:
            return live
        lock = self._opening.setdefault(session_id, anyio.Lock())
        async with lock:
            live = self.live.get(session_id)
            if live is not None and not live.closed:
                return live
            if live is not None:
                await live.finished.wait()
            found = self.locate(session_id)
            digest, records = content_digest(found.dir / WIRE_FILE)
            settings = self.settings
            stored_model = read_state(found.dir).get(MODEL_KEY)
            options = SessionOptions(
                work_dir=Path(found.work_dir),
                share_dir=settings.share,
                raw_config=settings.raw_config,
                config_path=settings.config_path,
                model_alias=stored_model if isinstance(stored_model, str) else settings.model_alias,
                yolo=settings.yolo,
                thinking=settings.thinking,
                max_steps_per_turn=settings.max_steps_per_turn,
                sandbox=settings.sandbox,
                sandbox_network=settings.sandbox_network,
                session_id=session_id,
                keep_empty_session=True,
            )
            from soulwire.runtime.builder import build_runtime

            try:
                runtime = await anyio.to_thread.run_sync(build_runtime, options, limiter=self.disk_limiter)
            except ConfigError as exc:
                status = 409 if "in use by another process" in str(exc) else 500
                raise SessionError(status, str(exc)) from None
            live = LiveSession(runtime, settings.hub, self._on_empty)
            live.loaded = {"session_id": session_id, "records": records, "content_hash": digest}
            self.live[session_id] = live
            self._group.start_soon(self._run, live)
            return live

    async def _run(self, live: LiveSession) -> None:
        try:
            await live.run()
        except Exception:  # one session's failure must not take the others down
            log.exception("session %s failed", live.id)
        finally:
            if self.live.get(live.id) is live:
                del self.live[live.id]

    def _on_empty(self, live: LiveSession) -> None:
        if not live.closed:  # (a closed one is on its way out already)
            self._group.start_soon(self._close_when_idle, live)

    async def _close_when_idle(self, live: LiveSession) -> None:
        """No client left: keep the session (and its ring) a while for reconnects, then close."""
        while not live.closed:
            await anyio.sleep(self.settings.idle_timeout_s)
            if live.clients:
                return  # someone came back; their leaving schedules another check
            if not live.busy:
                live.close()
                return

    async def aclose(self) -> bool:
        """Close every live session (their turns are cancelled) and wait for them, 10 s at
        most; whether they all finished."""
        sessions = list(self.live.values())
        for live in sessions:
            live.close()
        with anyio.move_on_after(10):
            for live in sessions:
                await live.finished.wait()
            return True
        return False


__all__ = ["Located", "ServeSettings", "SessionError", "SessionRegistry", "content_digest"]
