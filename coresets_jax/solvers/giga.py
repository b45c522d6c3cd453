"""Greedy iterative geodesic ascent (GIGA; Campbell & Broderick, ICML 2018, Algorithm 1).

Works on the unit sphere: l_n = v_n / ||v_n||, l = y / ||y|| with y = sum_n v_n. The normalised
approximation l(w) = sum_n w_n l_n stays on the sphere. Each iteration
  - takes the geodesic direction towards the target, d = (l - <l, l(w)> l(w)) / ||.||, and for each n the
    geodesic direction towards l_n, d_n = (l_n - <l_n, l(w)> l(w)) / ||.||;
  - chooses f = argmax_n <d, d_n> = <l_n, d> / sqrt(1 - <l_n, l(w)>^2) (d is orthogonal to l(w));
  - steps along the great circle from l(w) towards l_f with the closed-form maximiser of <l, l(w')>:
      gamma = (z0 - z1 z2) / ((z0 - z1 z2) + (z1 - z0 z2)),  z0 = <l, l_f>, z1 = <l, l(w)>, z2 = <l_f, l(w)>,
    then renormalises: l(w') = ((1 - gamma) l(w) + gamma l_f) / ||.||, and w likewise.
At the end the optimal scaling of l(w) onto y gives W_n = ||y|| <l, l(w)> w_n / ||v_n||.

<l, l(w_t)> is non-decreasing, so the relative error sqrt(1 - <l, l(w)>^2) of the rescaled coreset never
increases. Each iteration reads V once (two matvecs fused as V @ [d, l(w)]).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .base import Problem, Solver, Support, matvec, support_add, support_empty, support_scale, take_rows

__all__ = ["giga", "GigaState"]


class GigaState(NamedTuple):
    """Iterate of GIGA.

    support holds w / ||v_n|| (so that l(w) = sum_n support_n v_n); approx caches l(w) on the sphere so
    the directions need no pass over V; scale = ||y|| <l, l(w)> is the final optimal scaling; errors[t] is
    the squared relative error after t + 1 iterations, 1 - <l, l(w)>^2, for diagnostics.
    """

    support: Support
    approx: jax.Array
    scale: jax.Array
    errors: jax.Array
    iteration: jax.Array


def _unit(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    nrm = jnp.linalg.norm(x)
    return x / jnp.where(nrm > 0, nrm, 1.0), nrm


def giga(size: int) -> Solver:
    """GIGA with iteration budget `size` (also the capacity; re-selected points share a slot)."""

    def init(problem: Problem, key: jax.Array) -> GigaState:
        del key  # deterministic
        dtype = problem.target.dtype
        return GigaState(support_empty(size, dtype), jnp.zeros_like(problem.target), jnp.zeros((), dtype),
                         jnp.ones(size, dtype), jnp.asarray(0))

    def step(problem: Problem, state: GigaState) -> GigaState:
        dtype = problem.target.dtype
        ell, ynorm = _unit(problem.target)
        lw = state.approx
        z1 = jnp.dot(ell, lw)
        d, dnorm = _unit(ell - z1 * lw)
        sigma = jnp.where(problem.valid, problem.norms, 1.0)
        proj = matvec(problem, jnp.stack([d, lw], axis=1)).astype(dtype)
        along, cos = proj[:, 0] / sigma, proj[:, 1] / sigma
        sin2 = 1.0 - cos * cos
        eps = 10 * jnp.finfo(dtype).eps
        scores = jnp.where(problem.valid & (sin2 > eps), along / jnp.sqrt(jnp.maximum(sin2, eps)), -jnp.inf)
        f = jnp.argmax(scores)
        # take_rows: under a data mesh, read row f where it lives (not an all-gather of V)
        sigma_f, cos_f, score_f = take_rows(jnp.stack([sigma, cos, scores], axis=1), f)
        lf = take_rows(problem.V, f).astype(dtype) / sigma_f
        z0, z2 = jnp.dot(ell, lf), cos_f
        ga, gb = z0 - z1 * z2, z1 - z0 * z2
        denom = ga + gb
        gamma = jnp.where(denom > 0, ga / jnp.where(denom > 0, denom, 1.0), 0.0)
        # nothing left to gain: target reached or no point leads uphill
        gamma = jnp.where((dnorm > eps) & jnp.isfinite(score_f) & (score_f > 0), gamma, 0.0)
        gamma = jnp.clip(gamma, 0.0, 1.0)
        new, nrm = _unit((1.0 - gamma) * lw + gamma * lf)
        inv = jnp.where(nrm > 0, 1.0 / jnp.where(nrm > 0, nrm, 1.0), 0.0)
        support = support_scale(state.support, (1.0 - gamma) * inv)
        support = support_add(support, f, gamma * inv / sigma_f)
        zeta = jnp.dot(ell, new)
        err = jnp.clip(1.0 - zeta * zeta, 0.0, 1.0)
        return GigaState(support, new, ynorm * zeta, state.errors.at[state.iteration].set(err),
                         state.iteration + 1)

    def done(state: GigaState) -> jax.Array:
        return state.iteration >= size

    def extract(state: GigaState):
        weights = jnp.maximum(state.support.weights * state.scale, 0.0)
        return state.support.indices, weights, {"errors": state.errors}

    return Solver(init, step, done, extract)
