"""Sensitivity sampling (LR Algorithm 1, lines 7-13; HC Eq. 2.5): M draws with p_n ∝ m_n, weights 1 / (p_n M)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..core import Coreset
from ..core import validate as _validate
from ..core.rows import inverse_cdf
from ..core import compiled
from ..solvers.base import aggregate_draws

__all__ = ["sensitivity_sample", "sensitivity_sample_core"]

Array = jax.Array


@compiled.jit(static_argnames=("size",))
def sensitivity_sample_core(key: Array, sensitivity: Array, size: int):
    """The pure core of `sensitivity_sample`: `(indices, weights)` of M draws with p_n ∝ m_n, weights
    1 / (p_n M), repeats sharing a slot (LR Algorithm 1 lines 7-13). Jitted, vmappable over keys, no checks:
    `sensitivity` must be a non-negative (N,) vector with a positive entry."""
    # Inverse-CDF draws, O(N + M log N); `jax.random.categorical` with shape (M,) would hold M x N noise.
    total = jnp.sum(sensitivity)
    u = jax.random.uniform(key, (size,), sensitivity.dtype) * total
    draws = jnp.minimum(inverse_cdf(sensitivity, u), sensitivity.shape[0] - 1)
    amounts = total / (sensitivity[draws] * size)  # 1 / (p_n M), p_n = m_n / sum m
    support = aggregate_draws(draws, amounts, sensitivity.dtype)
    return support.indices, support.weights


def sensitivity_sample(sensitivity: Any, size: int, key: Array, method: str = "sensitivity") -> Coreset:
    """Draw (K_1..K_N) ~ Multi(M, p), p_n = m_n / sum m, and weight gamma_n = K_n / (p_n M).

    LR Algorithm 1 lines 7-13 and HC Eq. 2.5; E[gamma_n] = 1. Repeated draws of one row share a slot, so
    `num_points` can be below M.
    """
    sensitivity = jnp.asarray(sensitivity)
    if sensitivity.ndim != 1 or sensitivity.shape[0] < 1:
        raise ValueError(f"sensitivity: expected a non-empty vector (N,), got shape {sensitivity.shape}")
    _validate.check_finite(sensitivity, "sensitivity")
    if bool(jnp.any(sensitivity < 0)) or not bool(jnp.any(sensitivity > 0)):
        raise ValueError("sensitivity: must be non-negative with at least one positive entry")
    size = _validate.check_positive_int(size, "size")
    sensitivity = sensitivity.astype(jnp.promote_types(sensitivity.dtype, jnp.float32))
    indices, weights = sensitivity_sample_core(_validate.check_key(key), sensitivity, int(size))
    return Coreset(indices, weights, {}, method)
