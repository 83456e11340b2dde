"""Where numba keeps cputrace's compiled code: one folder per state of the package's sources.

numba checks a cached function against its own source file only, yet the compiled code also
holds what the function called in other modules and the constants it read from them (fact
bits, table sentinels). After an edit, a checkout or an upgrade that changes a module but not
its callers, numba would load the callers' old code: wrong answers, or loops that never end.
So the cache lives in `cache_dir()/numba/DIGEST`, DIGEST hashing the path, size and
modification time of every source file of the package: any change starts an empty folder. The
folders beyond the `KEEP` most recently used, unused for a day, are removed; they hold only
cputrace's compiled code, which a later run compiles again if it needs it.

A NUMBA_CACHE_DIR the user set is left alone (they chose where compiled code goes, and what
invalidates it). One this module set, inherited by a process that may run other sources, is
worked out again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import time
from pathlib import Path

from .cachedir import cache_dir

KEEP = 3
"""Cache folders kept: the one in use and the most recently used others."""
IDLE_SECONDS = 24 * 3600
"""A folder beyond KEEP is removed only when unused this long (a running older cputrace may use it)."""

_DIGEST = re.compile("[0-9a-f]{16}")  # the names of the folders this module makes
_OURS = "CPUTRACE_NUMBA_CACHE_DIR"  # the NUMBA_CACHE_DIR this module chose, to tell it from the user's


def sources_digest(package: Path) -> str:
    """A short hash of every .py file below `package`: relative path, size, modification time."""
    digest = hashlib.blake2b(digest_size=8)  # stdlib: importing the package loads no third-party module
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                st = os.stat(path)
                digest.update(f"{os.path.relpath(path, package)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def use_own_cache() -> None:
    """Point numba's cache at the folder of these sources (see the module's docstring)."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen and chosen != os.environ.get(_OURS):
        return
    digest = sources_digest(Path(__file__).parent)
    if chosen and Path(chosen).name == digest:
        return  # inherited from a cputrace of the same sources (whatever its CPUTRACE_CACHE)
    root = cache_dir() / "numba"
    folder = root / digest
    try:
        folder.mkdir(parents=True, exist_ok=True)
        os.utime(folder)  # its last use, for the pruning below
        _prune(root, keep=folder)
    except OSError:
        return  # no writable cache folder: numba's own default (beside the sources, or none)
    os.environ["NUMBA_CACHE_DIR"] = os.environ[_OURS] = str(folder)
    if "numba" in sys.modules:  # too late for the environment: numba read it when imported
        sys.modules["numba"].config.CACHE_DIR = str(folder)


def _prune(root: Path, keep: Path) -> None:
    """Remove the cache folders beyond the KEEP most recently used (`keep` stays)."""
    folders = [
        entry for entry in os.scandir(root)
        if entry.is_dir(follow_symlinks=False) and _DIGEST.fullmatch(entry.name)
    ]  # fmt: skip
    if len(folders) <= KEEP:
        return
    folders.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime, reverse=True)
    idle_since = time.time() - IDLE_SECONDS
    for entry in folders[KEEP:]:
        if Path(entry.path) != keep and entry.stat(follow_symlinks=False).st_mtime < idle_since:
            with contextlib.suppress(OSError):  # another process may be removing it too
                shutil.rmtree(entry.path)
