"""Uniform random subsampling: M draws with replacement, weight N/M per draw (the baseline of every paper)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .base import Problem, Solver, aggregate_draws, one_shot

__all__ = ["uniform"]


def uniform(size: int) -> Solver:
    def construct(problem: Problem, key: jax.Array):
        n = problem.V.shape[0]
        draws = jax.random.randint(key, (size,), 0, n)
        return aggregate_draws(draws, jnp.full((size,), n / size), problem.target.dtype)

    return one_shot(construct)
