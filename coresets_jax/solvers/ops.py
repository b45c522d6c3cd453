"""Pieces the sparse solvers share: projection onto the k-sparse non-negative set (and the sparse
simplex), the exact line search of a quadratic, and non-negative least squares on a small Gram matrix.

All functions are pure and traceable; shapes are static (k, capacities) and inputs are assumed valid.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core import rows as _rows
from ..core.rows import top_k
from .base import Problem

__all__ = [
    "NNLSResult",
    "combination",
    "line_search",
    "nnls_gram",
    "project_simplex",
    "project_sparse_nonneg",
    "refit_support",
    "scatter_dense",
    "unique_mask",
]

Array = jax.Array


def project_simplex(v: Array, total, mask: Optional[Array] = None) -> Array:
    """Euclidean projection of v onto {x >= 0, sum x = total} (sort-based, O(k log k)).

    With `mask`, only the masked entries are projected and the others are set to 0.
    """
    if mask is not None:
        v = jnp.where(mask, v, -jnp.inf)
    u = jnp.sort(v)[::-1]
    finite = jnp.isfinite(u)
    css = jnp.cumsum(jnp.where(finite, u, 0.0)) - total
    pos = jnp.arange(v.shape[0])
    rho = jnp.max(jnp.where(finite & (u - css / (pos + 1).astype(v.dtype) > 0), pos, 0))
    theta = css[rho] / (rho + 1).astype(v.dtype)
    return jnp.where(jnp.isfinite(v), jnp.maximum(v - theta, 0.0), 0.0)


def project_sparse_nonneg(x: Array, k: int, total: Optional[float] = None) -> tuple[Array, Array]:
    """Pi_{C_k ∩ R+^n}(x): the top-k entries of x, negatives set to 0 (IHT §3.1, appendix E).

    With `total`, the projection onto the sparse simplex {k-sparse, x >= 0, sum x = total}: the same top-k
    support, then the simplex projection of those entries (Kyrillidis et al. 2013).

    Returns (indices (k,), values (k,)); values are sorted non-increasing and may contain zeros.
    """
    vals, idx = top_k(x, k)
    vals = jnp.maximum(vals, 0.0) if total is None else project_simplex(vals, total)
    return idx, vals


def line_search(residual: Array, image: Array) -> Array:
    """argmin_s ||residual - s * image||^2 = <residual, image> / ||image||^2, and 0 when image = 0.

    This is the exact step of a quadratic objective along a direction whose image under V^T is `image`:
    IHT Algorithm 2 lines 6 and 8, Algorithm 3 lines 6, 9 and 11.
    """
    denom = jnp.dot(image, image)
    safe = jnp.where(denom > 0, denom, 1.0)
    return jnp.where(denom > 0, jnp.dot(residual, image) / safe, 0.0)


def unique_mask(slots: Array, n: int) -> Array:
    """True at the first occurrence of each index in `slots` (so gathered sums count each row once)."""
    pos = jnp.arange(slots.shape[0])
    owner = jnp.full((n,), slots.shape[0], pos.dtype).at[slots].min(pos)
    return owner[slots] == pos


def scatter_dense(n: int, dtype, *pairs: tuple[Array, Array]) -> Array:
    """sum of sparse (indices, values) pairs as a dense (n,) vector."""
    out = jnp.zeros(n, dtype)
    for idx, val in pairs:
        out = out.at[idx].add(val.astype(dtype))
    return out


def combination(problem: Problem, indices: Array, coeffs: Array) -> Array:
    """V^T w for w supported on `indices`: gathers those rows only, O(len(indices) * J)."""
    rows = _rows.take_rows(problem.V, indices).astype(problem.target.dtype)
    return coeffs.astype(rows.dtype) @ rows


# --------------------------------------------------------------------------------------------------------
# Non-negative least squares.


class NNLSResult(NamedTuple):
    x: Array
    iterations: Array
    kkt: Array  # max violation of the KKT conditions, relative to max |b|


def nnls_gram(G: Array, b: Array, x0: Array, mask: Array, max_iter: int = 500,
              tol: float = 1e-6) -> NNLSResult:
    """min_{x >= 0, x = 0 off mask} 1/2 x^T G x - b^T x, with G = A A^T symmetric PSD (k, k).

    Jacobi-scaled accelerated projected gradient (FISTA) with step 1/L, L from a power iteration (capped
    by the Gershgorin bound), and gradient-based restart (O'Donoghue & Candès 2015); warm-started from x0.
    Falls back to x0 if the result is worse, so the objective never rises above that of x0. Stops when the
    projected gradient is below tol * max|b| or after max_iter iterations. Robust to singular G (its
    objective still converges), which the support Gram of nearly low-rank vectors often is.

    Why a second NNLS beside `least_squares.active_set_nnls`: that one is only Lawson-Hanson's inner loop (it
    drops columns, never adds one) on a QR that OMP grows one column per step, so it needs OMP's selection
    as its outer loop. Here the support is fixed and given at once (IHT's debias, `refit_support`, OMP with
    exact_nnls=False), any coordinate may turn on or off, and the warm start bounds the cost; OMP also calls
    it with max_iter=0 for the KKT gap alone.
    """
    dtype = G.dtype
    m = mask.astype(dtype)
    # Jacobi scaling x = u / sqrt(diag G): unit diagonal, same non-negativity constraint
    diag = jnp.diagonal(G)
    d = jnp.where((diag > 0) & mask, 1.0 / jnp.sqrt(jnp.where(diag > 0, diag, 1.0)), 0.0)
    G = G * d[:, None] * d[None, :]
    b = b * d
    x0 = jnp.where(d > 0, jnp.maximum(x0.astype(dtype), 0.0) / jnp.where(d > 0, d, 1.0), 0.0)

    def power(_, v):
        v = G @ v
        return v / jnp.maximum(jnp.linalg.norm(v), jnp.finfo(dtype).tiny)

    m = (d > 0).astype(dtype)
    # an irregular start, so it is not orthogonal to the top eigenvector by symmetry
    v0 = m * (1.5 + jnp.cos(2.399963 * jnp.arange(m.shape[0], dtype=dtype)))
    v = jax.lax.fori_loop(0, 30, power, v0 / jnp.maximum(jnp.linalg.norm(v0), jnp.finfo(dtype).tiny))
    gershgorin = jnp.max(jnp.sum(jnp.abs(G), axis=1))  # an upper bound on the top eigenvalue
    lipschitz = jnp.minimum(1.1 * jnp.dot(v, G @ v), gershgorin)
    step = jnp.where(lipschitz > 0, 1.0 / jnp.where(lipschitz > 0, lipschitz, 1.0), 0.0)
    scale = jnp.maximum(jnp.max(jnp.abs(b)), jnp.finfo(dtype).tiny)

    def kkt(x, grad):
        # x > 0: grad = 0; x = 0: grad >= 0 (on the mask)
        viol = jnp.where(x > 0, jnp.abs(grad), jnp.maximum(-grad, 0.0)) * m
        return jnp.max(viol) / scale

    class S(NamedTuple):
        x: Array
        y: Array
        t: Array
        it: Array
        kkt: Array

    def cond(s):
        return (s.it < max_iter) & (s.kkt > tol)

    def body(s):
        x = jnp.maximum(s.y - step * (G @ s.y - b), 0.0) * m
        restart = jnp.dot(s.y - x, x - s.x) > 0
        t = jnp.where(restart, 1.0, 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * s.t * s.t)))
        beta = jnp.where(restart, 0.0, (s.t - 1.0) / t)
        y = x + beta * (x - s.x)
        return S(x, y, t, s.it + 1, kkt(x, G @ x - b))

    def objective(x):
        return jnp.dot(x, 0.5 * (G @ x) - b)

    grad0 = G @ x0 - b
    s = jax.lax.while_loop(cond, body, S(x0, x0, jnp.asarray(1.0, dtype), jnp.asarray(0), kkt(x0, grad0)))
    keep = objective(s.x) <= objective(x0)  # guard: never end worse than the warm start
    return NNLSResult(jnp.where(keep, s.x, x0) * d, s.it, jnp.where(keep, s.kkt, kkt(x0, grad0)))


def refit_support(problem: Problem, indices: Array, weights: Array, max_iter: int = 1000,
                  tol: float = 1e-6) -> tuple[Array, Array, NNLSResult]:
    """Re-optimise the weights on a fixed support: min_{w >= 0} ||sum_n v_n - V_S^T w||^2 (NNLS on V).

    The support is the slots with weight > 0 (each row once); the reference library calls this
    `optimize()`. Warm-started from `weights`, so the result is never worse than the input up to `tol`.
    Returns (indices, weights, NNLSResult); padding slots keep weight 0.
    """
    n = problem.V.shape[0]
    mask = (weights > 0) & unique_mask(indices, n)
    rows = _rows.take_rows(problem.V, indices).astype(problem.target.dtype)
    G = rows @ rows.T
    b = rows @ problem.target
    res = nnls_gram(G, b, weights.astype(G.dtype), mask, max_iter, tol)
    return indices, res.x.astype(weights.dtype), res
