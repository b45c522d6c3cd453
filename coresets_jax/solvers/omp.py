"""Orthogonal (matching) pursuit with a non-negative least-squares refit (Tropp & Gilbert 2007, IHT ref. [45];
the "greedy" baseline of the Hilbert-coreset papers, the reference library's orthogonal pursuit).

Each iteration selects the row outside the support most correlated with the residual,
f = argmax_n <y - V^T w, v_n> / ||v_n||, adds it to the support, and re-solves min_{w >= 0} ||y - V_S^T w||^2
on the support S (NNLS in `ops.nnls_gram`, warm-started from the previous weights). Rows whose weight the
NNLS sets to 0 leave the support, freeing their slot, and may be selected again later, as in orthogonal
pursuit (a fixed support that keeps dead rows drifts: issue 11 measured 9.2e-3 against the reference's 7.3e-6).

The NNLS is solved to a tolerance that adapts to the dtype (`nnls_tol=None`: 1e-10 in float64, 1e-5 in
float32, relative KKT violation; at most nnls_max_iter = 1000 warm-started iterations per step). Measured on
logistic Fisher features (synthetic_logistic, J = 200, N = 5000, M = 100; relative error ||y - V^T w|| / ||y||;
benchmarks/solvers.py --fidelity): the previous default (tolerance 1e-4, 100 iterations, no re-selection)
9.2e-3; this default 9.5e-4 (float64) and 2.5e-3 (float32); a plain NumPy OMP with SciPy's exact NNLS and
re-selection 3.7e-7. That gap is the accelerated gradient NNLS on a Gram whose condition number is ~1e30
(the rows' singular values span 1e15). exact_nnls=True closes it in float64 (3.3e-7): the inner loop of
Lawson-Hanson with least squares on the rows (`active_set_nnls`). It is not the default because XLA's SVD
on CPU is slow (tens of seconds for this case, against 2 s).

When no row outside the support correlates positively with the residual, or the support is full, a step only
continues the NNLS; the loop ends once the NNLS has converged with nothing to add, after 5 such steps in a row,
or after 2 * size steps.

One pass over V per iteration (the correlations); the support Gram G = V_S V_S^T is grown by one row and
column per added row (the rows gathered with `take_rows`), and compacted when rows leave, so the refit never
touches V.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from .base import Problem, Solver, Support, matvec, support_empty, take_rows
from .ops import nnls_gram

__all__ = ["active_set_nnls", "omp", "OMPState", "nnls_default_tol"]

_EXACT_MAX = 512  # largest support solved by the exact active-set NNLS (an SVD of J x |S| per pass)


def nnls_default_tol(dtype) -> float:
    """Relative KKT tolerance of the support NNLS: near the rounding level of G x - b in `dtype`."""
    return 1e-10 if jnp.finfo(dtype).bits >= 64 else 1e-5


class OMPState(NamedTuple):
    """Iterate of OMP.

    The support holds rows with weight > 0 in slots [0, count) (compacted after every refit); chosen marks
    them, so that none is selected twice while it is in use. gram and rhs cache V_S V_S^T and V_S y on the
    slots; approx caches V_S^T w; kkt is the last NNLS optimality gap. errors[t] is the squared relative error
    after step t.
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


def active_set_nnls(rows: jax.Array, y: jax.Array, x0: jax.Array, passive: jax.Array,
                    max_iter: Optional[int] = None) -> jax.Array:
    """min_{x >= 0, x = 0 off `passive`} ||y - rows^T x||^2 by the inner loop of Lawson & Hanson (1974, ch. 23).

    Starting from a feasible x0 (> 0 on `passive`): solve the unconstrained least squares on the passive set
    (SVD-based `lstsq` on the rows themselves, not the Gram, whose condition number is squared: Fisher
    features of logistic regression have singular values spanning 1e15); if some entries are <= 0, move from
    x towards that solution until the first one reaches 0, drop it from the passive set, and repeat. Each
    pass drops at least one row, so it ends within |passive| + 1 passes with x >= 0, least-squares optimal on
    its support. The outer loop of Lawson-Hanson (adding the coordinate of largest gradient) is OMP's own
    selection. Reliable in float64; in float32 the SVD cut-off loses the small directions.
    """
    k = rows.shape[0]
    max_iter = k + 1 if max_iter is None else max_iter
    cols = rows.T

    def solve(P):
        z = jnp.linalg.lstsq(jnp.where(P[None, :], cols, 0.0), y)[0]
        return jnp.where(P, z, 0.0)

    def cond(c):
        return ~c[3] & (c[2] < max_iter)

    def body(c):
        x, P, it, _ = c
        z = solve(P)
        bad = P & (z <= 0)
        feasible = ~jnp.any(bad)
        ratio = jnp.where(bad, x / jnp.where(bad, x - z, 1.0), jnp.inf)
        first = jnp.argmin(ratio)
        alpha = jnp.where(feasible, 1.0, jnp.clip(ratio[first], 0.0, 1.0))
        x = jnp.maximum(x + alpha * (z - x), 0.0)
        x = jnp.where(feasible, z, x.at[first].set(0.0))
        P = P & (x > 0)
        return x, P, it + 1, feasible

    x0 = jnp.where(passive, jnp.maximum(x0, 0.0), 0.0)
    x, _, _, _ = jax.lax.while_loop(cond, body, (x0, passive & (x0 > 0), jnp.asarray(0), jnp.asarray(False)))
    return x


def _compact(keep: jax.Array, *arrays_and_axes):
    """Move the kept slots to the front (stable), for every (array, axes) pair."""
    order = jnp.argsort(jnp.logical_not(keep), stable=True)
    out = []
    for arr, axes in arrays_and_axes:
        for ax in axes:
            arr = jnp.take(arr, order, axis=ax)
        out.append(arr)
    return out


def omp(size: int, nnls_max_iter: int = 1000, nnls_tol: Optional[float] = None,
        exact_nnls: bool = False) -> Solver:
    """OMP with budget `size` (capacity). The support NNLS is `ops.nnls_gram` with nnls_max_iter and nnls_tol
    (None: by dtype, `nnls_default_tol`); with exact_nnls=True, in float64 and size <= 512, it is the exact
    active-set solver `active_set_nnls` instead (far more accurate on ill-conditioned V, but each pass is an
    SVD of J x size, slow in XLA on CPU: module docstring)."""
    if exact_nnls not in (True, False):
        raise ValueError(f"exact_nnls: expected True or False, got {exact_nnls!r}")
    if isinstance(nnls_max_iter, bool) or not isinstance(nnls_max_iter, int) or nnls_max_iter < 1:
        raise ValueError(f"nnls_max_iter: must be a positive integer, got {nnls_max_iter!r}")
    if nnls_tol is not None and (isinstance(nnls_tol, bool) or not isinstance(nnls_tol, (int, float))
                                 or not nnls_tol >= 0):
        raise ValueError(f"nnls_tol: must be a non-negative number or None, got {nnls_tol!r}")

    def init(problem: Problem, key: jax.Array) -> OMPState:
        del key  # deterministic
        dtype = problem.target.dtype
        n = problem.V.shape[0]
        return OMPState(support_empty(size, dtype), jnp.zeros(n, bool), jnp.zeros((size, size), dtype),
                        jnp.zeros(size, dtype), jnp.zeros_like(problem.target), jnp.ones(2 * size, dtype),
                        jnp.zeros((), dtype), jnp.asarray(0), jnp.asarray(False), jnp.asarray(0))

    def step(problem: Problem, s: OMPState) -> OMPState:
        dtype = problem.target.dtype
        tol = nnls_default_tol(dtype) if nnls_tol is None else nnls_tol
        exact = exact_nnls and size <= _EXACT_MAX and jnp.finfo(dtype).bits >= 64
        r = problem.target - s.approx
        corr = matvec(problem, r).astype(dtype)
        scores = corr / jnp.where(problem.valid, problem.norms, 1.0)
        scores = jnp.where(problem.valid & ~s.chosen, scores, -jnp.inf)
        f = jnp.argmax(scores)
        t = s.support.count
        # a positive correlation above the rounding level of <r, v_n> / ||v_n||
        floor = 64 * jnp.finfo(dtype).eps * jnp.linalg.norm(r)
        add = (take_rows(scores, f) > floor) & (t < size)
        slot = jnp.minimum(t, size - 1)
        indices = jnp.where(add, s.support.indices.at[slot].set(f.astype(jnp.int32)), s.support.indices)
        count = t + add.astype(t.dtype)
        active = jnp.arange(size) < count
        rows = take_rows(problem.V, indices).astype(dtype)
        col = jnp.where(active, rows @ rows[slot], 0.0)
        gram = jnp.where(add, s.gram.at[:, slot].set(col).at[slot, :].set(col), s.gram)
        rhs = jnp.where(add, s.rhs.at[slot].set(jnp.dot(rows[slot], problem.target)), s.rhs)
        # warm start: previous weights plus the exact non-negative step on the new coordinate
        step0 = jnp.maximum(take_rows(corr, f), 0.0) / jnp.maximum(col[slot], jnp.finfo(dtype).tiny)
        x0 = jnp.where(add, s.support.weights.at[slot].set(step0), s.support.weights)
        if exact:  # the active-set NNLS on the rows
            x = active_set_nnls(rows, problem.target, x0, active)
            res = nnls_gram(gram, rhs, x, active, 0, tol)  # zero iterations: only its KKT gap, for info
        else:  # large supports: accelerated projected gradient on the Gram, to the dtype's tolerance
            res = nnls_gram(gram, rhs, x0, active, nnls_max_iter, tol)
            x = res.x
        approx = x @ rows
        resid = problem.target - approx
        err = jnp.dot(resid, resid) / jnp.maximum(jnp.dot(problem.target, problem.target), jnp.finfo(dtype).tiny)
        # rows whose weight fell to 0 leave the support (and may be selected again)
        keep = active & (x > 0)
        chosen = s.chosen.at[f].set(take_rows(s.chosen, f) | add)
        chosen = chosen.at[indices].set(jnp.where(active & ~keep, False, take_rows(chosen, indices)))
        indices, x, gram, rhs = _compact(keep, (indices, (0,)), (x, (0,)), (gram, (0, 1)), (rhs, (0,)))
        count = jnp.sum(keep).astype(t.dtype)
        idle = jnp.where(add, 0, s.idle + 1)
        stalled = ~add & (exact | (res.kkt <= tol) | (idle >= 5))
        return OMPState(Support(indices, x, count), chosen, gram, rhs, approx,
                        s.errors.at[s.iteration].set(err), res.kkt, idle, stalled, s.iteration + 1)

    def done(s: OMPState) -> jax.Array:
        return s.stalled | (s.iteration >= 2 * size)

    def extract(s: OMPState):
        it = s.iteration
        errors = jnp.where(jnp.arange(2 * size) < it, s.errors, s.errors[jnp.maximum(it - 1, 0)])
        return s.support.indices, s.support.weights, {"errors": errors, "iterations": it, "nnls_kkt": s.kkt}

    return Solver(init, step, done, extract)
