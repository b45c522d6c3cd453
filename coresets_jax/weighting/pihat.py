"""Weighting distributions pi_hat for the random projection (HC §5, Algorithm 3).

HC §5 lists the choices: the Laplace approximation (the default in its experiments), the prior, and samples
from elsewhere (e.g. a short MCMC run on a subsample). Every pi_hat exposes `sample(key, num) -> (num, D)`.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import mesh as _mesh
from .. import compilation
from ..compilation import fast_jit
from ..core import validate as _validate
from ..core import Model, initial_theta
from ..core import checks as _checks
from ..core import compiled
from . import laplace_mode as _mode
from ..compilation import full_precision, full_precision_factory
from ..core import caller

__all__ = ["GaussianApproximation", "PriorSamples", "Samples", "laplace", "laplace_fn", "prior", "samples"]

Array = jax.Array


class GaussianApproximation(NamedTuple):
    """N(mean, cov); the Laplace approximation is one.

    `info` records how the mode was found: `converged`, `iterations`, `grad_norm` (of the negative log
    posterior at the mode) and `finite` as arrays (so the core can run under jit/vmap); `cj.laplace` adds
    `method` and `subsample`.
    """

    mean: Array
    cov: Array
    info: dict = {}

    def sample(self, key: Array, num: int) -> Array:
        return gaussian_draws(_validate.check_key(key), self.mean, self.cov, int(num))


@functools.partial(fast_jit, static_argnames=("num",))
def gaussian_draws(key: Array, mean: Array, cov: Array, num: int) -> Array:
    """`num` draws from N(mean, cov): mean + z L^T with z standard normal and L the Cholesky factor of cov
    (one compiled program rather than four eager operations, each compiled on a first call; microseconds of
    work, so compiled fast: `compilation.fast_jit`)."""
    chol = jnp.linalg.cholesky(cov)
    z = jax.random.normal(key, (num, mean.shape[0]), mean.dtype)
    return mean + z @ chol.T


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


@full_precision_factory
def laplace_fn(model: Model, *, method: str = "newton", scale: float = 1.0, max_iter: int = 50,
               tol: float = 1e-6, learning_rate: Optional[float] = None):
    """The pure core of `laplace`: `(data, init, weights=None) -> GaussianApproximation` (jit/vmap-able).

    The Laplace approximation N(theta_hat, H^{-1}) of pi_w(theta) ∝ exp(scale sum_n w_n L_n) pi_0 (HC §5),
    with H the Hessian of the negative log posterior at its mode theta_hat. Reports in `info`:
    `converged` (Newton: relative step below `tol`; L-BFGS: gradient norm below tol (1 + |f|)),
    `iterations`, `grad_norm` and `finite`. It never syncs with the host, so `cj.laplace` checks the flags.
    """
    if method not in ("newton", "optax"):
        raise ValueError(f"method: unknown value {method!r}; expected one of ['newton', 'optax']")
    max_iter = _validate.check_positive_int(max_iter, "max_iter")
    tol = _validate.check_nonneg_float(tol, "tol")
    f = _mode.objective(model, float(scale))

    def fit(data, init, weights=None) -> GaussianApproximation:
        theta0 = jnp.asarray(init)
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        w = jnp.ones(n, theta0.dtype) if weights is None else jnp.asarray(weights).astype(theta0.dtype)
        if method == "newton":
            mode, value, grad, hess, iterations, converged = _mode.newton(f, data, w, theta0, max_iter, float(tol))
        else:
            mode, iterations, converged = _mode.lbfgs(f, data, w, theta0, max_iter, float(tol), learning_rate)
            value, grad, hess = _mode.derivatives(f, data, w)(mode)
        cov = jnp.linalg.inv(hess)
        cov = 0.5 * (cov + cov.T)
        finite = jnp.all(jnp.isfinite(mode)) & jnp.all(jnp.isfinite(cov)) & jnp.isfinite(value)
        # The covariance's Cholesky factor, here rather than eagerly in `laplace` and in every `sample`
        # (each an XLA compilation of its own on a first call); NaN when cov is not positive definite.
        chol = jnp.linalg.cholesky(cov)
        info = {"converged": converged, "iterations": iterations, "grad_norm": jnp.linalg.norm(grad),
                "finite": finite, "positive_definite": finite & jnp.all(jnp.isfinite(chol))}
        return GaussianApproximation(mode, cov, info)

    return _mesh.with_auto_axes(fit, 0)  # data traced on Explicit axes


LBFGS_FALLBACK_ITER = 200  # L-BFGS's iteration cap when it retries a Newton fit that failed


@functools.lru_cache(maxsize=64)
def _compiled(model: Model, method: str, scale: float, max_iter: int, tol: float, learning_rate):
    return compiled.jit(laplace_fn(model, method=method, scale=scale, max_iter=max_iter, tol=tol,
                              learning_rate=learning_rate))


@full_precision
def laplace(model: Model, data: Any, key: Optional[Array] = None, *, init: Optional[Array] = None,
            method: str = "newton", subsample: Optional[int] = None, max_iter: int = 50,
            tol: float = 1e-6, learning_rate: Optional[float] = None,
            weights: Optional[Array] = None) -> GaussianApproximation:
    """Laplace approximation N(theta_hat, -H^{-1}) of the posterior (HC §5, the pi_hat of its experiments).

    Validates, runs the pure core `laplace_fn`, then checks: a Newton fit that ends where the Hessian is not
    negative definite (a saddle, or the edge of a degenerate region) is retried with L-BFGS from the same start
    (`info["fallback"]` says so); a non-finite or non-positive-definite result raises ValueError, and a fit
    that did not converge within `max_iter` warns (`info["converged"]`).

    Args:
      model, data: the model and its data pytree.
      key: needed only with `subsample`, to draw the rows.
      init: starting theta; defaults to `model.init_params(data)`, else zeros of `model.dim`.
      method: "newton" (damped Newton, exact Hessian) or "optax" (L-BFGS from optax).
      subsample: fit on this many random rows, with the log-likelihood scaled by N / subsample.
      max_iter, tol: iteration cap and tolerance (Newton: relative step; L-BFGS: gradient norm).
      weights: optional (N,) non-negative data weights, for the coreset posterior pi_w (HC §2).
    """
    n = _checks.check_model_data(model, data)
    return laplace_checked(model, data, n, key, init=init, method=method, subsample=subsample, max_iter=max_iter,
                           tol=tol, learning_rate=learning_rate, weights=weights)


def laplace_checked(model: Model, data: Any, n: int, key: Optional[Array] = None, *, init: Optional[Array] = None,
                    method: str = "newton", subsample: Optional[int] = None, max_iter: int = 50,
                    tol: float = 1e-6, learning_rate: Optional[float] = None,
                    weights: Optional[Array] = None, then: Optional[Callable[[], Any]] = None
                    ) -> GaussianApproximation:
    """`laplace` for a caller that has already run `check_model_data(model, data)` (it returned N = n):
    `cj.coreset` checks the model and the data once, at its own boundary, not again for pi_hat. `then`: called
    once the fit's program is lowered, while it compiles in the background (`cj.coreset` starts its solver's
    compilation there: tracing it earlier slowed the fit's own tracing, which the projection waits for)."""
    _validate.check_choice(method, ("newton", "optax"), "method")
    if init is None:
        init = initial_theta(model, data)
        if init is None:
            raise ValueError("init: the model has neither init_params nor dim, so pass an initial theta of "
                             "shape (D,) (or build the model with cj.Model(..., dim=D))")
    theta0 = jnp.asarray(init)
    if theta0.ndim != 1:
        raise ValueError(f"init: expected a flat vector of shape (D,), got shape {theta0.shape}")
    if not jnp.issubdtype(theta0.dtype, jnp.floating):
        theta0 = theta0.astype(jnp.float32)
    _validate.check_finite(theta0, "init")
    _checks.check_theta(model, data, theta0, "init", ndim=1)
    if weights is not None:
        weights = jnp.asarray(weights)
        if weights.shape != (n,):
            raise ValueError(f"weights: expected shape (N,) = ({n},), got {weights.shape}")
        _validate.check_finite(weights, "weights")
        host = _validate.host_array(weights)
        if bool(np.any(host < 0) if host is not None else jnp.any(weights < 0)):
            raise ValueError("weights: must be non-negative")
    scale = 1.0
    if subsample is not None:
        subsample = _validate.check_size(subsample, n, "subsample")
        rows = jax.random.choice(_validate.check_key(key), n, (subsample,), replace=False)
        data = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf)[rows], data)
        weights = None if weights is None else weights[rows]
        scale = n / subsample
    fit = _compiled(model, method, float(scale), int(max_iter), float(tol), learning_rate)
    if then is not None:  # the fit's program first (it traces the model here), then the caller's work
        compiling = compilation.compile_ahead(fit, data, theta0, weights)
        then()
        compiling.wait()
    try:
        approx = fit(data, theta0, weights)
    except TypeError as err:
        raise ValueError(f"init: the model cannot evaluate a theta of shape {theta0.shape}: {err}") from err
    info = {k: v.item() for k, v in approx.info.items()}
    fallback = None
    if method == "newton" and not (info["finite"] and info["positive_definite"]):
        # Newton's steepest-descent fallback can walk into a saddle or the edge of a degenerate region (a
        # two-component mixture's weight -> 0: gradient norm 11, Hessian indefinite) where L-BFGS, with its
        # line search on the same objective, reaches the mode from the same start.
        retry_iter = max(int(max_iter), LBFGS_FALLBACK_ITER)
        second = _compiled(model, "optax", float(scale), retry_iter, float(tol), None)(data, theta0, weights)
        second_info = {k: v.item() for k, v in second.info.items()}
        if second_info["finite"] and second_info["positive_definite"]:
            fallback = (f"newton ended where the Hessian is not negative definite (gradient norm "
                        f"{info['grad_norm']:.3g}); L-BFGS from the same start found the mode")
            approx, info, method, max_iter = second, second_info, "optax", retry_iter
    if not info["finite"]:
        raise ValueError("model: the Laplace approximation is not finite; the log posterior may be "
                         "non-finite (a log-likelihood of -inf or NaN on some rows) or unbounded near init")
    if not info["positive_definite"]:
        raise ValueError("model: the Hessian at the mode is not negative definite, so the Laplace "
                         "covariance is not positive definite; try another init or a proper prior")
    if not info["converged"]:
        warnings.warn(f"laplace: did not converge in max_iter = {max_iter} iterations (gradient norm "
                      f"{info['grad_norm']:.3g}); raise max_iter or check the model", RuntimeWarning,
                      stacklevel=caller.stacklevel())
    info.update(method=method, subsample=subsample, fallback=fallback)
    return GaussianApproximation(approx.mean, approx.cov, info)
