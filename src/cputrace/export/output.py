"""Output files written whole or not at all: to a temporary file beside the target, renamed over it.

An export that fails or is interrupted (a full disk, a bug, Ctrl-C) leaves the target as it
was, never an empty or partial file, and takes its temporary file with it. Every file a
command writes with -o goes through here. Targets that are not regular files (/dev/stdout,
a named pipe) are written directly: nothing can be renamed over them, and they hold nothing
to lose. A target that is one of the command's inputs (the trace, an image), or a file inside
a store, is refused (`check_output_file`): replacing it would lose what the output was made from.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import WRITE_ERRORS, UsageError
from ..store.folder import check_utf8_path, is_store


def check_output_file(target: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Refuse (UsageError) an output file that is one of `inputs` (the same file, by any path or
    link), that lies inside a cputrace store, whose files only an ingest replaces, or whose
    name is not UTF-8 text (Arrow and DuckDB write some outputs, and reports name files)."""
    check_utf8_path(target, "an output's path", "choose another output")
    real = Path(os.path.realpath(target))
    with contextlib.suppress(OSError):  # a target that does not exist yet is no input
        written = os.stat(real)
        for source in inputs:
            with contextlib.suppress(OSError):  # an input that is gone is not overwritten either
                read = os.stat(source)
                if (read.st_dev, read.st_ino) == (written.st_dev, written.st_ino):
                    raise UsageError(f"the output {target} is the input {source}; choose another output")
    for folder in real.parents:
        if is_store(folder):
            raise UsageError(f"the output {target} is inside the store {folder}; choose another output")


@contextlib.contextmanager
def output_path(
    target: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = ()
) -> Iterator[Path]:
    """A path to write the output to; it becomes `target` when the block ends without an error.

    Errors name `target`, not the temporary file. An existing target keeps its permissions,
    and one that is not writable is refused, as opening it for writing would be; so is one of
    `inputs`, the files the output is made from (`check_output_file`).
    """
    target = Path(target)
    check_output_file(target, inputs)
    staged = None
    try:
        if target.exists() and not target.is_file():
            yield target
            return
        real = Path(os.path.realpath(target))  # through a symbolic link: the link stays
        if real.exists() and not os.access(real, os.W_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(target))
        staged = real.with_name(f".{real.name}.tmp-{uuid.uuid4().hex[:8]}{real.suffix}")
        yield staged
        if real.exists():
            shutil.copymode(real, staged)
        os.replace(staged, real)
    except BaseException as exc:
        if staged is not None:
            with contextlib.suppress(OSError):  # not made, or a file system that refuses even that
                staged.unlink()
        if isinstance(exc, OSError) and _about_output(exc, staged):
            reason = os.strerror(exc.errno) if exc.errno else exc.strerror  # not pyarrow's long text
            raise OSError(exc.errno, reason, str(target)) from exc
        raise


def _about_output(exc: OSError, staged: Path | None) -> bool:
    if exc.filename is None:
        return exc.errno in WRITE_ERRORS
    return isinstance(exc.filename, str | bytes) and os.fsdecode(exc.filename) == str(staged)


@contextlib.contextmanager
def output_file(
    target: str | os.PathLike[str],
    mode: str = "w",
    inputs: Iterable[str | os.PathLike[str]] = (),
    **options: Any,
) -> Iterator[IO[Any]]:
    """`open(target, mode, **options)` for writing, through `output_path` (which refuses `inputs`)."""
    with output_path(target, inputs) as path, open(path, mode, **options) as out:
        yield out
