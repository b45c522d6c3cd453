"""Sparse variational inference (Campbell & Beronov, NeurIPS 2019; the baseline of IHT §5).

Works on the model, not on projected vectors: every step draws S samples from the current coreset posterior
pi_w ∝ exp(sum_m w_m L_m) pi_0 and uses the centred log-likelihoods g_n(theta_s) = L_n(theta_s) - mean_s.
  - Selection: the residual r_s = sum_n g_n(theta_s) - sum_m w_m g_m(theta_s); add the row outside the
    coreset with the largest positive correlation corr(g_n, r) under pi_w.
  - Weights: projected stochastic gradient on KL(pi_w || pi) over the support, whose gradient in w_m is
    -Cov_{pi_w}[L_m, r] (Campbell & Beronov Eq. 8), estimated from fresh samples each iteration; step
    gamma_t = step_scale / t, `num_iters` iterations (IHT §5: 1/t and 100).
Samples of pi_w come from the model's closed-form `posterior` when it has one (`kernel="exact"`, the
default then, as in IHT §5.1-5.2), else from a short chain per weight iteration, through the sampling
layer's pure core `coresets_jax.inference.sample_fn` (`kernel="nuts" | "hmc" | "mala" | "rwmh" | "slice"`,
or any registered kernel). The option names are those of every posterior-driven method (`options.py`); the
old `sampler`, `weight_iters` and `num_samples` are aliases of `kernel`, `num_iters` and `num_draws`.

With data weights u (a streaming reduction, or padding), the full-data target is sum_n u_n L_n: the
residual uses sum_n u_n g_n, and rows with u_n = 0 are never selected.

The 1/t step can overshoot until the weights, then pi_w's draws, are not finite (a negative binomial
regression at M = 20, benchmarks/investigations/sparse_vi_cost.py): the run then keeps its last finite iterate
and stops (`info["diverged_at"]`, the selection step; `cj.coreset` warns), rather than return NaN weights.

Each weight iteration evaluates all N log-likelihoods at S samples (the residual needs them), so Sparse VI
costs about num_iters * size * S * N likelihood evaluations plus the sampling: far slower than the
Hilbert solvers (IHT §5 reports ~10^4 times).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..core import Model, log_likelihoods, take_data
from ..inference import kernels as _kernels
from ..inference import sample_fn  # the sampling layer's pure core
from .common import check_kernel

__all__ = ["sparse_vi", "SparseVIState"]

Array = jax.Array


class SparseVIState(NamedTuple):
    """indices/weights: the support (slots [0, count) in use); key: the PRNG stream for pi_w's samples;
    diverged_at: the selection step (0-based) at which a weight step first gave non-finite weights, or -1."""

    indices: Array
    weights: Array
    count: Array
    key: Array
    diverged_at: Array


def _centred_lls(model: Model, thetas: Array, data: Any) -> Array:
    """(S, N) log-likelihoods minus their mean over the S samples."""
    lls = jax.vmap(lambda th: log_likelihoods(model, th, data))(thetas)
    return lls - jnp.mean(lls, axis=0, keepdims=True)


def _sampler(model: Model, kernel: str, settings: dict, num_samples: int, num_warmup: int):
    """(key, data, indices, weights, start) -> (S, D) samples of pi_w."""
    if kernel == "exact":
        def draw(key, data, indices, weights, start):
            n = jax.tree_util.tree_leaves(data)[0].shape[0]
            dense = jnp.zeros(n, weights.dtype).at[indices].add(weights)
            mean, c = model.posterior(data, dense)
            chol = jnp.linalg.cholesky(c)
            return mean + jax.random.normal(key, (num_samples, mean.shape[0]), mean.dtype) @ chol.T
        return draw

    run = sample_fn(model, kernel, num_samples=num_samples, num_warmup=num_warmup, num_chains=1, **settings)

    def draw(key, data, indices, weights, start):
        samples, _ = run(key, take_data(data, indices), weights, start.mean[None, :], start.cov)
        return samples[0]
    return draw


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    return value


def sparse_vi(model: Model, size: int, num_draws: int = 100, num_iters: int = 100, step_scale: float = 1.0,
              kernel: Optional[str] = None, kernel_settings: tuple = (), num_warmup: int = 100):
    """Sparse VI of capacity `size` (greedy: `size` selection steps) as a pure posterior-driven core.

    Args:
      model: the model; `model.posterior` enables exact samples of pi_w.
      size: M, the number of selection steps (and capacity).
      num_draws: S, draws of pi_w per step (alias `num_samples`).
      num_iters: weight iterations after each selection (100 in IHT §5; alias `weight_iters`).
      step_scale: the learning rate is step_scale / t (1/t in IHT §5). Measured: 1/t overshoots when
        Var_{pi_w}[L_n] is large, as in the first steps from the prior (Gaussian model, N = 100: total
        weight ~ 6N, KL worse than uniform); step_scale = 0.1 beat uniform there.
      kernel: "exact" (default when `model.posterior` exists) or a registered kernel for a short chain
        of `num_warmup` adaptation steps and `num_draws` draws (default "nuts"), started at pi_hat's mean
        and preconditioned by its covariance (alias `sampler`).
      kernel_settings: the kernel's settings as (name, value) pairs (`cj.coreset` accepts a dict).
      num_warmup: the chain's adaptation steps (unused with "exact").

    Returns:
      `solve(key, data, start, data_weights) -> (indices, weights, info)` (see `coresets_jax.registry`).
    """
    if kernel is None:
        kernel = "exact" if model.posterior is not None else "nuts"
    if kernel == "exact":
        if model.posterior is None:
            raise ValueError("kernel: 'exact' needs a model with a closed-form posterior")
        if kernel_settings:
            raise ValueError("kernel_settings: 'exact' draws take no settings")
        settings = {}
    elif kernel not in _kernels.KERNELS:
        raise ValueError(f"kernel: unknown value {kernel!r}; expected 'exact' or one of {sorted(_kernels.KERNELS)}")
    else:
        settings = check_kernel(kernel, kernel_settings)
    for name, value in (("num_draws", num_draws), ("num_iters", num_iters), ("num_warmup", num_warmup)):
        _check_count(value, name)
    if not isinstance(step_scale, (int, float)) or isinstance(step_scale, bool) or not step_scale > 0:
        raise ValueError(f"step_scale: must be a positive number, got {step_scale!r}")
    step_scale = float(step_scale)
    draw = _sampler(model, kernel, settings, num_draws, num_warmup)

    def solve(key, data, start, data_weights):
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        u = data_weights.astype(dtype)
        live = u > 0

        def residual(g, state):
            """(S,) r_s = sum_n u_n g_sn - sum_m w_m g_s,idx_m, and the (S, size) support columns."""
            cols = g[:, state.indices]
            return g @ u - cols @ state.weights, cols

        def weight_step(t, state, i):
            key, sub = jax.random.split(state.key)
            g = _centred_lls(model, draw(sub, data, state.indices, state.weights, start), data).astype(dtype)
            r, cols = residual(g, state)
            grad = -(cols.T @ r) / num_draws  # -Cov[L_m, r], Campbell & Beronov Eq. 8
            active = jnp.arange(size) < state.count
            w = jnp.where(active, jnp.maximum(state.weights - step_scale / (t + 1.0) * grad, 0.0), 0.0)
            # The 1/t step can overshoot until the weights, then pi_w's draws, are not finite: the run keeps
            # the last finite iterate and stops there (`cj.coreset` warns), rather than return NaN weights.
            ok = jnp.all(jnp.isfinite(w))
            return state._replace(weights=jnp.where(ok, w, state.weights), key=key,
                                  diverged_at=jnp.where(ok, state.diverged_at, i).astype(state.diverged_at.dtype))

        def outer(i, state):
            # after a divergence nothing runs: no chains on the last finite iterate's posterior
            return jax.lax.cond(state.diverged_at < 0, lambda s: _outer(i, s), lambda s: s, state)

        def _outer(i, state):
            key, sub = jax.random.split(state.key)
            g = _centred_lls(model, draw(sub, data, state.indices, state.weights, start), data).astype(dtype)
            r, _ = residual(g, state)
            corr = (g.T @ r) / (jnp.sqrt(jnp.sum(g * g, axis=0)) * jnp.linalg.norm(r) + jnp.finfo(dtype).tiny)
            in_support = jnp.zeros(n, bool).at[state.indices].set(jnp.arange(size) < state.count)
            f = jnp.argmax(jnp.where(in_support | ~live, -jnp.inf, corr))
            new = ~in_support[f] & live[f] & (corr[f] > 0)
            slot = jnp.minimum(state.count, size - 1)
            indices = jnp.where(new, state.indices.at[slot].set(f.astype(jnp.int32)), state.indices)
            state = SparseVIState(indices, state.weights, state.count + new.astype(state.count.dtype), key,
                                  state.diverged_at)
            # the weight steps stop at the first that diverges (the remaining iterations are skipped)
            return jax.lax.while_loop(lambda c: (c[0] < num_iters) & (c[1].diverged_at < 0),
                                      lambda c: (c[0] + 1, weight_step(c[0], c[1], i)), (0, state))[1]

        init = SparseVIState(jnp.zeros(size, jnp.int32), jnp.zeros(size, dtype), jnp.asarray(0, jnp.int32), key,
                             jnp.asarray(-1, jnp.int32))
        state, _ = _progress.scan(lambda state, i: (outer(i, state), None), init, jnp.arange(size),
                                  desc="sparse VI (points)")
        return state.indices, state.weights, {"num_selected": state.count, "diverged_at": state.diverged_at}

    return solve
