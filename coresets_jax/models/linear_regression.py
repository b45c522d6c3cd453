"""Bayesian linear regression with known noise, with its exact (weighted) posterior.

y_n = x_n^T theta + eps_n, eps_n ~ N(0, noise_scale^2), prior theta ~ N(prior_mean, prior_scale^2 I).
The data is `(X, y)`, X of shape (N, D) carrying any intercept or basis expansion; the radial-basis
regression of IHT §5.2 is this model with x_n = b(x_n) the vector of basis-function values.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from ..core import checks as _checks
from ..core.model import Model

__all__ = ["linear_regression", "linear_regression_posterior"]


def linear_regression(noise_scale: float = 1.0, prior_scale: float = 1.0,
                      prior_mean: Optional[jax.Array] = None) -> Model:
    """L_n(theta) = log N(y_n | x_n^T theta, noise_scale^2); pi_0 = N(prior_mean, prior_scale^2 I).

    `prior_mean` defaults to 0 (a scalar or a (D,) vector). The model's `posterior(data, weights)` is the
    exact weighted posterior of `linear_regression_posterior`.
    """
    if not noise_scale > 0:
        raise ValueError(f"noise_scale: must be positive, got {noise_scale}")
    if not prior_scale > 0:
        raise ValueError(f"prior_scale: must be positive, got {prior_scale}")
    mu0 = 0.0 if prior_mean is None else jnp.asarray(prior_mean)
    log_2pi = jnp.log(2 * jnp.pi)

    def log_likelihood(theta, datum):
        x, y = datum
        r = y - jnp.dot(x, theta)
        return -0.5 * jnp.square(r) / noise_scale**2 - jnp.log(noise_scale) - 0.5 * log_2pi

    def grad_log_likelihood(theta, datum):
        x, y = datum
        return ((y - jnp.dot(x, theta)) / noise_scale**2)[..., None] * x

    def log_prior(theta):
        d = theta.shape[-1]
        return (-0.5 * jnp.sum(jnp.square(theta - mu0)) / prior_scale**2
                - d * (jnp.log(prior_scale) + 0.5 * log_2pi))

    def init_params(data):
        X, _ = data
        return jnp.zeros(X.shape[-1], dtype=jnp.result_type(X, jnp.float32)) + mu0

    def sample_prior(key, num, data):
        d = data[0].shape[-1]
        return mu0 + prior_scale * jax.random.normal(key, (num, d))

    def posterior(data, weights=None):
        return linear_regression_posterior(data, weights, noise_scale, prior_scale, prior_mean)

    model = Model(
        log_likelihood=log_likelihood,
        log_prior=log_prior,
        grad_log_likelihood=grad_log_likelihood,
        init_params=init_params,
        sample_prior=sample_prior,
        posterior=posterior,
        name="linear_regression",
    )
    # (X, y) with real y; `check_model_data` refuses a dict, a missing feature axis and y of shape (N, 1).
    return _checks.register(model, _checks.DataSpec("xy", "real"))


def linear_regression_posterior(data, weights: Optional[jax.Array] = None, noise_scale: float = 1.0,
                                prior_scale: float = 1.0, prior_mean: Optional[jax.Array] = None):
    """Exact posterior N(mean, cov) with coreset weights W (w = 1 when None):

        cov^{-1} = I / prior_scale^2 + X^T W X / noise_scale^2,
        mean = cov (prior_mean / prior_scale^2 + X^T W y / noise_scale^2).
    """
    X, y = data
    X = jnp.asarray(X)
    y = jnp.asarray(y, X.dtype)
    n, d = X.shape
    w = jnp.ones(n, X.dtype) if weights is None else jnp.asarray(weights, X.dtype)
    mu0 = jnp.zeros(d, X.dtype) + (0.0 if prior_mean is None else jnp.asarray(prior_mean, X.dtype))
    precision = jnp.eye(d, dtype=X.dtype) / prior_scale**2 + (X.T * w) @ X / noise_scale**2
    chol = jnp.linalg.cholesky(precision)
    rhs = mu0 / prior_scale**2 + X.T @ (w * y) / noise_scale**2
    mean = jax.scipy.linalg.cho_solve((chol, True), rhs)
    cov = jax.scipy.linalg.cho_solve((chol, True), jnp.eye(d, dtype=X.dtype))
    return mean, 0.5 * (cov + cov.T)
