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
  and App. E; 0.234 for the random walk as in HC §7.3);
- the covariance C from the positions visited in a sequence of doubling "slow" windows (Welford
  accumulation), shrunk towards its own diagonal; at each window end the scale restarts from the
  optimal-scaling reference for the new covariance.

The schedule is computed in Python from the static `num_warmup`, so the whole warm-up is one `lax.scan`.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
from blackjax.adaptation.step_size import dual_averaging_adaptation

from .. import progress as _progress
from . import kernels as _kernels
from .kernels import Tuning

__all__ = ["AdaptState", "Adapter", "adapter_for", "burn_in", "metropolis_adapter", "metropolis_schedule",
           "run_warmup", "run_window_adaptation", "schedule", "warmup", "window_adapter"]

Array = jax.Array


def schedule(num_warmup: int, init_buffer: int = 75, final_buffer: int = 50,
             first_window: int = 25) -> tuple[np.ndarray, np.ndarray]:
    """Stan's warm-up schedule: (slow, window_end) boolean arrays of length `num_warmup`.

    A fast initial buffer (scale only), doubling slow windows (scale and covariance), a fast final buffer.
    Short warm-ups use 15% / 75% / 10% as Stan does.
    """
    slow = np.zeros(num_warmup, bool)
    end = np.zeros(num_warmup, bool)
    if num_warmup < 20:
        return slow, end
    if init_buffer + first_window + final_buffer > num_warmup:
        init_buffer = int(0.15 * num_warmup)
        final_buffer = int(0.1 * num_warmup)
        first_window = num_warmup - init_buffer - final_buffer
    start, size = init_buffer, first_window
    last = num_warmup - final_buffer
    while start < last:
        stop = start + size
        if stop + 2 * size > last:  # the next window would not fit: stretch this one to the end
            stop = last
        slow[start:stop] = True
        end[stop - 1] = True
        start, size = stop, 2 * size
    return slow, end


class AdaptState(NamedTuple):
    """Warm-up state: (log step size, step count), current Cholesky factor, Welford sums."""

    da: tuple
    chol: Array
    count: Array
    mean: Array
    m2: Array


def _shrunk_cov(count, m2):
    """Window covariance shrunk towards its diagonal (pseudo-count 5), so it is positive definite."""
    cov = m2 / jnp.maximum(count - 1, 1)
    diag = jnp.diag(jnp.diag(cov))
    cov = (count / (count + 5.0)) * cov + (5.0 / (count + 5.0)) * diag
    jitter = 1e-10 * jnp.maximum(jnp.trace(cov) / cov.shape[0], 1e-30)
    return cov + jitter * jnp.eye(cov.shape[0], dtype=cov.dtype)


def _scan(show_progress: bool):
    return (lambda body, init, xs: _progress.scan(body, init, xs, desc="warm-up")) if show_progress \
        else jax.lax.scan


class Adapter(NamedTuple):
    """A warm-up scheme as pieces that a scan body calls around one kernel step, so that warm-up and sampling
    can share one scan over all steps and one compiled kernel (`driver.sample_fn`):

        step_size, precond = tuning(adapt)              # the tuning of this step
        state, info = kernel_step(key, state, step_size, precond)
        adapt = update(adapt, position, acceptance_rate, is_slow, is_end)    # warm-up steps only
        adapt = finish(adapt)                           # after the last warm-up step, if not None

    After `finish`, `tuning(adapt)` is the final tuning, which sampling then uses unchanged. `init` is the
    state before the first step; `is_slow` and `is_end` come from `schedule`.
    """

    init: Any
    tuning: Callable
    update: Callable
    finish: Optional[Callable] = None

    def final(self, adapt) -> tuple:
        """The tuning after warm-up."""
        return self.tuning(adapt if self.finish is None else self.finish(adapt))


def window_adapter(target: float, initial_step_size, initial_inverse_mass: Array, dtype) -> Adapter:
    """Stan's window adaptation of (step size, diagonal inverse mass matrix) (`run_window_adaptation`)."""
    da_init, da_update, da_final = dual_averaging_adaptation(target)
    mm_init, mm_update, mm_final = mass_matrix_adaptation(is_diagonal_matrix=True)

    def tuning(adapt):
        da, mm = adapt
        return jnp.exp(da.log_step_size).astype(dtype), mm.inverse_mass_matrix

    def update(adapt, position, acceptance_rate, is_slow, is_end):
        da, mm = adapt
        rate = jnp.where(jnp.isfinite(acceptance_rate), acceptance_rate, 0.0)
        da = da_update(da, rate)
        mm = jax.lax.cond(is_slow, lambda m: mm_update(m, position), lambda m: m, mm)

        def close_window(args):
            da, mm = args
            return da_init(da_final(da)), mm_final(mm)

        return jax.lax.cond(is_end, close_window, lambda args: args, (da, mm))

    def finish(adapt):
        # sampling steps with the averaged step size, exp(log_step_size_avg) = da_final(da)
        da, mm = adapt
        return da._replace(log_step_size=da.log_step_size_avg), mm

    inverse_mass = jnp.asarray(initial_inverse_mass, dtype)
    init = (da_init(jnp.asarray(initial_step_size, dtype)), mm_init(inverse_mass.shape[0], inverse_mass))
    return Adapter(init, tuning, update, finish)


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
               show_progress: bool = False, adapt_step_size: bool = True):
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

    Returns:
      (final state, step_size, chol, mean acceptance rate over warm-up).
    """
    adapter = metropolis_adapter(target, initial_step_size, initial_chol, reference_step_size, adapt_step_size)
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


def metropolis_schedule(num_warmup: int) -> tuple[np.ndarray, np.ndarray]:
    """`run_warmup`'s schedule: Stan's, with a final buffer of at least 50 steps and 20% of the warm-up."""
    return schedule(num_warmup, final_buffer=max(50, num_warmup // 5))


def metropolis_adapter(target: float, initial_step_size, initial_chol: Array, reference_step_size,
                       adapt_step_size: bool = True) -> Adapter:
    """The adaptation of (step_size, chol) of `run_warmup` as an `Adapter` (its `update` takes the
    acceptance rate with NaN already replaced by 0)."""
    def da_init(step_size):
        return (jnp.log(step_size), jnp.zeros((), step_size.dtype))

    def da_update(da, acceptance_rate):
        # Robbins–Monro on log h with gain (t + 10)^(-0.6) (Andrieu & Thoms 2008, §5); the last iterate is
        # used. Dual averaging's average is biased here: a one-step acceptance probability is too noisy.
        log_h, t = da
        t = t + 1.0
        return (log_h + (t + 10.0) ** (-0.6) * (acceptance_rate - target), t)

    d = initial_chol.shape[0]
    dtype = initial_chol.dtype

    def tuning(ad: AdaptState):
        return jnp.exp(ad.da[0]).astype(dtype), ad.chol

    def update(ad: AdaptState, position, acc, is_slow, is_end):
        da = da_update(ad.da, acc) if adapt_step_size else ad.da
        # Welford accumulation of positions in slow windows.
        x = position.astype(dtype)
        count = ad.count + jnp.where(is_slow, 1.0, 0.0)
        delta = x - ad.mean
        mean = jnp.where(is_slow, ad.mean + delta / jnp.maximum(count, 1.0), ad.mean)
        m2 = jnp.where(is_slow, ad.m2 + jnp.outer(delta, x - mean), ad.m2)

        def close_window(_):
            chol = jnp.linalg.cholesky(_shrunk_cov(count, m2))
            ok = jnp.all(jnp.isfinite(chol))
            chol = jnp.where(ok, chol, ad.chol)
            restart = jnp.where(ok, reference_step_size, jnp.exp(da[0])) if adapt_step_size else jnp.exp(da[0])
            return AdaptState(da_init(restart.astype(dtype)), chol, jnp.zeros_like(count),
                              jnp.zeros_like(mean), jnp.zeros_like(m2))

        return jax.lax.cond(is_end, close_window, lambda _: AdaptState(da, ad.chol, count, mean, m2), None)

    init = AdaptState(da_init(jnp.asarray(initial_step_size, dtype)), initial_chol,
                      jnp.zeros((), dtype), jnp.zeros(d, dtype), jnp.zeros((d, d), dtype))
    return Adapter(init, tuning, update)  # the last step's (step size, chol) is the final tuning


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
    return (metropolis_adapter(target, tuning.step_size, tuning.precond, reference, spec.adapts_step_size),
            *metropolis_schedule(num_warmup))


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
                                         spec.adapts_step_size)
        return state, Tuning(h, chol), acc

    return run
