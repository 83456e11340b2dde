"""numba's cache for cputrace follows every source file, not only the compiled function's own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cputrace
from cputrace.compiledcache import IDLE_SECONDS, KEEP, _prune, sources_digest

PACKAGE = Path(cputrace.__file__).parent

# An isa.index lookup calls kernels.pairtable.find, compiled into the caller's cached code.
LOOKUP = """
import numpy as np
from cputrace.isa.index import AddressIndex, lookup
index = AddressIndex()
index.add(np.array([8], np.int64), np.array([5], np.int64))
print(lookup(index.table, 8))
"""


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "CPUTRACE_NUMBA_CACHE_DIR")}
    env["CPUTRACE_CACHE"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(tmp_path / "src")
    return env


def _run(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_changed_callee_is_seen_by_its_unchanged_callers(tmp_path: Path) -> None:
    shutil.copytree(PACKAGE, tmp_path / "src" / "cputrace", ignore=shutil.ignore_patterns("__pycache__"))
    env = _clean_env(tmp_path)
    assert _run(LOOKUP, env) == "5"
    callee = tmp_path / "src" / "cputrace" / "kernels" / "pairtable.py"
    text = callee.read_text()
    marker = '    """The row holding key (a, b), or -1."""\n'
    assert marker in text
    callee.write_text(text.replace(marker, marker + "    return -1  # the edit: nothing is found\n"))
    assert _run(LOOKUP, env) == "-1"  # isa/index.py is unchanged: numba alone would reuse its old code
    assert len(list((tmp_path / "cache" / "cputrace" / "numba").iterdir())) == 2


def test_the_users_numba_cache_dir_is_kept(tmp_path: Path) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "mine"))
    env.pop("CPUTRACE_NUMBA_CACHE_DIR", None)
    shown = _run("import os, cputrace; print(os.environ['NUMBA_CACHE_DIR'])", env)
    assert shown == str(tmp_path / "mine")


def test_an_inherited_folder_of_the_same_sources_is_kept_and_of_others_replaced(tmp_path: Path) -> None:
    env = _clean_env(tmp_path)
    env["PYTHONPATH"] = str(PACKAGE.parent)
    ours = tmp_path / "elsewhere" / sources_digest(PACKAGE)
    env["NUMBA_CACHE_DIR"] = env["CPUTRACE_NUMBA_CACHE_DIR"] = str(ours)
    show = "import os, cputrace; print(os.environ['NUMBA_CACHE_DIR'])"
    assert _run(show, env) == str(ours)
    stale = tmp_path / "elsewhere" / "0123456789abcdef"
    env["NUMBA_CACHE_DIR"] = env["CPUTRACE_NUMBA_CACHE_DIR"] = str(stale)
    assert _run(show, env) == str(tmp_path / "cache" / "cputrace" / "numba" / sources_digest(PACKAGE))


def test_digest_follows_content_and_names(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not a source\n")
    first = sources_digest(tmp_path)
    (tmp_path / "notes.txt").write_text("still not a source\n")
    assert sources_digest(tmp_path) == first
    (tmp_path / "a.py").write_text("x = 22\n")
    assert sources_digest(tmp_path) != first


@pytest.mark.parametrize("idle", [True, False])
def test_pruning_keeps_the_recent_and_what_is_not_ours(tmp_path: Path, idle: bool) -> None:
    old = time.time() - (IDLE_SECONDS + 60 if idle else 60)
    folders = []
    for i in range(KEEP + 2):
        folder = tmp_path / f"{i:016x}"
        folder.mkdir()
        os.utime(folder, (old - i, old - i))
        folders.append(folder)
    (tmp_path / "not-a-digest").mkdir()
    os.utime(tmp_path / "not-a-digest", (old - 99, old - 99))
    _prune(tmp_path, keep=folders[-1])
    left = sorted(p.name for p in tmp_path.iterdir())
    if idle:  # the KEEP most recent, the one in use and the foreign folder stay
        assert left == sorted([f.name for f in folders[:KEEP]] + [folders[-1].name, "not-a-digest"])
    else:
        assert len(left) == KEEP + 3
