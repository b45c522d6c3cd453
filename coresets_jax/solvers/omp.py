"""Orthogonal (matching) pursuit with a non-negative least-squares refit (Tropp & Gilbert 2007, IHT ref. [45];
the "greedy" baseline of the Hilbert-coreset papers).

Each iteration selects the unselected row most correlated with the residual, f = argmax_n <y - V^T w, v_n> /
||v_n||, adds it to the support, and re-solves min_{w >= 0} ||y - V_S^T w||^2 on the support S (NNLS in
`ops.nnls_gram`, warm-started from the previous weights). It stops early when no row correlates positively
with the residual (no non-negative step can reduce the error).

One pass over V per iteration (the correlations); the support Gram matrix G = V_S V_S^T is grown by one
row and column per iteration, so the refit never touches V.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .base import Problem, Solver, Support, support_empty
from .ops import nnls_gram

__all__ = ["omp", "OMPState"]


class OMPState(NamedTuple):
    """Iterate of OMP.

    chosen marks selected rows so that none is selected twice; gram and rhs cache V_S V_S^T and V_S y on
    the support slots; approx caches V_S^T w. errors[t] is the squared relative error after iteration t.
    """

    support: Support
    chosen: jax.Array
    gram: jax.Array
    rhs: jax.Array
    approx: jax.Array
    errors: jax.Array
    stalled: jax.Array
    iteration: jax.Array


def omp(size: int, nnls_max_iter: int = 500, nnls_tol: float = 1e-6) -> Solver:
    """OMP with budget `size` (iterations = capacity); NNLS options as in `ops.nnls_gram`."""
    if isinstance(nnls_max_iter, bool) or not isinstance(nnls_max_iter, int) or nnls_max_iter < 1:
        raise ValueError(f"nnls_max_iter: must be a positive integer, got {nnls_max_iter!r}")
    if isinstance(nnls_tol, bool) or not isinstance(nnls_tol, (int, float)) or not nnls_tol >= 0:
        raise ValueError(f"nnls_tol: must be a non-negative number, got {nnls_tol!r}")

    def init(problem: Problem, key: jax.Array) -> OMPState:
        del key  # deterministic
        dtype = problem.target.dtype
        n = problem.V.shape[0]
        return OMPState(support_empty(size, dtype), jnp.zeros(n, bool), jnp.zeros((size, size), dtype),
                        jnp.zeros(size, dtype), jnp.zeros_like(problem.target), jnp.ones(size, dtype),
                        jnp.asarray(False), jnp.asarray(0))

    def step(problem: Problem, s: OMPState) -> OMPState:
        dtype = problem.target.dtype
        r = problem.target - s.approx
        corr = (problem.V @ r.astype(problem.V.dtype)).astype(dtype)
        scores = corr / jnp.where(problem.valid, problem.norms, 1.0)
        scores = jnp.where(problem.valid & ~s.chosen, scores, -jnp.inf)
        f = jnp.argmax(scores)
        stalled = ~(scores[f] > 0)
        t = s.support.count
        indices = s.support.indices.at[t].set(f.astype(jnp.int32))
        rows = problem.V[indices].astype(dtype)
        active = jnp.arange(size) <= t
        col = jnp.where(active, rows @ rows[t], 0.0)
        gram = s.gram.at[:, t].set(col).at[t, :].set(col)
        rhs = s.rhs.at[t].set(jnp.dot(rows[t], problem.target))
        # warm start: previous weights plus the exact non-negative step on the new coordinate
        x0 = s.support.weights.at[t].set(jnp.maximum(corr[f], 0.0) / jnp.maximum(col[t], jnp.finfo(dtype).tiny))
        w = nnls_gram(gram, rhs, x0, active, nnls_max_iter, nnls_tol).x
        approx = w @ rows
        resid = problem.target - approx
        err = jnp.dot(resid, resid) / jnp.maximum(jnp.dot(problem.target, problem.target), jnp.finfo(dtype).tiny)
        new = OMPState(Support(indices, w, t + 1), s.chosen.at[f].set(True), gram, rhs, approx,
                       s.errors.at[s.iteration].set(err), jnp.asarray(False), s.iteration + 1)
        # a stalled step changes nothing but the stop flag (errors keep the last value)
        kept = s._replace(errors=s.errors.at[s.iteration].set(s.errors[jnp.maximum(s.iteration - 1, 0)]),
                          stalled=jnp.asarray(True), iteration=s.iteration + 1)
        return jax.tree_util.tree_map(lambda a, b: jnp.where(stalled, a, b), kept, new)

    def done(s: OMPState) -> jax.Array:
        return s.stalled | (s.iteration >= size)

    def extract(s: OMPState):
        it = s.iteration
        errors = jnp.where(jnp.arange(size) < it, s.errors, s.errors[jnp.maximum(it - 1, 0)])
        return s.support.indices, s.support.weights, {"errors": errors, "iterations": it}

    return Solver(init, step, done, extract)
