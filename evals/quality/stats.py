"""Paired significance over queries.

scipy is not a dependency of the evals; a paired randomization test needs only NumPy: under the
null hypothesis that two systems are exchangeable on every query, the sign of each query's
difference is a coin flip, so the observed mean difference is compared with the mean
differences of random sign flips (Smucker, Allan and Carterette 2007 recommend it for IR).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERMUTATIONS = 10_000


def paired_permutation(
    a: Sequence[float], b: Sequence[float], *, permutations: int = PERMUTATIONS, seed: int = 0
) -> float:
    """Two-sided p-value of a paired randomization (sign-flip) test of mean(a - b) = 0."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diff.size == 0:
        return 1.0
    observed = abs(float(diff.mean()))
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, diff.size))
    means = np.abs((signs * diff).mean(axis=1))
    # A permutation as extreme as the observation counts (with a tolerance for rounding).
    extreme = int(np.count_nonzero(means >= observed - 1e-12))
    return (extreme + 1) / (permutations + 1)
