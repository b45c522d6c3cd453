"""Automated accelerated IHT: A-IHT (IHT Algorithm 2) and A-IHT II (IHT Algorithm 3, appendix A).

Minimises f(w) = ||y - Phi w||^2 over {w >= 0, ||w||_0 <= k} (IHT Eq. 2), with y = sum_n v_n and
Phi = V^T. Starting from w_0 = z_0 = 0, each iteration
  3-4. expands the support: S = supp(z_t) ∪ supp(Pi_{C_k \\ Z}(grad f(z_t)))  (|S| <= 3k);
  5-6. takes the exact line-search step mu along the gradient restricted to S;
  7.   projects: w_{t+1} = Pi_{C_k ∩ R+}(z_t - mu grad f(z_t))  (top-k non-negative entries);
  (II, lines 8-10: de-bias, an exact line-search gradient step restricted to supp(w_{t+1}), then >= 0;)
  8-9. momentum tau = argmin_tau f(w_{t+1} + tau (w_{t+1} - w_t)) in closed form,
       z_{t+1} = w_{t+1} + tau (w_{t+1} - w_t);
and stops when ||w_t - w_{t-1}|| <= tol ||w_t|| or after max_iter iterations (IHT §5).

Note on constants: with g = V r = -grad f / 2, the line searches are s = <r, Phi g_S> / ||Phi g_S||^2 along
+g, i.e. mu = s / 2 = ||grad_S||^2 / (2 ||Phi grad_S||^2) as in line 6. For tau, the exact minimiser is
<r, d> / ||d||^2 with d = Phi (w_{t+1} - w_t); the factor 2 printed in line 8 would halve it.

With simplex=True the projection is onto the sparse simplex {k-sparse, w >= 0, sum w = N}.

Iterates are kept sparse, as (indices, values) of their k slots, together with Phi w; one pass over V per
iteration (the gradient at z_t); every other product gathers at most 3k rows.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .base import Problem, Solver, matvec
from .ops import combination, line_search, project_simplex, project_sparse_nonneg, scatter_dense, top_k, \
    unique_mask

__all__ = ["iht", "iht2", "IHTState"]


class IHTState(NamedTuple):
    """Iterate of Algorithms 2/3.

    (indices, values) is w_t and (prev_indices, prev_values) is w_{t-1}, each on k slots; approx and
    prev_approx cache Phi w_t and Phi w_{t-1}, so z_t = w_t + tau (w_t - w_{t-1}) and Phi z_t cost O(N + J).
    objective[t] = f(w_t) (objective[0] = f(0) = ||y||^2); converged is the stopping test of §5.
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


def _check(size: int, max_iter: int, tol: float) -> None:
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"max_iter: must be a positive integer, got {max_iter!r}")
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0:
        raise ValueError(f"tol: must be a non-negative number, got {tol!r}")


def _aiht(size: int, max_iter: int, tol: float, simplex: bool, debias: bool) -> Solver:
    _check(size, max_iter, tol)
    k = size

    def init(problem: Problem, key: jax.Array) -> IHTState:
        del key  # deterministic
        dtype = problem.target.dtype
        zi, zv = jnp.zeros(k, jnp.int32), jnp.zeros(k, dtype)
        zero = jnp.zeros_like(problem.target)
        objective = jnp.zeros(max_iter + 1, dtype).at[0].set(jnp.dot(problem.target, problem.target))
        return IHTState(zi, zv, zi, zv, zero, zero, jnp.zeros((), dtype), objective, jnp.asarray(False),
                        jnp.asarray(0))

    def step(problem: Problem, s: IHTState) -> IHTState:
        n = problem.V.shape[0]
        dtype = problem.target.dtype
        total = float(n) if simplex else None
        # z_t and Phi z_t from the cached iterates (line 9 of the previous iteration)
        z = scatter_dense(n, dtype, (s.indices, (1.0 + s.tau) * s.values), (s.prev_indices, -s.tau * s.prev_values))
        phi_z = (1.0 + s.tau) * s.approx - s.tau * s.prev_approx
        r = problem.target - phi_z
        g = matvec(problem, r).astype(dtype)  # = -grad f(z_t) / 2, one pass over V
        # lines 3-4: S = supp(z_t) ∪ top-k |g| outside supp(z_t)
        in_z = z != 0
        _, new = top_k(jnp.where(in_z, -1.0, jnp.abs(g)), k)
        slots = jnp.concatenate([s.indices, s.prev_indices, new])
        member = jnp.concatenate([in_z[s.indices], in_z[s.prev_indices], jnp.ones(k, bool)])
        coeff = jnp.where(member & unique_mask(slots, n), g[slots], 0.0)
        # lines 5-7: exact step along g_S, then projection
        mu = line_search(r, combination(problem, slots, coeff))
        idx, val = project_sparse_nonneg(z + mu * g, k, total)
        approx = combination(problem, idx, val)
        if debias:  # Algorithm 3 lines 8-10: gradient step restricted to supp(x_t)
            supp = val > 0
            r2 = problem.target - approx
            rows = problem.V[idx].astype(dtype)
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
        converged = jnp.linalg.norm(diff) <= tol * jnp.linalg.norm(val)
        objective = s.objective.at[s.iteration + 1].set(jnp.dot(residual, residual))
        return IHTState(idx, val, s.indices, s.values, approx, s.approx, tau, objective, converged,
                        s.iteration + 1)

    def done(s: IHTState) -> jax.Array:
        return s.converged | (s.iteration >= max_iter)

    def extract(s: IHTState):
        objective = jnp.where(jnp.arange(max_iter + 1) <= s.iteration, s.objective, s.objective[s.iteration])
        return s.indices, s.values, {"objective": objective, "iterations": s.iteration}

    return Solver(init, step, done, extract)


def iht(size: int, max_iter: int = 300, tol: float = 1e-5, simplex: bool = False) -> Solver:
    """A-IHT, IHT Algorithm 2 (see the module docstring). `size` is the sparsity k."""
    return _aiht(size, max_iter, tol, simplex, debias=False)


def iht2(size: int, max_iter: int = 300, tol: float = 1e-5, simplex: bool = False) -> Solver:
    """A-IHT II, IHT Algorithm 3 with the de-bias step (appendix A). `size` is the sparsity k."""
    return _aiht(size, max_iter, tol, simplex, debias=True)
