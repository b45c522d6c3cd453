"""Hilbert Frank–Wolfe, HC Algorithm 2.

Solves min (w - 1)^T K (w - 1) over the polytope {w >= 0, sum_n sigma_n w_n = sigma} (Eq. 4.6), whose vertices
are (sigma / sigma_n) 1_n. Starts at the greedy vertex (Eq. 4.7), then for t = 1..M-1 moves towards the
vertex f_t = argmax_n <L - L(w), v_n / sigma_n> (Eq. 4.8) with the exact line search (Eq. 4.9, gamma in [0, 1]
by Lemma 4.3) or the fixed step gamma_t = 2 / (3t + 4) (bound Eq. 4.12). Error bound: Theorem 4.4.

Each iteration reads V once (the scores V r); the running approximation L(w) = V^T w is updated in O(J).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .base import (Problem, Solver, Support, masked_argmax, support_add, support_empty, support_scale,
                   take_rows)

__all__ = ["frank_wolfe", "FrankWolfeState", "STEP_RULES"]

STEP_RULES = ("line_search", "fixed")


class FrankWolfeState(NamedTuple):
    """Iterate of Algorithm 2.

    approx caches L(w) = V^T w so the residual needs no pass over V; gammas records each step for
    diagnostics (Lemma 4.3 says each exact step lies in [0, 1]).
    """

    support: Support
    approx: jax.Array
    gammas: jax.Array
    iteration: jax.Array


def frank_wolfe(size: int, step_rule: str = "line_search") -> Solver:
    if step_rule not in STEP_RULES:
        raise ValueError(f"step_rule: unknown value {step_rule!r}; expected one of {list(STEP_RULES)}")

    def vertex_scores(problem: Problem, direction: jax.Array) -> jax.Array:
        scores = problem.V @ direction.astype(problem.V.dtype)
        return scores.astype(direction.dtype) / jnp.where(problem.valid, problem.norms, 1.0)

    def vertex(problem: Problem, f: jax.Array) -> jax.Array:
        """The polytope vertex (sigma / sigma_f) v_f as a vector in R^J."""
        sigma = jnp.sum(problem.norms)
        return (sigma / take_rows(problem.norms, f)) * take_rows(problem.V, f).astype(problem.target.dtype)

    def init(problem: Problem, key: jax.Array) -> FrankWolfeState:
        del key  # deterministic
        dtype = problem.target.dtype
        f = masked_argmax(vertex_scores(problem, problem.target), problem.valid)  # Eq. 4.7
        sigma = jnp.sum(problem.norms)
        support = support_add(support_empty(size, dtype), f, sigma / take_rows(problem.norms, f))
        return FrankWolfeState(support, vertex(problem, f), jnp.zeros(size, dtype), jnp.asarray(1))

    def step(problem: Problem, state: FrankWolfeState) -> FrankWolfeState:
        residual = problem.target - state.approx
        f = masked_argmax(vertex_scores(problem, residual), problem.valid)  # Eq. 4.8
        toward = vertex(problem, f) - state.approx
        if step_rule == "line_search":  # Eq. 4.9
            denom = jnp.dot(toward, toward)
            gamma = jnp.where(denom > 0, jnp.dot(toward, residual) / jnp.where(denom > 0, denom, 1.0), 0.0)
        else:  # the fixed rule behind Eq. 4.12
            gamma = jnp.asarray(2.0 / (3.0 * state.iteration + 4.0), residual.dtype)
        applied = jnp.clip(gamma, 0.0, 1.0)  # rounding can leave gamma a hair outside [0, 1]
        sigma = jnp.sum(problem.norms)
        support = support_scale(state.support, 1.0 - applied)
        support = support_add(support, f, applied * sigma / take_rows(problem.norms, f))
        return FrankWolfeState(support, state.approx + applied * toward,
                               state.gammas.at[state.iteration].set(gamma), state.iteration + 1)

    def done(state: FrankWolfeState) -> jax.Array:
        return state.iteration >= size

    def extract(state: FrankWolfeState):
        return state.support.indices, state.support.weights, {"gammas": state.gammas[1:]}

    return Solver(init, step, done, extract)
