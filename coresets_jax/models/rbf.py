"""Bayesian radial-basis-function regression of IHT §5.2, with its closed-form (weighted) posterior.

Given coordinates x_n in R^2 and targets y_n, the model is y_n = b(x_n)^T alpha + eps_n with
eps_n ~ N(0, sigma^2), sigma^2 the variance of {y_n}, and basis functions

    b_d(x) = exp(-||x - mu_d||^2 / (2 sigma_d^2)),

50 per scale for sigma_d in {0.2, 0.4, 0.8, 1.2, 1.6, 2.0} (means drawn uniformly from the data) plus one
near-constant basis of scale 100 at the data mean: D = 301. The prior is alpha ~ N(mu_0 1, sigma_0^2 I),
mu_0 and sigma_0^2 the empirical mean and second moment of {y_n}. It is Bayesian linear regression on the
features b(x_n) (`linear_regression`), so the posterior is Gaussian in closed form.

`exact_centered_vectors` gives vectors whose inner products are the exact centred L2(pi) inner products of
the log-likelihoods (IHT §2 with pi_hat = pi, no sampling), as IHT §5.2 gives its solvers.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core.model import Model
from .linear_regression import linear_regression, linear_regression_posterior

__all__ = ["RBFBasis", "RBFProblem", "SCALES", "exact_centered_vectors", "rbf_basis", "rbf_features",
           "rbf_posterior", "rbf_regression"]

Array = jax.Array
SCALES = (0.2, 0.4, 0.8, 1.2, 1.6, 2.0)


class RBFBasis(NamedTuple):
    """Centres (D, 2) and scales (D,) of the basis functions."""

    means: Array
    scales: Array


class RBFProblem(NamedTuple):
    """The model, its data (B, y) with B = rbf_features(coords), the basis and the hyperparameters."""

    model: Model
    data: tuple
    basis: RBFBasis
    noise_scale: float
    prior_scale: float
    prior_mean: float


def rbf_basis(key: Array, coords: Array, scales=SCALES, per_scale: int = 50,
              constant_scale: float = 100.0) -> RBFBasis:
    """IHT §5.2: `per_scale` centres drawn uniformly from the data for each scale, plus one near-constant
    basis (scale `constant_scale`) at the mean coordinate."""
    coords = jnp.asarray(coords)
    if coords.ndim != 2:
        raise ValueError(f"coords: expected (N, 2), got shape {coords.shape}")
    if per_scale < 1:
        raise ValueError(f"per_scale: must be at least 1, got {per_scale}")
    n = coords.shape[0]
    rows = jax.random.randint(key, (len(scales) * per_scale,), 0, n)
    means = jnp.concatenate([coords[rows], jnp.mean(coords, 0, keepdims=True)])
    widths = jnp.concatenate([jnp.repeat(jnp.asarray(scales, coords.dtype), per_scale),
                              jnp.asarray([constant_scale], coords.dtype)])
    return RBFBasis(means, widths)


def rbf_features(coords: Array, basis: RBFBasis) -> Array:
    """B with B_nd = exp(-||x_n - mu_d||^2 / (2 sigma_d^2)), shape (N, D)."""
    coords = jnp.asarray(coords)
    sq = jnp.sum(jnp.square(coords[:, None, :] - basis.means[None, :, :]), -1)
    return jnp.exp(-0.5 * sq / jnp.square(basis.scales))


def rbf_regression(key: Array, coords: Array, y: Array, scales=SCALES, per_scale: int = 50) -> RBFProblem:
    """Build the IHT §5.2 model on (coords, y): basis, features, and hyperparameters from the data."""
    coords = jnp.asarray(coords)
    y = jnp.asarray(y, coords.dtype)
    if y.shape != (coords.shape[0],):
        raise ValueError(f"y: expected shape ({coords.shape[0]},), got {y.shape}")
    basis = rbf_basis(key, coords, scales, per_scale)
    B = rbf_features(coords, basis)
    noise_scale = float(jnp.std(y))
    prior_mean = float(jnp.mean(y))
    prior_scale = float(jnp.sqrt(jnp.mean(jnp.square(y))))
    model = linear_regression(noise_scale, prior_scale, prior_mean)
    return RBFProblem(model._replace(name="rbf_regression"), (B, y), basis, noise_scale, prior_scale,
                      prior_mean)


def rbf_posterior(problem: RBFProblem, weights: Optional[Array] = None) -> tuple[Array, Array]:
    """Exact posterior N(mean, cov) of alpha under coreset weights (all ones when None)."""
    return linear_regression_posterior(problem.data, weights, problem.noise_scale, problem.prior_scale,
                                       problem.prior_mean)


def exact_centered_vectors(problem: RBFProblem) -> Array:
    """V (N, N) with V V^T = the exact centred L2(pi) Gram matrix of the log-likelihoods (IHT §2, pi_hat = pi).

    With alpha = m + e, e ~ N(0, S), a_n = y_n - b_n^T m and C = B S B^T,
        L_n - E L_n = [2 a_n b_n^T e - ((b_n^T e)^2 - C_nn)] / (2 sigma^2),
        <g_n, g_m> = (a_n a_m C_nm + C_nm^2 / 2) / sigma^4      (Cov of Gaussian quadratic forms).
    The Gram matrix is factored by a symmetric eigendecomposition (float64 when enabled).
    """
    B, y = problem.data
    mean, cov = rbf_posterior(problem)
    a = y - B @ mean
    C = B @ cov @ B.T
    gram = (jnp.outer(a, a) * C + 0.5 * jnp.square(C)) / problem.noise_scale**4
    vals, vecs = jnp.linalg.eigh(0.5 * (gram + gram.T))
    return vecs * jnp.sqrt(jnp.maximum(vals, 0.0))
