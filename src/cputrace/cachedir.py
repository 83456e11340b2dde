"""The one folder cputrace keeps its own files in, outside the folders of its inputs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where cputrace keeps what cannot live beside its input: the stores of inputs in
    read-only folders, the derived indexes of read-only stores, and compiled code
    (compiledcache.py)."""
    base = os.environ.get("CPUTRACE_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(base) / "cputrace" if base else Path.home() / ".cache" / "cputrace"
