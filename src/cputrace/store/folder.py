"""A store's folder: versions of the tables behind one manifest, replaced atomically.

    NAME.ctrace/manifest.json     the current manifest; its `data` names the version folder
    NAME.ctrace/v-XXXXXXXXXXXX/   one version's table files, and its derived indexes

Why versions behind a manifest. A store is replaced (re-ingested) while others may be reading
it: a notebook or a service holds `cputrace.open(...)` for hours, and DuckDB reopens the table
files by path for every query. A folder cannot be swapped for another atomically everywhere
(`renameat2`'s exchange is Linux-only and missing on NFS), and a folder renamed aside is a
moment with nothing at the store's path; but `rename(2)` of a file over another is atomic on
every POSIX filesystem. So a new version's tables are moved into a folder of their own beside
the current ones, and one rename of `manifest.json` switches every later reader to them: there
is always a whole store at the path, and a failure at any step leaves the old one as it was.

Readers hold a shared `flock` on their version's first instructions file (`held_file`:
`instructions.parquet`, or `instructions/part-00000.parquet` in a partitioned store) for as
long as they are open (`pin`); an old version is deleted only once nobody holds it (`collect`: by the ingest
that replaced it, a later one, or its last reader closing). A reader thus sees one version for
its whole life, whatever is re-ingested meanwhile. `flock` locks belong to an open file, so
they work between threads and processes alike, and vanish with a killed process.

An ingest writes into a sibling `NAME.ctrace.tmp-XXXXXXXX/`, marked as an ingest's by a
`.cputrace-ingest` file that it holds an exclusive lock on until it ends; the next ingest of
the same store removes the marked folders whose lock is free (their ingest was killed).

Stores of model version 1 keep their tables beside the manifest; they are read as they are,
and the first re-ingest moves the store to this layout.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from ..errors import StoreError, UsageError
from ..model import TABLES
from .manifest import MANIFEST, VERSION_FOLDER, data_dir, held_file, load_manifest, part_file, table_file

STORE_SUFFIX = ".ctrace"
"""The suffix of a store's folder: `run.tarmac` is ingested into `run.tarmac.ctrace`."""

HELD_FILE = table_file("instructions")
"""The file of a plain version that readers lock (a partitioned one's: `HELD_PART`)."""
HELD_PART = part_file("instructions", 0)

INGEST_MARKER = ".cputrace-ingest"
_MARKER_TEXT = b"cputrace ingest in progress\n"
_NEXT_MANIFEST = ".manifest-next"
_STAGING = re.compile(r"\.tmp-[0-9a-f]{8}")
_OLD_STORE = re.compile(r"\.old-[0-9a-f]{8}")  # set aside by cputrace before versioned stores
_PIN_ATTEMPTS = 20


def is_store(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / MANIFEST).is_file()


def check_utf8_path(path: str | os.PathLike[str], what: str, advice: str) -> None:
    """Refuse (UsageError) a path to write or read through Arrow or DuckDB that is not UTF-8
    text: they open files by UTF-8 names only. `what` names the path, `advice` what to do."""
    try:
        os.fspath(Path(path).absolute()).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise UsageError(
            f"{shown}: {what} must be UTF-8 text (Arrow and DuckDB open no other file names); {advice}"
        ) from None


def check_store_path(store: str | os.PathLike[str]) -> None:
    """A store's path must be UTF-8 text (`check_utf8_path`), or it could be neither written nor read."""
    check_utf8_path(store, "a store's path", "rename it, or ingest with -o NAME.ctrace")


def check_output(output: Path, inputs: Sequence[str | os.PathLike[str]] = ()) -> None:
    """Refuse an output that would replace anything but a store (or an empty folder), that
    holds one of the inputs (a store replaces its old version, never a user's files), or whose
    path Arrow and DuckDB cannot open (`check_store_path`)."""
    check_store_path(output)
    if os.path.lexists(output) and not is_store(output) and not _is_empty_dir(output):
        kind = "a folder" if output.is_dir() else "a file"
        raise UsageError(f"{output} exists and is {kind}, not a cputrace store; choose another output")
    resolved = output.resolve()
    for source in inputs:
        path = Path(source).resolve()
        if path == resolved or resolved in path.parents:
            raise UsageError(f"the output {output} would hold the input {source}; choose another output")


def _is_empty_dir(path: Path) -> bool:
    if path.is_symlink() or not path.is_dir():
        return False
    with os.scandir(path) as entries:
        return next(entries, None) is None


class Pin:
    """One version of a store, held open: its manifest, its folder, and the shared lock that
    keeps any ingest from deleting it until `release`."""

    def __init__(self, manifest: dict[str, Any], data: Path, held: IO[bytes]) -> None:
        self.manifest = manifest
        self.data = data
        self._held: IO[bytes] | None = held

    def release(self) -> None:
        if self._held is not None:
            self._held.close()  # closing the file drops its lock
            self._held = None


def pin(store: Path) -> Pin:
    """Hold the store's current version (see the module docstring).

    The manifest is read again once the lock is held: if it changed meanwhile, the version
    locked may be one an ingest was deleting, and the current one is tried instead.
    """
    for _ in range(_PIN_ATTEMPTS):
        manifest = load_manifest(store)
        data = data_dir(store, manifest)
        try:
            held = open(data / held_file(manifest), "rb")  # noqa: SIM115 - kept open: it holds the lock
        except FileNotFoundError:
            if load_manifest(store) != manifest:
                continue
            raise StoreError(f"damaged store: {data / held_file(manifest)}: missing") from None
        with contextlib.suppress(OSError):  # without locks, the version is read unheld
            fcntl.flock(held, fcntl.LOCK_SH)
        if load_manifest(store) == manifest:
            return Pin(manifest, data, held)
        held.close()
    raise StoreError(f"{store}: the store was replaced {_PIN_ATTEMPTS} times while being opened; try again")


class Staging:
    """A new version of a store, written in a marked sibling folder and moved in by `commit`."""

    def __init__(self, store: Path) -> None:
        self.store = store
        remove_dead_staging(store)
        self.root = store.with_name(f"{store.name}.tmp-{uuid.uuid4().hex[:8]}")
        self.root.mkdir(parents=True)
        try:  # a full disk can refuse the marker or the version: the folder goes then
            self._marker = _hold_marker(self.root / INGEST_MARKER)
            try:
                self.version = self.root / f"v-{uuid.uuid4().hex[:12]}"
                self.version.mkdir()
            except BaseException:
                self._marker.close()
                raise
        except BaseException:
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def commit(self, manifest: dict[str, Any]) -> None:
        """Make the version the store's current one, then remove what nobody uses any more.

        The version is held (as a reader would) from before it enters the store until the
        manifest names it, so a concurrent ingest's `collect` never takes it for a leftover.
        """
        text = json.dumps({**manifest, "data": self.version.name}, indent=2, default=str) + "\n"
        (self.version / _NEXT_MANIFEST).write_text(text)
        with open(self.version / held_file(manifest), "rb") as held:
            with contextlib.suppress(OSError):
                fcntl.flock(held, fcntl.LOCK_SH)
            if is_store(self.store) or not self._create():
                self._replace()
        self.discard()
        collect(self.store)

    def _create(self) -> bool:
        """Put a store with this version where there is none (or an empty folder); False if
        another ingest made a store there meanwhile."""
        fresh = self.root / "store"
        fresh.mkdir()
        self._move_version(fresh)
        os.rename(fresh / self.version.name / _NEXT_MANIFEST, fresh / MANIFEST)
        try:
            os.rename(fresh, self.store)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
            if not is_store(self.store):
                raise UsageError(f"{self.store} appeared meanwhile and is not a cputrace store") from None
            os.rename(fresh / MANIFEST, self.version / _NEXT_MANIFEST)
            self._move_version(self.root)
            return False
        return True

    def _replace(self) -> None:
        """Move the version into the store, then switch the manifest to it (one rename)."""
        self._move_version(self.store)
        try:
            os.replace(self.version / _NEXT_MANIFEST, self.store / MANIFEST)
        except BaseException:
            shutil.rmtree(self.version, ignore_errors=True)  # the old version stays current
            raise

    def _move_version(self, folder: Path) -> None:
        target = folder / self.version.name
        os.rename(self.version, target)
        self.version = target

    def discard(self) -> None:
        """Remove the staging folder (and the version, unless it has entered the store)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self._marker.close()


def _hold_marker(path: Path) -> IO[bytes]:
    """Create the marker of an ingest's staging folder, locked before it says what it is: a
    folder whose marker is locked, or empty, is never taken for a killed ingest's."""
    marker = open(path, "xb")  # noqa: SIM115 - kept open: it holds the lock
    try:
        with contextlib.suppress(OSError):  # without locks, other ingests leave the folder alone
            fcntl.flock(marker, fcntl.LOCK_EX)
        marker.write(_MARKER_TEXT)
        marker.flush()
    except BaseException:
        with contextlib.suppress(OSError):  # its unwritten bytes cannot be flushed either
            marker.close()
        raise
    return marker


def remove_dead_staging(store: Path) -> None:
    """Remove the staging folders of ingests of `store` that were killed: named like ours,
    marked as ours, and with their marker's lock free."""
    for folder in store.parent.glob(glob.escape(store.name) + ".tmp-*"):
        if not _STAGING.fullmatch(folder.name[len(store.name) :]) or folder.is_symlink():
            continue
        try:
            marker = open(folder / INGEST_MARKER, "rb")  # noqa: SIM115 - closed below
        except OSError:
            continue  # not an ingest's folder
        with marker:
            try:
                fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its ingest is running (or locks are not to be had)
            if marker.read() == _MARKER_TEXT:
                shutil.rmtree(folder, ignore_errors=True)


def collect(store: Path) -> None:
    """Remove what the store's manifest no longer names and no reader holds: old versions,
    the tables of a model-version-1 store once replaced, and stores set aside by older
    cputrace (`NAME.ctrace.old-XXXXXXXX`). Best effort: what cannot be removed now (held, or
    no permission) is left for a later ingest."""

    def current() -> str | None:
        try:
            return load_manifest(store).get("data", "")
        except StoreError:
            return None  # never delete beside a manifest that cannot be read

    name = current()
    if name is None:
        return
    for folder in store.iterdir():
        if folder.name != name and _is_version(folder):
            _remove_unheld(_held_in(folder), [folder], lambda f=folder: current() not in (None, f.name))
    if name and (store / HELD_FILE).exists():  # a version-1 store's tables, now replaced
        legacy = [store / table_file(t) for t in TABLES if table_file(t) != HELD_FILE]
        legacy += [store / "index", store / HELD_FILE]
        _remove_unheld(store / HELD_FILE, legacy, lambda: bool(current()))
    for folder in store.parent.glob(glob.escape(store.name) + ".old-*"):
        old = _OLD_STORE.fullmatch(folder.name[len(store.name) :])
        if old and is_store(folder) and not folder.is_symlink():
            _remove_unheld(folder / HELD_FILE, [folder], lambda: True)


def _held_in(version: Path) -> Path:
    """The file readers lock in a version folder whose manifest is gone (an old version)."""
    return version / HELD_PART if (version / HELD_PART).exists() else version / HELD_FILE


def _is_version(folder: Path) -> bool:
    return VERSION_FOLDER.fullmatch(folder.name) is not None and folder.is_dir() and not folder.is_symlink()


def _remove_unheld(held: Path, paths: Iterable[Path], still_unused: Callable[[], bool]) -> None:
    """Remove `paths` if no reader holds `held` and `still_unused()` says so once the lock is
    ours (a reader that read the manifest before it changed may have locked it just before)."""
    try:
        lock = open(held, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        lock = None  # a version without its tables (an ingest killed while moving it in)
    except OSError:
        return
    try:
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return  # held by a reader (or locks are not to be had)
        if still_unused():
            for path in paths:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        path.unlink()
    finally:
        if lock is not None:
            lock.close()
