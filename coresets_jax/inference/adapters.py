"""The adaptation rules of warm-up, as `Adapter`s (init, tuning, update) that `inference.warmup` runs in one
scan: Stan's schedule of fast and slow windows, its window adaptation for NUTS/HMC (BlackJAX's dual averaging
and Welford mass-matrix pieces), and the windowed Robbins–Monro scale and covariance adaptation of the
Metropolis kernels (MALA, RWMH); the module docstring of `inference.warmup` gives the equations."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.mass_matrix import mass_matrix_adaptation
from blackjax.adaptation.step_size import dual_averaging_adaptation

__all__ = ["AdaptState", "Adapter", "metropolis_adapter", "metropolis_schedule", "schedule", "window_adapter"]

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
    """Warm-up state: (log step size, steps since the last window's end, whether no window has ended yet),
    the current Cholesky factor, and the Welford sums of the open window."""

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


def metropolis_schedule(num_warmup: int) -> tuple[np.ndarray, np.ndarray]:
    """`run_warmup`'s schedule: Stan's, with a final buffer of at least 50 steps and 20% of the warm-up."""
    return schedule(num_warmup, final_buffer=max(50, num_warmup // 5))


# The most a window's covariance estimate may stretch or shrink the proposal covariance in any direction.
MAX_WINDOW_CHANGE = 4.0


def _window_covariance(count, m2, chol, prior_steps):
    """The Cholesky factor of the proposal covariance after a slow window: the window's covariance S (shrunk
    towards its diagonal), pooled with the current C = L L^T weighted as `prior_steps` steps against the
    window's `count` (as an inverse-Wishart prior at C would be), then held within MAX_WINDOW_CHANGE of C in every direction (the eigenvalues
    of L^-1 S L^-T clipped). Positions of a chain still travelling from a far start stretch S along its path
    and collapse it across; so do the few, correlated positions of a random walk in many dimensions."""
    cov = _shrunk_cov(count, m2)
    current = chol @ chol.T
    if prior_steps is not None:
        cov = (count * cov + prior_steps * current) / (count + prior_steps)
    half = jax.scipy.linalg.solve_triangular(chol, cov, lower=True)
    relative = jax.scipy.linalg.solve_triangular(chol, half.T, lower=True)
    lam, q = jnp.linalg.eigh(0.5 * (relative + relative.T))
    lam = jnp.clip(lam, 1.0 / MAX_WINDOW_CHANGE, MAX_WINDOW_CHANGE)
    cov = chol @ ((q * lam) @ q.T) @ chol.T
    return jnp.linalg.cholesky(0.5 * (cov + cov.T))


def metropolis_adapter(target: float, initial_step_size, initial_chol: Array, reference_step_size,
                       adapt_step_size: bool = True, steps_per_draw: Optional[float] = None) -> Adapter:
    """The windowed adaptation of (step_size, chol) of the Metropolis kernels as an `Adapter` (its `update`
    takes the acceptance rate with NaN already replaced by 0).

    - The log scale follows Robbins–Monro towards `target` (Andrieu & Thoms 2008, §5), with gain 1 until the
      first window ends, then (t + 10)^-0.6 from each window's end, restarting at `reference_step_size`; the
      last iterate is used (a one-step acceptance probability is too noisy for dual averaging's average).
      Far from the posterior the right scale grows with the distance, so the constant first gain lets a
      chain started there reach the posterior in a few steps per halving of the distance.
    - At each window's end the covariance becomes `_window_covariance`; `steps_per_draw` (steps of the
      tuned kernel per independent draw) counts a window of n steps as n / steps_per_draw draws against
      the current covariance's D; None pools nothing.
    """
    d = initial_chol.shape[0]
    dtype = initial_chol.dtype
    prior_steps = None if steps_per_draw is None else d * steps_per_draw

    def da_init(step_size, first=False):
        return (jnp.log(step_size), jnp.zeros((), step_size.dtype), jnp.asarray(first))

    def da_update(da, acceptance_rate):
        log_h, t, first = da
        t = t + 1.0
        gain = jnp.where(first, 1.0, (t + 10.0) ** (-0.6))
        return (log_h + gain * (acceptance_rate - target), t, first)

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
            chol = _window_covariance(count, m2, ad.chol, prior_steps)
            ok = jnp.all(jnp.isfinite(chol))
            chol = jnp.where(ok, chol, ad.chol)
            restart = jnp.where(ok, reference_step_size, jnp.exp(da[0])) if adapt_step_size else jnp.exp(da[0])
            return AdaptState(da_init(restart.astype(dtype)), chol, jnp.zeros_like(count),
                              jnp.zeros_like(mean), jnp.zeros_like(m2))

        return jax.lax.cond(is_end, close_window, lambda _: AdaptState(da, ad.chol, count, mean, m2), None)

    init = AdaptState(da_init(jnp.asarray(initial_step_size, dtype), first=True), initial_chol,
                      jnp.zeros((), dtype), jnp.zeros(d, dtype), jnp.zeros((d, d), dtype))
    return Adapter(init, tuning, update)  # the last step's (step size, chol) is the final tuning
