"""The file store's part of checkpoints, in `<session dir>/checkpoints/`: objects in pack
files found through `objects.idx`, and the checkpoint log `log.jsonl`. Each process that
stores objects appends them to a pack of its own (created at its first object, so no file is
created per checkpoint), and names them in the index only once their bytes are written: a
killed process leaves at most an unnamed tail. The index and the log are append-only JSON
lines: a torn last line is skipped by readers. A pack only grows, and only at its end, so
what an index names in it never changes (a fork may share it by a hard link).

Durability is the session records': whole against a killed process (the kernel keeps what was
written), not fsynced per checkpoint — a step's checkpoint would otherwise wait on the disk. An
OS crash may lose the newest objects; a checkpoint naming one then says the object is missing
(`get_object` checks each object's length), it never restores a torn file."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from soulwire.ids import uuid4
from soulwire.sessions.jsonl import (
    JsonlAppender,
    ensure_private_dir,
    fast_decoder,
    iter_lines,
    read_jsonl,
    write_all,
)

CHECKPOINTS_DIR = "checkpoints"
PACKS_DIR = "packs"
INDEX_FILE = "objects.idx"
LOG_FILE = "log.jsonl"


class CheckpointFiles:
    """Objects and checkpoint records of one session directory (created at the first write)."""

    def __init__(self, session_dir: Path) -> None:
        self.dir = session_dir / CHECKPOINTS_DIR
        self._index: dict[str, tuple[str, int, int]] | None = None
        self._index_file = JsonlAppender(self.dir / INDEX_FILE)
        self._log = JsonlAppender(self.dir / LOG_FILE)
        self._pack: tuple[int, str] | None = None
        """This process's pack: its descriptor and name."""
        self._pack_end = 0

    def _loaded_index(self) -> dict[str, tuple[str, int, int]]:
        if self._index is None:
            index: dict[str, tuple[str, int, int]] = {}
            for record in read_jsonl(self.dir / INDEX_FILE, decode=fast_decoder()):
                try:
                    index[str(record["d"])] = (str(record["p"]), int(record["o"]), int(record["n"]))
                except (KeyError, TypeError, ValueError):
                    continue
            self._index = index
        return self._index

    def has_object(self, digest: str) -> bool:
        return digest in self._loaded_index()

    def put_objects(self, objects: Mapping[str, bytes]) -> None:
        index = self._loaded_index()
        fresh = {d: b for d, b in objects.items() if d not in index}
        if not fresh:
            return
        fd, name = self._open_pack()
        entries: list[dict[str, Any]] = []
        offset = self._pack_end
        try:
            write_all(fd, b"".join(fresh.values()))
        except OSError:
            self._close_pack()  # where it ends is not known: the next objects go to a new pack
            raise
        for digest, data in fresh.items():
            entries.append({"d": digest, "p": name, "o": offset, "n": len(data)})
            offset += len(data)
        self._pack_end = offset
        self._index_file.append_many(entries)  # named once their bytes are in the pack
        for entry in entries:
            index[entry["d"]] = (name, entry["o"], entry["n"])

    def _open_pack(self) -> tuple[int, str]:
        if self._pack is None:
            packs = ensure_private_dir(self.dir / PACKS_DIR)
            name = f"{uuid4()}.pack"
            fd = os.open(packs / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
            self._pack, self._pack_end = (fd, name), 0
        return self._pack

    def _close_pack(self) -> None:
        if self._pack is not None:
            os.close(self._pack[0])
            self._pack = None

    def get_object(self, digest: str) -> bytes | None:
        where = self._loaded_index().get(digest)
        if where is None:
            return None
        name, offset, length = where
        try:
            fd = os.open(self.dir / PACKS_DIR / name, os.O_RDONLY)
        except OSError:
            return None
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        return data if len(data) == length else None

    def append_checkpoint(self, record: dict[str, Any]) -> None:
        self._log.append(record)  # one write(2): whole against a killed process, as the records are

    def checkpoint_records(self) -> Iterator[dict[str, Any]]:
        return read_jsonl(self.dir / LOG_FILE, decode=fast_decoder())

    def close(self) -> None:
        self._close_pack()
        self._index_file.close()
        self._log.close()


def truncate_jsonl(path: Path, keep: int, counts: Any) -> None:
    """Keep the lines of `path` up to the `keep`-th one that `counts(line)` accepts (and the
    lines before it it does not count), replacing the file atomically: a temporary file renamed
    over it, whole against a killed process as the appended records are. Not fsynced (that was
    most of a rewind's conversation cut under load; a rename over a file on ext4 starts writing
    the new data at once anyway)."""
    cut = 0
    seen = 0
    offset = 0
    for _, line in iter_lines(path):
        end = offset + len(line) + 1
        if seen >= keep and counts(line):
            break
        if counts(line):
            seen += 1
        cut = offset = end
    tmp = path.with_name(f".{path.name}.cut")
    with path.open("rb") as source:
        data = source.read(cut)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
