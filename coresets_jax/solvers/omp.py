"""Orthogonal (matching) pursuit with a non-negative least-squares refit (Tropp & Gilbert 2007, IHT ref. [45];
the "greedy" baseline of the Hilbert-coreset papers).

Each iteration selects the unselected row most correlated with the residual, f = argmax_n <y - V^T w, v_n> /
||v_n||, adds it to the support, and re-solves min_{w >= 0} ||y - V_S^T w||^2 on the support S (NNLS in
`ops.nnls_gram`, warm-started from the previous weights, at most nnls_max_iter iterations per step). When no
unselected row correlates positively with the residual, or the support is full, a step only continues the
NNLS; the loop ends once that NNLS has converged, after 5 such steps in a row, or after 2 * size steps.

One pass over V per iteration (the correlations); the support Gram matrix G = V_S V_S^T is grown by one
row and column per iteration, so the refit never touches V.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .base import Problem, Solver, Support, matvec, support_empty
from .ops import nnls_gram

__all__ = ["omp", "OMPState"]


class OMPState(NamedTuple):
    """Iterate of OMP.

    chosen marks selected rows so that none is selected twice; gram and rhs cache V_S V_S^T and V_S y on
    the support slots; approx caches V_S^T w; kkt is the last NNLS optimality gap. errors[t] is the squared
    relative error after step t.
    """

    support: Support
    chosen: jax.Array
    gram: jax.Array
    rhs: jax.Array
    approx: jax.Array
    errors: jax.Array
    kkt: jax.Array
    idle: jax.Array
    stalled: jax.Array
    iteration: jax.Array


def omp(size: int, nnls_max_iter: int = 100, nnls_tol: float = 1e-4) -> Solver:
    """OMP with budget `size` (capacity); NNLS options as in `ops.nnls_gram` (the default tolerance sits above
    the float32 rounding floor of the gradient, which a tighter one would chase until 2 * size steps)."""
    if isinstance(nnls_max_iter, bool) or not isinstance(nnls_max_iter, int) or nnls_max_iter < 1:
        raise ValueError(f"nnls_max_iter: must be a positive integer, got {nnls_max_iter!r}")
    if isinstance(nnls_tol, bool) or not isinstance(nnls_tol, (int, float)) or not nnls_tol >= 0:
        raise ValueError(f"nnls_tol: must be a non-negative number, got {nnls_tol!r}")

    def init(problem: Problem, key: jax.Array) -> OMPState:
        del key  # deterministic
        dtype = problem.target.dtype
        n = problem.V.shape[0]
        return OMPState(support_empty(size, dtype), jnp.zeros(n, bool), jnp.zeros((size, size), dtype),
                        jnp.zeros(size, dtype), jnp.zeros_like(problem.target), jnp.ones(2 * size, dtype),
                        jnp.zeros((), dtype), jnp.asarray(0), jnp.asarray(False), jnp.asarray(0))

    def step(problem: Problem, s: OMPState) -> OMPState:
        dtype = problem.target.dtype
        r = problem.target - s.approx
        corr = matvec(problem, r).astype(dtype)
        scores = corr / jnp.where(problem.valid, problem.norms, 1.0)
        scores = jnp.where(problem.valid & ~s.chosen, scores, -jnp.inf)
        f = jnp.argmax(scores)
        t = s.support.count
        add = (scores[f] > 0) & (t < size)
        slot = jnp.minimum(t, size - 1)
        indices = jnp.where(add, s.support.indices.at[slot].set(f.astype(jnp.int32)), s.support.indices)
        rows = problem.V[indices].astype(dtype)
        count = t + add.astype(t.dtype)
        active = jnp.arange(size) < count
        col = jnp.where(active, rows @ rows[slot], 0.0)
        gram = jnp.where(add, s.gram.at[:, slot].set(col).at[slot, :].set(col), s.gram)
        rhs = jnp.where(add, s.rhs.at[slot].set(jnp.dot(rows[slot], problem.target)), s.rhs)
        # warm start: previous weights plus the exact non-negative step on the new coordinate
        step0 = jnp.maximum(corr[f], 0.0) / jnp.maximum(col[slot], jnp.finfo(dtype).tiny)
        x0 = jnp.where(add, s.support.weights.at[slot].set(step0), s.support.weights)
        res = nnls_gram(gram, rhs, x0, active, nnls_max_iter, nnls_tol)
        approx = res.x @ rows
        resid = problem.target - approx
        err = jnp.dot(resid, resid) / jnp.maximum(jnp.dot(problem.target, problem.target), jnp.finfo(dtype).tiny)
        idle = jnp.where(add, 0, s.idle + 1)
        stalled = ~add & ((res.kkt <= nnls_tol) | (idle >= 5))
        return OMPState(Support(indices, res.x, count), s.chosen.at[f].set(s.chosen[f] | add), gram, rhs,
                        approx, s.errors.at[s.iteration].set(err), res.kkt, idle, stalled, s.iteration + 1)

    def done(s: OMPState) -> jax.Array:
        return s.stalled | (s.iteration >= 2 * size)

    def extract(s: OMPState):
        it = s.iteration
        errors = jnp.where(jnp.arange(2 * size) < it, s.errors, s.errors[jnp.maximum(it - 1, 0)])
        return s.support.indices, s.support.weights, {"errors": errors, "iterations": it, "nnls_kkt": s.kkt}

    return Solver(init, step, done, extract)
