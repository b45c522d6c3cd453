"""The Gaussian mean model of HC §6, with closed forms.

y_n ~ N(mu, I_D) independently, prior mu ~ N(mu_0, I_D). The data is the (N, D) array of y_n.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from ..core import checks as _checks
from ..core.model import Model

__all__ = ["gaussian_mean", "gaussian_mean_posterior", "gaussian_mean_fisher_vectors"]


def gaussian_mean(dim: int, prior_mean: Optional[jax.Array] = None) -> Model:
    """HC Eq. 6.1: L_n(mu) = log N(y_n | mu, I), pi_0 = N(mu_0, I)."""
    if dim < 1:
        raise ValueError(f"dim: must be at least 1, got {dim}")
    mu0 = jnp.zeros(dim) if prior_mean is None else jnp.asarray(prior_mean)
    log_norm = -0.5 * dim * jnp.log(2 * jnp.pi)

    def log_likelihood(theta, y):
        return -0.5 * jnp.sum(jnp.square(y - theta)) + log_norm

    def log_prior(theta):
        return -0.5 * jnp.sum(jnp.square(theta - mu0)) + log_norm

    def grad_log_likelihood(theta, y):
        return y - theta

    def sample_prior(key, num, data=None):
        return mu0 + jax.random.normal(key, (num, dim))

    model = Model(
        log_likelihood=log_likelihood,
        log_prior=log_prior,
        grad_log_likelihood=grad_log_likelihood,
        init_params=lambda data: jnp.zeros(dim, dtype=jnp.result_type(data, jnp.float32)),
        sample_prior=sample_prior,
        posterior=lambda data, weights=None: gaussian_mean_posterior(data, weights, mu0),
        name="gaussian_mean",
    )
    # One (N, dim) array; `check_model_data` refuses (N,) (the broadcast would silently work) and (N, D != dim).
    return _checks.register(model, _checks.DataSpec("matrix", dim=int(dim)))


def gaussian_mean_posterior(y: jax.Array, weights: Optional[jax.Array] = None,
                            prior_mean: Optional[jax.Array] = None):
    """Exact (weighted) posterior, HC Eq. 6.2 (w = 1) and Eq. 6.4 (coreset weights W).

    Returns (mean, cov) with cov = I / (1 + sum_n W_n) and mean = cov (mu_0 + sum_n W_n y_n).
    """
    y = jnp.asarray(y)
    n, d = y.shape
    w = jnp.ones(n, y.dtype) if weights is None else jnp.asarray(weights, y.dtype)
    mu0 = jnp.zeros(d, y.dtype) if prior_mean is None else jnp.asarray(prior_mean, y.dtype)
    precision = 1.0 + jnp.sum(w)
    mean = (mu0 + w @ y) / precision
    return mean, jnp.eye(d, dtype=y.dtype) / precision


def gaussian_mean_fisher_vectors(y: jax.Array, prior_mean: Optional[jax.Array] = None) -> jax.Array:
    """Exact finite-dimensional vectors for the Fisher inner product with pi_hat = pi (HC Eq. 6.5).

    <L_n, L_m>_{pi,F} = E_pi[(y_n - mu)^T (y_m - mu)] = D / (1 + N) + (mu_pi - y_n)^T (mu_pi - y_m),
    so v_n = [sqrt(D / (1 + N)), mu_pi - y_n] has exactly that Gram matrix (Eq. 6.5 is the case D = 2).
    """
    y = jnp.asarray(y)
    n, d = y.shape
    mean, _ = gaussian_mean_posterior(y, prior_mean=prior_mean)
    const = jnp.full((n, 1), jnp.sqrt(d / (1.0 + n)), y.dtype)
    return jnp.concatenate([const, mean - y], axis=1)
