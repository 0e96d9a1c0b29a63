"""This replica's side of a shared store: taking and giving up sessions' ownership
(sessions/ownership.py) from the event loop, and the heartbeat that keeps the leases and
watches the store: while the database cannot be reached the live sessions refuse requests
for their engines (one clear JSON-RPC error, one line in the log); once it is back they are
closed, and reopen through a new ownership as their clients re-attach (the record closed
where the outage cut a turn short)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from soulwire.errors import SoulwireError
from soulwire.server.registry import SessionError
from soulwire.sessions.ownership import OwnedElsewhere, Ownership, StoreUnreachable
from soulwire.ui.wire.errors import store_unavailable

if TYPE_CHECKING:
    from soulwire.server.hub import LiveSession

log = logging.getLogger("soulwire.server")


class Replica:
    """The ownership of the sessions this process runs."""

    def __init__(
        self, url: str, advertise: str, lease_s: float, *, recheck: Callable[[], None] | None = None
    ) -> None:
        self.ownership = Ownership(url, owner=advertise, lease_s=lease_s)
        self.down: str | None = None
        """Why the store cannot be reached, while it cannot (one line)."""
        self._recheck = recheck
        """Drops the store pool's connections that the outage broke (when it is back)."""

    async def own(
        self, session_id: str, work_dir: str, materialise: Callable[[], object] | None = None
    ) -> None:
        """Take the session's ownership (a 307 to the live replica that has it), and check that
        this replica can run it (its work dir is here, or `materialise` makes it from the
        session's latest checkpoint: `serve --workspaces`)."""
        if self.down is not None:
            raise SessionError(503, self.down)
        try:
            await anyio.to_thread.run_sync(self.ownership.acquire, session_id)
        except OwnedElsewhere as exc:
            if exc.owner:
                raise SessionError(307, str(exc), owner=exc.owner) from None
            raise SessionError(409, str(exc)) from None
        except SoulwireError:
            raise
        except Exception:  # psycopg's: the store is unreachable
            raise SessionError(503, "the session store is unreachable") from None
        if not Path(work_dir).is_dir() and materialise is not None:
            try:
                await anyio.to_thread.run_sync(materialise)
            except Exception as exc:  # a checkpoint unreadable, the disk full: refuse with why
                await self.disown(session_id)
                raise SessionError(
                    409, f"cannot make the work dir {work_dir} of session {session_id} here: {exc}"
                ) from None
        if not Path(work_dir).is_dir():
            await self.disown(session_id)
            raise SessionError(
                409, f"this replica has no work dir {work_dir} for session {session_id} (mount it here)"
            )

    async def disown(self, session_id: str) -> None:
        if session_id not in self.ownership.held:
            return
        try:
            await anyio.to_thread.run_sync(self.ownership.release, session_id)
        except Exception:  # the store is down: the lock went with the connection
            log.warning("could not release session %s", session_id)

    async def _reachable(self) -> bool:
        try:
            await anyio.to_thread.run_sync(self.ownership.probe)
        except StoreUnreachable:
            return False
        return True

    async def heartbeat(self, live: Callable[[], Iterable[LiveSession]], on_lost: Callable[[], None]) -> None:
        """Renew the leases (the module docstring says what happens while the store is down);
        when the sessions were taken from a replica that looked hung, `on_lost` stops running
        every session."""
        while True:
            await anyio.sleep(self.ownership.lease_s / 3)
            check = self.ownership.probe if self.down is not None else self.ownership.renew
            try:
                await anyio.to_thread.run_sync(check)
            except StoreUnreachable as exc:
                if self.down is None and await self._reachable():
                    # The database is there: another replica ended this one's connection,
                    # and its locks with it (this one looked hung).
                    log.error("soulwire serve: lost the ownership of its sessions: %s", exc)
                    on_lost()
                elif self.down is None:
                    self.down = f"the session store is unreachable ({exc}); try again when it is back"
                    log.error("soulwire serve: %s", self.down)
                    refusal = store_unavailable(self.down)
                    for session in live():
                        session.refuse(refusal)
            except Exception as exc:
                log.error("soulwire serve: lost the ownership of its sessions: %s", exc)
                on_lost()
            else:
                if self.down is not None:
                    self.down = None
                    log.warning("soulwire serve: the session store is back; sessions reopen as clients come")
                    if self._recheck is not None:
                        await anyio.to_thread.run_sync(self._recheck)
                    on_lost()


__all__ = ["Replica"]
