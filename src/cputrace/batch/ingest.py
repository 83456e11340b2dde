"""Many inputs, one store each, ingested side by side on a cluster (`cputrace batch ingest`).

Each task is `cputrace.ingest` of one input, as `cputrace ingest` does it (sniffing, options,
images), on a worker: the store is written there, atomically, so a task whose worker dies
leaves only a staging folder, which the client removes once the task cannot complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..ingest import default_store_path, ingest
from ..store.folder import STORE_SUFFIX, remove_dead_staging
from .cluster import distributed, run_tasks
from .tasks import Failed, absolute, absolute_images, missing_here, readable, readable_images, reported


@dataclass(frozen=True, slots=True)
class Ingested:
    """An input's store and its manifest (counts, warnings, time taken)."""

    input: str
    store: str
    manifest: dict[str, Any]


def store_paths(
    inputs: Sequence[str | os.PathLike[str]], output_dir: str | os.PathLike[str] | None
) -> list[str]:
    """Each input's store: INPUT.ctrace beside it, or NAME.ctrace in `output_dir`; two inputs
    given one store is bad usage."""
    if output_dir is None:
        stores = [str(default_store_path([path])) for path in inputs]
    else:
        stores = [str(Path(output_dir, Path(path).name + STORE_SUFFIX)) for path in inputs]
    seen: dict[str, str] = {}
    for path, store in zip(inputs, stores, strict=True):
        key = absolute(store)
        if key in seen:
            raise UsageError(f"{seen[key]} and {os.fspath(path)} would both be ingested into {store}")
        seen[key] = os.fspath(path)
    return stores


@reported
def ingest_one(
    source: str, store: str, format: str | None, strict: bool, options: Mapping[str, Any],
    images: Sequence[str],
) -> Ingested:  # fmt: skip
    """The task: one input into its store, on a worker."""
    readable(source)
    images = readable_images(images)
    result = ingest([source], store, format=format, strict=strict, options=options, images=images)
    return Ingested(source, str(result.store), result.manifest)


def ingest_many(
    client: distributed.Client,
    inputs: Sequence[str | os.PathLike[str]],
    output_dir: str | os.PathLike[str] | None = None,
    *,
    format: str | None = None,
    strict: bool = False,
    options: Mapping[str, Any] | None = None,
    images: Sequence[str] = (),
    on_done: Callable[[int], None] | None = None,
) -> list[Ingested | Failed]:
    """Ingest each input into a store of its own on the cluster of `client`, in input order.

    An input that fails is a `Failed` and the others go on. Options are checked here, before
    any task starts (UsageError), as `ingest` checks them.
    """
    from ..formats import FORMATS, check_options
    from ..image import ImageError, parse_image_spec

    check_options(dict(options or {}), [format] if format else list(FORMATS))
    stores = store_paths(inputs, output_dir)
    for spec in images:  # as `ingest` refuses one, before any task starts
        path = parse_image_spec(spec)[0]
        try:
            open(path, "rb").close()
        except OSError as exc:
            raise ImageError(f"{path}: cannot read: {exc.strerror}") from exc
    specs = absolute_images(images)
    results: dict[int, Ingested | Failed] = {}
    jobs, submitted = [], []  # the inputs sent to the cluster, and their indexes in `inputs`
    for index, (source, store) in enumerate(zip(inputs, stores, strict=True)):
        failed = missing_here(os.fspath(source), [source])
        if failed is None:
            task = (absolute(source), absolute(store), format, strict, dict(options or {}), specs)
            jobs.append((os.fspath(source), task))
            submitted.append(index)
            continue
        results[index] = failed
        if on_done is not None:
            on_done(1)
    for at, result in run_tasks(client, ingest_one, jobs, on_done):
        index = submitted[at]
        if isinstance(result, Failed):
            remove_dead_staging(Path(absolute(stores[index])))
            results[index] = result
        else:  # as the caller named them, not as workers were told
            results[index] = replace(result, input=os.fspath(inputs[index]), store=stores[index])
    return [results[index] for index in range(len(inputs))]
