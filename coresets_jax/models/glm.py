"""Generalised linear models of HC §7: logistic (Eq. 7.1) and Poisson (Eq. 7.2) regression.

The data is `(X, y)` with X of shape (N, D) already carrying any intercept column. The prior is
N(0, prior_scale^2 I) as in the papers. Each model declares this data (`core.checks.DataSpec`), so
`core.checks.check_model_data` refuses a dict, a missing feature axis, labels outside {-1, +1} / {0, 1}
(logistic) and non-count responses (Poisson) at the public boundary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..core import checks as _checks
from ..core.model import Model

__all__ = ["logistic_regression", "poisson_regression", "gaussian_log_prior"]


def gaussian_log_prior(prior_scale: float):
    """log N(theta | 0, prior_scale^2 I)."""

    def log_prior(theta):
        d = theta.shape[-1]
        return (-0.5 * jnp.sum(jnp.square(theta)) / prior_scale**2
                - d * (jnp.log(prior_scale) + 0.5 * jnp.log(2 * jnp.pi)))

    return log_prior


def _gaussian_prior_sampler(prior_scale: float, dim_of):
    def sample_prior(key, num, data):
        return prior_scale * jax.random.normal(key, (num, dim_of(data)))

    return sample_prior


def _zeros_init(data):
    X, _ = data
    # NumPy: a constant needs no XLA compilation on a first call (jnp.zeros eagerly compiles one)
    return np.zeros(X.shape[-1], dtype=jnp.result_type(X, jnp.float32))


def _glm(name: str, response: str, prior_scale: float, log_likelihood, grad_log_likelihood) -> Model:
    """A GLM on data (X, y) with the papers' N(0, prior_scale^2 I) prior, a zero start, and its data spec
    (y `response`: "binary" or "count")."""
    model = Model(
        log_likelihood=log_likelihood,
        log_prior=gaussian_log_prior(prior_scale),
        grad_log_likelihood=grad_log_likelihood,
        init_params=_zeros_init,
        sample_prior=_gaussian_prior_sampler(prior_scale, lambda data: data[0].shape[-1]),
        name=name,
    )
    return _checks.register(model, _checks.DataSpec("xy", response))


def _plus_minus(y, dtype):
    """Labels in {0, 1} (NumPyro's, scikit-learn's) read as {-1, +1}: y' = 2y - 1 on {0, 1}.

    Per datum, y' = -1 where y == 0 and y' = y otherwise, which is 2y - 1 on {0, 1} and the identity on
    {-1, +1}; the two codings then give the same likelihood, so the same posterior everywhere.
    """
    return jnp.where(y == 0, -1.0, y).astype(dtype)


def logistic_regression(prior_scale: float = 1.0) -> Model:
    """Logistic regression, HC Eq. 7.1: L_n(theta) = -log(1 + exp(-y_n x_n^T theta)), y_n in {-1, +1}.

    Labels in {0, 1} are accepted too, with 0 meaning -1 (`_plus_minus`); any other label set is refused by
    `core.checks.check_model_data`.
    """
    if not prior_scale > 0:
        raise ValueError(f"prior_scale: must be positive, got {prior_scale}")

    def log_likelihood(theta, datum):
        x, y = datum
        eta = jnp.dot(x, theta)
        return -jax.nn.softplus(-_plus_minus(y, eta.dtype) * eta)

    def grad_log_likelihood(theta, datum):
        x, y = datum
        eta = jnp.dot(x, theta)
        s = _plus_minus(y, eta.dtype)
        return (s * jax.nn.sigmoid(-s * eta))[..., None] * x

    return _glm("logistic_regression", "binary", prior_scale, log_likelihood, grad_log_likelihood)


def poisson_regression(prior_scale: float = 1.0) -> Model:
    """Poisson regression, HC Eq. 7.2: y_n ~ Poisson(lambda_n), lambda_n = log(1 + exp(x_n^T theta)).

    L_n(theta) = y_n log(lambda_n) - lambda_n - log(y_n!).
    """
    if not prior_scale > 0:
        raise ValueError(f"prior_scale: must be positive, got {prior_scale}")

    def log_likelihood(theta, datum):
        x, y = datum
        eta = jnp.dot(x, theta)
        rate = jax.nn.softplus(eta)
        # log(softplus(eta)) underflows for very negative eta; softplus(eta) ~ exp(eta) there.
        log_rate = jnp.where(eta < -30.0, eta, jnp.log(rate))
        return y * log_rate - rate - jax.lax.lgamma(y + 1.0)

    def grad_log_likelihood(theta, datum):
        x, y = datum
        eta = jnp.dot(x, theta)
        rate = jax.nn.softplus(eta)
        dlog_rate = jnp.where(eta < -30.0, 1.0, jax.nn.sigmoid(eta) / rate)
        return (y * dlog_rate - jax.nn.sigmoid(eta))[..., None] * x

    return _glm("poisson_regression", "count", prior_scale, log_likelihood, grad_log_likelihood)
