"""The sessions a server knows: found on disk in the CLI's share-dir layout (so either side can
continue the other's), created, renamed, forked and deleted, and opened as live sessions on
demand — one runtime per session, closed again after it has been idle for a while."""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.abc
import anyio.to_thread

from soulwire.config.loader import ConfigError
from soulwire.errors import SoulwireError
from soulwire.runtime.model_switch import MODEL_KEY, THINKING_KEY
from soulwire.runtime.options import SessionOptions
from soulwire.runtime.session import SessionHeldError
from soulwire.server.hub import LiveSession
from soulwire.server.messages import HubSettings
from soulwire.sessions.backend import FILE_STORES, HostedStore, SessionStores
from soulwire.sessions.fork import ForkError, fork_from_store, fork_session
from soulwire.sessions.index import update_work_dir_index
from soulwire.sessions.jsonl import iter_lines
from soulwire.sessions.listing import SessionSummary, summarise_session
from soulwire.sessions.lock import is_locked
from soulwire.sessions.paths import (
    CONTEXT_FILE,
    INDEX_FILE,
    WIRE_FILE,
    is_valid_session_id,
    normalise_work_dir,
    session_dir,
    work_dir_hash,
)
from soulwire.sessions.store import StoreUnavailable, new_session_id, read_state
from soulwire.wire import PROTOCOL_VERSION
from soulwire.wire.session_settings import OVERLAY_MODES, SandboxMode, SessionSettings

if TYPE_CHECKING:
    from soulwire.server.follow import FollowedSession, Followers
    from soulwire.server.replicas import Replica
    from soulwire.sessions.pg_catalog import PostgresStores

log = logging.getLogger("soulwire.server")

_REMEMBER_CREATED = 4096
"""The newest sessions created here that `locate` finds without a scan."""
_DISK_THREADS = 2

WORK_DIR_KEY = "work_dir"
"""Kept in state.json by the server: the work dir a session's directory hash stands for."""
OWNER_KEY = "owner"
"""Kept in state.json by a server with named users: the user who created the session."""
SHARED_KEY = "shared_with"
"""Kept in state.json by a server with named users: the users the session is shared with."""
CHECKPOINTS_KEY = "checkpoints"
"""Kept in state.json by the server: checkpoints asked for (or refused) at creation; it wins
over the server's `--checkpoints` whenever the server opens the session."""
OVERLAY_KEY = "overlay"
"""Kept in state.json by the server: the overlay policy asked for at creation (`ask`, `commit`,
`discard`); it wins over the server's `--overlay` whenever the server opens the session."""


class SessionError(SoulwireError):
    """A request about a session that cannot be done; `status` is its HTTP status, `owner`
    the address of the replica that runs the session (a 307 there)."""

    def __init__(self, status: int, message: str, *, owner: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.owner = owner


def error_answer(
    exc: SessionError, path: str, query: str, *, websocket: bool = False
) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON body and headers of an HTTP answer to a SessionError: a session another replica
    runs is a 307 to the same path and query on that replica (`owner` in the body too; a
    WebSocket upgrade is sent to its ws:// or wss:// address, which WebSocket clients follow)."""
    if exc.owner is None:
        return {"detail": exc.message}, {}
    owner = exc.owner
    if websocket:
        owner = "ws" + owner.removeprefix("http") if owner.startswith("http") else owner
    location = owner + path + (f"?{query}" if query else "")
    return {"detail": exc.message, "owner": exc.owner}, {"location": location}


@dataclass
class ServeSettings(SessionSettings):
    """The server's: its share and work dir, its configuration, and the settings of every
    session it opens (`SessionSettings`; a session's own stored model and sandbox win)."""

    share: Path
    work_dir: Path
    raw_config: dict[str, Any] = field(default_factory=dict)
    config_path: Path | None = None
    idle_timeout_s: float = 300.0
    hub: HubSettings = field(default_factory=HubSettings)
    stores: SessionStores = FILE_STORES
    """Where sessions are kept (`serve --store`: PostgreSQL, shared with other replicas)."""
    advertise: str = ""
    """This replica's address for clients another replica sends here (`serve --advertise`)."""
    lease_s: float = 10.0
    workspaces: Path | None = None
    """Work dirs under this directory that are missing here are made from their session's
    latest checkpoint when this replica takes the session (`serve --workspaces DIR`)."""


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


Known = tuple[SessionSummary | None, dict[str, Any] | None, str | None]
"""A session's summary, state and owning replica, read already (registry.describe)."""
T = TypeVar("T")


def _listed(infos: list[dict[str, Any]], archived: bool | None) -> list[dict[str, Any]]:
    """Sessions newest first; `archived` True or False keeps only those."""
    if archived is not None:
        infos = [i for i in infos if i["archived"] is archived]
    return sorted(infos, key=lambda i: i.get("updated", 0), reverse=True)


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
        self.shared: PostgresStores | None = None
        self.replica: Replica | None = None
        self.draining = False
        """This replica hands its sessions over and takes none (server/handover.py)."""
        self.followers: Followers | None = None
        """Sessions run by other replicas that this one's observers watch (server/follow.py)."""
        if settings.stores.shared:
            from soulwire.server.follow import Followers
            from soulwire.server.replicas import Replica
            from soulwire.sessions.pg_catalog import PostgresStores

            assert isinstance(settings.stores, PostgresStores)
            self.shared = settings.stores
            backend = self.shared.backend
            self.replica = Replica(backend.url, settings.advertise, settings.lease_s, recheck=backend.recheck)
            group.start_soon(self.replica.heartbeat, self.live.values, self._close_all)
            self.followers = Followers(backend.url, settings.hub, group)
            settings.hub.relay = backend.writer.relay  # (what followers' observers get unrecorded)

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
        if self.shared is not None:
            work_dir = self.shared.work_dir_of(session_id) if is_valid_session_id(session_id) else None
            if work_dir is None:
                raise SessionError(404, f"no session {session_id!r}")
            return Located(session_id, session_dir(self.settings.share, work_dir, session_id), work_dir)
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

    def describe(self, found: Located, *, priced: bool = True, known: Known | None = None) -> dict[str, Any]:
        """A session's facts; `priced` adds its model's price (the list leaves it out: the price
        table's first import is not worth a page load); `known`: its summary, state and owner
        read already (a listing reads every session's at once)."""
        if known is not None:
            summary, state, owner = known
        elif self.shared is not None:
            described = self.shared.described([found.id], lambda _: found.dir).get(found.id)
            summary, state = described if described else (None, {})
            owner = self._owner(found)
        else:
            summary, state = summarise_session(found.dir), None
            owner = None
        info: dict[str, Any] = summary.to_json() if summary else {"id": found.id, "dir": str(found.dir)}
        live = self.live.get(found.id)
        info["work_dir"] = found.work_dir
        info["live"] = live is not None
        info["busy"] = live.busy if live else False
        info["clients"] = len(live.clients) if live else 0
        info["last_seq"] = live.seq if live else None
        info["replica"] = owner if live is None else (self.settings.advertise or None)
        info["held_elsewhere"] = live is None and (
            info["replica"] is not None
            if self.shared
            else is_locked(self.settings.share, found.work_dir, found.id)
        )
        if state is None:
            state = self._store(found.id, found.work_dir).load_state()
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
        if OWNER_KEY in state:
            info["owner"] = state[OWNER_KEY]
            info["shared_with"] = state.get(SHARED_KEY) or []
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
        if self.shared is not None:
            share = self.settings.share
            found = [Located(i, session_dir(share, w, i), w) for i, w in self.shared.entries()]
            found = [f for f in found if wanted is None or f.work_dir == wanted]
            dirs = {f.id: f.dir for f in found}
            described = self.shared.described(None, lambda i: dirs.get(i, share))
            owners = self._owners()
            infos = [
                self.describe(f, priced=False, known=(*described[f.id], owners.get(f.id)))
                for f in found
                if f.id in described
            ]
            return _listed(infos, archived)
        else:
            found = [
                f
                for f in self._session_dirs()
                if (wanted is None or f.work_dir == wanted)
                and ((f.dir / CONTEXT_FILE).exists() or (f.dir / WIRE_FILE).exists())
            ]
        return _listed([self.describe(f, priced=False) for f in found], archived)

    async def off_loop(self, call: Callable[[], T]) -> T:
        """Run a reading `call` (the listing, a session's info, its history) on a worker thread
        when the store is a database (its queries would stall every session this replica
        streams); in place on the share dir's files, as before."""
        if self.shared is None:
            return call()
        return await anyio.to_thread.run_sync(call, limiter=self.disk_limiter)

    # -- changing sessions --------------------------------------------------------------
    def _store(self, session_id: str, work_dir: str) -> HostedStore:
        return self.settings.stores.open(
            self.settings.share, work_dir, session_id, protocol_version=PROTOCOL_VERSION
        )

    def _owners(self) -> dict[str, str]:
        """Every session another live replica runs, with its address (shared stores only)."""
        if self.replica is None:
            return {}
        try:
            return self.replica.ownership.owners()
        except Exception:  # the store is down: nobody can be sent anywhere
            return {}

    def _owner(self, found: Located) -> str | None:
        """The address of another live replica that runs the session (shared stores only)."""
        if self.replica is None:
            return None
        try:
            return self.replica.ownership.owner_of(found.id)
        except Exception:  # the store is down: nobody can be sent anywhere
            return None

    def create(
        self,
        work_dir: str | None,
        title: str | None,
        settings: SessionSettings | None = None,
        *,
        create_dir: bool = False,
        owner: str | None = None,
    ) -> Located:
        """A new session; the `settings` it keeps are recorded in its state, where the runtime
        finds them whenever the session is opened (here or by the CLI): `sandbox` and
        `sandbox_network`, `yolo` and `plan_mode` (the state it starts in), `checkpoints` and
        `model` (used whenever this server opens it; 422 for a model the configuration does not
        offer). `create_dir` makes a missing (absolute) work dir first; `owner` names the user
        who created it (a server with named users)."""
        asked = settings or SessionSettings()
        model, sandbox, sandbox_network = asked.model, asked.sandbox, asked.sandbox_network
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
        if asked.overlay not in (None, "off"):
            configured = self.settings.raw_config.get("sandbox")
            self._check_overlay(sandbox or self.settings.sandbox or configured)
        normal = normalise_work_dir(path)
        session_id = new_session_id()
        store = self._store(session_id, normal)
        state: dict[str, Any] = {WORK_DIR_KEY: normal}
        if title:
            state["custom_title"] = title
        if model is not None:
            state[MODEL_KEY] = model
        if owner is not None:
            state[OWNER_KEY] = owner
        if asked.yolo:
            state["approval"] = {"yolo": True, "afk": False, "auto_approve_actions": []}
        if asked.plan_mode:
            state["plan_mode"] = True
        if asked.checkpoints is not None:
            state[CHECKPOINTS_KEY] = asked.checkpoints
        if asked.overlay is not None:
            state[OVERLAY_KEY] = asked.overlay
        if sandbox is not None or sandbox_network is not None:
            from soulwire.runtime.sandbox import STATE_KEY

            state[STATE_KEY] = {"mode": sandbox or "off", "network": bool(sandbox_network)}
        store.save_state(state)
        if not self.settings.stores.shared:  # the file that makes the directory a session
            (store.dir / CONTEXT_FILE).touch(mode=0o600)
        update_work_dir_index(self.settings.share, normal, session_id)
        found = self._created[session_id] = Located(session_id, store.dir, normal)
        if len(self._created) > _REMEMBER_CREATED:
            del self._created[next(iter(self._created))]
        return found

    @staticmethod
    def _check_overlay(sandbox: str | None) -> None:
        """An overlay asked for where it cannot run is refused at creation (a 422 naming why),
        not left to a line on the server's stderr when the session opens."""
        if sandbox != "workspace-write":
            raise SessionError(422, "an overlay needs the sandbox: sandbox=workspace-write")
        from soulwire.tools.overlay import overlay_problem

        problem = overlay_problem()
        if problem is not None:
            raise SessionError(422, f"cannot run turns in an overlay here: {problem}")

    def _not_held_elsewhere(self, found: Located) -> None:
        if found.id in self.live:
            return
        owner = self._owner(found)
        if owner is not None:
            raise SessionError(307, f"session {found.id} is run by the replica at {owner}", owner=owner)
        if not self.settings.stores.shared and is_locked(self.settings.share, found.work_dir, found.id):
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

    def state_of(self, session_id: str) -> dict[str, Any]:
        """A session's state as it stands (its live keeper's when it runs here)."""
        live = self.live.get(session_id)
        if live is not None:
            return live.runtime.state.state
        found = self.locate(session_id)
        return self._store(found.id, found.work_dir).load_state()

    def update_state(self, session_id: str, changes: dict[str, Any]) -> Located:
        """Change keys of a session's state (its owner, who it is shared with)."""
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
        store = self._store(found.id, found.work_dir)
        state = store.load_state()
        state.update(changes)
        state.setdefault(WORK_DIR_KEY, found.work_dir)
        store.save_state(state)
        return found

    async def set_sandbox(self, session_id: str, mode: SandboxMode) -> None:
        """Reopen the session under another sandbox mode (it is part of how the session's tools
        are built; an ACP editor's `sandbox` option): refused while a turn runs, and when this
        server sets every session's sandbox (`serve --sandbox`). Its clients are disconnected
        (1001) and attach again, as after any restart of the session."""
        from soulwire.runtime.sandbox import STATE_KEY
        from soulwire.tools.sandbox import bubblewrap_problem

        found = self.locate(session_id)
        if self.settings.sandbox is not None:
            raise SessionError(409, f"this server runs every session with --sandbox {self.settings.sandbox}")
        problem = bubblewrap_problem() if mode != "off" else None
        if problem is not None:
            raise SessionError(422, f"cannot sandbox the session: {problem}")
        live = self.live.get(session_id)
        if live is not None and not live.closed:
            if live.busy:
                raise SessionError(409, f"session {session_id} is running a turn")
            live.close()
            await live.finished.wait()  # its keeper wrote its last state: ours goes over it
        else:
            self._not_held_elsewhere(found)
        store = self._store(found.id, found.work_dir)
        state = store.load_state()
        stored = state.get(STATE_KEY)
        network = isinstance(stored, dict) and stored.get("network") is True
        state[STATE_KEY] = {"mode": mode, "network": network}
        store.save_state(state)

    async def fork(self, session_id: str, title: str | None, turn: int | None = None) -> Located:
        """A new session with a copy of this one's history (up to the end of turn `turn`); on a
        database store the copy runs off the event loop."""
        found = self.locate(session_id)
        live = self.live.get(session_id)
        if live is not None:
            if live.busy:
                raise SessionError(409, f"session {session_id} is running a turn; fork it when idle")
            live.runtime.bus.flush()
            live.runtime.session.store.sync()
            live.runtime.save_state()
        try:
            if self.shared is not None:  # the records are copied in the database
                new_id = await self.off_loop(
                    lambda: fork_from_store(
                        self._store(found.id, found.work_dir), found.work_dir, turns=turn, title=title
                    )
                )
                target = session_dir(self.settings.share, found.work_dir, new_id)
            else:
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
        self._store(found.id, found.work_dir).delete()
        shutil.rmtree(found.dir, ignore_errors=True)  # what a PostgreSQL session kept here
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
            if self.draining:
                raise SessionError(503, "this replica is draining: another one takes the session")
            try:
                found = await self.off_loop(lambda: self.locate(session_id))  # (a query on a database)
                if self.replica is not None:
                    await self.replica.own(found.id, found.work_dir, self._materialiser(found))
                try:
                    return await self._start(found)
                except BaseException:
                    await self._disown(found.id)
                    raise
            except StoreUnavailable as exc:
                raise SessionError(503, str(exc)) from None

    async def observe(self, session_id: str) -> LiveSession | FollowedSession:
        """What an observer attaches to: on a shared store, a session another live replica runs
        is followed through the store (an observer is not sent to the owner: it may watch
        anywhere); any other is opened here as for every client."""
        live = self.live.get(session_id)
        if self.followers is None or (live is not None and not live.closed):
            return await self.open(session_id)

        def located() -> tuple[Located, str | None]:  # two queries: off the event loop
            found = self.locate(session_id)
            return found, self._owner(found)

        found, owner = await self.off_loop(located)
        if owner is None:
            return await self.open(session_id)
        try:
            return await self.followers.follow(found.id, found.work_dir, owner)
        except Exception as exc:  # psycopg's, or no LISTEN connection in time: the store is down
            raise SessionError(503, f"the session store is unreachable ({type(exc).__name__})") from None

    def _materialiser(self, found: Located) -> Callable[[], object] | None:
        """What makes the session's missing work dir here (`serve --workspaces`), if it may."""
        root = self.settings.workspaces
        if root is None or not Path(found.work_dir).is_relative_to(root):
            return None
        from soulwire.sessions.checkpoints.forking import materialise

        return lambda: materialise(self._store(found.id, found.work_dir), found.work_dir)

    async def _start(self, found: Located) -> LiveSession:
        session_id = found.id
        if self.shared is not None:  # the database's round trips off the event loop
            digest, records = await anyio.to_thread.run_sync(self.shared.content_digest, session_id)
        else:
            digest, records = content_digest(found.dir / WIRE_FILE)
        settings = self.settings
        state = await self.off_loop(lambda: self._store(session_id, found.work_dir).load_state())
        stored_model, stored_checkpoints = state.get(MODEL_KEY), state.get(CHECKPOINTS_KEY)
        stored_overlay = state.get(OVERLAY_KEY)
        session = settings.session_settings()
        if isinstance(stored_model, str):
            session.model = stored_model
        if isinstance(state.get(THINKING_KEY), bool):  # as last switched (runtime/model_switch.py)
            session.thinking = bool(state[THINKING_KEY])
        if isinstance(stored_checkpoints, bool):
            session.checkpoints = stored_checkpoints
        if stored_overlay in OVERLAY_MODES:
            session.overlay = stored_overlay
        options = SessionOptions(
            work_dir=Path(found.work_dir),
            share_dir=settings.share,
            raw_config=settings.raw_config,
            config_path=settings.config_path,
            session_id=session_id,
            keep_empty_session=True,
            continue_turn=True,  # a takeover continues a turn left waiting for approvals
            stores=settings.stores,
            **vars(session),
        )
        from soulwire.runtime.builder import build_runtime

        try:
            runtime = await anyio.to_thread.run_sync(build_runtime, options, limiter=self.disk_limiter)
        except SessionHeldError as exc:
            raise SessionError(409, str(exc)) from None
        except ConfigError as exc:
            raise SessionError(500, str(exc)) from None
        live = LiveSession(runtime, settings.hub, self._on_empty)
        live.loaded = {"session_id": session_id, "records": records, "content_hash": digest}
        if live.by_store:  # numbered by the store: the newest records start the ring
            from soulwire.sessions.postgres import PostgresSessionStore

            store = runtime.session.store
            assert isinstance(store, PostgresSessionStore)
            rows, last = await anyio.to_thread.run_sync(store.recent_wire_rows, settings.hub.ring_events)
            live.preload(rows, last)
            if last != records and self.shared is not None:
                # A turn a dead owner left open was closed in the record while the session
                # opened: what was loaded is the record with that closing (a page draws the
                # record up to `records`, and the ring goes on after `last`).
                digest, records = await anyio.to_thread.run_sync(self.shared.content_digest, session_id)
                live.loaded = {"session_id": session_id, "records": records, "content_hash": digest}
        self.live[session_id] = live
        self._group.start_soon(self._run, live)
        return live

    async def _run(self, live: LiveSession) -> None:
        try:
            await live.run()
        except StoreUnavailable as exc:  # closed while the store was down: its record says so
            log.warning("session %s closed: %s", live.id, exc)
        except Exception:  # one session's failure must not take the others down
            log.exception("session %s failed", live.id)
        finally:
            if self.live.get(live.id) is live:
                del self.live[live.id]
            await self._disown(live.id)

    async def _disown(self, session_id: str) -> None:
        if self.replica is not None:
            await self.replica.disown(session_id)

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

    def _close_all(self) -> None:
        for live in list(self.live.values()):
            live.close()

    async def aclose(self) -> bool:
        """Close every live session (their turns are cancelled) and wait for them, 10 s at
        most; whether they all finished."""
        sessions = list(self.live.values())
        for live in sessions:
            live.close()
        try:
            with anyio.move_on_after(10):
                for live in sessions:
                    await live.finished.wait()
                return True
            return False
        finally:
            if self.replica is not None:
                self.replica.ownership.close()
            if self.followers is not None:
                with anyio.move_on_after(2):
                    await self.followers.aclose()


__all__ = ["Located", "ServeSettings", "SessionError", "SessionRegistry", "content_digest", "error_answer"]
