"""Models: a per-datum log-likelihood and a log-prior over a flat parameter vector.

The posterior is pi(theta) ∝ exp(sum_n w_n L_n(theta)) pi_0(theta) (HC §2), with w = 1 for the full data and
a sparse non-negative w for a coreset.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

__all__ = ["Model", "log_likelihoods", "log_joint"]

Array = jax.Array


class Model(NamedTuple):
    """A Bayesian model given by pure JAX functions.

    Attributes:
      log_likelihood: `(theta, datum) -> scalar`, with `theta` a flat `(D,)` vector and `datum` one row of
        the data pytree.
      log_prior: `theta -> scalar`.
      grad_log_likelihood: optional closed form of `grad(log_likelihood)` in theta, `(theta, datum) -> (D,)`.
        Fisher projection uses it when given; it is faster than autodiff for GLMs.
      init_params: optional `data -> (D,)` starting point for optimisation (the Laplace mode search).
      sample_prior: optional `(key, num, data) -> (num, D)`, so the prior can serve as pi_hat (the data
        only tells the dimension D).
      posterior: optional closed form `(data, weights) -> (mean, cov)` of the (weighted) posterior, for
        conjugate models (weights None means all ones). Tests, metrics and Sparse VI use it when present.
      name: a label used in reports.
    """

    log_likelihood: Callable[[Array, Any], Array]
    log_prior: Callable[[Array], Array]
    grad_log_likelihood: Optional[Callable[[Array, Any], Array]] = None
    init_params: Optional[Callable[[Any], Array]] = None
    sample_prior: Optional[Callable[[Array, int, Any], Array]] = None
    posterior: Optional[Callable[[Any, Optional[Array]], tuple[Array, Array]]] = None
    name: str = "custom"


def log_likelihoods(model: Model, theta: Array, data: Any) -> Array:
    """The vector (L_n(theta))_{n=1}^N."""
    return jax.vmap(model.log_likelihood, in_axes=(None, 0))(theta, data)


def log_joint(model: Model, theta: Array, data: Any, weights: Optional[Array] = None) -> Array:
    """sum_n w_n L_n(theta) + log pi_0(theta); w = 1 when `weights` is None."""
    lls = log_likelihoods(model, theta, data)
    total = jnp.sum(lls) if weights is None else jnp.dot(weights.astype(lls.dtype), lls)
    return total + model.log_prior(theta)
