"""Profiles summed over many traces on a cluster (`cputrace batch profile`).

Each task is `analysis.profile.profile` of one trace on a worker (the image loaded once per
worker); the client adds the tables up (`analysis.profile.added`) as they come: the same
tables as `cputrace profile`, for the whole suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..analysis.calls.log import Method
from ..analysis.profile import Profile, added, profile
from .cluster import distributed, run_tasks
from .tasks import Failed, absolute, absolute_images, image_of, open_trace, reported


@reported
def profile_of(trace: str, images: Sequence[str], method: Method) -> Profile:
    """The task: one trace's profile, on a worker."""
    return profile(open_trace(trace), image=image_of(images), method=method)


@dataclass
class SummedProfile:
    """The profiles added up (None: no trace could be read), and the traces that failed."""

    profile: Profile | None
    traces: int  # profiles added
    failed: list[Failed]


def summed_profile(
    client: distributed.Client,
    traces: Sequence[str | os.PathLike[str]],
    images: Sequence[str] = (),
    method: Method = Method.AUTO,
    on_done: Callable[[int], None] | None = None,
) -> SummedProfile:
    """The profile of every trace, on the cluster of `client`, added up. A trace that fails is
    left out and listed."""
    specs = absolute_images(images)
    jobs = [(os.fspath(trace), (absolute(trace), specs, method)) for trace in traces]
    total: Profile | None = None
    count = 0
    failed: dict[int, Failed] = {}
    for index, result in run_tasks(client, profile_of, jobs, on_done):
        if isinstance(result, Failed):
            failed[index] = result
            continue
        total = result if total is None else added([total, result])
        count += 1
    return SummedProfile(total, count, [failed[index] for index in sorted(failed)])
