"""Opening a session: new, by id (resume or create with that id), or the last one."""

from __future__ import annotations

from dataclasses import dataclass

from soulwire.config.loader import ConfigError
from soulwire.runtime.options import SessionOptions
from soulwire.sessions.backend import FILE_STORES, HostedStore
from soulwire.sessions.index import last_session_id, update_work_dir_index
from soulwire.sessions.lock import SessionBusyError, SessionLock
from soulwire.sessions.paths import is_valid_session_id, normalise_work_dir
from soulwire.sessions.store import new_session_id


@dataclass(eq=False)  # compared by identity (and cheaper to define)
class SessionHandle:
    """One open session (in the store the options chose), and the share-dir bookkeeping
    around it."""

    store: HostedStore
    resumed: bool
    lock: SessionLock | None = None
    keep_empty: bool = False
    _announced: bool = False

    @property
    def id(self) -> str:
        return self.store.session_id

    def announce(self) -> None:
        """Make this the work dir's last session as soon as it has content, so that
        `--continue` finds it even if the process is killed later."""
        if not self._announced:
            self._announced = True
            update_work_dir_index(self.store.share, self.store.work_dir, self.id)

    def is_empty(self) -> bool:
        """Nothing worth keeping: no wire records, no title, no model-visible message."""
        store = self.store
        if store.has_wire_records() or store.load_state().get("custom_title"):
            return False
        return not any(not str(r.get("role", "_")).startswith("_") for r in store.load_context())

    def close(self, *, exit_ok: bool = True) -> None:
        """Leave the share dir tidy: drop a session nobody used, else remember it as last."""
        self.store.close()
        work_dir = self.store.work_dir
        try:
            self._tidy(work_dir, exit_ok=exit_ok)
        finally:
            if self.lock is not None:
                self.lock.release()

    def _tidy(self, work_dir: str, *, exit_ok: bool) -> None:
        if self.is_empty() and not self.keep_empty:
            self.store.delete()
            update_work_dir_index(self.store.share, work_dir, None, only_if=self.id)
        elif exit_ok:
            update_work_dir_index(self.store.share, work_dir, self.id)


def resolve_session_id(options: SessionOptions) -> str | None:
    """The id to open (None = a new session). `--continue` without history is a usage error."""
    if options.continue_last:
        found = last_session_id(options.share_dir, normalise_work_dir(options.work_dir))
        if found is None:
            raise ConfigError(
                "No previous session found for the working directory; start one without --continue"
            )
        return found
    if options.session_id is not None and not is_valid_session_id(options.session_id):
        raise ConfigError(f"invalid session id: {options.session_id!r}")
    return options.session_id


class SessionHeldError(ConfigError):
    """The session is held by another process: `holder` names it (`pid`, `host`, `since`)."""

    def __init__(self, busy: SessionBusyError) -> None:
        super().__init__(str(busy))
        self.session_id = busy.session_id
        self.holder = busy.holder


def lock_session(options: SessionOptions, session_id: str) -> SessionLock:
    """Take the session's lock for this process, or raise SessionHeldError."""
    try:
        return SessionLock.acquire(options.share_dir, options.work_dir, session_id)
    except SessionBusyError as exc:
        raise SessionHeldError(exc) from None


def open_session(
    options: SessionOptions, *, protocol_version: str, lock: SessionLock | None = None
) -> SessionHandle:
    """Open the session the options name. It counts as resumed when it has wire records
    (spec §7.2); an unknown id creates a session with exactly that id. The session is locked
    for this process (`lock`: taken already, by `lock_session`): one held elsewhere (a
    `soulwire serve`, another `--wire`) is a SessionHeldError that names the holder."""
    session_id = resolve_session_id(options) or new_session_id()
    stores = options.stores or FILE_STORES
    if lock is None and not stores.shared:  # a shared store's replicas own sessions there instead
        lock = lock_session(options, session_id)
    store = stores.open(options.share_dir, options.work_dir, session_id, protocol_version=protocol_version)
    resumed = store.existed and store.has_wire_records()
    return SessionHandle(store, resumed=resumed, lock=lock, keep_empty=options.keep_empty_session)
