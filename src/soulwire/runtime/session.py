"""Opening a session: new, by id (resume or create with that id), or the last one."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from soulwire.config.loader import ConfigError
from soulwire.runtime.options import SessionOptions
from soulwire.sessions.paths import normalise_work_dir
from soulwire.sessions.store import FileSessionStore, last_session_id, update_work_dir_index


@dataclass
class SessionHandle:
    store: FileSessionStore
    resumed: bool

    @property
    def id(self) -> str:
        return self.store.session_id

    def is_empty(self) -> bool:
        directory = self.store.dir
        if (directory / "wire.jsonl").exists() and self.store.has_wire_records():
            return False
        state = self.store.load_state()
        return not state.get("custom_title")

    def close(self, *, exit_ok: bool = True) -> None:
        """Leave the share dir tidy: drop a session nobody used, else remember it as last."""
        self.store.close()
        work_dir = self.store.work_dir
        if self.is_empty():
            shutil.rmtree(self.store.dir, ignore_errors=True)
            if last_session_id(self.store.share, work_dir) == self.id:
                update_work_dir_index(self.store.share, work_dir, None)
        elif exit_ok:
            update_work_dir_index(self.store.share, work_dir, self.id)


def resolve_session_id(options: SessionOptions) -> str | None:
    """The id to open (None = a new session). `--continue` without history is a usage error."""
    if options.continue_last:
        found = last_session_id(options.share_dir, normalise_work_dir(options.work_dir))
        if found is None:
            raise ConfigError("No previous session found for the working directory")
        return found
    return options.session_id


def open_session(options: SessionOptions, *, protocol_version: str) -> SessionHandle:
    session_id = resolve_session_id(options) or FileSessionStore.new_id()
    store = FileSessionStore(
        options.share_dir, options.work_dir, session_id, protocol_version=protocol_version
    )
    resumed = store.existed and store.has_wire_records()
    store.ensure_dir()
    return SessionHandle(store, resumed)
