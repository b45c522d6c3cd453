"""Second-order features: each log-likelihood's gradient and Hessian at pi_hat's mean, whitened (ours).

For a Gaussian pi_hat = N(mu, Sigma) with Sigma = L L^T, each row's log-likelihood to second order around mu in
the whitened coordinates u (theta = mu + L u) is L_n(mu) + g_n^T u - u^T H_n u / 2, with g_n = L^T grad L_n(mu)
and H_n = -L^T hess L_n(mu) L. The features are

    v_n = [g_n ; diag(H_n) / sqrt(2) ; (H_n)_{ij}, i < j]            (J = D (D + 3) / 2 entries)

so that, for weights w, with r = sum_n (1 - w_n) v_n,

    ||r||^2 / 2  ~  KL(pi_w || pi)                                                       (*)

to second order for a nearly Gaussian posterior: the Laplace fits of pi_w and pi differ in mean by
H^-1 sum_n (w_n - 1) grad L_n and in precision by sum_n (w_n - 1) hess L_n, and the Gaussian KL is half the
squared whitened mean shift plus a quarter of the squared Frobenius norm of the whitened precision change,
which is what the scaling of the diagonal and the upper triangle gives. A Hilbert coreset on these features
(HC Eq. 3.2) therefore fits the D (D + 3) / 2 moments that pin a posterior's mean and covariance in D
dimensions, in the norm in which their error is the KL, and its residual predicts that KL without sampling.
The Fisher projection (HC Eq. 5.7) reaches the same moments only through J random gradient coordinates at
draws of pi_hat, as a noisy random projection of them; at D = 50 its 500 default features cannot hold the
1,325 moments.

The gradient and Hessian come from `jax.grad` and `jax.jacfwd` of the user's log-likelihood in u (D
forward passes of its gradient per row), in chunks of rows, so any model works; a model's
`grad_log_likelihood` is used where given.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import take_data
from ..core.model import Model
from ..core.rows import fold_row_chunks
from ..compilation import full_precision

__all__ = ["CHUNK_BYTES", "SCORE_DRAWS", "candidate_features", "candidates", "num_features", "predicted_kl",
           "target_and_scores", "taylor_features", "taylor_sum_and_norms"]

Array = jax.Array

CHUNK_BYTES = 64 << 20  # a chunk's D x D Hessians and its features take about this much memory


def num_features(dim: int) -> int:
    """J = D (D + 3) / 2: D gradient entries and the D (D + 1) / 2 of a symmetric Hessian."""
    return dim * (dim + 3) // 2


def predicted_kl(squared_residual) -> Any:
    """KL(pi_w || pi) from the squared residual ||sum_n (1 - w_n) v_n||^2 of these features (Eq. (*))."""
    return 0.5 * squared_residual


def _row_features(model: Model, mean: Array, chol: Array):
    """datum -> (value L_n(mu), features (J,)) in the whitened coordinates of N(mean, chol chol^T)."""
    dim = mean.shape[0]
    upper = np.triu_indices(dim, 1)
    if model.grad_log_likelihood is not None:
        grad_theta = model.grad_log_likelihood
    else:
        grad_theta = jax.grad(model.log_likelihood)

    def grad_u(u, datum):  # L^T grad L_n(mu + L u)
        return chol.T @ grad_theta(mean + chol @ u, datum)

    def features(datum):
        zero = jnp.zeros_like(mean)
        g = grad_u(zero, datum)
        hess = -jax.jacfwd(grad_u)(zero, datum)
        hess = 0.5 * (hess + hess.T)
        value = model.log_likelihood(mean, datum)
        v = jnp.concatenate([g, jnp.diagonal(hess) / math.sqrt(2.0), hess[upper]])
        return value, v

    return features


def _chunk_rows(dim: int, chunk: Optional[int], n: int) -> int:
    if chunk is None:
        chunk = max(16, CHUNK_BYTES // (4 * (dim * dim + num_features(dim)) * 2))
    return int(max(1, min(chunk, n)))


@functools.partial(jax.jit, static_argnames=("model", "chunk", "dtype"))
def _features(model: Model, data: Any, mean: Array, chol: Array, chunk: int, dtype):
    """(V (N, J) in `dtype`, all finite): V written in place chunk by chunk."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    one = jax.vmap(_row_features(model, mean, chol))

    def body(carry, rows, start, fresh):
        del fresh  # the last chunk rewrites rows it shares with the one before: the same values
        V, finite = carry
        value, v = one(rows)
        ok = jnp.all(jnp.isfinite(value)) & jnp.all(jnp.isfinite(v))
        return jax.lax.dynamic_update_slice_in_dim(V, v.astype(dtype), start, 0), finite & ok

    init = (jnp.zeros((n, num_features(mean.shape[0])), dtype), jnp.asarray(True))
    return fold_row_chunks(body, init, data, chunk)


@full_precision
def taylor_features(model: Model, data: Any, mean: Array, cov: Array, *, dtype=None,
                    chunk: Optional[int] = None) -> Array:
    """V (N, J) of second-order features at N(mean, cov) (module docstring), or ValueError where a row's
    log-likelihood or its derivatives are not finite at the mean. The caller has checked the model and data."""
    mean, chol = _expansion(mean, cov)
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    dtype = jnp.dtype(jnp.float32 if dtype is None else dtype)
    V, finite = _features(model, _floats(data, mean.dtype), mean, chol, _chunk_rows(mean.shape[0], chunk, n), dtype)
    if not bool(finite):
        raise ValueError("model: the log-likelihood or its first two derivatives are not finite at pi_hat's mean "
                         f"on some row (first: row {int(jnp.argmin(jnp.all(jnp.isfinite(V), axis=1)))}); check "
                         "that the model fits the data")
    return V


@functools.partial(jax.jit, static_argnames=("model", "chunk"))
def _sum_and_norms(model: Model, data: Any, mean: Array, chol: Array, chunk: int):
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    one = jax.vmap(_row_features(model, mean, chol))
    j = num_features(mean.shape[0])

    def body(carry, rows, start, fresh):
        total, norms, finite = carry
        value, v = one(rows)
        ok = jnp.all(jnp.isfinite(value)) & jnp.all(jnp.isfinite(v))
        total = total + jnp.sum(jnp.where(fresh[:, None], v, 0.0), axis=0)  # the overlap counted once
        norms = jax.lax.dynamic_update_slice_in_dim(norms, jnp.linalg.norm(v, axis=1), start, 0)
        return total, norms, finite & ok

    init = (jnp.zeros(j, mean.dtype), jnp.zeros(n, mean.dtype), jnp.asarray(True))
    return fold_row_chunks(body, init, data, chunk)


@full_precision
def taylor_sum_and_norms(model: Model, data: Any, mean: Array, cov: Array,
                         chunk: Optional[int] = None) -> tuple[Array, Array]:
    """(sum_n v_n, (||v_n||)_n) in one streamed pass over the rows, never holding V: the target for a solver on
    candidate rows, and the norms that importance sampling of those candidates uses (HC Algorithm 1's
    p_n ∝ ||v_n||). ValueError where a row's features are not finite."""
    mean, chol = _expansion(mean, cov)
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    total, norms, finite = _sum_and_norms(model, _floats(data, mean.dtype), mean, chol,
                                          _chunk_rows(mean.shape[0], chunk, n))
    if not bool(finite):
        raise ValueError("model: the log-likelihood or its first two derivatives are not finite at pi_hat's mean "
                         f"on some row (first: row {int(jnp.argmin(jnp.isfinite(norms)))}); check that the model "
                         "fits the data")
    return total, norms


SCORE_DRAWS = 4  # draws of pi_hat at which `target_and_scores` reads each row's gradient


@functools.partial(jax.jit, static_argnames=("model", "chunk"))
def _grad_sum_and_scores(model: Model, data: Any, mean: Array, chol: Array, z: Array, chunk: int):
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    grad = model.grad_log_likelihood or jax.grad(model.log_likelihood)
    thetas = jnp.concatenate([mean[None], mean + z @ chol.T])  # (1 + K, D)

    def body(carry, rows, start, fresh):
        total, scores, finite = carry
        g = jax.vmap(lambda theta: jax.vmap(grad, in_axes=(None, 0))(theta, rows))(thetas) @ chol  # whitened
        g0, spread = g[0], g[1:] - g[0]
        score = jnp.sum(g0 * g0, axis=-1) + 0.5 * jnp.mean(jnp.sum(spread * spread, axis=-1), axis=0)
        total = total + jnp.sum(jnp.where(fresh[:, None], g0, 0.0), axis=0)
        ok = jnp.all(jnp.isfinite(g))
        return total, jax.lax.dynamic_update_slice_in_dim(scores, jnp.sqrt(score), start, 0), finite & ok

    init = (jnp.zeros(mean.shape[0], mean.dtype), jnp.zeros(n, mean.dtype), jnp.asarray(True))
    return fold_row_chunks(body, init, data, chunk)


@full_precision
def target_and_scores(model: Model, data: Any, mean: Array, cov: Array, key: Array,
                      chunk: Optional[int] = None) -> tuple[Array, Array]:
    """(sum_n v_n, scores) for a solver on candidate rows, from gradients only (no Hessian per row):

    - the target's gradient part sum_n g_n from one gradient per row at the mean; its Hessian part from the
      Laplace fit whose mean and covariance these are: sum_n H_n = L^T (H - H_0) L = I - L^T H_0 L, with H the
      fit's precision (cov^-1 = (L L^T)^-1) and H_0 the prior's negative Hessian at the mean;
    - each row's score s_n ~ ||v_n||, from its gradients at SCORE_DRAWS draws mu + L z_k of pi_hat:
      s_n^2 = ||g_n||^2 + mean_k ||g_n(z_k) - g_n||^2 / 2, whose expectation is ||g_n||^2 + ||H_n||_F^2 / 2
      to second order (E ||H z||^2 = ||H||_F^2).
    ValueError where a row's gradient is not finite."""
    mean, chol = _expansion(mean, cov)
    dim = mean.shape[0]
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    z = jax.random.normal(key, (SCORE_DRAWS, dim), mean.dtype)
    if chunk is None:
        chunk = max(64, CHUNK_BYTES // (4 * dim * (SCORE_DRAWS + 1) * 2))
    g_sum, scores, finite = _grad_sum_and_scores(model, _floats(data, mean.dtype), mean, chol, z,
                                                 int(min(chunk, n)))
    if not bool(finite):
        raise ValueError("model: the log-likelihood's gradient is not finite at pi_hat's draws on some row; check "
                         "that the model fits the data")
    prior_h = -jax.hessian(model.log_prior)(mean)
    h = jnp.eye(dim, dtype=mean.dtype) - chol.T @ prior_h @ chol
    upper = np.triu_indices(dim, 1)
    return jnp.concatenate([g_sum, jnp.diagonal(h) / math.sqrt(2.0), h[upper]]), scores


def candidates(key: Array, norms: Array, rows: int) -> Array:
    """`rows` distinct rows in increasing order, drawn without replacement with probabilities
    q_n = (1 / N + ||v_n|| / sum_m ||v_m||) / 2 (half uniform, half by the features' norms, so the rows that alone
    carry a direction, a rare covariate, are rarely missed): Gumbel top-k."""
    return _gumbel_top(key, norms, int(rows))


@functools.partial(jax.jit, static_argnames=("rows",))
def _gumbel_top(key, norms, rows: int):
    n = norms.shape[0]
    h = jnp.where(jnp.isfinite(norms) & (norms > 0), norms, 0.0)
    q = 0.5 / n + 0.5 * h / jnp.maximum(jnp.sum(h), jnp.finfo(h.dtype).tiny)
    scores = jnp.log(q) + jax.random.gumbel(key, (n,), h.dtype)
    return jnp.sort(jax.lax.top_k(scores, rows)[1]).astype(jnp.int32)


def candidate_features(model: Model, data: Any, mean: Array, cov: Array, rows: Array, *, dtype=None) -> Array:
    """The features of the candidate `rows` only (`taylor_features` on those rows)."""
    return taylor_features(model, take_data(data, rows), mean, cov, dtype=dtype)


def _expansion(mean, cov):
    mean = jnp.asarray(mean)
    mean = mean.astype(jnp.promote_types(mean.dtype, jnp.float32))
    chol = jnp.linalg.cholesky(jnp.asarray(cov, mean.dtype))
    if mean.ndim != 1 or chol.shape != (mean.shape[0], mean.shape[0]) or not bool(jnp.all(jnp.isfinite(chol))):
        raise ValueError(f"pi_hat: the Taylor features need a mean (D,) and a positive definite covariance (D, D), "
                         f"got shapes {tuple(np.shape(mean))} and {tuple(np.shape(cov))}")
    return mean, chol


def _floats(data: Any, dtype) -> Any:
    return jax.tree_util.tree_map(
        lambda x: jnp.asarray(x).astype(dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating)
        else jnp.asarray(x), data)
