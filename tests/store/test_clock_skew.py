"""A replica whose clock is off: leases are timed by the database's clock (`now()`), never a
replica's, so a replica an hour behind or ahead neither takes a live owner's session nor keeps
a hung owner's past its lease. Each replica's clock is skewed by tests/store/skewed_clock
(`time.time` of the process, as a host whose clock is off would give it)."""

from __future__ import annotations

import datetime
import os
import signal
from pathlib import Path

import psycopg
import pytest
from websockets.sync.client import connect

from tests.server.serve_client import ServeProcess
from tests.store.test_serve_replicas import PG_ENV, wait_for
from tests.wire_client import Sandbox

pytestmark = pytest.mark.xdist_group("postgres")

HOUR = 3600
LEASE_S = 3


def skewed(sandbox: Sandbox, store: str, skew_s: int) -> ServeProcess:
    clock = Path(__file__).parent / "skewed_clock"
    env = {**PG_ENV, "PYTHONPATH": str(clock), "SOULWIRE_TEST_CLOCK_SKEW_S": str(skew_s)}
    return ServeProcess(sandbox, "--store", store, "--lease", str(LEASE_S), env=env)


def lease(url: str, session: str) -> tuple[str, datetime.datetime, datetime.datetime] | None:
    """(owner, the lease's expiry, the database's now) of the session."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT owner, expires_at, now() FROM sw_owners WHERE session_id = %s", (session,)
        ).fetchone()
    return (str(row[0]), row[1], row[2]) if row else None


def attach(server: ServeProcess, session: str) -> None:
    """A client attaches to the session at `server`: it runs the session if it may take it,
    else sends the client to the owner (a hung one never answers)."""
    try:
        with connect(
            f"ws://127.0.0.1:{server.port}/ws/sessions/{session}?token={server.token}", open_timeout=2
        ):
            pass
    except Exception:  # sent to a hung owner, or refused
        pass


def test_a_skewed_clock_neither_steals_a_live_session_nor_keeps_a_hung_one(sandbox: Sandbox, store):
    sandbox.scripts = ["text: hello"]
    behind = skewed(sandbox, store[1], -HOUR)  # its leases would have run out an hour ago
    ahead = skewed(sandbox, store[1], +HOUR)  # every lease would look run out to it
    late = skewed(sandbox, store[1], -2 * HOUR)  # every lease would look good for hours to it
    try:
        session = behind.create_session()
        wire = behind.ws(session)
        wire.initialize()
        _, answer = wire.call("prompt", {"user_input": "hi"})
        assert answer["result"]["status"] == "finished"
        with psycopg.connect(store[0]) as conn:  # the skew is in effect: its records say so
            row = conn.execute(
                "SELECT extract(epoch FROM now()) - min(recorded_at) FROM sw_wire WHERE session_id = %s",
                (session,),
            ).fetchone()
        assert row is not None and HOUR - 60 < float(row[0]) < HOUR + 60
        first = lease(store[0], session)
        assert first is not None and first[0] == behind.base
        assert first[1] - first[2] <= datetime.timedelta(seconds=LEASE_S)  # the database's clock

        # The owner renews its lease (by the database's clock) while it lives: twice at least,
        # and the others send the session's clients to it all along.
        renewed = [first[1]]

        def renewed_twice() -> bool:
            current = lease(store[0], session)
            assert current is not None and current[0] == behind.base  # never taken meanwhile
            attach(ahead, session)
            if current[1] != renewed[-1]:
                renewed.append(current[1])
            return len(renewed) >= 3

        assert wait_for(renewed_twice, timeout=60)
        redirected = ahead.api(
            "PATCH", f"/api/sessions/{session}", json={"title": "x"}, follow_redirects=False
        )
        assert redirected.status_code == 307 and redirected.json()["owner"] == behind.base

        # The owner hangs: its lease runs out by the database's clock, and then another
        # replica (whose clock says the lease has hours left) takes the session.
        os.kill(behind.proc.pid, signal.SIGSTOP)
        try:
            hung = lease(store[0], session)
            assert hung is not None

            def taken_by_late() -> bool:
                attach(late, session)
                current = lease(store[0], session)
                return current is not None and current[0] == late.base

            assert wait_for(taken_by_late, timeout=60)
            taken = lease(store[0], session)
            assert taken is not None
            assert taken[2] >= hung[1]  # not before the hung owner's lease ran out
        finally:
            os.kill(behind.proc.pid, signal.SIGCONT)
        # The hung replica, awake again, finds it owns nothing and stops running the session.
        assert wait_for(lambda: any("lost the ownership" in line for line in behind.stderr_lines))
        assert lease(store[0], session)[0] == late.base  # type: ignore[index]
    finally:
        for server in (behind, ahead, late):
            server.close()
