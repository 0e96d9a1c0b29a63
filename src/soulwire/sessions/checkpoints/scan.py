"""One pass over the workspace: every kept file's entry, reading only what changed.

An entry is a tuple: `("f", mode, size, mtime_ns, ino, sha256)` for a file, `("l", target)`
for a symlink, `("s", size, reason)` for a file left out by a size cap. A file whose size,
mtime, inode and mode match the previous entry is not read again; any other is read and
hashed, and its bytes are handed to `store` once per content (content-addressed). Listings of
directories whose mtime and ignore rules did not change are reused, so an unchanged tree costs
one `lstat` per file — and where the kernel reports changes (`watch.Watcher`), only the
names the kernel reported since the previous scan are looked at (a whole directory is read
again only when an event does not name its child)."""

from __future__ import annotations

import os
import stat
import time
from collections import ChainMap
from collections.abc import Callable, Mapping, MutableMapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from soulwire.sessions.checkpoints.ignore import IgnoreRules, root_rules
from soulwire.sessions.checkpoints.watch import Watcher

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

Entry = tuple[Any, ...]
Manifest = dict[str, Entry]
Child = tuple[str, str, str, str]
"""A kept child of a directory: (kind — `d`, `f` or `l` —, path, path under the root, key)."""
Listing = tuple[int, tuple[object, ...], dict[str, Child], set[tuple[str, str]]]
"""A directory's listing as last read: its mtime (-1: read it again), the stamp of the rules it
was filtered by, its kept children by name and the (name, kind) of the children the rules left
out."""
Dirty = dict[str, set[str] | None]
"""Directories to look at again: the names of the children to look at (None: all of them)."""
Frame = tuple[str, str, IgnoreRules]
"""A directory to walk: its path, its path under the root, the rules of its parent."""

TEMP_SUFFIX = ".soulwire-restore"
"""What a restore names a file while writing it (then renames it into place)."""
RACY_WINDOW_NS = 50_000_000
"""A file modified this close to the scan may change again within the same mtime tick: its
entry keeps no stat data, so the next full walk hashes it again (git's "racily clean" rule).
A watched scan needs no such rule: a change after the watch was added is an event."""


def content(entry: Entry | None) -> tuple[Any, ...] | None:
    """What a restore would reproduce: kind, mode and bytes (not inode or mtime)."""
    if entry is None:
        return None
    if entry[0] == "f":
        return ("f", entry[1], entry[5])
    return tuple(entry)


@dataclass
class Root:
    """A scanned directory; keys of its files are `prefix + relative path`."""

    path: str
    prefix: str


def roots_for(work_dir: str, additional: Sequence[str] = ()) -> list[Root]:
    """The work dir (relative keys) and each `--add-dir` dir (absolute keys)."""
    roots = [Root(os.path.abspath(work_dir), "")]
    for extra in additional:
        path = os.path.abspath(extra)
        if path != roots[0].path:
            roots.append(Root(path, path.rstrip("/") + "/"))
    return roots


@dataclass
class ScanResult:
    manifest: Manifest
    new_bytes: int = 0
    read_files: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    base: Manifest | None = None
    """A watched scan: the manifest it started from; only `touched` keys may differ from it."""
    touched: set[str] = field(default_factory=set[str])
    old: dict[str, Entry | None] | None = None
    """A watched scan changes the last manifest in place (no copy of the whole tree): what each
    key it changed held before (None: absent). `manifest` and `base` are then one object."""


def recorded(result: ScanResult, manifest: Manifest) -> Mapping[str, Entry | None]:
    """`manifest` as it was before `result`'s scan changed it in place (itself otherwise)."""
    if result.old is None:
        return manifest
    return ChainMap(result.old, cast(MutableMapping[str, Entry | None], manifest))


class ObjectSink(Protocol):
    """Where a scan puts the bytes of files it has not seen before."""

    def has(self, digest: str) -> bool: ...

    def put(self, digest: str, data: bytes) -> None: ...


@dataclass
class Limits:
    max_file_bytes: int
    max_checkpoint_bytes: int


class Scanner:
    """Scans roots repeatedly, remembering listings and ignore files between scans.

    With `watch` (Linux), a scan that stores (`store` given) after a first full walk looks only
    at the names the kernel reported changed, plus those a walk could not settle (a file left
    out by the per-checkpoint cap): what a full walk would find, at a cost that follows the
    changes, not the tree or the size of the directories they are in."""

    def __init__(
        self, roots: Sequence[Root], *, excludes: Sequence[str], limits: Limits, watch: bool = True
    ) -> None:
        self.roots = list(roots)
        self.limits = limits
        self._rules = root_rules(excludes)
        self._listings: dict[str, Listing] = {}
        self._specs: dict[str, tuple[object, GitIgnoreSpec | None]] = {}
        self._watching = watch
        self._watch: Watcher | None = None
        self._dirs: dict[str, tuple[Root, Frame, IgnoreRules]] = {}
        """Each kept directory of the last walks: its root, its frame and its own rules."""
        self._last: Manifest | None = None
        """What the last storing scan found (the base a watched scan starts from)."""
        self._recheck: Dirty = {}
        """What a watched scan looks at again though no event names it."""
        self.leftovers: set[str] = set()
        """Temporary files of a restore killed mid-way, seen by a scan (the next restore
        removes them)."""
        self._held: Dirty | None = {}
        """What `quick` drained for the next storing scan (None: that scan must walk it all)."""

    def scan(self, previous: Manifest, store: ObjectSink | None) -> ScanResult:
        """The entries now. `store` None: hash only (a look that records nothing, and leaves
        the watch's events for the next storing scan)."""
        result = ScanResult({})
        now = time.time_ns()
        if store is None:
            for root in self.roots:
                self._walk(root, [(root.path, "", self._rules)], previous, None, result, now, {})
            return result
        dirty = self._changed()
        if dirty is not None and not dirty and self._last is not None:
            # nothing happened since the last scan: its manifest as it is (never changed in
            # place: a scan that finds changes starts from a copy), no copy of the whole tree
            return ScanResult(self._last, base=self._last)
        if dirty is None or not self._rescan(dirty, previous, store, result, now):
            result = ScanResult({})
            self._full(previous, store, result, now)
        self._last = result.manifest
        return result

    def forget(self) -> None:
        """The next storing scan walks the whole tree (what the last one found is not kept)."""
        self._last = None

    @property
    def watched(self) -> bool:
        """Whether the next storing scan can read the changed directories only."""
        return self._watch is not None and self._watch.usable and self._last is not None

    def quick(self, max_names: int, max_bytes: int) -> bool:
        """Whether the next storing scan is a small one: watched, and looking at no more than
        `max_names` names, files of `max_bytes` in all, and no whole directory. What it drains
        from the watch is kept for that scan."""
        watch = self._watch
        if watch is None or self._last is None:
            return False
        drained = watch.drain()
        if drained is None or self._held is None:
            self._held = None
            return False
        for directory, names in drained.items():
            _mark(self._held, directory, names)
        size = count = 0
        for dirty in (self._held, self._recheck):
            for directory, names in dirty.items():
                if names is None:
                    return False
                count += len(names)
                if count > max_names:
                    return False
                for name in names:
                    try:
                        st = os.lstat(os.path.join(directory, name))
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        return False  # a new directory: its walk may be long
                    size += st.st_size
        return size <= max_bytes

    def _changed(self) -> Dirty | None:
        held, self._held = self._held, {}
        if self._watch is None or self._last is None:
            return None
        dirty = self._watch.drain()
        if dirty is None or held is None:
            return None
        for extra in (held, self._recheck):
            for directory, names in extra.items():
                _mark(dirty, directory, names)
        return dirty

    def _full(self, previous: Manifest, store: ObjectSink, result: ScanResult, now: int) -> None:
        self._dirs.clear()
        if self._watching:
            if self._watch is None:
                self._watch = Watcher()
            else:
                self._watch.reset()
        flagged: Dirty = {}
        for root in self.roots:
            self._walk(root, [(root.path, "", self._rules)], previous, store, result, now, flagged)
        self._recheck = flagged

    def _rescan(
        self, dirty: Dirty, previous: Manifest, store: ObjectSink, result: ScanResult, now: int
    ) -> bool:
        """The last manifest with the `dirty` names looked at again. False when a changed
        `.gitignore` changes what is kept below it (then only a full walk can tell)."""
        assert self._last is not None
        manifest = result.manifest = result.base = self._last
        saved: dict[str, Entry | None] = {}
        result.old, touched = saved, result.touched
        flagged: Dirty = {}
        for directory in sorted(dirty, key=lambda d: d.count("/")):  # parents first
            known = self._dirs.get(directory)
            if known is None:
                continue  # under a directory removed meanwhile, or never kept
            root, frame, rules = known
            _, rel, parent_rules = frame
            if parent_rules.descend(directory, rel, self._specs).stamp != rules.stamp:
                return False
            cached = self._listings.get(directory)
            names = dirty[directory]
            if cached is not None and names is not None:
                self._named(root, frame, rules, cached, names, previous, store, result, now, flagged)
                continue
            old = list(cached[2].values()) if cached is not None else []
            if cached is not None:  # listed again (a change within one mtime tick would not show)
                self._listings[directory] = (-1, *cached[1:])
            subdirs = {path for kind, path, _, _ in old if kind == "d"}
            for kind, _, _, key in old:
                if kind != "d":
                    if key not in saved:
                        saved[key] = manifest.get(key)
                    manifest.pop(key, None)
                    touched.add(key)
            kept = self._walk(root, [frame], previous, store, result, now, flagged, subdirs, touched)
            for gone in subdirs - kept:
                self._forget(gone, manifest, touched, saved)
        self._recheck = flagged
        return True

    def _named(
        self,
        root: Root,
        frame: Frame,
        rules: IgnoreRules,
        cached: Listing,
        names: Set[str],
        previous: Manifest,
        store: ObjectSink,
        result: ScanResult,
        now: int,
        flagged: Dirty,
    ) -> None:
        """Look at the children `names` of a listed directory again (an event named each):
        what each holds now replaces what it held; nothing else of the directory is read."""
        directory, rel, _ = frame
        manifest, saved, touched = result.manifest, result.old, result.touched
        assert saved is not None
        children, ignored = cached[2], cached[3]
        self._listings[directory] = (-1, *cached[1:])  # a full walk lists it again
        get = recorded(result, previous).get
        for name in names:
            if name.endswith(TEMP_SUFFIX):
                self.leftovers.add(os.path.join(directory, name))
                continue
            path = os.path.join(directory, name)
            try:
                st: os.stat_result | None = os.lstat(path)
            except OSError:
                st = None
            kind = None if st is None else _kind(st.st_mode)
            had = children.get(name)
            if had is not None and had[0] == kind == "d":
                continue  # a directory still there: its own watch names its changes
            if had is not None and had[0] != kind:  # gone, or now of another kind
                del children[name]
                if had[0] == "d":
                    self._forget(had[1], manifest, touched, saved)
                else:
                    key = had[3]
                    if key not in saved:
                        saved[key] = manifest.get(key)
                    manifest.pop(key, None)
                    touched.add(key)
                had = None
            if st is None or kind is None:
                continue
            if had is None:
                if (name, kind) in ignored:
                    continue
                child = f"{rel}/{name}" if rel else name
                if rules.ignored(child, kind == "d"):
                    ignored.add((name, kind))
                    continue
                had = children[name] = (kind, path, child, root.prefix + child)
            key = had[3]
            if kind == "d":
                frames: list[Frame] = [(path, had[2], rules)]
                self._walk(root, frames, previous, store, result, now, flagged, touched=touched)
                continue
            touched.add(key)
            entry = self._entry(key, path, st, get(key), store, result, now)
            if entry is None:
                if key not in saved:
                    saved[key] = manifest.get(key)
                manifest.pop(key, None)
                continue
            if key not in saved:
                saved[key] = manifest.get(key)
            manifest[key] = entry
            if entry[0] == "s":
                _mark(flagged, directory, {name})

    def _forget(
        self, directory: str, manifest: Manifest, touched: set[str], saved: dict[str, Entry | None]
    ) -> None:
        """Drop a removed directory's entries, all the way down."""
        self._dirs.pop(directory, None)
        cached = self._listings.pop(directory, None)
        for kind, path, _, key in cached[2].values() if cached is not None else ():
            if kind == "d":
                self._forget(path, manifest, touched, saved)
            else:
                if key not in saved:
                    saved[key] = manifest.get(key)
                manifest.pop(key, None)
                touched.add(key)

    def restat(
        self,
        disk: Manifest,
        target: Manifest,
        written: Sequence[str],
        deleted: Sequence[str],
        resolve: Callable[[str], str],
    ) -> Manifest:
        """The manifest after a restore changed only `written` and `deleted` (their stat data
        read again, nothing else scanned)."""
        manifest = dict(disk)
        now = time.time_ns()
        for key in deleted:
            manifest.pop(key, None)
        for key in written:
            entry = target[key]
            if entry[0] == "f":
                try:
                    st = os.lstat(resolve(key))
                except OSError:
                    manifest.pop(key, None)
                    continue
                mtime = -1 if now - st.st_mtime_ns < RACY_WINDOW_NS else st.st_mtime_ns
                entry = ("f", entry[1], entry[2], mtime, st.st_ino, entry[5])
            manifest[key] = entry  # (a watched scan is told of these writes by their events)
        self._last = manifest
        return manifest

    def _listing(self, directory: str, rel: str, rules: IgnoreRules, prefix: str) -> dict[str, Child] | None:
        """The kept children of a directory (listed again only when its mtime or the ignore
        rules changed)."""
        try:
            mtime = os.stat(directory).st_mtime_ns
        except OSError:
            return None
        cached = self._listings.get(directory)
        if cached is not None and cached[1] == rules.stamp:
            if cached[0] == mtime:
                return cached[2]
            # the same rules: a name seen before keeps its verdict (matching is the costly part)
            kept = {(c[1], c[0]): c for c in cached[2].values()}
            left_out = cached[3]
        else:
            kept, left_out = {}, set()
        children: list[Child] = []
        ignored: set[tuple[str, str]] = set()
        try:
            with os.scandir(directory) as it:
                for item in it:
                    try:
                        if item.is_symlink():
                            kind = "l"
                        elif item.is_dir():
                            kind = "d"
                        elif item.is_file():
                            kind = "f"
                        else:
                            continue  # sockets, fifos, devices: not content
                    except OSError:
                        continue
                    if item.name.endswith(TEMP_SUFFIX):
                        self.leftovers.add(item.path)  # a restore killed mid-way left it
                        continue
                    known = kept.get((item.path, kind))
                    if known is not None:
                        children.append(known)
                        continue
                    if (item.name, kind) in left_out:
                        ignored.add((item.name, kind))
                        continue
                    child = f"{rel}/{item.name}" if rel else item.name
                    if rules.ignored(child, kind == "d"):
                        ignored.add((item.name, kind))
                        continue
                    children.append((kind, item.path, child, prefix + child))
        except OSError:
            return None
        children.sort(key=lambda c: c[2])
        if time.time_ns() - mtime < RACY_WINDOW_NS:
            mtime = -1  # an entry added within the same timestamp tick would not change it
        by_name = {os.path.basename(c[1]): c for c in children}
        self._listings[directory] = (mtime, rules.stamp, by_name, ignored)
        return by_name

    def _walk(
        self,
        root: Root,
        stack: list[Frame],
        previous: Manifest,
        store: ObjectSink | None,
        result: ScanResult,
        now: int,
        flagged: Dirty,
        known: Set[str] = frozenset(),
        touched: set[str] | None = None,
    ) -> set[str]:
        """Walk down from the frames on `stack`, into every subdirectory but the `known` ones
        (returns those of them still there). `flagged` gets each entry a later watched scan
        must read again though no event will name it (left out by the per-checkpoint cap);
        `touched`, every key the walk met."""
        manifest, saved = result.manifest, result.old
        lstat, get, regular = os.lstat, recorded(result, previous).get, stat.S_IFREG

        watch = self._watch if store is not None else None
        kept: set[str] = set()
        while stack:
            frame = stack.pop()
            directory, rel, parent_rules = frame
            rules = parent_rules.descend(directory, rel, self._specs)
            if watch is not None:
                watch.add(directory)  # before listing it: a change from now on is an event
                self._dirs[directory] = (root, frame, rules)
            listing = self._listing(directory, rel, rules, root.prefix)
            if listing is None:
                continue
            if touched is not None:
                touched.update(c[3] for c in listing.values() if c[0] != "d")
            for kind, path, child, key in listing.values():
                if kind == "d":
                    if path in known:
                        kept.add(path)
                    else:
                        stack.append((path, child, rules))
                    continue
                try:
                    st = lstat(path)
                except OSError:
                    continue  # gone since the listing
                mode = st.st_mode
                old = get(key)
                # The hot path: an unchanged file (same type, mode, size, mtime, inode).
                if (
                    old is not None
                    and mode >> 12 == regular >> 12
                    and old[0] == "f"
                    and old[3] == st.st_mtime_ns
                    and old[2] == st.st_size
                    and old[4] == st.st_ino
                    and old[1] == mode & 0o7777
                ):
                    if saved is not None and key not in saved:
                        saved[key] = manifest.get(key)
                    manifest[key] = old
                else:
                    entry = self._entry(key, path, st, old, store, result, now)
                    if entry is not None:
                        if saved is not None and key not in saved:
                            saved[key] = manifest.get(key)
                        manifest[key] = entry
                        if entry[0] == "s":
                            _mark(flagged, directory, {os.path.basename(path)})
        return kept

    def _entry(
        self,
        key: str,
        path: str,
        st: os.stat_result,
        old: Entry | None,
        store: ObjectSink | None,
        result: ScanResult,
        now: int,
    ) -> Entry | None:
        """The entry of a file or symlink as `st` found it (None: neither, or gone)."""
        mode = st.st_mode
        if (
            old is not None
            and stat.S_ISREG(mode)
            and old[0] == "f"
            and old[3] == st.st_mtime_ns
            and old[2] == st.st_size
            and old[4] == st.st_ino
            and old[1] == mode & 0o7777
        ):
            return old
        if stat.S_ISLNK(mode):
            try:
                return ("l", os.readlink(path))
            except OSError:
                return None
        if stat.S_ISREG(mode):
            return self._file_entry(key, path, st, old, store, result, now)
        return None

    def _file_entry(
        self,
        key: str,
        path: str,
        st: os.stat_result,
        old: Entry | None,
        store: ObjectSink | None,
        result: ScanResult,
        now: int,
    ) -> Entry | None:
        """A new or changed file's entry (read, hashed, its bytes stored if never seen)."""
        mode = stat.S_IMODE(st.st_mode)
        size, mtime, ino = st.st_size, st.st_mtime_ns, st.st_ino
        if size > self.limits.max_file_bytes:
            reason = f"larger than the per-file cap of {self.limits.max_file_bytes} bytes"
            result.skipped.append((key, reason))
            return ("s", size, reason)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        from hashlib import sha256

        digest = sha256(data).hexdigest()
        result.read_files += 1
        known = old is not None and old[0] == "f" and old[5] == digest
        if store is not None and not known and not store.has(digest):
            if result.new_bytes + len(data) > self.limits.max_checkpoint_bytes:
                reason = f"over the per-checkpoint cap of {self.limits.max_checkpoint_bytes} bytes"
                result.skipped.append((key, reason))
                return ("s", len(data), reason)
            store.put(digest, data)
            result.new_bytes += len(data)
        if now - mtime < RACY_WINDOW_NS:
            mtime = -1
        return ("f", mode, len(data), mtime, ino, digest)


def _kind(mode: int) -> str | None:
    """A child's kind as a listing keeps it (None: not content — a socket, a fifo, a device)."""
    if stat.S_ISLNK(mode):
        return "l"
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISREG(mode):
        return "f"
    return None


def _mark(dirty: Dirty, directory: str, names: Set[str] | None) -> None:
    """Add `names` of `directory` (None: all of it) to `dirty`."""
    had = dirty.get(directory, set())
    if names is None or had is None:
        dirty[directory] = None
    else:
        dirty[directory] = had | names
