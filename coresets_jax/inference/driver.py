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
import numpy as np

from .. import progress as _progress
from ..core import Model, weighted_log_density
from ..core import mesh as _mesh
from ..core.validate import check_int
from . import kernels as _kernels
from .kernels import Tuning
from .warmup import adapter_for as warmup_adapter_for
from .warmup import warmup
from ..compilation import full_precision_factory

__all__ = ["PROGRESS_MIN_WORK", "SamplerStats", "init_chains", "run_chain", "sample_fn", "step_chains"]

Array = jax.Array

# Chains x steps x rows x D below which sampling shows no bar. A tick costs 0.5-1 ms (more on a loaded
# machine), and warm-up and sampling tick 20 times each: at 2^28 the cheapest kernel (RWMH, 0.7 s) lost
# 6.7%; at 2^29 it runs ~1.4 s, and NUTS ~10x longer (benchmarks/investigations/progress_overhead.py). Shorter runs need
# no bar.
PROGRESS_MIN_WORK = 1 << 29
# Rows x D of one density evaluation up to which a CPU runs the chains one after another in the program
# (`lax.map`) rather than batched (`vmap`). Batching a NUTS chain batches its trajectory's while loops, which
# JAX traces to a fixed point and XLA compiles with a mask per chain, and each batched step waits for the
# longest trajectory. Measured with 2 chains (benchmarks/investigations/chain_batching.py): the first cj.sample
# took 0.6-1.0 s less on coresets (M = 100 to 1,000, D = 10) and on full data up to N = 20,000 (rows x D
# 2e5), and the compiled call was as fast or faster (0.80-0.92x on the full data). Larger evaluations are not
# measured and stay batched, as on accelerators, where the batch runs in parallel.
SEQUENTIAL_CHAINS_MAX_WORK = 1 << 18


def sequential_chains(num_rows: int, dim: int) -> bool:
    """Whether `sample_fn`'s chains run one after another (`lax.map`) instead of batched (`vmap`): on a CPU,
    for a density evaluation of at most SEQUENTIAL_CHAINS_MAX_WORK rows x D (and, in `sample_fn`, a run below
    PROGRESS_MIN_WORK, whose progress bar counts the batched steps)."""
    return jax.default_backend() == "cpu" and num_rows * dim <= SEQUENTIAL_CHAINS_MAX_WORK


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


def _phases(num_warmup: int, num_samples: int, thin: int, slow: np.ndarray, end: np.ndarray) -> dict:
    """Per-step facts of the single scan, computed in Python from the static counts: whether step i is a
    warm-up step, in a slow window, at a window's end, the last warm-up step; the draw slot it writes
    (warm-up steps write slot 0, which sampling overwrites later); whether it is a kept draw."""
    total = num_warmup + thin * num_samples
    i = np.arange(total)
    after = i - num_warmup
    pad = np.zeros(thin * num_samples, bool)
    return {"step": i.astype(np.int32), "warm": i < num_warmup, "slow": np.concatenate([slow, pad]),
            "end": np.concatenate([end, pad]), "last_warm": i == num_warmup - 1,
            "slot": (np.maximum(after, 0) // thin).astype(np.int32), "kept": (after >= 0) & (after % thin == thin - 1)}


def _tick_if(pred, count, total: int, desc: str, every: int) -> None:
    jax.lax.cond(pred, lambda c: _progress.tick(c, total, desc, every), lambda c: c, count)


def run_chain(method: str, logdensity_fn: Callable, settings: dict, num_samples: int, num_warmup: int, thin: int,
              show_progress: bool = False):
    """`chain(key, position, tuning0) -> (draws, SamplerStats)`: warm-up, then `num_samples` draws of `thin`
    steps each. NUTS and HMC (window adaptation) run both phases in one scan (`_one_scan_chain`); the
    Metropolis and Gibbs kernels in two (`_two_scan_chain`). Both give the same draws for the same key."""
    if _kernels.KERNELS[method].precond == "diagonal":
        return _one_scan_chain(method, logdensity_fn, settings, num_samples, num_warmup, thin, show_progress)
    return _two_scan_chain(method, logdensity_fn, settings, num_samples, num_warmup, thin, show_progress)


def _two_scan_chain(method: str, logdensity_fn: Callable, settings: dict, num_samples: int, num_warmup: int,
                    thin: int, show_progress: bool = False):
    """Warm-up (`warmup.warmup`), then a sampling scan over draws, each an inner scan of `thin` steps. The
    kernel is traced twice; for a cheap step (MALA, RWMH) that costs no more compilation than one scan does
    (measured), and it saves the one scan's per-step branch (10-20% of an RWMH step at M = 100, D = 31)."""
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


def _one_scan_chain(method: str, logdensity_fn: Callable, settings: dict, num_samples: int, num_warmup: int,
                    thin: int, show_progress: bool = False):
    """One chain's warm-up and sampling as ONE `lax.scan` over all num_warmup + thin * num_samples steps.

    Each step uses the warm-up's current tuning (`warmup.Adapter`), which after the last warm-up step is the
    final one, so the kernel is traced and compiled once (for NUTS at M = 100, D = 31: 30% less MLIR, about
    1 s less tracing and compilation). The keys, the adaptation and the recorded statistics are those of
    `_two_scan_chain`; sampling steps skip the adaptation with one branch.
    """
    spec = _kernels.KERNELS[method]

    def chain(key, position, tuning0):
        dtype = position.dtype
        adapter, slow, end = warmup_adapter_for(method, settings, tuning0, position.shape[0], num_warmup, dtype)
        phases = {k: jnp.asarray(v) for k, v in _phases(num_warmup, num_samples, thin, slow, end).items()}
        k_warm, k_sample = jax.random.split(key)
        draw_keys = jax.random.split(k_sample, num_samples)
        keys = jnp.concatenate([jax.random.split(k_warm, num_warmup),
                                jax.vmap(lambda k: jax.random.split(k, thin))(draw_keys).reshape(-1)])
        state = spec.build(logdensity_fn, tuning0, settings).init(position)

        def body(carry, xs):
            state, adapt, draws = carry
            k, ph = xs
            tuning = Tuning(*adapter.tuning(adapt)) if adapter is not None else tuning0
            state, info = spec.build(logdensity_fn, tuning, settings).step(k, state)
            rate = jnp.asarray(getattr(info, "acceptance_rate", jnp.ones((), dtype)))
            if adapter is not None:
                clean = jnp.where(jnp.isfinite(rate), rate, 0.0)

                def adapt_step(a):
                    a = adapter.update(a, state.position, clean, ph["slow"], ph["end"])
                    if adapter.finish is None:
                        return a
                    return jax.lax.cond(ph["last_warm"], adapter.finish, lambda a: a, a)

                # sampling steps skip the adaptation: their tuning stays the final one
                adapt = jax.lax.cond(ph["warm"], adapt_step, lambda a: a, adapt)
            # the draw slot (warm-up steps write slot 0, which sampling overwrites)
            draws = jax.lax.dynamic_update_index_in_dim(draws, state.position, ph["slot"], 0)
            if show_progress:
                _tick_if(ph["warm"], ph["step"] + 1, num_warmup, "warm-up", max(1, num_warmup // 20))
                _tick_if(ph["kept"], ph["slot"] + 1, num_samples, "sampling", max(1, num_samples // 20))
            return (state, adapt, draws), (rate, _divergent(info), spec.gradient_evals(info))

        carry = (state, () if adapter is None else adapter.init, jnp.zeros((num_samples,) + position.shape, dtype))
        (_, adapt, draws), (rate, div, cost) = jax.lax.scan(body, carry, (keys, phases))
        step_size = adapter.tuning(adapt)[0] if adapter is not None else tuning0.step_size
        # per-step records -> per-draw: (num_samples, thin) blocks after the warm-up
        warm_rate = rate[:num_warmup]
        rate, div, cost = (x[num_warmup:].reshape(num_samples, thin) for x in (rate, div, cost))
        if spec.precond == "diagonal" or num_warmup == 0:
            warm_acc = jnp.asarray(jnp.nan, dtype)  # window adaptation does not record it
        else:
            warm_acc = jnp.mean(jnp.where(jnp.isfinite(warm_rate), warm_rate, 0.0)).astype(dtype)
        draw_div = jnp.any(div, axis=1)
        return draws, SamplerStats(
            jnp.mean(jnp.mean(rate, axis=1)), jnp.sum(draw_div), jnp.asarray(step_size, dtype), warm_acc,
            (jnp.sum(cost) / (num_samples * thin)).astype(dtype), rate[:, -1], draw_div)

    return chain


@full_precision_factory
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
        check_int(value, name, low)

    def run(key, rows: Any, weights, init_positions, init_cov):
        if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            key = jax.random.wrap_key_data(key)
        logdensity_fn = weighted_log_density(model, rows, weights)
        num_rows = jax.tree_util.tree_leaves(rows)[0].shape[0]
        work = init_positions.shape[0] * (num_warmup + thin * num_samples) * num_rows * init_positions.shape[1]
        chain = run_chain(method, logdensity_fn, settings, num_samples, num_warmup, thin,
                          show_progress and _progress.is_enabled() and work >= PROGRESS_MIN_WORK)
        tuning0 = _kernels.initial_tuning(method, init_cov, settings)
        keys = jax.random.split(key, init_positions.shape[0])
        # runs long enough to show progress stay batched, so turning progress on or off never changes the draws
        if work < PROGRESS_MIN_WORK and sequential_chains(num_rows, init_positions.shape[1]):
            return jax.lax.map(lambda a: chain(a[0], a[1], tuning0), (keys, init_positions))
        return jax.vmap(chain, in_axes=(0, 0, None))(keys, init_positions, tuning0)

    return _mesh.with_auto_axes(run, 1)  # rows traced on Explicit axes
