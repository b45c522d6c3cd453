"""Orthogonal (matching) pursuit with a non-negative least-squares refit (Tropp & Gilbert 2007, IHT ref. [45];
the "greedy" baseline of the Hilbert-coreset papers, the reference library's orthogonal pursuit).

Each iteration selects the row outside the support most correlated with the residual,
f = argmax_n <y - V^T w, v_n> / ||v_n||, adds it to the support, and re-solves min_{w >= 0} ||y - V_S^T w||^2
on the support S. Rows whose weight the NNLS sets to 0 leave the support, freeing their slot, and may be
selected again later, as in orthogonal pursuit (a fixed support that keeps dead rows drifts: issue 11 measured
9.2e-3 against the reference's 7.3e-6).

The support NNLS (default, exact_nnls=True) is Lawson & Hanson's: OMP's selection is its outer loop, and
`least_squares.active_set_nnls` its inner loop, on a QR factorisation of the support rows that gains a column
per step (CGS2) and loses columns by Givens rotations. It works on the rows, not on the Gram V_S V_S^T, whose
condition number is the square (~1e30 for Fisher features, whose singular values span 1e15). The Gram route
(exact_nnls=False, accelerated projected gradient, the previous default) reached 9.5e-4 in float64 and 2.5e-3
in float32 on the problem below.

The same answer everywhere (issue 34). Float32 OMP gave answers that depended on the row order (errors 3.6-9.6x
apart), on batching (a vmapped batch 3.0x the loop's error) and on sharding (1.5x), and reached 1.3e-4 where
float64 references reach ~5e-7. The cause: a good fit's residual y - V_S^T w is far smaller than the terms it
cancels (sum_n w_n ||v_n|| ~ 40 ||y|| for Fisher features), so in float32 it was mostly rounding, and so were
the weights refined from it, the selection (rows in the support's span scored on the residual's rounding, then
were refused by their pivot, which stopped the run) and the stopping test. The path then followed anything
that changes the rounding: the float32 target sum_n v_n (its rounding depends on the order, the shards and the
batch), the matvec kernels (a batched matvec rounds otherwise), the row's position. Fixes:
- the target is sum_n v_n correctly rounded (`base.column_sum`, compensated; same bits for any order, sharding
  or batch);
- the residual, the gradient V_S r and the weights are compensated: pairs (hi, lo) in the working dtype built
  on error-free transformations (`least_squares`), so no float64 is needed and x64 may stay off; the least
  squares is refined on the augmented system (Bjorck), which converges below the working precision where
  refining the weights alone stops at eps kappa ||r|| (the stored Q spans V_S only to eps); the weights
  returned are rounded along R (nearest plane), not one by one;
- the 8 best candidates of the float32 pass are scored again with compensated dot products (the pass's own
  rounding depends on the row's position, shard and batch kernel, and decides near-ties), and the first whose
  pivot clears the round-off is taken; a refused row no longer stops the run;
- under vmap each batch element runs the unbatched step (`base.sequential_under_vmap`), bit for bit a loop.
The O(N J) pass over V stays one matvec in V's dtype per iteration; the compensated work is O(count J) per
refinement step on the support rows. Measured (float32 V, logistic Fisher features, errors in float64; 3 seeds
each; before -> after):
- N = 2000, J = 100, M = 30: error 2.1e-4, 2.1e-4, 8.9e-5 -> 2.47e-5, 3.62e-5, 8.87e-5, equal to 4
  digits to a float64 NumPy/SciPy OMP with re-selection (benchmarks/numpy_reference.py's `omp_nnls`), and
  2.5-11x below the reference library's plain form (M selections, SciPy NNLS); 3 row permutations: errors
  0.21-1.26x -> 1x (the same weights); vmapped batch of 4 / loop: 0.44-1.31x -> bit-identical; V sharded over
  4 devices / single device: 0.35x -> bit-identical.
- N = 5000, J = 200, M = 100 (the issue's problem, errors ~4 eps32): 3.2e-4, 1.7e-4, 1.6e-4 -> 4.6e-7, 6.0e-7,
  5.8e-7, against 4.7e-7, 5.2e-7, 6.5e-7 for the float64 OMP with re-selection (0.89-1.16x) and 3.2e-7,
  4.2e-7, 3.2e-7 for the plain form; permutations 0.17-1.56x -> 1x; batch / loop 0.43-3.46x -> identical;
  sharded / single 1.11x, 1.40x -> identical.
At that level float32 runs into its own resolution (candidates' pivots at 4 eps32, scores at eps32 ||r||), and
its path parts from float64's at near-ties; each is then as good as the other within ~20%.
Speed (N = 1e5, J = 500, M = 100, float32, one 2-core machine shared with other jobs, A/B alternating): one
step at the same support costs 3-10% more CPU (the compensated work); a whole call runs 114 iterations to
3.2e-6 (4.5 s) where the previous code stopped after 27 at 6.5e-4 (1.1 s), the same time per iteration;
compilation takes ~1.5x longer.

Stopping: no row outside the support correlates positively with the residual above eps ||r|| (compensated
score), the error has not fallen by 1% in max(25, J / 20) steps, or after `max_iter` steps (default 2 * size).
The best iterate seen is returned.

The step budget. The reference library builds a coreset of size M in M steps (`build(M)`: one selection and
refit per step), and a row that leaves the support spends its step. Ours defaults to 2 M: on the model suite
budget M left coresets short of their capacity (64 of 100 points on BINARY10, 74 on airportdelays), with
median errors up to 20x higher on the real files (250x on linear regression) and the certificate's KL 2-120x
higher on 9 of 16 cells (airportdelays at M = 100: 0.078, usable, against 0.92, poor) and from 6e-12 to 8e-6 on
one more (linear regression at M = 100); at N = 5e5 it took the construction from 2.0 s to 1.3 s and Poisson
regression's KL from 0.004-0.020 to 0.17-0.24 (benchmarks/investigations/omp_budget.py). `max_iter=size` gives
the reference library's budget, at half the passes over V.

One pass over V per iteration (the correlations); the support rows are gathered with `take_rows`, so the
refit never touches V.

Large coresets (ours). From LARGE_SIZE = 512 points on, one pass serves several atoms by default
(`atoms_per_pass_for`: size // 64, at most 16): the pass keeps its 8 k best rows (the pool), and while the
pool's best row, scored exactly against the current residual, still scores above the lowest pool score of
the pass (no row outside the pool scored higher then), the next atom comes from the pool. The choice among
the pool is exact; only a row outside it whose correlation rose past the pool since the pass is missed.
`compensated=False` drops the compensated refinement for features whose fit stays far above float32's
rounding (the second-order features of `features.taylor`, fit to a KL target of about 1e-2 relative): a
step then costs O(J M) in the working precision, and a dropped column's residual comes from the two
least-squares residuals, not from the support's rows.

The greedy path (`path_sizes`, ours; used by `cj.coreset(..., tol=...)`). OMP at size m follows the same
steps as OMP at any larger size for as long as its support has fewer than m rows: a step's selection and refit
depend on the support, never on the capacity. So one run at the largest size also gives the coreset that
each smaller size m would return: the best iterate among the steps that began with fewer than m rows and
within m's step budget (2 m by default). It differs from a separate run at m only by that run's last step, a
refit on the full support with no new row (the refit that the step before it already refined). The run keeps
one best iterate per size (O(K M^2) memory for K sizes), so the automatic size compiles and runs OMP once for
the sizes it tries first, not once per size.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core.validate import check_bool, check_nonneg_float, check_positive_int
from .base import Problem, Solver, Support, matvec, sequential_under_vmap, support_empty, take_rows, top_k
from .least_squares import (QR, Appended, active_set_nnls, dot_rows, qr_commit, qr_empty, qr_orthogonalize,
                            residual_pair, round_nearest_plane)
from .ops import nnls_gram

__all__ = ["omp", "OMPState", "nnls_default_tol"]

_PATIENCE = 25  # steps without a 1% fall of the error before OMP stops: at least this, and J / 20 (a step
# lowers the squared error by about 1 / J of itself early on: J = 2,000 second-order features fall 1% in ~40)
_PROGRESS = 0.01
_REFINE = 8  # at most this many compensated refinement steps per least-squares solve
_STEPS = 2  # at most _STEPS * size steps by default (`max_iter`)
_CANDIDATES = 8  # candidates re-scored (compensated) and checked for their pivot per step (exact NNLS)
_PIVOT = 4  # a new row needs a pivot above this many eps (relative to its norm)
_FLOOR = 1  # selection floor on <r, v_n> / ||v_n||, in units of eps ||r|| (module docstring)
LARGE_SIZE = 512  # from this many points on, one pass over V serves several atoms by default
_MAX_ATOMS = 16  # ... at most this many
_POOL = 8  # a pass keeps _POOL x atoms_per_pass rows to choose among


def nnls_default_tol(dtype) -> float:
    """Relative KKT tolerance of the support NNLS: near the rounding level of G x - b in `dtype`."""
    return 1e-10 if jnp.finfo(dtype).bits >= 64 else 1e-5


class OMPState(NamedTuple):
    """Iterate of OMP.

    The support holds rows with weight > 0 in slots [0, count) (compacted after every refit); chosen marks
    them, so that none is selected twice while it is in use; refused marks rows whose pivot was at round-off
    (cleared when the support loses a row). gram and rhs cache V_S V_S^T and V_S y on the slots for the Gram
    route (exact_nnls=False; 1 x 1 placeholders otherwise); the weights are pairs support.weights +
    weights_lo, and resid + resid_lo is y - V_S^T w (compensated, `least_squares`); kkt is the last NNLS
    optimality gap (for info); qr factors V_S^T on the slots (exact NNLS only).
    errors[t] is the squared relative error after step t. best (with best_lo and best_r, its R) is the best
    iterate. marks (with marks_lo, marks_r, marks_error) holds, per size of `path_sizes` (leading axis K), the
    best iterate of the steps that began with fewer rows than that size; marks_open says which are still
    taking iterates (the greedy path, module docstring). With several atoms per pass, pool holds the rows
    the last pass scored best, pool_bar the lowest of their scores then (no row outside the pool scored
    higher), pool_left how many more atoms they may give before the next pass; passes counts the passes over
    V.
    """

    support: Support
    chosen: jax.Array
    refused: jax.Array
    gram: jax.Array
    rhs: jax.Array
    weights_lo: jax.Array
    resid: jax.Array
    resid_lo: jax.Array
    errors: jax.Array
    kkt: jax.Array
    qr: QR
    idle: jax.Array
    stalled: jax.Array
    best: Support
    best_lo: jax.Array
    best_r: jax.Array
    best_error: jax.Array
    mark: jax.Array
    since: jax.Array
    iteration: jax.Array
    marks: Support
    marks_lo: jax.Array
    marks_r: jax.Array
    marks_error: jax.Array
    marks_open: jax.Array
    pool: jax.Array
    pool_bar: jax.Array
    pool_left: jax.Array
    passes: jax.Array


def _kkt_rows(rows: jax.Array, target: jax.Array, resid: jax.Array, x: jax.Array, mask: jax.Array) -> jax.Array:
    """`_kkt` from the support rows and the residual y - V_S^T x (the exact NNLS keeps no Gram): the gradient
    G x - b is -V_S r, the diagonal of G the rows' squared norms and b = V_S y."""
    diag = jnp.sum(rows * rows, axis=1)
    d = jnp.where((diag > 0) & mask, 1.0 / jnp.sqrt(jnp.where(diag > 0, diag, 1.0)), 0.0)
    grad = -d * (rows @ resid)
    viol = jnp.where(x > 0, jnp.abs(grad), jnp.maximum(-grad, 0.0)) * (d > 0)
    return jnp.max(viol) / jnp.maximum(jnp.max(jnp.abs(d * (rows @ target))), jnp.finfo(rows.dtype).tiny)


def _kkt(gram: jax.Array, rhs: jax.Array, x: jax.Array, mask: jax.Array) -> jax.Array:
    """The NNLS optimality gap that `ops.nnls_gram` reports (Jacobi-scaled, relative to max |b|), for info."""
    diag = jnp.diagonal(gram)
    d = jnp.where((diag > 0) & mask, 1.0 / jnp.sqrt(jnp.where(diag > 0, diag, 1.0)), 0.0)
    grad = d * (gram @ x - rhs)
    viol = jnp.where(x > 0, jnp.abs(grad), jnp.maximum(-grad, 0.0)) * (d > 0)
    return jnp.max(viol) / jnp.maximum(jnp.max(jnp.abs(rhs * d)), jnp.finfo(gram.dtype).tiny)


def _compact(keep: jax.Array, *arrays_and_axes):
    """Move the kept slots to the front (stable), for every (array, axes) pair."""
    order = jnp.argsort(jnp.logical_not(keep), stable=True)
    out = []
    for arr, axes in arrays_and_axes:
        for ax in axes:
            arr = jnp.take(arr, order, axis=ax)
        out.append(arr)
    return out


def _check_path_sizes(path_sizes, size: int) -> tuple:
    """path_sizes as a sorted tuple of distinct ints in [1, size), or ValueError."""
    if isinstance(path_sizes, (int, float)) or path_sizes is None:
        raise ValueError(f"path_sizes: expected a sequence of sizes below size = {size}, got {path_sizes!r}")
    out = tuple(sorted({check_positive_int(m, "path_sizes") for m in path_sizes}))
    if out and out[-1] >= size:
        raise ValueError(f"path_sizes: every size must be below size = {size} (the run itself), got {out[-1]}")
    return out


def atoms_per_pass_for(size: int) -> int:
    """The default atoms per pass over V: 1 below LARGE_SIZE points, else size // 64, at most 16 (module
    docstring, "Large coresets")."""
    return 1 if size < LARGE_SIZE else min(_MAX_ATOMS, size // 64)


def omp(size: int, nnls_max_iter: int = 1000, nnls_tol: Optional[float] = None,
        exact_nnls: bool = True, path_sizes: tuple = (), max_iter: Optional[int] = None,
        atoms_per_pass: Optional[int] = None, compensated: bool = True, stop_error: float = 0.0) -> Solver:
    """OMP with budget `size` (capacity).

    max_iter: the most steps (selections and refits; one pass over V each). None (default): 2 * size. The
    reference library's `build(M)` takes M (module docstring). With `path_sizes`, size m's run takes
    ceil(m * max_iter / size) steps, so each path size keeps the same budget per point.

    path_sizes: sizes m < size whose coresets the run also returns (the greedy path, module docstring): the
    result's info gains `path_indices` and `path_weights` (K, size), row k holding size m_k's coreset in its
    first m_k slots (zero weights after them), and `path_errors` (K,), their squared relative errors.

    exact_nnls=True (default): the support NNLS is Lawson-Hanson's active-set loop on a QR factorisation of
    the support rows that grows by one column per step (`least_squares`), exact up to the dtype's round-off.
    exact_nnls=False: accelerated projected gradient on the support Gram (`ops.nnls_gram`) with nnls_max_iter
    and nnls_tol (None: by dtype, `nnls_default_tol`), the previous default (module docstring).

    atoms_per_pass: how many selections one pass over V serves (exact NNLS only). None (default):
    `atoms_per_pass_for(size)`, 1 below LARGE_SIZE points. With k > 1 a pass keeps its 8 k best rows, and the
    next k selections choose among them on their exact correlations with the current residual (module
    docstring, "Large coresets").

    stop_error: stop once the squared relative error ||y - V^T w||^2 / ||y||^2 is at most this (default 0:
    never); the greedy path's larger sizes then keep the last iterate.

    compensated: True (default) refines each least squares in compensated arithmetic (module docstring);
    False solves it in the working precision only, for features whose fit stays far above the rounding level
    (the second-order features of `features.taylor`), at a fraction of the cost per step.
    """
    exact_nnls = check_bool(exact_nnls, "exact_nnls")
    compensated = check_bool(compensated, "compensated")
    stop_error = check_nonneg_float(stop_error, "stop_error")
    atoms = atoms_per_pass_for(size) if atoms_per_pass is None else check_positive_int(atoms_per_pass,
                                                                                        "atoms_per_pass")
    if atoms > 1 and not exact_nnls:
        raise ValueError("atoms_per_pass: several atoms per pass need exact_nnls=True")
    pool_size = 1 if atoms == 1 else _POOL * atoms
    nnls_max_iter = check_positive_int(nnls_max_iter, "nnls_max_iter")
    if nnls_tol is not None:
        nnls_tol = check_nonneg_float(nnls_tol, "nnls_tol")
    path_sizes = _check_path_sizes(path_sizes, size)
    steps = _STEPS * size if max_iter is None else check_positive_int(max_iter, "max_iter")
    marks_at = np.asarray(path_sizes, np.int32).reshape(-1)  # NumPy: no eager program at construction
    marks_steps = (-(-marks_at.astype(np.int64) * steps // size)).astype(np.int32)  # ceil(m steps / size)
    num_marks = len(path_sizes)

    def init(problem: Problem, key: jax.Array) -> OMPState:
        del key  # deterministic
        dtype = problem.target.dtype
        n, dim = problem.V.shape
        qr = qr_empty(dim, size, dtype) if exact_nnls else qr_empty(1, 1, dtype)
        cache = 1 if exact_nnls else size  # the Gram route's V_S V_S^T and V_S y
        r_shape = qr.r.shape if compensated else (1, 1)  # R of the best iterates: nearest-plane rounding
        one = jnp.ones((), dtype)
        return OMPState(support_empty(size, dtype), jnp.zeros(n, bool), jnp.zeros(n, bool),
                        jnp.zeros((cache, cache), dtype), jnp.zeros(cache, dtype), jnp.zeros(size, dtype),
                        problem.target, jnp.zeros_like(problem.target), jnp.ones(steps, dtype),
                        jnp.zeros((), dtype), qr, jnp.asarray(0), jnp.asarray(False),
                        support_empty(size, dtype), jnp.zeros(size, dtype), jnp.zeros(r_shape, dtype), one, one,
                        jnp.asarray(0), jnp.asarray(0),
                        jax.tree.map(lambda x: jnp.broadcast_to(x, (num_marks,) + x.shape),
                                     support_empty(size, dtype)),
                        jnp.zeros((num_marks, size), dtype), jnp.zeros((num_marks,) + r_shape, dtype),
                        jnp.full(num_marks, jnp.inf, dtype), jnp.ones(num_marks, bool),
                        jnp.zeros(min(pool_size, n), jnp.int32), jnp.zeros((), dtype), jnp.asarray(0),
                        jnp.asarray(0))

    def full_pass(problem: Problem, s: OMPState, dtype):
        """The scores <r, v_n> / ||v_n|| of every row not in use, from one pass over V."""
        corr = matvec(problem, s.resid).astype(dtype)
        scores = corr / jnp.where(problem.valid, problem.norms, 1.0)
        return corr, jnp.where(problem.valid & ~s.chosen & ~s.refused, scores, -jnp.inf)

    def candidates(problem: Problem, s: OMPState, dtype, floor):
        """(the best few scores, their rows, the pool, its bar, atoms left in it, passes, whether this step
        passed over V). One atom per pass: the pass's best _CANDIDATES rows. Several: the pool's rows scored
        exactly against the current residual while the pool has atoms left and its best row still scores
        above the pool's bar (the best score outside the pool at its pass, as far as that pass knew), else a
        new pass and its pool of the best `pool_size` rows."""
        num = min(_CANDIDATES, problem.V.shape[0])
        if atoms == 1:
            _, scores = full_pass(problem, s, dtype)
            best, cand = top_k(scores, num)
            return best, cand, s.pool, s.pool_bar, s.pool_left, s.passes + 1, jnp.asarray(True)
        rows_p = take_rows(problem.V, s.pool).astype(dtype)
        usable = take_rows(problem.valid, s.pool) & ~take_rows(s.chosen, s.pool) & ~take_rows(s.refused, s.pool)
        norms = jnp.where(usable, take_rows(problem.norms, s.pool), 1.0)
        pool_scores = jnp.where(usable, (rows_p @ s.resid) / norms, -jnp.inf)

        def from_pool(_):
            best, j = top_k(pool_scores, min(num, pool_scores.shape[0]))
            return best, s.pool[j], s.pool, s.pool_bar, s.pool_left - 1, s.passes, jnp.asarray(False)

        def from_pass(_):
            _, scores = full_pass(problem, s, dtype)
            best, pool = top_k(scores, s.pool.shape[0])
            bar = jnp.where(jnp.isfinite(best[-1]), best[-1], 0.0)
            return best[:num], pool[:num], pool, bar, jnp.asarray(atoms - 1), s.passes + 1, jnp.asarray(True)

        fresh = (s.pool_left <= 0) | ~(jnp.max(pool_scores) > jnp.maximum(floor, s.pool_bar))
        return jax.lax.cond(fresh, from_pass, from_pool, None)

    def step(problem: Problem, s: OMPState) -> OMPState:
        dtype = problem.target.dtype
        eps = jnp.finfo(dtype).eps
        tol = nnls_default_tol(dtype) if nnls_tol is None else nnls_tol
        r = s.resid
        t = s.support.count
        patience = max(_PATIENCE, problem.V.shape[1] // 20)
        # a positive correlation above the rounding level of <r, v_n> / ||v_n||
        floor = _FLOOR * eps * jnp.linalg.norm(r)
        qr, refused = s.qr, s.refused
        pool, pool_bar, pool_left, passes = s.pool, s.pool_bar, s.pool_left, s.passes + 1
        if exact_nnls:
            # a row in the span of the support (pivot at round-off) cannot lower the residual: of the best
            # few candidates, take the first whose pivot is clear of round-off; those before it are refused
            # until the support loses a row
            best, cand, pool, pool_bar, pool_left, passes, fresh = candidates(problem, s, dtype, floor)
            # the candidates' scores again, compensated (`dot_rows`): the pass's own rounding (~eps ||r||)
            # depends on where a row sits in V, its shard and the batch, and decides near-ties
            rows_c = take_rows(problem.V, cand).astype(dtype)
            c = rows_c.shape[0]
            both = dot_rows(jnp.concatenate([rows_c, rows_c]),  # <v_n, r> and ||v_n||^2 in one call
                            jnp.concatenate([jnp.broadcast_to(r, rows_c.shape), rows_c]),
                            jnp.concatenate([jnp.broadcast_to(s.resid_lo, rows_c.shape),
                                             jnp.zeros_like(rows_c)]))
            norm_c = jnp.sqrt(both[c:])
            exact = both[:c] / jnp.where(norm_c > 0, norm_c, 1.0)
            exact = jnp.where(jnp.isfinite(best) & (norm_c > 0), exact, -jnp.inf)
            order = jnp.argsort(-exact, stable=True)
            cand, rows_c, exact = cand[order], rows_c[order], exact[order]
            above = exact > floor
            thresh = _PIVOT * eps
            n_cand = cand.shape[0]

            def unclear(c):  # none taken yet, and candidate i is above the floor (`above` is sorted)
                i, found = c[0], c[1]
                return ~found & (i < n_cand) & above[jnp.minimum(i, n_cand - 1)]

            def try_next(c):  # orthogonalise candidate i; it is taken if above the floor and clear of round-off
                i, _, _ = c
                appended = qr_orthogonalize(s.qr, rows_c[i])
                return i + 1, above[i] & (appended.pivot > thresh), appended

            # one candidate at a time, in order, until one is clear: the first, in the usual case, outside any
            # loop (a loop that reads Q made XLA copy Q and R at every step); Q is written once, afterwards
            start = try_next((jnp.asarray(0), jnp.asarray(False), None))
            tried, found, appended = jax.lax.cond(
                unclear(start), lambda c: jax.lax.while_loop(unclear, try_next, c), lambda c: c, start)
            pick = jnp.where(found, tried - 1, 0)
            clear = found & (jnp.arange(n_cand) == pick)
            f = cand[pick]
            add = found & (t < size)
            none_above = ~above[0] & fresh
            ahead = jnp.arange(cand.shape[0]) < jnp.where(found, pick, cand.shape[0])
            refused = refused.at[cand].set(take_rows(refused, cand) | (above & ahead & ~clear))
            qr = qr_commit(s.qr, appended, problem.target, add)
        else:
            corr, scores = full_pass(problem, s, dtype)
            f = jnp.argmax(scores)
            add = (take_rows(scores, f) > floor) & (t < size)
            none_above = ~add
        slot = jnp.minimum(t, size - 1)
        indices = jnp.where(add, s.support.indices.at[slot].set(f.astype(jnp.int32)), s.support.indices)
        count = t + add.astype(t.dtype)
        active = jnp.arange(size) < count
        gather = lambda: take_rows(problem.V, indices).astype(dtype)  # noqa: E731
        gram, rhs = s.gram, s.rhs  # the Gram route's cache (exact_nnls: unused)
        if exact_nnls:  # Lawson-Hanson from the previous weights, the new coordinate at 0 (feasible)
            x0 = jnp.where(add, s.support.weights.at[slot].set(0.0), s.support.weights)
            x0_lo = jnp.where(add, s.weights_lo.at[slot].set(0.0), s.weights_lo)
            # plain refits gather the support rows only where a column is dropped, and report no gap
            rows = gather() if compensated else None
            x, x_lo, keep, qr, (resid, resid_lo) = active_set_nnls(
                rows.T if compensated else lambda: gather().T, problem.target, x0, qr, x_lo=x0_lo,
                refine=_REFINE if compensated else 0, r0=(s.resid, s.resid_lo), appended_only=not compensated)
            keep = keep & active & (x > 0)
            kkt = _kkt_rows(rows, problem.target, resid, x, keep) if compensated else jnp.full((), jnp.nan, dtype)
        else:  # warm start: previous weights plus the exact non-negative step on the new coordinate
            rows = gather()
            col = jnp.where(active, rows @ rows[slot], 0.0)
            gram = jnp.where(add, s.gram.at[:, slot].set(col).at[slot, :].set(col), s.gram)
            rhs = jnp.where(add, s.rhs.at[slot].set(jnp.dot(rows[slot], problem.target)), s.rhs)
            step0 = jnp.maximum(take_rows(corr, f), 0.0) / jnp.maximum(col[slot], jnp.finfo(dtype).tiny)
            x0 = jnp.where(add, s.support.weights.at[slot].set(step0), s.support.weights)
            res = nnls_gram(gram, rhs, x0, active, nnls_max_iter, tol)
            x = res.x
            x_lo = jnp.zeros_like(x)
            keep = active & (x > 0)
            kkt = res.kkt
            resid, resid_lo = residual_pair(problem.target, rows, jnp.where(keep, x, 0.0))
        x = jnp.where(keep, x, 0.0)
        x_lo = jnp.where(keep, x_lo, 0.0)
        err = jnp.dot(resid, resid) / jnp.maximum(jnp.dot(problem.target, problem.target), jnp.finfo(dtype).tiny)
        # rows whose weight fell to 0 leave the support (and may be selected again)
        chosen = s.chosen.at[f].set(take_rows(s.chosen, f) | add)
        chosen = chosen.at[indices].set(jnp.where(active & ~keep, False, take_rows(chosen, indices)))
        refused = refused & ~jnp.any(active & ~keep)  # a smaller span: refused rows may be clear again
        indices, x, x_lo = _compact(keep, (indices, (0,)), (x, (0,)), (x_lo, (0,)))
        if not exact_nnls:
            gram, rhs = _compact(keep, (gram, (0, 1)), (rhs, (0,)))
        count = jnp.sum(keep).astype(t.dtype)
        idle = jnp.where(add, 0, s.idle + 1)
        support = Support(indices, x, count)
        better = err < s.best_error
        r_now = qr.r if compensated else s.best_r  # plain weights are rounded plainly: no R is kept
        best, best_lo, best_r = jax.tree.map(lambda new, old: jnp.where(better, new, old), (support, x_lo, r_now),
                                             (s.best, s.best_lo, s.best_r))
        # the greedy path: size m's run takes this step's iterate iff the step began with fewer than m rows
        # and within its budget of steps; after the first step that does not, it has stopped for good
        taking = s.marks_open & (t < marks_at) & (s.iteration < marks_steps)
        improves = taking & (err < s.marks_error)
        pick_new = lambda new, old: jnp.where(  # noqa: E731
            improves.reshape((-1,) + (1,) * (old.ndim - 1)), jnp.broadcast_to(new, old.shape), old)
        marks, marks_lo = jax.tree.map(pick_new, (support, x_lo), (s.marks, s.marks_lo))
        marks_r = jax.tree.map(pick_new, qr.r, s.marks_r) if compensated else s.marks_r
        marks_error = jnp.where(improves, err, s.marks_error)
        progressed = err < (1 - _PROGRESS) ** 2 * s.mark  # err is squared
        mark = jnp.where(progressed, err, s.mark)
        since = jnp.where(progressed, 0, s.since + 1)
        if exact_nnls:  # no candidate above the floor (top candidates refused by their pivot: go on)
            stalled = (~add & (none_above | (t >= size))) | (since >= patience)
        else:
            stalled = (~add & ((res.kkt <= tol) | (idle >= 5))) | (since >= patience)
        stalled = stalled | (err <= stop_error)
        return OMPState(support, chosen, refused, gram, rhs, x_lo, resid, resid_lo,
                        s.errors.at[s.iteration].set(err), kkt, qr, idle, stalled, best, best_lo, best_r,
                        jnp.minimum(err, s.best_error), mark, since, s.iteration + 1, marks, marks_lo, marks_r,
                        marks_error, taking, pool, pool_bar, pool_left, passes)

    def done(s: OMPState) -> jax.Array:
        return s.stalled | (s.iteration >= steps)

    def extract(s: OMPState):
        it = s.iteration
        errors = jnp.where(jnp.arange(steps) < it, s.errors, s.errors[jnp.maximum(it - 1, 0)])
        weights = s.best.weights
        if exact_nnls and compensated:  # the weights are pairs (hi, lo): round them by nearest plane on R
            weights = round_nearest_plane(s.best_r, weights, s.best_lo, s.best.count)
        elif exact_nnls:
            weights = weights + s.best_lo
        info = {"errors": errors, "iterations": it, "nnls_kkt": s.kkt, "passes": s.passes}
        if num_marks:
            path_weights = s.marks.weights
            if exact_nnls and compensated:
                path_weights = jax.vmap(round_nearest_plane)(s.marks_r, path_weights, s.marks_lo, s.marks.count)
            elif exact_nnls:
                path_weights = path_weights + s.marks_lo
            info.update(path_indices=s.marks.indices, path_weights=path_weights, path_errors=s.marks_error)
        return s.best.indices, weights, info

    # under vmap, each batch element runs the unbatched step (bit for bit a Python loop's result)
    return Solver(init, sequential_under_vmap(step), done, sequential_under_vmap(extract))
