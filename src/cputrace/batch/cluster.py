"""Where a batch runs: a Dask cluster, and a job's tasks run on it.

`connect` gives a `distributed.Client`: of a local cluster of worker processes (one thread
each: the hot paths are compiled code that holds the interpreter lock in places, so processes
scale where threads would not), or of a running cluster through its scheduler's address or
scheduler file. `run_tasks` submits one task per input and yields the results as they come,
so the client merges while the workers go on, holding only what is not merged yet.

A worker that dies mid-task (killed, out of memory) loses nothing: the scheduler runs the task
again on another worker, and tasks only read their inputs and write stores atomically, so the
rerun gives the same result. After `distributed.scheduler.allowed-failures` deaths (3) the
task fails with KilledWorker, reported as that input's failure. Ctrl-C (KeyboardInterrupt
while waiting) cancels the job's tasks on the cluster before it propagates.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from types import FrameType
from typing import Any

from ..errors import CputraceError, MissingExtra, UsageError, shown
from .tasks import Failed

try:
    import distributed
except ModuleNotFoundError:
    raise MissingExtra("running on a Dask cluster", "distributed", "cluster") from None

CONNECT_SECONDS = 30
"""How long to wait for a running cluster's scheduler to answer."""


def default_workers() -> int:
    """Worker processes of a local cluster when none are asked for: this machine's cores."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def most_local_workers() -> int:
    """The most worker processes a local cluster is started with: 4 a core, at least 16. Each
    is a Python process of its own memory; a count past what the machine holds took all its
    memory before any work began (an internal MemoryError, or the process killed)."""
    return max(16, 4 * default_workers())


@contextlib.contextmanager
def connect(
    workers: int | None = None,
    scheduler: str | None = None,
    scheduler_file: str | os.PathLike[str] | None = None,
    on_dashboard: Callable[[str], None] | None = None,
) -> Iterator[distributed.Client]:
    """A client of a local cluster of `workers` processes (default: one per core), or of the
    running cluster whose scheduler is at `scheduler` or described by `scheduler_file`; the
    local cluster is stopped when the block ends. `on_dashboard` gets a running cluster's
    dashboard link, where its scheduler lists one."""
    if sum(given is not None for given in (workers, scheduler, scheduler_file)) > 1:
        raise UsageError("give one of workers, scheduler and scheduler file")
    if scheduler is None and scheduler_file is None:
        count = default_workers() if workers is None else workers
        if not 1 <= count <= most_local_workers():
            raise UsageError(
                f"workers: a local cluster of 1 to {most_local_workers()} processes on this machine "
                f"({default_workers()} cores), got {count}; for more, start a cluster and give its scheduler"
            )
        with _HeldInterrupt() as held:
            cluster = distributed.LocalCluster(
                n_workers=count, threads_per_worker=1, processes=True, dashboard_address=None,
                # without a dashboard the scheduler still serves HTTP (health, metrics), by default
                # on 8787: where that is taken (another cluster, a notebook's), distributed warned
                # into the command's output; any free port does, nobody is told to open it
                scheduler_kwargs={"dashboard_address": ":0"},
                # its processes' own logs stay out of the command's output: a task cancelled by
                # Ctrl-C, or a worker's heartbeat refused while the cluster shuts down (its
                # traceback at ERROR), says nothing a user can act on; failures reach the client
                silence_logs=logging.CRITICAL,
            )
            try:
                client = distributed.Client(cluster)
            except BaseException:
                cluster.close()
                raise
        with cluster, client:
            held.deliver()
            yield client
        return
    where = scheduler
    if scheduler_file is not None:
        scheduler = scheduler_address(scheduler_file)
        where = f"{scheduler} (from {os.fspath(scheduler_file)})"
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_SECONDS)
    except (OSError, ValueError) as exc:  # a refused or timed-out connection, a bad address
        raise CputraceError(f"cannot reach the Dask scheduler at {where}: {exc}") from None
    with client:
        if on_dashboard is not None and "dashboard" in client.scheduler_info().get("services", {}):
            on_dashboard(client.dashboard_link)
        yield client


def scheduler_address(scheduler_file: str | os.PathLike[str]) -> str:
    """The scheduler address in a scheduler file (`dask scheduler --scheduler-file` writes JSON
    with an "address"), or CputraceError naming the file and what it holds instead."""
    path = os.fspath(scheduler_file)
    try:
        with open(path, "rb") as stream:
            text = stream.read(1 << 20)
    except OSError as exc:
        raise CputraceError(f"{path}: cannot read the scheduler file: {exc.strerror}") from None
    try:
        described = json.loads(text)
    except ValueError:
        described = None
    address = described.get("address") if isinstance(described, dict) else None
    if not isinstance(address, str) or not address:
        first = text.lstrip().split(b"\n", 1)[0]
        raise CputraceError(
            f'{path}: expected a Dask scheduler file (JSON with an "address", as `dask scheduler '
            f"--scheduler-file` writes it), got {shown(first) if first else 'nothing'}"
        )
    return address


class _HeldInterrupt:
    """Ctrl-C held while a local cluster starts, and delivered once the cluster can be stopped
    whole: one interrupted half-started is left to an exit hook of distributed's that fails
    with a traceback. A start takes a few seconds."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, FrameType | None]] = []
        self._previous: Any = None

    def __enter__(self) -> _HeldInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, lambda *received: self._pending.append(received))
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def deliver(self) -> None:
        """Act on a Ctrl-C held, as the handler it was held from would have."""
        if not self._pending:
            return
        if callable(self._previous):
            self._previous(*self._pending[0])
        raise KeyboardInterrupt


def run_tasks(
    client: distributed.Client,
    task: Callable[..., Any],
    jobs: Sequence[tuple[str, tuple[Any, ...]]],
    on_done: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, Any]]:
    """`task(*args)` for each (name, args) of `jobs` on the cluster: (index, result) as each
    ends, a task that could not end (its workers kept dying) as `Failed` naming it.

    Ending early (an exception, Ctrl-C, the caller stopping) cancels the tasks left.
    """
    futures = {client.submit(task, *args, pure=False): index for index, (_, args) in enumerate(jobs)}
    try:
        for future in distributed.as_completed(futures):
            index = futures[future]
            result = _result(future, jobs[index][0])
            yield index, replace(result, name=jobs[index][0]) if isinstance(result, Failed) else result
            future.release()
            if on_done is not None:
                on_done(1)
    finally:
        left = [future for future in futures if not future.done()]
        if left:
            client.cancel(left)


def _result(future: distributed.Future, name: str) -> Any:
    """The task's result; a task the cluster could not run, `Failed` naming its input."""
    if future.status == "cancelled":
        return Failed(name, f"{name}: cancelled on the cluster")
    if future.status == "error":
        killed = future.exception()
        if isinstance(killed, distributed.KilledWorker):
            died = killed.allowed_failures + 1
            return Failed(
                name,
                f"{name}: the job could not complete: {died} worker process{'es' if died > 1 else ''} "
                f"died running it, the last at {killed.last_worker.address} (out of memory? killed?)",
            )
    return future.result()
