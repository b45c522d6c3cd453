"""Orthogonal (matching) pursuit with a non-negative least-squares refit (Tropp & Gilbert 2007, IHT ref. [45];
the "greedy" baseline of the Hilbert-coreset papers, the reference library's orthogonal pursuit).

Each iteration selects the row outside the support most correlated with the residual,
f = argmax_n <y - V^T w, v_n> / ||v_n||, adds it to the support, and re-solves min_{w >= 0} ||y - V_S^T w||^2
on the support S. Rows whose weight the NNLS sets to 0 leave the support, freeing their slot, and may be
selected again later, as in orthogonal pursuit (a fixed support that keeps dead rows drifts: issue 11 measured
9.2e-3 against the reference's 7.3e-6).

The support NNLS (default, exact_nnls=True) is Lawson & Hanson's: OMP's selection is its outer loop, and
`least_squares.active_set_nnls` its inner loop, on a QR factorisation of the support rows that gains a column
per step (CGS2) and loses columns by Givens rotations, with one step of iterative refinement per solve. It
works on the rows, not on the Gram V_S V_S^T, whose condition number is the square (~1e30 for Fisher features,
whose singular values span 1e15). Measured (benchmarks/solvers.py --fidelity; logistic Fisher features,
N = 5000, J = 200, M = 100; relative error ||y - V^T w|| / ||y||): accelerated projected gradient on the Gram
(exact_nnls=False, the previous default) 9.5e-4 in float64 and 2.5e-3 in float32; this default 2.8e-7 and
8.0e-5; a plain NumPy OMP with SciPy's exact NNLS 3.7e-7. In float32 the floor is round-off in the residual,
sqrt(J) eps32 sum_n w_n ||v_n|| / ||y|| = 5.5e-5 here.

Stopping: no row outside the support correlates positively with the residual above the rounding level (or
its pivot in the QR is at round-off: it lies in the support's span), the error has not fallen by 1% in
`patience` = 25 steps (in float32 the support can cycle at the round-off floor), or 2 * size steps. The best
iterate seen is returned.

One pass over V per iteration (the correlations); the support rows are gathered with `take_rows`, so the
refit never touches V.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core.validate import check_bool, check_nonneg_float, check_positive_int
from .base import Problem, Solver, Support, matvec, support_empty, take_rows
from .least_squares import QR, active_set_nnls, qr_append, qr_empty
from .ops import nnls_gram

__all__ = ["omp", "OMPState", "nnls_default_tol"]

_PATIENCE = 25  # steps without a 1% fall of the error before OMP stops
_PROGRESS = 0.01


def nnls_default_tol(dtype) -> float:
    """Relative KKT tolerance of the support NNLS: near the rounding level of G x - b in `dtype`."""
    return 1e-10 if jnp.finfo(dtype).bits >= 64 else 1e-5


class OMPState(NamedTuple):
    """Iterate of OMP.

    The support holds rows with weight > 0 in slots [0, count) (compacted after every refit); chosen marks
    them, so that none is selected twice while it is in use. gram and rhs cache V_S V_S^T and V_S y on the
    slots; approx caches V_S^T w; kkt is the last NNLS optimality gap; qr factors V_S^T on the slots (exact NNLS
    only). errors[t] is the squared relative error
    after step t.
    """

    support: Support
    chosen: jax.Array
    gram: jax.Array
    rhs: jax.Array
    approx: jax.Array
    errors: jax.Array
    kkt: jax.Array
    qr: QR
    idle: jax.Array
    stalled: jax.Array
    best: Support
    best_error: jax.Array
    mark: jax.Array
    since: jax.Array
    iteration: jax.Array


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
        exact_nnls: bool = True) -> Solver:
    """OMP with budget `size` (capacity).

    exact_nnls=True (default): the support NNLS is Lawson-Hanson's active-set loop on a QR factorisation of
    the support rows that grows by one column per step (`least_squares`), exact up to the dtype's round-off.
    exact_nnls=False: accelerated projected gradient on the support Gram (`ops.nnls_gram`) with nnls_max_iter
    and nnls_tol (None: by dtype, `nnls_default_tol`), the previous default (module docstring).
    """
    exact_nnls = check_bool(exact_nnls, "exact_nnls")
    nnls_max_iter = check_positive_int(nnls_max_iter, "nnls_max_iter")
    if nnls_tol is not None:
        nnls_tol = check_nonneg_float(nnls_tol, "nnls_tol")

    def init(problem: Problem, key: jax.Array) -> OMPState:
        del key  # deterministic
        dtype = problem.target.dtype
        n, dim = problem.V.shape
        qr = qr_empty(dim, size, dtype) if exact_nnls else qr_empty(1, 1, dtype)
        one = jnp.ones((), dtype)
        return OMPState(support_empty(size, dtype), jnp.zeros(n, bool), jnp.zeros((size, size), dtype),
                        jnp.zeros(size, dtype), jnp.zeros_like(problem.target), jnp.ones(2 * size, dtype),
                        jnp.zeros((), dtype), qr, jnp.asarray(0), jnp.asarray(False),
                        support_empty(size, dtype), one, one, jnp.asarray(0), jnp.asarray(0))

    def step(problem: Problem, s: OMPState) -> OMPState:
        dtype = problem.target.dtype
        eps = jnp.finfo(dtype).eps
        tol = nnls_default_tol(dtype) if nnls_tol is None else nnls_tol
        r = problem.target - s.approx
        corr = matvec(problem, r).astype(dtype)
        scores = corr / jnp.where(problem.valid, problem.norms, 1.0)
        scores = jnp.where(problem.valid & ~s.chosen, scores, -jnp.inf)
        f = jnp.argmax(scores)
        t = s.support.count
        # a positive correlation above the rounding level of <r, v_n> / ||v_n||
        floor = 64 * eps * jnp.linalg.norm(r)
        add = (take_rows(scores, f) > floor) & (t < size)
        qr = s.qr
        if exact_nnls:  # a row in the span of the support (pivot at round-off) cannot lower the residual
            appended, pivot = qr_append(s.qr, take_rows(problem.V, f).astype(dtype), problem.target)
            add = add & (pivot > 64 * eps)
            qr = jax.tree.map(lambda new, old: jnp.where(add, new, old), appended, s.qr)
        slot = jnp.minimum(t, size - 1)
        indices = jnp.where(add, s.support.indices.at[slot].set(f.astype(jnp.int32)), s.support.indices)
        count = t + add.astype(t.dtype)
        active = jnp.arange(size) < count
        rows = take_rows(problem.V, indices).astype(dtype)
        col = jnp.where(active, rows @ rows[slot], 0.0)
        gram = jnp.where(add, s.gram.at[:, slot].set(col).at[slot, :].set(col), s.gram)
        rhs = jnp.where(add, s.rhs.at[slot].set(jnp.dot(rows[slot], problem.target)), s.rhs)
        if exact_nnls:  # Lawson-Hanson from the previous weights, the new coordinate at 0 (feasible)
            x0 = jnp.where(add, s.support.weights.at[slot].set(0.0), s.support.weights)
            x, keep, qr = active_set_nnls(rows.T, problem.target, x0, qr)
            keep = keep & active & (x > 0)
            res = nnls_gram(gram, rhs, x, keep, 0, tol)  # zero iterations: only its KKT gap, for info
        else:  # warm start: previous weights plus the exact non-negative step on the new coordinate
            step0 = jnp.maximum(take_rows(corr, f), 0.0) / jnp.maximum(col[slot], jnp.finfo(dtype).tiny)
            x0 = jnp.where(add, s.support.weights.at[slot].set(step0), s.support.weights)
            res = nnls_gram(gram, rhs, x0, active, nnls_max_iter, tol)
            x = res.x
            keep = active & (x > 0)
        x = jnp.where(keep, x, 0.0)
        approx = x @ rows
        resid = problem.target - approx
        err = jnp.dot(resid, resid) / jnp.maximum(jnp.dot(problem.target, problem.target), jnp.finfo(dtype).tiny)
        # rows whose weight fell to 0 leave the support (and may be selected again)
        chosen = s.chosen.at[f].set(take_rows(s.chosen, f) | add)
        chosen = chosen.at[indices].set(jnp.where(active & ~keep, False, take_rows(chosen, indices)))
        indices, x, gram, rhs = _compact(keep, (indices, (0,)), (x, (0,)), (gram, (0, 1)), (rhs, (0,)))
        count = jnp.sum(keep).astype(t.dtype)
        idle = jnp.where(add, 0, s.idle + 1)
        support = Support(indices, x, count)
        better = err < s.best_error
        best = jax.tree.map(lambda new, old: jnp.where(better, new, old), support, s.best)
        progressed = err < (1 - _PROGRESS) ** 2 * s.mark  # err is squared
        mark = jnp.where(progressed, err, s.mark)
        since = jnp.where(progressed, 0, s.since + 1)
        stalled = (~add & (exact_nnls | (res.kkt <= tol) | (idle >= 5))) | (since >= _PATIENCE)
        return OMPState(support, chosen, gram, rhs, approx, s.errors.at[s.iteration].set(err), res.kkt, qr,
                        idle, stalled, best, jnp.minimum(err, s.best_error), mark, since, s.iteration + 1)

    def done(s: OMPState) -> jax.Array:
        return s.stalled | (s.iteration >= 2 * size)

    def extract(s: OMPState):
        it = s.iteration
        errors = jnp.where(jnp.arange(2 * size) < it, s.errors, s.errors[jnp.maximum(it - 1, 0)])
        return s.best.indices, s.best.weights, {"errors": errors, "iterations": it, "nnls_kkt": s.kkt}

    return Solver(init, step, done, extract)
