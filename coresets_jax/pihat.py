"""Weighting distributions pi_hat for the random projection (HC §5, Algorithm 3).

HC §5 lists the choices: the Laplace approximation (the default in its experiments), the prior, and samples
from elsewhere (e.g. a short MCMC run on a subsample). Every pi_hat exposes `sample(key, num) -> (num, D)`.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from .core import validate as _validate
from .core.model import Model, log_likelihoods

__all__ = ["GaussianApproximation", "PriorSamples", "Samples", "laplace", "prior", "samples"]

Array = jax.Array


class GaussianApproximation(NamedTuple):
    """N(mean, cov); the Laplace approximation is one. `info` records how the mode was found."""

    mean: Array
    cov: Array
    info: dict = {}

    def sample(self, key: Array, num: int) -> Array:
        chol = jnp.linalg.cholesky(self.cov)
        z = jax.random.normal(_validate.check_key(key), (num, self.mean.shape[0]), self.mean.dtype)
        return self.mean + z @ chol.T


class Samples(NamedTuple):
    """Samples the user supplies; `sample` draws rows without replacement (or all of them, shuffled)."""

    thetas: Array

    def sample(self, key: Array, num: int) -> Array:
        total = self.thetas.shape[0]
        if num > total:
            raise ValueError(f"num: asked for {num} samples but only {total} were supplied")
        order = jax.random.permutation(_validate.check_key(key), total)[:num]
        return self.thetas[order]


class PriorSamples(NamedTuple):
    """The prior as pi_hat, through the model's `sample_prior`."""

    model: Model
    data: Any

    def sample(self, key: Array, num: int) -> Array:
        return self.model.sample_prior(_validate.check_key(key), num, self.data)


def samples(thetas: Array) -> Samples:
    thetas = jnp.asarray(thetas)
    if thetas.ndim != 2:
        raise ValueError(f"thetas: expected shape (S, D), got {thetas.shape}")
    _validate.check_finite(thetas, "thetas")
    return Samples(thetas)


def prior(model: Model, data: Any) -> PriorSamples:
    if model.sample_prior is None:
        raise ValueError("model: has no sample_prior, so the prior cannot serve as pi_hat; "
                         "pass samples with cj.samples(thetas) instead")
    return PriorSamples(model, data)


def _objective(model: Model, scale: float):
    """Negative log posterior, with the likelihood scaled by N/m when fitted on a subsample of m rows."""

    def neg_log_post(theta, data):
        return -(scale * jnp.sum(log_likelihoods(model, theta, data)) + model.log_prior(theta))

    return neg_log_post


class _NewtonState(NamedTuple):
    theta: Array
    value: Array
    step_norm: Array
    iteration: Array


@functools.partial(jax.jit, static_argnames=("model", "scale", "max_iter", "tol"))
def _newton(model: Model, data: Any, theta0: Array, scale: float, max_iter: int, tol: float):
    """Damped Newton with backtracking (step halving until the objective decreases)."""
    f = _objective(model, scale)
    value_and_grad = jax.value_and_grad(f)
    hess = jax.hessian(f)

    def direction(theta):
        _, g = value_and_grad(theta, data)
        h = hess(theta, data)
        d = -jnp.linalg.solve(h, g)
        # Fall back to steepest descent where the Hessian is not positive definite along d.
        ok = jnp.all(jnp.isfinite(d)) & (jnp.dot(d, g) < 0)
        return jnp.where(ok, d, -g)

    def cond(s: _NewtonState):
        return (s.iteration < max_iter) & (s.step_norm > tol)

    def body(s: _NewtonState):
        d = direction(s.theta)

        def halve(carry):
            t, _ = carry
            return t * 0.5, f(s.theta + t * 0.5 * d, data)

        def not_better(carry):
            t, v = carry
            return (~(v < s.value)) & (t > 1e-10)

        t, v = jax.lax.while_loop(not_better, halve, (jnp.asarray(1.0, d.dtype), f(s.theta + d, data)))
        accepted = v < s.value  # no strict decrease means converged to rounding
        theta = jnp.where(accepted, s.theta + t * d, s.theta)
        step = jnp.where(accepted, t * jnp.linalg.norm(d) / (1.0 + jnp.linalg.norm(s.theta)), 0.0)
        return _NewtonState(theta, jnp.where(accepted, v, s.value), step, s.iteration + 1)

    init = _NewtonState(theta0, f(theta0, data), jnp.asarray(jnp.inf, theta0.dtype), jnp.asarray(0))
    final = jax.lax.while_loop(cond, body, init)
    return final.theta, hess(final.theta, data), final.iteration


@functools.partial(jax.jit, static_argnames=("model", "scale", "max_iter", "learning_rate"))
def _optax_mode(model: Model, data: Any, theta0: Array, scale: float, max_iter: int, learning_rate):
    """L-BFGS from optax (with its zoom line search), then the Hessian at the mode."""
    f = functools.partial(_objective(model, scale), data=data)
    opt = optax.lbfgs(learning_rate=learning_rate)
    value_and_grad = optax.value_and_grad_from_state(f)

    def body(_, carry):
        theta, state = carry
        value, grad = value_and_grad(theta, state=state)
        updates, state = opt.update(grad, state, theta, value=value, grad=grad, value_fn=f)
        return optax.apply_updates(theta, updates), state

    theta, _ = jax.lax.fori_loop(0, max_iter, body, (theta0, opt.init(theta0)))
    return theta, jax.hessian(f)(theta), jnp.asarray(max_iter)


def laplace(model: Model, data: Any, key: Optional[Array] = None, *, init: Optional[Array] = None,
            method: str = "newton", subsample: Optional[int] = None, max_iter: int = 50,
            tol: float = 1e-6, learning_rate: Optional[float] = None) -> GaussianApproximation:
    """Laplace approximation N(theta_hat, -H^{-1}) of the posterior (HC §5, the pi_hat of its experiments).

    Args:
      model, data: the model and its data pytree.
      key: needed only with `subsample`, to draw the rows.
      init: starting theta; defaults to `model.init_params(data)`.
      method: "newton" (damped Newton, exact Hessian) or "optax" (L-BFGS from optax).
      subsample: fit on this many random rows, with the log-likelihood scaled by N / subsample.
      max_iter, tol: iteration cap and relative step tolerance (Newton).
    """
    n = _validate.check_data(data)
    _validate.check_choice(method, ("newton", "optax"), "method")
    if init is None:
        if model.init_params is None:
            raise ValueError("init: the model has no init_params, so pass an initial theta of shape (D,)")
        init = model.init_params(data)
    theta0 = jnp.asarray(init)
    if theta0.ndim != 1:
        raise ValueError(f"init: expected a flat vector of shape (D,), got shape {theta0.shape}")
    if not jnp.issubdtype(theta0.dtype, jnp.floating):
        theta0 = theta0.astype(jnp.float32)
    scale = 1.0
    if subsample is not None:
        subsample = _validate.check_size(subsample, n, "subsample")
        rows = jax.random.choice(_validate.check_key(key), n, (subsample,), replace=False)
        data = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf)[rows], data)
        scale = n / subsample
    if method == "newton":
        mode, hess, iters = _newton(model, data, theta0, float(scale), int(max_iter), float(tol))
    else:
        mode, hess, iters = _optax_mode(model, data, theta0, float(scale), int(max_iter), learning_rate)
    cov = jnp.linalg.inv(hess)
    cov = 0.5 * (cov + cov.T)
    if not (bool(jnp.all(jnp.isfinite(mode))) and bool(jnp.all(jnp.isfinite(cov)))):
        raise ValueError("model: the Laplace approximation is not finite; the log posterior may be "
                         "non-finite or unbounded near init")
    if not bool(jnp.all(jnp.linalg.eigvalsh(cov) > 0)):
        raise ValueError("model: the Hessian at the mode is not negative definite, so the Laplace "
                         "covariance is not positive definite; try another init or a proper prior")
    return GaussianApproximation(mode, cov, {"iterations": int(iters), "method": method,
                                             "subsample": subsample})
