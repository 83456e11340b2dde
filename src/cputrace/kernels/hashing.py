"""Integer hashing for compiled code: the multipliers and the bit mixer the tables and content
hashes share."""

from __future__ import annotations

import numba
import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
"""2**64 divided by the golden ratio (odd): multiplying by it spreads consecutive keys apart
(Fibonacci hashing)."""
SECOND = np.uint64(0xC2B2AE3D27D4EB4F)
"""A second large odd multiplier (xxHash's PRIME64_2), for the second half of a pair key."""

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True, inline="always")
def mix64(x):
    """splitmix64's finaliser: spreads every input bit over the whole word."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))
