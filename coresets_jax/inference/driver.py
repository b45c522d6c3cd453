"""Chains: warm up, then draw, for any registered kernel; and stepwise chains for constructions.

- `sample_fn(model, method, ...)` is the pure core of `cj.sample`: `run(key, rows, weights, init_positions,
  init_cov) -> (samples, SamplerStats)`. Warm-up and sampling for all chains are one traceable function;
  chains run under `vmap`, steps under `lax.scan`. Rows and weights are traced, so a new coreset of the
  same capacity reuses the compiled code, and the function vmaps over keys or coresets (batched trials).
- `init_chains` / `step_chains` let a construction keep K persistent chains and take one step at a time
  against a density that changes between steps (Coreset MCMC: the weights w move after every step). A
  BlackJAX state caches the log density (and gradient) at its position; `step_chains` re-evaluates them
  under the current density first, so the Metropolis ratio never mixes two targets.

The target is the coreset posterior log pi_w = sum_m w_m L_m + log pi_0 (HC §2), `core.weighted_log_density`,
evaluated on the gathered rows only, so a step costs O(M), not O(N).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..core import Model, weighted_log_density
from . import kernels as _kernels
from .kernels import Tuning
from .warmup import warmup

__all__ = ["PROGRESS_MIN_WORK", "SamplerStats", "init_chains", "sample_fn", "step_chains"]

Array = jax.Array

# Chains x steps x rows x D below which sampling shows no bar. A tick costs 0.5-1 ms (more on a loaded
# machine), and warm-up and sampling tick 20 times each: at 2^28 the cheapest kernel (RWMH, 0.7 s) lost
# 6.7%; at 2^29 it runs ~1.4 s, and NUTS ~10x longer (benchmarks/progress_overhead.py). Shorter runs need
# no bar.
PROGRESS_MIN_WORK = 1 << 29


class SamplerStats(NamedTuple):
    """Per-chain and per-draw diagnostics from `sample_fn`.

    acceptance_rate: (C,) mean acceptance probability over the kept draws' steps.
    num_divergent: (C,) divergent transitions during sampling (NUTS/HMC; 0 for MALA and RWMH).
    step_size: (C,) adapted step size (MALA and RWMH: the global proposal scale).
    warmup_acceptance_rate: (C,) mean acceptance during warm-up (NaN for NUTS/HMC: not recorded).
    num_integration_steps: (C,) mean gradient evaluations per transition (NUTS/HMC; 1 for MALA, 0 for RWMH).
    draw_acceptance: (C, S) acceptance probability of each kept draw's last step.
    draw_divergent: (C, S) whether any step since the previous kept draw diverged.
    """

    acceptance_rate: Array
    num_divergent: Array
    step_size: Array
    warmup_acceptance_rate: Array
    num_integration_steps: Array
    draw_acceptance: Array
    draw_divergent: Array


def _divergent(info) -> Array:
    return jnp.asarray(getattr(info, "is_divergent", False), bool)


def init_chains(method: str, logdensity_fn: Callable, positions: Array, tuning: Tuning, settings: dict):
    """States of K chains at `positions` (K, D); `tuning` may carry a leading K axis or be shared."""
    shared = jnp.ndim(tuning.step_size) == 0
    init = lambda x, t: _kernels.build(method, logdensity_fn, t, settings).init(x)
    return jax.vmap(init, in_axes=(0, None if shared else 0))(positions, tuning)


def step_chains(key: Array, method: str, logdensity_fn: Callable, states, tuning: Tuning, settings: dict,
                refresh: bool = True):
    """One transition of each of K chains targeting `logdensity_fn`; returns (states, infos).

    With `refresh`, each state's cached log density is first recomputed under `logdensity_fn` (one density
    and gradient evaluation), as needed when the target changed since the last step.
    """
    shared = jnp.ndim(tuning.step_size) == 0

    def one(k, state, t):
        algorithm = _kernels.build(method, logdensity_fn, t, settings)
        if refresh:
            state = algorithm.init(state.position)
        return algorithm.step(k, state)

    keys = jax.random.split(key, jax.tree_util.tree_leaves(states)[0].shape[0])
    return jax.vmap(one, in_axes=(0, 0, None if shared else 0))(keys, states, tuning)


def _chain(method: str, logdensity_fn: Callable, settings: dict, num_samples: int, num_warmup: int, thin: int,
           show_progress: bool = False):
    spec = _kernels.KERNELS[method]
    adapt = warmup(method, logdensity_fn, num_warmup, settings, show_progress)

    def chain(key, position, tuning0):
        k_warm, k_sample = jax.random.split(key)
        state, tuning, warm_acc = adapt(k_warm, position, tuning0)
        step = _kernels.build(method, logdensity_fn, tuning, settings).step

        def inner(carry, k):
            state, div, cost = carry
            state, info = step(k, state)
            return (state, div | _divergent(info), cost + spec.gradient_evals(info)), info.acceptance_rate

        def outer(state, k):
            carry = (state, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
            (state, div, cost), acc = jax.lax.scan(inner, carry, jax.random.split(k, thin))
            return state, (state.position, acc[-1], jnp.mean(acc), div, cost)

        scan = functools.partial(_progress.scan, desc="sampling") if show_progress else jax.lax.scan
        _, (draws, acc_last, acc_mean, div, cost) = scan(outer, state, jax.random.split(k_sample, num_samples))
        dtype = draws.dtype
        return draws, SamplerStats(
            jnp.mean(acc_mean), jnp.sum(div), jnp.asarray(tuning.step_size, dtype), warm_acc,
            (jnp.sum(cost) / (num_samples * thin)).astype(dtype), acc_last, div)

    return chain


def sample_fn(model: Model, method: str = "nuts", *, num_samples: int, num_warmup: int, num_chains: int = 1,
              thin: int = 1, show_progress: bool = False, **settings) -> Callable:
    """The jittable sampler of pi_w for fixed static settings (the pure core of `cj.sample`).

    Returns `run(key, rows, weights, init_positions, init_cov) -> (samples, stats)` where

      key: a PRNG key (typed or raw);
      rows: the data pytree of the M rows to weight (leading axis M), e.g. `cj.core.take_data(data, idx)`;
      weights: (M,) non-negative weights w_m (traced; rows with w_m = 0 contribute nothing), or None (ones);
      init_positions: (num_chains, D) starting points;
      init_cov: (D, D) a rough posterior covariance (e.g. a Laplace covariance, or the identity); NUTS/HMC
        start their diagonal inverse mass matrix at its diagonal, MALA/RWMH their preconditioner at it;
      samples: (num_chains, num_samples, D), after `num_warmup` adaptation steps and thinning by `thin`;
      stats: a `SamplerStats` of per-chain diagnostics.

    Settings are validated here, once (`kernels.check_settings`); `run` performs no validation and has no
    Python side effects, so it runs under `jax.jit` and `jax.vmap` (Sparse VI calls it inside its own loop).
    `show_progress` reports warm-up and sampling steps through `coresets_jax.progress` (`cj.sample` turns
    it on; it is read when `run` is traced, and only runs of at least PROGRESS_MIN_WORK chains x steps x
    rows x D show a bar).
    """
    settings = _kernels.check_settings(method, settings)
    for name, value, low in (("num_samples", num_samples, 1), ("num_warmup", num_warmup, 0),
                             ("num_chains", num_chains, 1), ("thin", thin, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")

    def run(key, rows: Any, weights, init_positions, init_cov):
        if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            key = jax.random.wrap_key_data(key)
        logdensity_fn = weighted_log_density(model, rows, weights)
        num_rows = jax.tree_util.tree_leaves(rows)[0].shape[0]
        work = init_positions.shape[0] * (num_warmup + thin * num_samples) * num_rows * init_positions.shape[1]
        chain = _chain(method, logdensity_fn, settings, num_samples, num_warmup, thin,
                       show_progress and _progress.is_enabled() and work >= PROGRESS_MIN_WORK)
        tuning0 = _kernels.initial_tuning(method, init_cov, settings)
        keys = jax.random.split(key, init_positions.shape[0])
        return jax.vmap(chain, in_axes=(0, 0, None))(keys, init_positions, tuning0)

    return run
