"""The pure cores of the posterior-driven constructions (`coreset_fn`) and their start (pi_hat's Gaussian
summary); where their points come from (`support=`) is `posterior_driven.support`'s."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from ..core import mesh as _mesh
from ..weighting import pihat as _pihat
from ..compilation import loop_jit_options
from .. import progress as _progress
from ..core import Coreset, Model, initial_theta
from ..core import checks as _checks
from ..core import validate as _validate
from ..core import compiled as _compiled_fns
from ..core.rows import unit_weights
from ..registry import Construction, Start, resolve
from .vectors import as_key, finish
from ..compilation import full_precision_factory

__all__ = ["compiled_coreset_fn", "coreset_fn", "default_start", "resolve_pi_hat", "start_from"]


def default_start(model: Model, data: Any, init: Any = None) -> Start:
    """The start of a method that needs no pi_hat (`Construction.uses_pi_hat` False): `init`, else the
    model's starting theta (`init_params(data)`, or zeros of `dim`), with identity covariance; no pass over
    the data."""
    theta = initial_theta(model, data) if init is None else jnp.asarray(init)
    if theta is None:
        raise ValueError("model: give the model `dim` or `init_params`, or pass init= (a starting theta), so "
                         "that its chains can start")
    theta = theta.astype(jnp.promote_types(theta.dtype, jnp.float32))
    return Start(theta, jnp.eye(theta.shape[0], dtype=theta.dtype))


@full_precision_factory
def coreset_fn(model: Model, method: Any, size: int, **options):
    """The pure core of a posterior-driven method:
    `(key, data, start=None, data_weights=None, initial=None) -> Coreset`.

    `start` is a `cj.Start(mean, cov)` (pi_hat's Gaussian summary; e.g. from `cj.laplace`), used to start
    and precondition chains; None: `default_start` (the model's zero theta, identity covariance), which is
    what `cj.coreset` uses for methods that need no pi_hat, so `cj.coreset_fn(model, m, M)(key, data)` and
    `cj.coreset(model, data, M, m, key=key)` give the same weights. `data_weights` (N,) weights the
    full-data target (default: ones). `initial` `(indices, weights)`, each (size,), is the starting coreset
    (default: the method's own, as in the papers); only its rows with weight > 0 are optimised. Jittable
    and vmappable over keys; validation happens here, once.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    construction = resolve(method, needs="posterior")
    size = _validate.check_positive_int(size, "size")
    core = construction.make(model, size, **dict(construction.check_options(options)))

    takes_initial = "initial" in inspect.signature(core).parameters

    def solve(key, data, start=None, data_weights=None, initial=None) -> Coreset:
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        if size > n:
            raise ValueError(f"size: must be at most N = {n}")
        if start is None:
            start = default_start(model, data)
        if jax.config.read("jax_enable_x64"):  # BlackJAX's NUTS needs a float64 state then (cj.sample)
            start = Start(*(jnp.asarray(a, jnp.promote_types(jnp.result_type(a), jnp.float64)) for a in start))
        if data_weights is None:
            data_weights = unit_weights(n, jnp.result_type(start.mean.dtype, jnp.float32))
        if initial is None:
            indices, weights, info = core(as_key(key), data, start, data_weights)
        elif not takes_initial:
            raise ValueError(f"initial: {construction.name} does not take a starting coreset")
        else:
            indices, weights, info = core(as_key(key), data, start, data_weights, initial)
        return finish(indices, weights, info, construction.name)

    return _mesh.with_auto_axes(solve, 1)  # data traced on Explicit axes


@functools.lru_cache(maxsize=64)
def _compiled_coreset_fn_for(model: Model, construction: Construction, size: int, options: tuple,
                             show_progress: bool):
    return _compiled_fns.jit(coreset_fn(model, construction, size, **dict(options)), **loop_jit_options())


def compiled_coreset_fn(model: Model, construction: Construction, size: int, options: tuple):
    """`jax.jit(coreset_fn(...))` with `compilation.LOOP_COMPILE`'s options, cached per (model, construction,
    size, options, progress switch) so that repeated calls (streaming reductions, the CLI's repeats) never
    recompile, and a change of the progress switch gets a program with or without its callbacks; `options`
    is `construction.check_options`'s sorted tuple."""
    return _compiled_coreset_fn_for(model, construction, size, options, _progress.is_enabled())


def start_from(approx: Any, key: jax.Array, num: int = 256) -> Start:
    """pi_hat's Gaussian summary: its mean and cov; for supplied samples, their moments; otherwise the moments
    of `num` of its draws. A 1e-6 ridge keeps a sample covariance positive definite."""
    if hasattr(approx, "mean") and hasattr(approx, "cov") and not callable(approx.cov):
        return Start(jnp.asarray(approx.mean), jnp.asarray(approx.cov))
    thetas = approx.thetas if isinstance(approx, _pihat.Samples) else approx.sample(key, num)
    d = thetas.shape[1]
    cov = jnp.cov(thetas, rowvar=False).reshape(d, d) if thetas.shape[0] > 1 else jnp.eye(d, dtype=thetas.dtype)
    return Start(jnp.mean(thetas, axis=0), cov + 1e-6 * jnp.eye(d, dtype=thetas.dtype))


def resolve_pi_hat(pi_hat: Any, model: Model, data: Any, key: jax.Array, init: Any = None,
                   checked_n: Optional[int] = None, then: Optional[Callable[[], Any]] = None):
    """pi_hat as an object with `.sample(key, num)`: None or "laplace" (a Laplace fit on `data`), "prior", an
    (S, D) array of samples, or such an object itself. The one place a pi_hat argument is read (`coreset`,
    `merged_coreset`, `stream_coreset`). `checked_n`: N, when the caller has checked model and data already
    (the Laplace fit then does not check them again). `then` is called exactly once: once a Laplace fit's
    program is lowered (`pihat.laplace_checked`), else before pi_hat is resolved."""
    if (pi_hat is None or (isinstance(pi_hat, str) and pi_hat == "laplace")) and checked_n is not None:
        return _pihat.laplace_checked(model, data, checked_n, key, init=init, then=then)
    if then is not None:
        then()
    if pi_hat is None or (isinstance(pi_hat, str) and pi_hat == "laplace"):
        return _pihat.laplace(model, data, key=key, init=init)
    if isinstance(pi_hat, str):
        if pi_hat == "prior":
            return _pihat.prior(model, data)
        raise ValueError(f"pi_hat: unknown value {pi_hat!r}; expected 'laplace', 'prior', an (S, D) array "
                         "of samples, or an object with .sample(key, num)")
    if hasattr(pi_hat, "sample"):
        return pi_hat
    _checks.check_theta(model, data, pi_hat, "pi_hat", ndim=2)
    return _pihat.samples(pi_hat)
