"""Warm-up: adapt a kernel's `Tuning` on the way to the target, separately from sampling.

`warmup(method, logdensity_fn, num_steps, settings)` returns a pure `run(key, position, tuning) -> (state,
tuning, acceptance)` for any registered kernel, so a construction (Coreset MCMC) or `cj.sample` can warm
chains up once and then step them itself.

- NUTS/HMC: Stan's window adaptation (dual averaging of the step size, diagonal inverse mass matrix from
  doubling windows), from BlackJAX's dual averaging and Welford mass-matrix pieces on the schedule below,
  started from the given diagonal inverse mass matrix and step size. The loop is ours rather than
  `blackjax.window_adaptation(...).run`, which is one opaque scan, so that warm-up reports progress.
- MALA and RWMH: the windowed scheme below.

The Metropolis kernels take a global scale `step_size` and a preconditioner given by the Cholesky factor `chol` of a
covariance C. Warm-up adapts them together, in Stan's windowed scheme:

- the log scale by a Robbins–Monro recursion towards a target acceptance rate (0.574 for MALA as in LR §4
  and App. E; 0.234 for the random walk as in HC §7.3), with a constant gain until the first window ends so
  that a chain started far away travels at the scale the distance calls for;
- the covariance C from the positions visited in a sequence of doubling "slow" windows (Welford
  accumulation), shrunk towards its own diagonal, pooled with the current C for a kernel that states its
  steps per draw (the random walk), and changed by at most a factor of 4 in any direction per window; at
  each window end the scale restarts from the optimal-scaling reference for the new covariance.

The schedule is computed in Python from the static `num_warmup`, so the whole warm-up is one `lax.scan`.
"""

from __future__ import annotations

from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import progress as _progress
from . import kernels as _kernels
from .kernels import Tuning
from .adapters import (AdaptState, Adapter, metropolis_adapter, metropolis_schedule, schedule,  # noqa: F401
                       window_adapter)

__all__ = ["AdaptState", "Adapter", "adapter_for", "burn_in", "metropolis_adapter", "metropolis_schedule",
           "run_warmup", "run_window_adaptation", "schedule", "warmup", "window_adapter"]

Array = jax.Array


def _scan(show_progress: bool):
    return (lambda body, init, xs: _progress.scan(body, init, xs, desc="warm-up")) if show_progress \
        else jax.lax.scan


def run_window_adaptation(step: Callable, state, key: Array, num_warmup: int, target: float,
                          initial_step_size, initial_inverse_mass: Array, show_progress: bool = False):
    """Stan's window adaptation of (step size, diagonal inverse mass matrix) over `num_warmup` steps.

    `step(key, state, step_size, inverse_mass) -> (state, info)` with `info.acceptance_rate`. Stan's
    schedule (`schedule`: a fast buffer of 75 steps, doubling slow windows from 25, a final buffer of 50);
    dual averaging of log h throughout (Hoffman & Gelman 2014, Algorithm 5: gamma = 0.05, t0 = 10,
    kappa = 0.75); the positions of each slow window give the inverse mass matrix at its end (Welford
    variances shrunk towards 1e-3 with pseudo-count 5, as Stan does), and dual averaging restarts from
    the current step size. Returns (state, averaged step size, inverse mass matrix).
    """
    adapter = window_adapter(target, initial_step_size, initial_inverse_mass, state.position.dtype)
    slow, end = schedule(num_warmup)

    def body(carry, xs):
        state, adapt = carry
        k, is_slow, is_end = xs
        state, info = step(k, state, *adapter.tuning(adapt))
        return (state, adapter.update(adapt, state.position, info.acceptance_rate, is_slow, is_end)), None

    (state, adapt), _ = _scan(show_progress)(
        body, (state, adapter.init), (jax.random.split(key, num_warmup), jnp.asarray(slow), jnp.asarray(end)))
    return (state, *adapter.final(adapt))


def run_warmup(step: Callable, state, position_of: Callable, key: Array, num_warmup: int,
               target: float, initial_step_size, initial_chol: Array, reference_step_size: float,
               show_progress: bool = False, adapt_step_size: bool = True,
               steps_per_draw: Optional[float] = None):
    """Adapt (step_size, chol) over `num_warmup` steps of `step(key, state, step_size, chol)`.

    Args:
      step: kernel `(key, state, step_size, chol) -> (state, info)`; `info.acceptance_rate` is used.
      state: initial kernel state; `position_of(state)` gives its (D,) position.
      target: target acceptance rate.
      initial_step_size: starting scale (may be traced).
      initial_chol: starting (D, D) Cholesky factor of the preconditioner (may be traced).
      reference_step_size: scale the dual averaging restarts from after a new covariance estimate
        (2.38 / sqrt(D) for the random walk, about 1.65 D^(-1/6) for MALA; Roberts & Rosenthal 2001).
      adapt_step_size: False keeps the scale at `initial_step_size` and adapts only the covariance (slice
        sampling, whose interval search sizes every move itself).
      steps_per_draw: the kernel's steps per independent draw, which pools each window's covariance with
        the current one (`adapters.metropolis_adapter`); None pools nothing.

    Returns:
      (final state, step_size, chol, mean acceptance rate over warm-up).
    """
    adapter = metropolis_adapter(target, initial_step_size, initial_chol, reference_step_size, adapt_step_size,
                                 steps_per_draw)
    slow, end = metropolis_schedule(num_warmup)

    def body(carry, xs):
        state, adapt = carry
        k, is_slow, is_end = xs
        state, info = step(k, state, *adapter.tuning(adapt))
        acc = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0)
        return (state, adapter.update(adapt, position_of(state), acc, is_slow, is_end)), acc

    if num_warmup == 0:
        dtype = initial_chol.dtype
        return state, jnp.asarray(initial_step_size, dtype), initial_chol, jnp.asarray(jnp.nan, dtype)
    keys = jax.random.split(key, num_warmup)
    (state, adapt), acc = _scan(show_progress)(body, (state, adapter.init),
                                               (keys, jnp.asarray(slow), jnp.asarray(end)))
    return (state, *adapter.final(adapt), jnp.mean(acc))


def burn_in(step: Callable, state, key: Array, num_steps: int, show_progress: bool = False):
    """`num_steps` transitions with nothing adapted; returns (state, mean acceptance)."""

    def body(state, k):
        state, info = step(k, state)
        rate = getattr(info, "acceptance_rate", jnp.ones((), state.position.dtype))
        return state, jnp.where(jnp.isfinite(rate), rate, 0.0)

    state, acc = _scan(show_progress)(body, state, jax.random.split(key, num_steps))
    return state, jnp.mean(acc)


def adapter_for(method: str, settings: dict, tuning: Tuning, dim: int, num_warmup: int, dtype):
    """(adapter, slow, end): kernel `method`'s warm-up as an `Adapter` started from `tuning`, with its
    schedule (boolean arrays of length `num_warmup`); the adapter is None for a kernel with nothing to adapt
    (a plain burn-in). `warmup` runs the same schemes in a scan of their own."""
    spec = _kernels.KERNELS[method]
    target = float(settings.get("target_accept", 0.0))
    if spec.precond == "none":
        return None, np.zeros(num_warmup, bool), np.zeros(num_warmup, bool)
    if spec.precond == "diagonal":
        return (window_adapter(target, tuning.step_size, tuning.precond, dtype), *schedule(num_warmup))
    reference = spec.reference_step_size(dim) if spec.reference_step_size is not None else tuning.step_size
    return (metropolis_adapter(target, tuning.step_size, tuning.precond, reference, spec.adapts_step_size,
                               _steps_per_draw(spec, dim)), *metropolis_schedule(num_warmup))


def _steps_per_draw(spec, dim: int) -> Optional[float]:
    return None if spec.steps_per_draw is None else float(spec.steps_per_draw(dim))


def warmup(method: str, logdensity_fn: Callable, num_steps: int, settings: dict,
           show_progress: bool = False) -> Callable:
    """`run(key, position, tuning) -> (state, tuning, mean warm-up acceptance)` for kernel `method`.

    `settings` as from `kernels.check_settings`. With `num_steps = 0` the state is initialised at
    `position` and the tuning is returned unchanged. The acceptance is NaN for NUTS/HMC (their adaptation
    does not record it). `show_progress` reports the steps (`progress.scan`, read when `run` is traced).
    """
    spec = _kernels.KERNELS[method]
    target = float(settings.get("target_accept", 0.0))

    def run(key, position, tuning: Tuning):
        nan = jnp.asarray(jnp.nan, position.dtype)
        kernel = spec.build(logdensity_fn, tuning, settings)  # for its init only
        if num_steps == 0:
            return kernel.init(position), tuning, nan
        step_fn = lambda k, s, h, precond: spec.build(logdensity_fn, Tuning(h, precond), settings).step(k, s)
        if spec.precond == "none":  # nothing to adapt: a plain burn-in
            state, acc = burn_in(kernel.step, kernel.init(position), key, num_steps, show_progress)
            return state, tuning, acc
        if spec.precond == "diagonal":
            state, h, inverse_mass = run_window_adaptation(step_fn, kernel.init(position), key, num_steps,
                                                           target, tuning.step_size, tuning.precond,
                                                           show_progress)
            return state, Tuning(h.astype(position.dtype), inverse_mass.astype(position.dtype)), nan
        reference = (spec.reference_step_size(position.shape[0]) if spec.reference_step_size is not None
                     else tuning.step_size)
        state, h, chol, acc = run_warmup(step_fn, kernel.init(position), lambda s: s.position, key, num_steps,
                                         target, tuning.step_size, tuning.precond, reference, show_progress,
                                         spec.adapts_step_size, _steps_per_draw(spec, position.shape[0]))
        return state, Tuning(h, chol), acc

    return run
