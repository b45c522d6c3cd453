"""Hilbert importance sampling, HC Algorithm 1.

Draw (M_1..M_N) ~ Multi(M, sigma_n / sigma) and weight W_n = (sigma / sigma_n)(M_n / M). The choice
p_n ∝ sigma_n minimises the expected squared error, which is E||L(W) - L||^2 = sigma^2 eta^2 / M (Eq. 4.1);
W is unbiased, E[W] = 1. Rows with sigma_n = 0 have probability 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..core.rows import inverse_cdf, take_rows
from .base import Problem, Solver, aggregate_draws, one_shot

__all__ = ["importance"]


def importance(size: int) -> Solver:
    def construct(problem: Problem, key: jax.Array):
        sigma_n = problem.norms
        sigma = jnp.sum(sigma_n)
        # Inverse-CDF draws: O(N + M log N) memory and time, where categorical(shape=(M,)) builds M x N noise.
        # Mesh-aware (core.rows): under a data mesh the norms are never gathered.
        p = jnp.where(problem.valid, sigma_n, 0.0)
        u = jax.random.uniform(key, (size,), p.dtype) * jnp.sum(p)
        draws = jnp.minimum(inverse_cdf(p, u), sigma_n.shape[0] - 1)
        amounts = sigma / (take_rows(sigma_n, draws) * size)
        return aggregate_draws(draws, amounts, problem.target.dtype)

    return one_shot(construct)
