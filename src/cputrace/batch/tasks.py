"""What every task of a batch shares on its worker: paths checked there, failures as values.

A task's expected failure (bad input, a refused output, a file it cannot read) comes back as
a `Failed` value naming the input, not as an exception: the other tasks go on, the client
reports it, and nothing is pickled that cannot be unpickled (`TraceFormatError` takes four
arguments). Anything else is a bug and propagates.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from ..errors import CputraceError, UsageError, os_error_text

if TYPE_CHECKING:
    from ..image import Image
    from ..store.trace import Trace

P = ParamSpec("P")
R = TypeVar("R")

PART_BYTES = 256 << 20
"""Input bytes per part of an input split across a cluster (partition.py), by default: a part
is a task, and tasks of a few seconds keep the scheduler's cost per task (a few ms) and the
stitching small against the decoding."""

SHARED_STORAGE = "inputs and stores must be on paths every worker can read (a shared file system)"


@dataclass(frozen=True, slots=True)
class Failed:
    """A task that could not be done: the input it was for and why, as a user reads it."""

    name: str  # the input (or pair) as the caller named it
    message: str
    usage: bool = False  # bad usage (a refused output), rather than bad input


class NotShared(CputraceError):
    """A path the client can read and a worker cannot: they do not share a file system."""


def missing_here(name: str, paths: Sequence[str | os.PathLike[str]]) -> Failed | None:
    """A task's failure before it is sent, when the client finds no file or store at one of
    its `paths`: it is missing, not on a file system the workers do not share (`readable`)."""
    gone = next((path for path in paths if not os.path.exists(path)), None)
    return None if gone is None else Failed(name, f"{os.fspath(gone)}: no such file or store")


def readable(path: str) -> str:
    """`path`, after checking that this worker can read it (the client already has)."""
    if not os.access(path, os.R_OK):
        raise NotShared(f"{path}: worker on {socket.gethostname()} cannot read it; {SHARED_STORAGE}")
    return path


def absolute(path: str | os.PathLike[str]) -> str:
    """A path as a worker must be given it: workers do not share the client's working folder."""
    return os.path.abspath(os.fspath(path))


def absolute_images(specs: Sequence[str]) -> tuple[str, ...]:
    """Image specs (`PATH[@ADDR]`) with absolute paths."""
    from ..image import parse_image_spec

    absolute_specs = []
    for spec in specs:
        path, address = parse_image_spec(spec)
        absolute_specs.append(absolute(path) + ("" if address is None else f"@{address:#x}"))
    return tuple(absolute_specs)


def readable_images(specs: Sequence[str]) -> tuple[str, ...]:
    """`readable` for the file of each image spec."""
    from ..image import parse_image_spec

    for spec in specs:
        readable(str(parse_image_spec(spec)[0]))
    return tuple(specs)


def image_of(specs: Sequence[str]) -> Image | None:
    """The program image of `specs` (None: no specs), loaded once per worker while its files
    are unchanged: a job's tasks on one worker share it."""
    from ..image import parse_image_spec

    stamps = []
    for spec in readable_images(specs):
        status = os.stat(parse_image_spec(spec)[0])
        stamps.append((status.st_size, status.st_mtime_ns))
    return _loaded_image(tuple(specs), tuple(stamps))


@functools.lru_cache(maxsize=4)
def _loaded_image(specs: tuple[str, ...], _stamps: tuple[tuple[int, int], ...]) -> Image | None:
    from ..image import load_image_specs

    return load_image_specs(specs)


def open_trace(path: str) -> Trace:
    """A store, or a raw input ingested once into its cached store (`cputrace.open`), on a worker."""
    from ..opening import open as open_path

    return open_path(readable(path))


def reported(task: Callable[P, R]) -> Callable[P, R | Failed]:
    """A task whose CputraceError or OSError comes back as `Failed` (`run_tasks` names the input)."""

    @functools.wraps(task)
    def run(*args: P.args, **kwargs: P.kwargs) -> R | Failed:
        try:
            return task(*args, **kwargs)
        except CputraceError as exc:
            return Failed("", str(exc), usage=isinstance(exc, UsageError))
        except OSError as exc:
            return Failed("", os_error_text(exc))

    return run
