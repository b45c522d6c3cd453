"""Automated accelerated IHT: A-IHT (IHT Algorithm 2) and A-IHT II (IHT Algorithm 3, appendix A).

Minimises f(w) = ||y - Phi w||^2 over {w >= 0, ||w||_0 <= k} (IHT Eq. 2), with y = sum_n v_n and
Phi = V^T. Starting from w_0 = z_0 (see "Starts" below), each iteration
  3-4. expands the support: S = supp(z_t) ∪ supp(Pi_{C_k \\ Z}(grad f(z_t)))  (|S| <= 3k);
  5-6. takes the exact line-search step mu along the gradient restricted to S;
  7.   projects: w_{t+1} = Pi_{C_k ∩ R+}(z_t - mu grad f(z_t))  (top-k non-negative entries);
  (II, lines 8-10: de-bias, an exact line-search gradient step restricted to supp(w_{t+1}), then >= 0;
   debias="nnls" instead solves min_{w >= 0} f(w) on that support, the least-squares de-bias of the pursuit
   methods the paper builds on (CoSaMP, subspace pursuit; IHT refs [38], [16]);)
  8-9. momentum tau = argmin_tau f(w_{t+1} + tau (w_{t+1} - w_t)) in closed form,
       z_{t+1} = w_{t+1} + tau (w_{t+1} - w_t);
and stops when ||w_t - w_{t-1}|| <= tol ||w_t|| or after max_iter iterations (IHT §5). The iterate with the
lowest f seen is returned: thresholding and momentum make f non-monotone, and the last iterate can be worse.

Starts. IHT is a local method, and where it ends depends on w_0. init="zero" is Algorithm 3 line 1,
w_0 = z_0 = 0. init="giga" starts from the GIGA coreset of the same size, so IHT refines a greedy support.
init="both" (the default) runs the two starts in lockstep and returns the better. Each iteration still
reads V once: the two gradients are one matrix product. So f(result) <= f(GIGA) always, and
f(result) <= f(IHT from 0) in exact arithmetic (tested in float64). In float32 the batched product rounds
differently, and on ill-conditioned V the zero start's path can drift from a separate init="zero" run
(solvers.json, N = 10^4, M = 100: 0.34 against 0.28).
Why: from 0, the first projection keeps the k points most correlated with y, and these all point the
same way. Below the rank of V nothing cancels them, and IHT stalls in a worse local minimum than greedy
selection. Yet on other problems the zero start wins (tests/test_iht.py). Measured in the IHT §5.1
Gaussian setting (closed-form vectors, median forward KL over 10 trials; benchmarks/iht.py --starts, with
the exchange step):
  - D = 20, N = 200, K = 10 (rank 21): GIGA 3.1, init="zero" 5.8 (<= GIGA in 2 of 10 trials), the default 1.3;
  - D = 200, N = 600 (the paper's setting): init="zero" is <= GIGA in 2 of 10 trials at K = 10 and 6 of 10
    at K = 25 (median 329 and 189 against 323 and 190), and in every trial from K = 100. The default is
    <= GIGA in every trial at every K; the greedy start won in 9 of 10 trials at K <= 50.
The greedy start costs GIGA's k passes over V. info["greedy_start"] says which start won.

Note on constants: with g = V r = -grad f / 2, the line searches are s = <r, Phi g_S> / ||Phi g_S||^2 along
+g, i.e. mu = s / 2 = ||grad_S||^2 / (2 ||Phi grad_S||^2) as in line 6. For tau, the exact minimiser is
<r, d> / ||d||^2 with d = Phi (w_{t+1} - w_t); the factor 2 printed in line 8 would halve it.

With simplex=True the projection is onto the sparse simplex {k-sparse, w >= 0, sum w = N}.

De-bias (A-IHT II). Algorithm 3 as printed (debias="step") takes one exact line-search gradient step on
supp(x_t). debias="nnls" instead solves min_{w >= 0} f(w) on that support (`ops.refit_support`, warm-started,
at most 200 iterations), the least-squares de-bias of the pursuit methods the paper builds on (CoSaMP,
subspace pursuit; IHT refs [38], [16]). Neither dominates: IHT is a local method and the converged de-bias
settles sooner. The default, debias="both", runs the two rules as extra lockstep lanes (still one pass over
V per iteration) and returns the better, so it is never worse than the printed rule (tested in float64).
Measured (relative error ||y - V^T w|| / ||y||, benchmarks/results/fidelity.json):
  - the authors' cone example (N = 1000, J = 300, target in the cone of K = 100 rows): printed rule 2.8e-6
    in 36 iterations, the default 1.4e-6 (NNLS lane, 12 iterations); the authors' NumPy code, whose line-6
    and de-bias steps are each half the exact one (its 1/2 applies to V r, not to the gradient 2 V r),
    1.6e-6 (on this construction the printed rule is not worse; issue 11's 0.098 was not reproduced here);
  - logistic Fisher features, N = 5000, J = 200, K = 100: printed rule 0.23 (float64) / 0.24 (float32),
    the default 2.1e-3 / 7.3e-3;
  - 6 random problems of tests/test_iht.py (N = 120, J = 30, K = 15): the NNLS lane alone is worse than the
    printed rule on 3 of 6 (e.g. f = 267 against 73), which is why the printed rule stays as a lane.
Cost: the NNLS lanes form the k x k support Gram, O(k^2 J) per iteration: negligible for k <= 100, about 10x
the printed rule's time at N = 10^4, k = 1000 (benchmarks/results/solvers.json, iht2_nnls). debias="step"
gives Algorithm 3 as printed (and is the only rule with simplex=True: NNLS would not keep sum(w) = N).

Exchange (iht2's swap=True, the default; NNLS lanes only): at a fixed point of the support an NNLS lane
swaps one row and refits instead of stopping (`exchange.py`, which gives the rule and its measurements).

Iterates are kept sparse, as (indices, values) of their k slots, together with Phi w; one pass over V per
iteration (the gradient at z_t); every other product gathers at most 3k rows.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core import validate as _validate
from .base import Problem, Solver, matvec, run, take_rows, top_k
from .exchange import exchange, exchange_failed
from .giga import giga
from .ops import combination, line_search, project_simplex, project_sparse_nonneg, refit_support, \
    scatter_dense, unique_mask

__all__ = ["iht", "iht2", "IHTState"]


class IHTState(NamedTuple):
    """Iterate of Algorithms 2/3.

    (indices, values) is w_t and (prev_indices, prev_values) is w_{t-1}, each on k slots; approx and
    prev_approx cache Phi w_t and Phi w_{t-1}, so z_t = w_t + tau (w_t - w_{t-1}) and Phi z_t cost O(N + J).
    objective[t] = f(w_t) (objective[0] = f(w_0)); converged is the stopping test of §5;
    (best_indices, best_values) is the iterate with the lowest objective so far, best_objective its f.
    stuck (NNLS lanes with swap=True): the last iteration left w unchanged (a fixed point of the support), so
    the next one tries an exchange instead of stopping (`exchange.py`).
    """

    indices: jax.Array
    values: jax.Array
    prev_indices: jax.Array
    prev_values: jax.Array
    approx: jax.Array
    prev_approx: jax.Array
    tau: jax.Array
    objective: jax.Array
    converged: jax.Array
    iteration: jax.Array
    best_indices: jax.Array
    best_values: jax.Array
    best_objective: jax.Array
    stuck: jax.Array


INITS = ("both", "giga", "zero")
DEBIAS = ("both", "nnls", "step")
_NNLS_MAX_ITER, _NNLS_TOL = 200, 1e-6  # per de-bias; warm-started, so the iterations add up across IHT steps


def _check(size: int, max_iter: int, tol: float, init: str, debias, simplex: bool) -> None:
    _validate.check_choice(init, INITS, "init")
    if debias is not None:
        _validate.check_choice(debias, DEBIAS, "debias")
        if debias == "nnls" and simplex:
            raise ValueError("debias: 'nnls' does not keep sum(w) = N; use debias='step' with simplex=True")
    _validate.check_positive_int(max_iter, "max_iter")
    _validate.check_nonneg_float(tol, "tol")


def _lanes(init: str, debias: Optional[str], simplex: bool) -> tuple[tuple[str, Optional[str]], ...]:
    """The (start, de-bias rule) pairs run in lockstep, grouped by rule (one vmap per rule)."""
    starts = ("zero", "giga") if init == "both" else (init,)
    if debias is None:
        rules = (None,)
    elif debias == "both":
        rules = ("step",) if simplex else ("step", "nnls")
    else:
        rules = (debias,)
    return tuple((start, rule) for rule in rules for start in starts)


def _aiht(size: int, max_iter: int, tol: float, simplex: bool, debias: Optional[str], init: str,
          swap: bool = False) -> Solver:
    _check(size, max_iter, tol, init, debias, simplex)
    swap = _validate.check_bool(swap, "swap")
    k = size
    lanes = _lanes(init, debias, simplex)
    rules = tuple(dict.fromkeys(rule for _, rule in lanes))
    seed = giga(k) if any(start == "giga" for start, _ in lanes) else None

    def first(problem: Problem, idx: jax.Array, val: jax.Array, greedy: bool) -> IHTState:
        dtype = problem.target.dtype
        approx = combination(problem, idx, val)
        residual = problem.target - approx
        f0 = jnp.dot(residual, residual)
        objective = jnp.zeros(max_iter + 1, dtype).at[0].set(f0)
        # w_0 = 0 is not a coreset (nor feasible on the simplex): only a greedy start counts as a best iterate
        best = f0 if greedy else jnp.asarray(jnp.inf, dtype)
        return IHTState(idx, val, idx, val, approx, approx, jnp.zeros((), dtype), objective, jnp.asarray(False),
                        jnp.asarray(0), idx, val, best, jnp.asarray(False))

    def start(problem: Problem, key: jax.Array) -> IHTState:
        """One state per lane (start x de-bias rule), stacked on a leading axis."""
        dtype = problem.target.dtype
        zero = first(problem, jnp.zeros(k, jnp.int32), jnp.zeros(k, dtype), greedy=False)  # Algorithm 3 line 1
        greedy = None
        if seed is not None:
            idx, val, _ = run(seed, problem, key)
            val = val.astype(dtype)
            if simplex:  # rescale the greedy weights onto sum(w) = N
                total = jnp.sum(val)
                val = jnp.where(total > 0, val * (problem.V.shape[0] / jnp.where(total > 0, total, 1.0)), 0.0)
            greedy = first(problem, idx, val, greedy=True)
        states = [zero if name == "zero" else greedy for name, _ in lanes]
        return jax.tree.map(lambda *xs: jnp.stack(xs), *states)

    def point(problem: Problem, s: IHTState) -> tuple[jax.Array, jax.Array]:
        """z_t and the residual y - Phi z_t from the cached iterates (line 9 of the previous iteration)."""
        n = problem.V.shape[0]
        dtype = problem.target.dtype
        z = scatter_dense(n, dtype, (s.indices, (1.0 + s.tau) * s.values), (s.prev_indices, -s.tau * s.prev_values))
        phi_z = (1.0 + s.tau) * s.approx - s.tau * s.prev_approx
        return z, problem.target - phi_z

    def iterate(rule: Optional[str], problem: Problem, s: IHTState, z: jax.Array, r: jax.Array,
                g: jax.Array) -> IHTState:
        """One iteration given g = V r = -grad f(z_t) / 2 (the one pass over V, shared by all lanes)."""
        n = problem.V.shape[0]
        dtype = problem.target.dtype
        total = float(n) if simplex else None
        # lines 3-4: S = supp(z_t) ∪ top-k |g| outside supp(z_t)
        in_z = z != 0
        _, new = top_k(jnp.where(in_z, -1.0, jnp.abs(g)), k)
        slots = jnp.concatenate([s.indices, s.prev_indices, new])
        member = jnp.concatenate([take_rows(in_z, s.indices), take_rows(in_z, s.prev_indices),
                                  jnp.ones(k, bool)])
        coeff = jnp.where(member & unique_mask(slots, n), take_rows(g, slots), 0.0)
        # lines 5-7: exact step along g_S, then projection
        mu = line_search(r, combination(problem, slots, coeff))
        idx, val = project_sparse_nonneg(z + mu * g, k, total)
        approx = combination(problem, idx, val)
        exchanging = swap and rule == "nnls"
        if exchanging:  # at a fixed point the projection gives supp(w_t) back: exchange one row instead
            idx, val, can_swap = exchange(problem, s.indices, s.values, s.stuck, in_z, g, idx, val)
        if rule == "nnls":  # the converged de-bias: min_{w >= 0 on supp(x_t)} f(w), warm-started at x_t
            _, val, _ = refit_support(problem, idx, val, _NNLS_MAX_ITER, _NNLS_TOL)
            approx = combination(problem, idx, val)
        elif rule == "step":  # Algorithm 3 lines 8-10: gradient step restricted to supp(x_t)
            supp = val > 0
            r2 = problem.target - approx
            rows = take_rows(problem.V, idx).astype(dtype)
            g2 = jnp.where(supp, rows @ r2, 0.0)
            val = val + line_search(r2, g2 @ rows) * g2
            val = jnp.maximum(val, 0.0) if total is None else project_simplex(val, total, supp)
            approx = val @ rows
        # lines 8-9 (Algorithm 3 lines 11-12): momentum
        d = approx - s.approx
        residual = problem.target - approx
        tau = line_search(residual, d)
        # stopping test on ||w_{t+1} - w_t||
        diff = scatter_dense(n, dtype, (idx, val), (s.indices, -s.values))
        settled = jnp.linalg.norm(diff) <= tol * jnp.linalg.norm(val)
        f = jnp.dot(residual, residual)
        objective = s.objective.at[s.iteration + 1].set(f)
        better = f < s.best_objective
        converged, stuck = settled, jnp.asarray(False)
        if exchanging:
            # a fixed point is not the end: the next iteration tries an exchange from w_{t+1} (tau = 0, so
            # z_{t+2} = w_{t+1} and its gradient is the one the exchange needs); only a failed exchange stops
            converged, stuck = jnp.asarray(False), settled
            tau = jnp.where(settled, 0.0, tau)
        new = IHTState(idx, val, s.indices, s.values, approx, s.approx, tau, objective, converged,
                       s.iteration + 1, jnp.where(better, idx, s.best_indices),
                       jnp.where(better, val, s.best_values), jnp.where(better, f, s.best_objective), stuck)
        if exchanging:  # a rejected exchange leaves w_t final
            failed = exchange_failed(s.stuck, can_swap, f, s.objective[s.iteration])
            new = jax.tree.map(lambda old, nw: jnp.where(failed, old, nw), s._replace(converged=True), new)
        return new

    def finished(s: IHTState) -> jax.Array:
        return s.converged | (s.iteration >= max_iter)

    def step(problem: Problem, s: IHTState) -> IHTState:
        # every lane in lockstep: the gradients of all lanes come from one pass over V (a matrix product)
        z, r = jax.vmap(point, in_axes=(None, 0))(problem, s)
        g = matvec(problem, r.T).T.astype(r.dtype)  # (lanes, N)
        parts, lo = [], 0
        for rule in rules:  # one vmap per de-bias rule: each lane computes only its own rule
            hi = lo + sum(1 for _, rl in lanes if rl == rule)
            part = jax.tree.map(lambda a: a[lo:hi], s)
            parts.append(jax.vmap(lambda st, zz, rr, gg: iterate(rule, problem, st, zz, rr, gg))(
                part, z[lo:hi], r[lo:hi], g[lo:hi]))
            lo = hi
        new = jax.tree.map(lambda *xs: jnp.concatenate(xs), *parts)
        frozen = finished(s)
        return jax.tree.map(lambda old, nw: jnp.where(frozen.reshape((-1,) + (1,) * (nw.ndim - 1)), old, nw),
                            s, new)

    def done(s: IHTState) -> jax.Array:
        return jnp.all(finished(s))

    def extract(s: IHTState):
        chosen = jnp.argmin(s.best_objective)
        s = jax.tree.map(lambda a: a[chosen], s)
        objective = jnp.where(jnp.arange(max_iter + 1) <= s.iteration, s.objective, s.objective[s.iteration])
        info = {"objective": objective, "iterations": s.iteration, "best_objective": s.best_objective,
                "greedy_start": jnp.asarray([name == "giga" for name, _ in lanes])[chosen]}
        if debias is not None:
            info["nnls_debias"] = jnp.asarray([rule == "nnls" for _, rule in lanes])[chosen]
        return s.best_indices, s.best_values, info

    return Solver(start, step, done, extract)


def iht(size: int, max_iter: int = 300, tol: float = 1e-5, simplex: bool = False, init: str = "both") -> Solver:
    """A-IHT, IHT Algorithm 2 (see the module docstring). `size` is the sparsity k; `init` is "both",
    "giga" or "zero" (Algorithm 2 as printed)."""
    return _aiht(size, max_iter, tol, simplex, debias=None, init=init)


def iht2(size: int, max_iter: int = 300, tol: float = 1e-5, simplex: bool = False, init: str = "both",
         debias: str = "both", swap: bool = True) -> Solver:
    """A-IHT II, IHT Algorithm 3 with a de-bias on the support (appendix A). `size` is the sparsity k; `init`
    is "both", "giga" or "zero" (Algorithm 3 as printed); `debias` is "step" (lines 8-10 as printed: one
    exact line-search gradient step), "nnls" (the converged de-bias) or "both" (the default: the two rules
    in lockstep, the better returned; "step" only with simplex=True, where NNLS would not keep sum(w) = N).
    `swap`: at a fixed point of the support an NNLS lane tries an exchange instead of stopping
    (`exchange.py`); False stops there, as before.
    Why the default differs from the printed rule: module docstring, "De-bias", and `exchange.py`."""
    return _aiht(size, max_iter, tol, simplex, debias=debias, init=init, swap=swap)
