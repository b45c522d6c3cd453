"""Hilbert Frank–Wolfe, HC Algorithm 2.

Solves min (w - 1)^T K (w - 1) over the polytope {w >= 0, sum_n sigma_n w_n = sigma} (Eq. 4.6), whose vertices
are (sigma / sigma_n) 1_n. Starts at the greedy vertex (Eq. 4.7), then for t = 1..M-1 moves towards the
vertex f_t = argmax_n <L - L(w), v_n / sigma_n> (Eq. 4.8) with the exact line search (Eq. 4.9, gamma in [0, 1]
by Lemma 4.3) or the fixed step gamma_t = 2 / (3t + 4) (bound Eq. 4.12). Error bound: Theorem 4.4.

Each iteration reads V once (the scores V r); the running approximation L(w) = V^T w is updated in O(J).

With `cache_mb > 0`, the scores s = V r (r = L - L(w)) are kept incrementally instead: the step
L(w') = (1 - gamma) L(w) + gamma (sigma / sigma_f) v_f gives
    s' = (1 - gamma) s + gamma (V L - (sigma / sigma_f) V v_f),
where V L is computed once and V v_f is the Gram column of the chosen point. Frank–Wolfe re-selects points
often (num_points is well below M), and a re-selected point's column is served from a FIFO cache of
capacity C = min(M, cache_mb MiB / (4 N)) columns, so the iteration costs O(N) instead of a pass over V.
A miss computes V [v_f, r'] in one pass, which also resets the scores to their exact value (no drift
across misses). C = 0 (N too large for the budget) falls back to the plain iteration.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..core.validate import check_nonneg_int
from .base import (Problem, Solver, Support, masked_argmax, matvec, support_add, support_empty,
                   support_scale, take_rows)

__all__ = ["frank_wolfe", "FrankWolfeState", "GramCache", "STEP_RULES"]

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
    cache: "GramCache | None" = None


class GramCache(NamedTuple):
    """Incremental scores (module docstring, cache_mb > 0).

    scores = V (L - L(w)), kept up to date; base = V L (computed once); rows[c] / columns[c] are the chosen
    points whose Gram columns V v_f are cached (FIFO, slot `filled % C`); hits counts cache-served steps.
    """

    scores: jax.Array
    base: jax.Array
    rows: jax.Array
    columns: jax.Array
    filled: jax.Array
    hits: jax.Array


def frank_wolfe(size: int, step_rule: str = "line_search", cache_mb: int = 0) -> Solver:
    """HC Algorithm 2 with M = size iterations; cache_mb > 0 enables the Gram-column cache (docstring)."""
    if step_rule not in STEP_RULES:
        raise ValueError(f"step_rule: unknown value {step_rule!r}; expected one of {list(STEP_RULES)}")
    cache_mb = check_nonneg_int(cache_mb, "cache_mb")

    def capacity(problem: Problem) -> int:
        return int(min(size, (cache_mb << 20) // (4 * problem.V.shape[0])))

    def vertex_scores(problem: Problem, direction: jax.Array) -> jax.Array:
        scores = matvec(problem, direction)
        return scores.astype(direction.dtype) / jnp.where(problem.valid, problem.norms, 1.0)

    def vertex(problem: Problem, f: jax.Array) -> jax.Array:
        """The polytope vertex (sigma / sigma_f) v_f as a vector in R^J."""
        sigma = jnp.sum(problem.norms)
        return (sigma / take_rows(problem.norms, f)) * take_rows(problem.V, f).astype(problem.target.dtype)

    def step_size(toward: jax.Array, residual: jax.Array, iteration: jax.Array):
        """(gamma, gamma clipped to [0, 1]); rounding can leave gamma a hair outside [0, 1]."""
        if step_rule == "line_search":  # Eq. 4.9
            denom = jnp.dot(toward, toward)
            gamma = jnp.where(denom > 0, jnp.dot(toward, residual) / jnp.where(denom > 0, denom, 1.0), 0.0)
        else:  # the fixed rule behind Eq. 4.12
            gamma = jnp.asarray(2.0 / (3.0 * iteration + 4.0), residual.dtype)
        return gamma, jnp.clip(gamma, 0.0, 1.0)

    def init(problem: Problem, key: jax.Array) -> FrankWolfeState:
        del key  # deterministic
        dtype = problem.target.dtype
        f = masked_argmax(vertex_scores(problem, problem.target), problem.valid)  # Eq. 4.7
        sigma = jnp.sum(problem.norms)
        support = support_add(support_empty(size, dtype), f, sigma / take_rows(problem.norms, f))
        state = FrankWolfeState(support, vertex(problem, f), jnp.zeros(size, dtype), jnp.asarray(1))
        cap = capacity(problem)
        if cap == 0:
            return state
        n = problem.V.shape[0]
        base = matvec(problem, problem.target).astype(dtype)
        column = matvec(problem, take_rows(problem.V, f)).astype(dtype)
        cache = GramCache(base - (sigma / take_rows(problem.norms, f)) * column, base,
                          jnp.full(cap, -1, jnp.int32).at[0].set(f.astype(jnp.int32)),
                          jnp.zeros((cap, n), dtype).at[0].set(column), jnp.asarray(1, jnp.int32),
                          jnp.asarray(0, jnp.int32))
        return state._replace(cache=cache)

    def cached_step(problem: Problem, state: FrankWolfeState) -> FrankWolfeState:
        cache, dtype = state.cache, problem.target.dtype
        residual = problem.target - state.approx
        f = masked_argmax(cache.scores / jnp.where(problem.valid, problem.norms, 1.0), problem.valid)
        toward = vertex(problem, f) - state.approx
        gamma, applied = step_size(toward, residual, state.iteration)
        sigma = jnp.sum(problem.norms)
        scale_f = sigma / take_rows(problem.norms, f)
        approx = state.approx + applied * toward
        hit = cache.rows == f
        present = jnp.any(hit)

        def from_cache(_):
            column = cache.columns[jnp.argmax(hit)]
            return column, (1.0 - applied) * cache.scores + applied * (cache.base - scale_f * column)

        def from_pass(_):  # one pass: the new column and the exact new scores
            both = matvec(problem, jnp.stack([take_rows(problem.V, f).astype(dtype), problem.target - approx],
                                             axis=1))
            return both[:, 0].astype(dtype), both[:, 1].astype(dtype)

        column, scores = jax.lax.cond(present, from_cache, from_pass, None)
        slot = cache.filled % cache.rows.shape[0]
        new = jnp.logical_not(present)
        cache = GramCache(scores, cache.base,
                          cache.rows.at[slot].set(jnp.where(new, f.astype(jnp.int32), cache.rows[slot])),
                          cache.columns.at[slot].set(jnp.where(new, column, cache.columns[slot])),
                          cache.filled + new.astype(jnp.int32), cache.hits + present.astype(jnp.int32))
        support = support_scale(state.support, 1.0 - applied)
        support = support_add(support, f, applied * scale_f)
        return FrankWolfeState(support, approx, state.gammas.at[state.iteration].set(gamma),
                               state.iteration + 1, cache)

    def step(problem: Problem, state: FrankWolfeState) -> FrankWolfeState:
        if state.cache is not None:
            return cached_step(problem, state)
        residual = problem.target - state.approx
        f = masked_argmax(vertex_scores(problem, residual), problem.valid)  # Eq. 4.8
        toward = vertex(problem, f) - state.approx
        gamma, applied = step_size(toward, residual, state.iteration)
        sigma = jnp.sum(problem.norms)
        support = support_scale(state.support, 1.0 - applied)
        support = support_add(support, f, applied * sigma / take_rows(problem.norms, f))
        return FrankWolfeState(support, state.approx + applied * toward,
                               state.gammas.at[state.iteration].set(gamma), state.iteration + 1)

    def done(state: FrankWolfeState) -> jax.Array:
        return state.iteration >= size

    def extract(state: FrankWolfeState):
        info = {"gammas": state.gammas[1:]}
        if state.cache is not None:
            info["cache_hits"] = state.cache.hits
        return state.support.indices, state.support.weights, info

    return Solver(init, step, done, extract)
