"""Faults injected into a running Dask cluster (tests of batch and split jobs)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator


def kill_a_busy_worker(client) -> str:
    """SIGKILL a worker process that is running a task; its address."""
    pids = client.run(os.getpid)
    for _ in range(3000):
        busy = [address for address, keys in client.processing().items() if keys]
        if busy:
            os.kill(pids[busy[0]], signal.SIGKILL)
            return busy[0]
        time.sleep(0.005)
    raise AssertionError("no worker ran a task")


@contextlib.contextmanager
def killing_a_busy_worker(client) -> Iterator[list[str]]:
    """While the block runs a job: the first worker seen running a task is killed (its address
    is put in the list yielded); after it, the cluster is waited for until its nannies have
    brought it back to as many workers as it had."""
    workers = len(client.scheduler_info()["workers"])
    killed: list[str] = []
    killer = threading.Thread(target=lambda: killed.append(kill_a_busy_worker(client)))
    killer.start()
    try:
        yield killed
    finally:
        killer.join()
        client.wait_for_workers(workers, timeout=180)
