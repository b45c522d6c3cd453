"""Models and the weighted posterior, defined once.

A model is a per-datum log-likelihood L_n(theta) = log p(x_n | theta) and a log prior over a flat parameter
vector theta of length D. The coreset posterior (HC §2) is

    log pi_w(theta) = sum_n w_n L_n(theta) + log pi_0(theta) + const,

with w = 1 for the full data and a sparse non-negative w for a coreset. `weighted_log_density` is the one
definition every stage uses (Laplace, sampling, Sparse VI, Coreset MCMC, metrics). A row of weight 0
contributes exactly 0, even where its log-likelihood is -inf or NaN: padding slots of a fixed-capacity
coreset must never change the target.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from ..compilation import full_precision

__all__ = ["Model", "WeightedLogDensity", "initial_theta", "log_joint", "log_likelihoods", "weighted_log_density",
           "weighted_sum"]

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
      dim: optional D. With it, every stage can start without `init_params` or an `init` (from theta = 0).
      constrain: optional `theta -> dict` of named, constrained parameter values (the NumPyro bridge sets
        it); `Posterior.to_arviz` uses it for site names.
      data_spec: optional description of the data the model expects, checked once at the public boundary
        (`core.checks.check_model_data`): a `core.checks.DataSpec`, or a callable
        `check(data, model_name, argument_name)` that raises ValueError for data the model cannot take.
    """

    log_likelihood: Callable[[Array, Any], Array]
    log_prior: Callable[[Array], Array]
    grad_log_likelihood: Optional[Callable[[Array, Any], Array]] = None
    init_params: Optional[Callable[[Any], Array]] = None
    sample_prior: Optional[Callable[[Array, int, Any], Array]] = None
    posterior: Optional[Callable[[Any, Optional[Array]], tuple[Array, Array]]] = None
    name: str = "custom"
    dim: Optional[int] = None
    constrain: Optional[Callable[[Array], dict]] = None
    data_spec: Optional[Any] = None


@full_precision
def log_likelihoods(model: Model, theta: Array, data: Any) -> Array:
    """The vector (L_n(theta))_{n=1}^N."""
    return jax.vmap(model.log_likelihood, in_axes=(None, 0))(theta, data)


def weighted_sum(weights: Array, lls: Array) -> Array:
    """sum_n w_n L_n with rows of weight 0 masked out (0 * -inf would be NaN)."""
    w = weights.astype(lls.dtype)
    return jnp.sum(jnp.where(w > 0, w * lls, jnp.zeros_like(lls)))


class WeightedLogDensity:
    """theta -> sum_m w_m L(rows_m | theta) + log pi_0(theta) (HC §2), a callable that keeps the model, rows
    and weights it was built from: a model-specific kernel (a conjugate Gibbs sampler) reads them, where a
    generic kernel only calls the density. `weights` None means all ones."""

    __slots__ = ("model", "rows", "weights", "__weakref__")  # jax.jit and eval_shape take weak references

    def __init__(self, model: Model, rows: Any, weights: Optional[Array] = None):
        self.model, self.rows, self.weights = model, rows, weights

    @full_precision
    def __call__(self, theta: Array) -> Array:
        lls = log_likelihoods(self.model, theta, self.rows)
        total = jnp.sum(lls) if self.weights is None else weighted_sum(self.weights, lls)
        return total + self.model.log_prior(theta)

    def row_weights(self, dtype=None) -> Array:
        """The (M,) weights, ones when None, 0 where a weight is not positive."""
        n = jax.tree_util.tree_leaves(self.rows)[0].shape[0]
        if self.weights is None:
            return jnp.ones(n, dtype or jnp.float32)
        w = self.weights if dtype is None else self.weights.astype(dtype)
        return jnp.where(w > 0, w, jnp.zeros_like(w))


def weighted_log_density(model: Model, rows: Any, weights: Optional[Array] = None) -> WeightedLogDensity:
    """theta -> sum_m w_m L(rows_m | theta) + log pi_0(theta) (HC §2); `weights` None means all ones."""
    return WeightedLogDensity(model, rows, weights)


@full_precision
def log_joint(model: Model, theta: Array, data: Any, weights: Optional[Array] = None) -> Array:
    """sum_n w_n L_n(theta) + log pi_0(theta); w = 1 when `weights` is None."""
    return weighted_log_density(model, data, weights)(theta)


def initial_theta(model: Model, data: Any) -> Optional[Array]:
    """A starting theta: `model.init_params(data)`, else zeros of `model.dim`, else None."""
    if model.init_params is not None:
        theta = model.init_params(data)
        theta = jax.device_put(theta) if isinstance(theta, np.ndarray) else jnp.asarray(theta)
    elif model.dim is not None:
        leaf = jax.tree_util.tree_leaves(data)[0]
        dtype = jnp.promote_types(jnp.result_type(leaf), jnp.float32)
        dtype = dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32
        theta = jnp.asarray(np.zeros(int(model.dim), dtype))  # no eager compilation of jnp.zeros
    else:
        return None
    return theta if jnp.issubdtype(theta.dtype, jnp.floating) else theta.astype(jnp.float32)
