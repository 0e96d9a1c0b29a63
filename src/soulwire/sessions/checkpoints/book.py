"""The checkpoint log of one session and everything read from it: take a checkpoint, list
them, what a turn changed, rewind (files, conversation or both; itself undoable) and the
files of a turn for a fork. Faces and the engine call this; none computes history itself.

The log (`SessionStore.checkpoint_records`) holds `checkpoint` records — each the change of
the manifest since the previous one — and `rewind` records. Turns are the session's top-level
turns, numbered from 1 as `sessions fork --turn` counts them."""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from soulwire.errors import SoulwireError
from soulwire.sessions.checkpoints.changes import compare
from soulwire.sessions.checkpoints.ignore import DEFAULT_EXCLUDES
from soulwire.sessions.checkpoints.restore import Plan, apply, plan
from soulwire.sessions.checkpoints.scan import (
    Limits,
    Manifest,
    Root,
    Scanner,
    ScanResult,
    recorded,
    roots_for,
)
from soulwire.sessions.fork import turn_starts
from soulwire.sessions.store import SessionStore

DEFAULT_MAX_FILE_BYTES = 10 << 20
DEFAULT_MAX_CHECKPOINT_BYTES = 512 << 20
BATCH_BYTES = 32 << 20
"""New objects are handed to the store in batches of about this size (one pack each)."""
INLINE_DELTA_ENTRIES = 512
"""A checkpoint changing more entries than this keeps its change list as an object."""
TRASH_DIR = "retired"
"""In the session's checkpoints directory: old files a restore replaced, being removed."""
QUICK_NAMES = 64
QUICK_BYTES = 256 << 10
"""A checkpoint looking at no more names than this, of files of no more bytes, is `quick`."""


class CheckpointError(SoulwireError, ValueError):
    """A checkpoint operation that cannot be done as asked (no such turn, nothing recorded)."""


class CheckpointsOff(CheckpointError):
    """The session takes no checkpoints (configuration `[checkpoints] enabled`, `--checkpoints`)."""


class RewindConflict(CheckpointError):
    """Files changed by someone else since the session recorded them would be overwritten."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(f"{len(paths)} file(s) changed since the session recorded them: {', '.join(paths)}")
        self.paths = paths


def _encode(data: bytes) -> bytes:
    packed = zlib.compress(data, 1)
    return b"z" + packed if len(packed) < len(data) else b"r" + data


def _decode(value: bytes) -> bytes:
    return zlib.decompress(value[1:]) if value[:1] == b"z" else value[1:]


class _Batch:
    """The scan's object sink: new objects go to the store in batches."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.pending: dict[str, bytes] = {}
        self.size = 0

    def has(self, digest: str) -> bool:
        return digest in self.pending or self.store.has_object(digest)

    def put(self, digest: str, data: bytes) -> None:
        encoded = _encode(data)
        self.pending[digest] = encoded
        self.size += len(encoded)
        if self.size >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.store.put_objects(self.pending)
            self.pending, self.size = {}, 0


@dataclass
class TurnSpan:
    start: int
    end: int
    """Index of the record that ends the turn's changes (its `end` checkpoint, or the next
    turn's start); the last record when the turn is still running or was cut short."""


class CheckpointBook:
    def __init__(
        self,
        store: SessionStore,
        work_dir: str,
        additional_dirs: Sequence[str] = (),
        *,
        excludes: Sequence[str] = DEFAULT_EXCLUDES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_checkpoint_bytes: int = DEFAULT_MAX_CHECKPOINT_BYTES,
    ) -> None:
        self.store = store
        self.work_dir = os.path.abspath(work_dir)
        self.roots: list[Root] = roots_for(work_dir, additional_dirs)
        self.excludes = list(excludes)
        self.limits = Limits(max_file_bytes, max_checkpoint_bytes)
        self.scanner = Scanner(self.roots, excludes=self.excludes, limits=self.limits)
        self._records: list[dict[str, Any]] | None = None
        self._latest: Manifest | None = None
        self._after = ScanResult({})
        """The workspace after a rewind's restore: only the keys it wrote or deleted touched."""
        self._replayed: tuple[int, Manifest] | None = None
        """The last manifest `manifest_at` computed (the log only grows: later ones start there)."""
        """The workspace as a rewind left it (recorded once the conversation is cut too)."""

    # -- the log -------------------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        if self._records is None:
            self._records = [
                r for r in self.store.checkpoint_records() if r.get("type") in ("checkpoint", "rewind")
            ]
        return self._records

    def _append(self, record: dict[str, Any]) -> None:
        self.store.append_checkpoint(record)
        self.records().append(record)

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{len(self.records()) + 1}"

    def checkpoints(self) -> list[dict[str, Any]]:
        """Every checkpoint and rewind, oldest first, without their change lists."""
        return [{k: v for k, v in r.items() if k not in ("changed", "changed_ref")} for r in self.records()]

    def manifest_at(self, index: int) -> Manifest:
        """The manifest recorded by checkpoint `index` of the log (-1: none yet)."""
        start, manifest = -1, {}
        cached = self._replayed
        if cached is not None and cached[0] <= index:  # replay on from the last one computed
            start, manifest = cached[0], dict(cached[1])
        for record in self.records()[start + 1 : index + 1]:
            if record.get("type") == "checkpoint":
                for key, entry in self._delta(record).items():
                    if entry is None:
                        manifest.pop(key, None)
                    else:
                        manifest[key] = tuple(entry)
        self._replayed = (index, manifest)
        return dict(manifest)

    def latest(self) -> Manifest:
        if self._latest is None:
            self._latest = self.manifest_at(len(self.records()) - 1)
        return self._latest

    def _delta(self, record: dict[str, Any]) -> dict[str, Any]:
        ref = record.get("changed_ref")
        if isinstance(ref, str):
            return json.loads(self.fetch(ref))
        changed = record.get("changed")
        return changed if isinstance(changed, dict) else {}

    def fetch(self, digest: str) -> bytes:
        value = self.store.get_object(digest)
        if value is None:
            raise CheckpointError(f"object {digest} is missing from the session's storage")
        return _decode(value)

    def _fetch_or_none(self, digest: str) -> bytes | None:
        value = self.store.get_object(digest)
        return None if value is None else _decode(value)

    def _put_json(self, value: Any) -> str:
        from hashlib import sha256

        data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        digest = sha256(data).hexdigest()
        self.store.put_objects({digest: _encode(data)})
        return digest

    # -- taking a checkpoint -----------------------------------------------------
    def take(
        self, *, turn: int, kind: str, step: int | None = None, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Record the workspace now. `kind`: `turn` (a turn starts), `step` (before a step's
        writing tools), `end` (a turn ended), `rewind-before` / `rewind` (around a rewind),
        `overlay` (a turn's overlay committed after it ended: counted in that turn)."""
        started = time.perf_counter()
        scanned = self._scan()
        try:
            return self._record(scanned, turn=turn, kind=kind, step=step, extra=extra, started=started)
        except BaseException:
            self._unrecorded()
            raise

    def quick(self) -> bool:
        """Whether the next `take` is quick enough for the caller's event loop (no thread hop):
        a watched scan of a few small files into a local store, nothing to read back first."""
        return (
            self.store.local_checkpoints
            and self._latest is not None
            and self._records is not None
            and self.scanner.quick(QUICK_NAMES, QUICK_BYTES)
        )

    def _unrecorded(self) -> None:
        """A scan was not recorded: it may have changed the recorded manifest in place, so that
        is read again from the log, and the next scan is a full walk compared with it."""
        self._latest = None
        self.scanner.forget()

    def _scan(self) -> ScanResult:
        batch = _Batch(self.store)
        result = self.scanner.scan(self.latest(), batch)
        batch.flush()
        return result

    def _record(
        self,
        result: ScanResult,
        *,
        turn: int,
        kind: str,
        step: int | None = None,
        extra: dict[str, Any] | None = None,
        started: float | None = None,
    ) -> dict[str, Any]:
        """Append the checkpoint of a scanned (or computed) manifest to the log."""
        started = time.perf_counter() if started is None else started
        previous = recorded(result, self.latest())  # (changed in place: seen as it was)
        delta: dict[str, Any] = {}
        if result.base is self.latest():  # a watched scan of the recorded state: only these can differ
            for key in result.touched:
                old, entry = previous.get(key), result.manifest.get(key)
                if old is not entry and old != entry:
                    delta[key] = None if entry is None else list(entry)
        else:
            added = 0
            for key, entry in result.manifest.items():
                old = previous.get(key)
                if old is not entry and old != entry:
                    delta[key] = list(entry)
                    added += old is None
            if len(result.manifest) - added < len(previous):  # something was deleted
                delta.update({k: None for k in previous if k not in result.manifest})
        changed = sum(1 for k in delta if _content_changed(previous.get(k), result.manifest.get(k)))
        record: dict[str, Any] = {
            "type": "checkpoint",
            "id": self._next_id("c"),
            "turn": turn,
            "kind": kind,
            "step": step,
            "time": time.time(),
            "files": len(result.manifest),
            "files_changed": changed,
            "files_read": result.read_files,
            "bytes_stored": result.new_bytes,
            "skipped": [{"path": p, "reason": r} for p, r in result.skipped],
        }
        if extra:
            record.update(extra)
        if len(delta) > INLINE_DELTA_ENTRIES:
            record["changed_ref"] = self._put_json(delta)
        else:
            record["changed"] = delta
        record["ms"] = round((time.perf_counter() - started) * 1000, 2)
        self._append(record)
        self._latest = result.manifest
        return {k: v for k, v in record.items() if k not in ("changed", "changed_ref")}

    # -- reading turns -----------------------------------------------------------
    def turns(self) -> list[int]:
        return turns_of(self.records())

    def span(self, turn: int) -> TurnSpan:
        return turn_span(self.records(), turn)

    def changes(self, turn: int, *, diffs: bool = True) -> dict[str, Any]:
        """What turn `turn` changed: its files (with diffs) and which step changed which."""
        span = self.span(turn)
        records = self.records()
        before = self.manifest_at(span.start)
        after = self.manifest_at(span.end)
        steps: list[dict[str, Any]] = []
        marks = [i for i in range(span.start, span.end + 1) if records[i].get("type") == "checkpoint"]
        for here, there in pairwise(marks):
            paths = [
                c.path
                for c in compare(
                    self.manifest_at(here), self.manifest_at(there), self._fetch_or_none, diffs=False
                )
            ]
            if paths:
                steps.append(
                    {"step": records[here].get("step"), "checkpoint": records[here]["id"], "paths": paths}
                )
        files = compare(before, after, self._fetch_or_none, diffs=diffs)
        return {
            "turn": turn,
            "checkpoint": records[span.start]["id"],
            "files": [f.model_dump(exclude_none=True) for f in files],
            "steps": steps,
        }

    # -- rewind ------------------------------------------------------------------
    def resolve(self, key: str) -> str:
        return key if key.startswith("/") else os.path.join(self.work_dir, key)

    def _begin(
        self, target: Manifest | None, since: int, *, turn: int, force: bool, extra: dict[str, Any]
    ) -> tuple[Plan, str, str]:
        """Record the workspace as it is (hand edits included), record the rewind, then put the
        files back to `target` (None: files untouched), checkpoint `since`'s manifest. Returns
        (plan, that checkpoint's id, the rewind's id). Refuses before changing anything when a
        hand edit would be lost."""
        steps = Plan()
        scanned = self._scan()
        if target is not None:
            known = recorded(scanned, self.latest())
            steps = plan(target, scanned.manifest, known, self._differing(since, scanned))
            if steps.conflicts and not force:
                self._unrecorded()
                raise RewindConflict(steps.conflicts)
        before = self._record(scanned, turn=turn, kind="rewind-before")["id"]
        rewind_id = self._next_id("r")
        self._append({"type": "rewind", "id": rewind_id, "time": time.time(), "before": before, **extra})
        after = scanned.manifest
        if target is not None:
            apply(self.resolve, target, steps, self.fetch, self.scanner.leftovers, self._trash())
            self.scanner.leftovers.clear()
            after = self.scanner.restat(scanned.manifest, target, steps.writes, steps.deletes, self.resolve)
        self._after = ScanResult(after, base=scanned.manifest, touched=set(steps.writes + steps.deletes))
        return steps, before, rewind_id

    def _trash(self) -> str | None:
        """Where a restore moves the old files it replaced (then removed on a thread): in the
        session's own directory, when the store keeps one on this machine."""
        directory = getattr(self.store, "dir", None)  # (a hosted store's: HostedStore.dir)
        return os.path.join(str(directory), "checkpoints", TRASH_DIR) if directory is not None else None

    def _differing(self, since: int, scanned: ScanResult) -> set[str] | None:
        """The only keys in which checkpoint `since`, the last one and the disk can differ: what
        the checkpoints after `since` changed and what a watched scan touched (None: unknown,
        after a full walk)."""
        if scanned.base is not self.latest():
            return None
        keys = set(scanned.touched)
        for record in self.records()[since + 1 :]:
            if record.get("type") == "checkpoint":
                keys.update(self._delta(record))
        return keys

    @staticmethod
    def _result(
        rewind_id: str, steps: Plan, before: str, after: dict[str, Any], extra: dict[str, Any]
    ) -> dict[str, Any]:
        shown = {k: v for k, v in extra.items() if k not in ("history", "turns")}
        return {
            "id": rewind_id,
            **shown,
            "restored": steps.paths,
            "forced": steps.conflicts,
            "before": before,
            "checkpoint": after["id"],
        }

    def rewind(
        self,
        turn: int,
        *,
        files: bool = True,
        context: bool = True,
        force: bool = False,
        current_turn: int = 0,
    ) -> dict[str, Any]:
        """Rewind to the start of turn `turn`: its files and/or the conversation before it."""
        if not (files or context):
            raise CheckpointError("nothing to rewind: neither files nor context")
        since = self.span(turn).start
        target = self.manifest_at(since) if files else None
        cut = self._history_cut(turn - 1) if context else None
        extra: dict[str, Any] = {"to_turn": turn, "files": files, "context": context}
        if cut is not None:
            extra["history"] = self._save_history()
            extra["turns"] = turn - 1
        steps, before, rewind_id = self._begin(target, since, turn=current_turn, force=force, extra=extra)
        if cut is not None:
            self.store.truncate_history(*cut)
        after = self._record(self._after, turn=turn - 1 if context else current_turn, kind="rewind")
        return self._result(rewind_id, steps, before, after, extra)

    def undo(self, *, force: bool = False, current_turn: int = 0) -> dict[str, Any]:
        """Undo the last rewind (an undo is a rewind too: undoing it again redoes)."""
        last = next((r for r in reversed(self.records()) if r.get("type") == "rewind"), None)
        if last is None:
            raise CheckpointError("the session has no rewind to undo")
        index = next(i for i, r in enumerate(self.records()) if r.get("id") == last["before"])
        history = last.get("history")
        extra: dict[str, Any] = {
            "undo_of": last["id"],
            "files": bool(last.get("files")),
            "context": history is not None,
        }
        if history is not None:
            extra["history"] = self._save_history()
        target = self.manifest_at(index) if last.get("files") else None
        steps, before, rewind_id = self._begin(target, index, turn=current_turn, force=force, extra=extra)
        if history is not None:
            self._load_history(str(history))
        turns = self.recorded_turns() if history is not None else current_turn
        after = self._record(self._after, turn=turns, kind="rewind")
        return self._result(rewind_id, steps, before, after, extra)

    # -- conversation ------------------------------------------------------------
    def recorded_turns(self) -> int:
        return len(turn_starts([m for m in self.store.wire_records()]))

    def _history_cut(self, keep: int) -> tuple[int, int]:
        """(context records, wire messages) that hold the first `keep` turns."""
        from soulwire.sessions.fork import context_cut

        messages = list(self.store.wire_records())
        starts = turn_starts(messages)
        if keep >= len(starts):
            raise CheckpointError(f"the session has {len(starts)} turns; cannot keep {keep} of them")
        if self.store.archived_contexts():
            raise CheckpointError("the session's context was compacted or cleared: rewind its files only")
        inputs = [messages[i].get("payload", {}).get("user_input") for i in starts]
        records = list(self.store.load_context())
        return context_cut(records, inputs, keep), starts[keep]

    def _save_history(self) -> str:
        return self._put_json(
            {"context": list(self.store.load_context()), "wire": list(self.store.wire_records())}
        )

    def _load_history(self, digest: str) -> None:
        saved = json.loads(self.fetch(digest))
        self.store.truncate_history(0, 0)
        self.store.append_context(saved["context"])
        for message in saved["wire"]:
            self.store.record_wire(message)

    # -- fork --------------------------------------------------------------------
    def files_at_end(self, turn: int | None) -> Manifest:
        """The work dir's files (relative keys) at the end of turn `turn` (None: the last
        checkpoint; 0: before the first turn)."""
        if turn is None:
            manifest = self.latest()
        elif turn == 0:
            manifest = self.manifest_at(self.span(1).start)
        else:
            manifest = self.manifest_at(self.span(turn).end)
        return {k: v for k, v in manifest.items() if not k.startswith("/")}

    def files_at(self, checkpoint: str) -> tuple[Manifest, int]:
        """The work dir's files as checkpoint `checkpoint` recorded them, and the turns the
        conversation had finished then (all of its turn for an `end` checkpoint, the ones
        before it for the others)."""
        records = self.records()
        index = next(
            (i for i, r in enumerate(records) if r.get("id") == checkpoint and r.get("type") == "checkpoint"),
            None,
        )
        if index is None:
            raise CheckpointError(f"no checkpoint {checkpoint!r} in this session")
        record = records[index]
        turn = int(record.get("turn") or 0)
        turns = turn if record.get("kind") == "end" else max(turn - 1, 0)
        manifest = self.manifest_at(index)
        return {k: v for k, v in manifest.items() if not k.startswith("/")}, turns

    def export_manifest(self, target: Manifest, directory: str) -> list[str]:
        """Make `directory` hold `target`'s files (files it has that `target` lacks are
        removed, ignored ones kept); returns the paths written or removed."""
        root = os.path.abspath(directory)
        scanner = Scanner([Root(root, "")], excludes=self.excludes, limits=self.limits)
        disk = scanner.scan({}, None).manifest
        steps = plan(target, disk, disk)
        apply(lambda key: os.path.join(root, key), target, steps, self.fetch)
        return steps.paths

    def export(self, turn: int, directory: str) -> list[str]:
        return self.export_manifest(self.files_at_end(turn), directory)


def turns_of(records: list[dict[str, Any]]) -> list[int]:
    """The turns that have a checkpoint, of the book's records (or of `checkpoints`' list)."""
    return sorted({int(r["turn"]) for r in records if r.get("kind") == "turn"})


def turn_span(records: list[dict[str, Any]], turn: int) -> TurnSpan:
    """Where turn `turn` starts and ends in a checkpoint log (its latest run, after rewinds)."""
    start = next(
        (
            i
            for i in range(len(records) - 1, -1, -1)
            if records[i].get("kind") == "turn" and records[i].get("turn") == turn
        ),
        None,
    )
    if start is None:
        raise CheckpointError(f"no checkpoint was taken at the start of turn {turn}")
    end = len(records) - 1
    for index in range(start + 1, len(records)):
        record = records[index]
        if record.get("type") != "checkpoint":
            continue
        end = index
        if record.get("kind") == "end" or record.get("turn") != turn or record.get("kind") == "turn":
            break
    for index in range(end + 1, len(records)):  # an overlay committed after the turn is the turn's
        record = records[index]
        if record.get("kind") != "overlay" or record.get("turn") != turn:
            break
        end = index
    return TurnSpan(start, end)


def records_through(records: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The log up to the end of turn `turn` (all of it when that turn has no checkpoint)."""
    try:
        if turn == 0:
            return records[: turn_span(records, 1).start]
        return records[: turn_span(records, turn).end + 1]
    except CheckpointError:
        return records


def _content_changed(old: Any, new: Any) -> bool:
    from soulwire.sessions.checkpoints.scan import content

    return content(tuple(old) if old else None) != content(tuple(new) if new else None)
