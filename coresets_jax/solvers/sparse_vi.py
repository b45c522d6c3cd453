"""Sparse variational inference (Campbell & Beronov, NeurIPS 2019; the baseline of IHT §5).

Works on the model, not on projected vectors: every step draws S samples from the current coreset posterior
pi_w ∝ exp(sum_m w_m L_m) pi_0 and uses the centred log-likelihoods g_n(theta_s) = L_n(theta_s) - mean_s.
  - Selection: the residual r_s = sum_n g_n(theta_s) - sum_m w_m g_m(theta_s); add the row outside the
    coreset with the largest positive correlation corr(g_n, r) under pi_w.
  - Weights: projected stochastic gradient on KL(pi_w || pi) over the support, whose gradient in w_m is
    -Cov_{pi_w}[L_m, r] (Campbell & Beronov Eq. 8), estimated from fresh samples each iteration; step
    gamma_t = step_scale / t, `weight_iters` iterations (IHT §5: 1/t and 100).
Samples of pi_w come from the model's closed-form `posterior` when it has one (`sampler="exact"`, the
default then, as in IHT §5.1-5.2), else from a short BlackJAX chain per weight iteration, through
`coresets_jax.inference.sample.sample_weighted_fn` (`sampler="nuts" | "hmc" | "mala" | "rwmh"`).

Each weight iteration evaluates all N log-likelihoods at S samples (the residual needs them), so Sparse VI
costs about weight_iters * size * S * N likelihood evaluations plus the sampling: far slower than the
Hilbert solvers (IHT §5 reports ~10^4 times).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core import Coreset, Model

__all__ = ["sparse_vi", "SparseVIState"]

Array = jax.Array
SAMPLERS = ("exact", "nuts", "hmc", "mala", "rwmh")


class SparseVIState(NamedTuple):
    """indices/weights: the support (slots [0, count) in use); key: the PRNG stream for pi_w's samples."""

    indices: Array
    weights: Array
    count: Array
    key: Array


def _centred_lls(model: Model, thetas: Array, data: Any) -> Array:
    """(S, N) log-likelihoods minus their mean over the S samples."""
    lls = jax.vmap(lambda th: jax.vmap(model.log_likelihood, in_axes=(None, 0))(th, data))(thetas)
    return lls - jnp.mean(lls, axis=0, keepdims=True)


def _sampler(model: Model, data: Any, sampler: str, num_samples: int, num_warmup: int, center: Array,
             cov: Array):
    """(key, indices, weights) -> (S, D) samples of pi_w."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    if sampler == "exact":
        def draw(key, indices, weights):
            dense = jnp.zeros(n, weights.dtype).at[indices].add(weights)
            mean, c = model.posterior(data, dense)
            chol = jnp.linalg.cholesky(c)
            return mean + jax.random.normal(key, (num_samples, mean.shape[0]), mean.dtype) @ chol.T
        return draw

    from ..inference.sample import sample_weighted_fn  # jittable weighted sampler (issue 4)

    run = sample_weighted_fn(model, sampler, num_samples=num_samples, num_warmup=num_warmup, num_chains=1)

    def draw(key, indices, weights):
        rows = jax.tree_util.tree_map(lambda a: a[indices], data)
        samples, _ = run(key, rows, weights, center[None, :], cov)
        return samples[0]
    return draw


def _build(model: Model, data: Any, size: int, num_samples: int, weight_iters: int, step_scale: float,
           sampler: str, num_warmup: int):

    def solve(data, key, center, cov):
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        draw = _sampler(model, data, sampler, num_samples, num_warmup, center, cov)
        dtype = jnp.result_type(center.dtype, jnp.float32)

        def residual(g, state):
            """(S,) r_s = sum_n g_sn - sum_m w_m g_s,idx_m, and the (S, size) support columns."""
            cols = g[:, state.indices]
            return jnp.sum(g, axis=1) - cols @ state.weights, cols

        def weight_step(t, state):
            key, sub = jax.random.split(state.key)
            g = _centred_lls(model, draw(sub, state.indices, state.weights), data).astype(dtype)
            r, cols = residual(g, state)
            grad = -(cols.T @ r) / num_samples  # -Cov[L_m, r]
            active = jnp.arange(size) < state.count
            w = jnp.where(active, jnp.maximum(state.weights - step_scale / (t + 1.0) * grad, 0.0), 0.0)
            return state._replace(weights=w, key=key)

        def outer(i, state):
            key, sub = jax.random.split(state.key)
            g = _centred_lls(model, draw(sub, state.indices, state.weights), data).astype(dtype)
            r, _ = residual(g, state)
            corr = (g.T @ r) / (jnp.sqrt(jnp.sum(g * g, axis=0)) * jnp.linalg.norm(r) + jnp.finfo(dtype).tiny)
            in_support = jnp.zeros(n, bool).at[state.indices].set(jnp.arange(size) < state.count)
            f = jnp.argmax(jnp.where(in_support, -jnp.inf, corr))
            new = ~in_support[f] & (corr[f] > 0)
            slot = jnp.minimum(state.count, size - 1)
            indices = jnp.where(new, state.indices.at[slot].set(f.astype(jnp.int32)), state.indices)
            state = SparseVIState(indices, state.weights, state.count + new.astype(state.count.dtype), key)
            return jax.lax.fori_loop(0, weight_iters, weight_step, state)

        init = SparseVIState(jnp.zeros(size, jnp.int32), jnp.zeros(size, dtype), jnp.asarray(0, jnp.int32), key)
        state = jax.lax.fori_loop(0, size, outer, init)
        return state.indices, state.weights, state.count

    return jax.jit(solve)


_CACHE: dict = {}


def sparse_vi(model: Model, data: Any, size: int, key: Array, *, pi_hat: Any = None, num_samples: int = 100,
              weight_iters: int = 100, step_scale: float = 1.0, sampler: Optional[str] = None,
              num_warmup: int = 100) -> Coreset:
    """Sparse VI coreset of capacity `size` (greedy: `size` selection steps). Called by `cj.coreset`.

    Args:
      model, data: the model and its data pytree; `model.posterior` enables exact samples of pi_w.
      size: M, the number of selection steps (and capacity).
      key: PRNG key.
      pi_hat: a Gaussian approximation with .mean/.cov (e.g. `cj.laplace`) to start and precondition the
        chains when sampling by MCMC; ignored by the exact sampler.
      num_samples: S, samples of pi_w per step.
      weight_iters: weight iterations after each selection (100 in IHT §5).
      step_scale: the learning rate is step_scale / t (1/t in IHT §5). Measured: 1/t overshoots when
        Var_{pi_w}[L_n] is large, as in the first steps from the prior (Gaussian model, N = 100: total
        weight ~ 6N, KL worse than uniform); step_scale = 0.1 beat uniform there.
      sampler: "exact" (default when `model.posterior` exists) or a `cj.sample` method for a short chain
        of `num_warmup` adaptation steps and `num_samples` draws (default "nuts").
    """
    from .. import _validate, pihat as _pihat

    key = _validate.check_key(key)
    if sampler is None:
        sampler = "exact" if model.posterior is not None else "nuts"
    _validate.check_choice(sampler, SAMPLERS, "sampler")
    if sampler == "exact" and model.posterior is None:
        raise ValueError("sampler: 'exact' needs a model with a closed-form posterior")
    for name, value in (("num_samples", num_samples), ("weight_iters", weight_iters), ("num_warmup", num_warmup)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    if not isinstance(step_scale, (int, float)) or isinstance(step_scale, bool) or not step_scale > 0:
        raise ValueError(f"step_scale: must be a positive number, got {step_scale!r}")
    if sampler == "exact":
        mean, _ = model.posterior(data, None)
        center, cov = jnp.zeros_like(mean), jnp.eye(mean.shape[0], dtype=mean.dtype)
    else:
        approx = pi_hat if hasattr(pi_hat, "cov") else _pihat.laplace(model, data, key=key)
        center, cov = approx.mean, approx.cov
    sig = (id(model), size, num_samples, weight_iters, float(step_scale), sampler, num_warmup)
    if sig not in _CACHE:
        _CACHE[sig] = (model, _build(model, data, size, num_samples, weight_iters, float(step_scale), sampler,
                                     num_warmup))
    indices, weights, count = _CACHE[sig][1](data, key, center, cov)
    if not bool(jnp.all(jnp.isfinite(weights))):
        raise FloatingPointError("sparse_vi produced non-finite weights; try a smaller step_scale")
    return Coreset(indices, weights, {"num_selected": count}, "sparse_vi")
