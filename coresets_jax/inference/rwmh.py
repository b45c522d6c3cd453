"""Gaussian random-walk Metropolis–Hastings (HC §7.3), on BlackJAX's `normal_random_walk`.

The proposal is theta' = theta + h L z, z ~ N(0, I), with L the Cholesky factor of the proposal shape C and
h a global scale; it is symmetric, so the acceptance ratio is pi(theta') / pi(theta). Warm-up
(`inference.warmup`) adapts (h, L) towards acceptance 0.234 (Roberts, Gelman & Gilks 1997).
"""

from __future__ import annotations

from typing import Callable, Optional

import blackjax
import jax
from blackjax.base import SamplingAlgorithm

__all__ = ["rwmh"]


def rwmh(logdensity_fn: Callable, step_size, chol: Optional[jax.Array] = None) -> SamplingAlgorithm:
    """BlackJAX's Gaussian random walk with the matrix scale h L (`chol` = L; the identity when None)."""
    scale = step_size if chol is None else step_size * chol
    return blackjax.additive_step_random_walk.normal_random_walk(logdensity_fn, scale)
