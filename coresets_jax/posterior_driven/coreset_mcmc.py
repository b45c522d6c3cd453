"""Coreset MCMC (Chen & Campbell, AISTATS 2024), with the learning-rate-free Hot DoG step (Chen, Huggins &
Campbell, arXiv 2410.18973) as the default optimiser.

The papers' full texts are not in /work/shared/papers; algorithm references below follow their published
descriptions, and no equation numbers are claimed.

1. Subsample M rows with probability proportional to the data weights u (uniform for a plain dataset),
   without replacement, and give each the weight sum(u) / M (Chen & Campbell, Algorithm 1).
2. Start K >= 2 chains of any registered kernel ("mala" default, "nuts", "hmc", "rwmh") at the Laplace fit
   of pi_{w_0} (`common.coreset_start`; pi_hat itself with `hot_start=False`) and warm their tuning up for
   `num_warmup` steps against pi_{w_0}, with the weights held at w_0 (the "hot start": the chains reach pi_w
   before the first gradient is taken, so early gradients are not biased by the initialisation; see below).
3. Each of `num_iters` iterations (Chen & Campbell, Algorithm 1): step every chain once against the current pi_w
   (`inference.step_chains`, which refreshes the cached density because w moved); estimate the full-data
   log-likelihood T(theta_k) = sum_n u_n L_n(theta_k) at each chain state from an S-point data subsample
   drawn with probabilities u_n / sum(u) (by default with the first-order control variate of
   `common.full_data_estimator`, our addition); estimate the KL gradient (the Coreset MCMC gradient
   estimate)

       g_m = -Cov_k( L_m(theta_k), T(theta_k) - sum_m' w_m' L_m'(theta_k) )

   with the sample covariance over the K chains (`kl_gradient_from_target`); update w with the optimiser and
   clip at 0. A step costs O(K (M + S) D): the chains see only the M coreset rows and the gradient only the
   S subsampled rows. The subsample is drawn by inverse-CDF sampling against a cumulative sum of u computed
   once; the control variate's gradient sum is one O(N D) pass, also made once.
4. The returned weights are the mean of the iterates over the last `average_tail` fraction of the
   iterations (Polyak-Ruppert averaging, our addition). The chains then take `num_draws` more steps with
   those weights fixed. These K x T draws are MCMC samples of the returned coreset's posterior, so no
   separate sampling run is needed: `coreset.info["samples"]` has shape (K, T, D).

Hot DoG (the default, `optimizer="hot_dog"`). The paper's text available to us (abstract and summaries)
describes it as DoG, "distance over gradients" (Ivgi, Hinder & Carmon, ICML 2023), made coordinate-wise and
"hot-started". This file implements that description; it is our derivation, not a transcription of the
paper's algorithm:

    r_{t,m} = max( r (1 + |w_{0,m}|),  max_{t' <= t} |w_{t',m} - w_{0,m}| )     (DoG's r_eps, per coordinate)
    v_{t,m} = sum_{t' <= t} g_{t',m}^2
    w_{t+1,m} = max( w_{t,m} - r_{t,m} / sqrt(v_{t,m}) g_{t,m},  0 )

with r = 0.001 as in the paper's Figure 1. The learning rate is then the distance travelled so far over the
root of the summed squared gradients, which grows geometrically while the weights move consistently and
shrinks once the gradient changes sign (noise). The "hot start" is our fixed-length warm-up at w_0 (step 2),
not the paper's adaptive stationarity test. We chose this over `optax.contrib.dog` (one global scalar step,
which moves the small and the large weights equally) and Prodigy (Adam with an estimated distance; not
compared here). `optimizer="adam"` with `learning_rate` gives the original Coreset MCMC with ADAM.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from .. import progress as _progress
from ..core import Model, log_likelihoods, take_data, weighted_log_density
from ..inference.driver import init_chains, step_chains
from .common import (check_count, check_kernel, check_positive, coreset_start, full_data_estimator,
                     initial_coreset, start_chains)

__all__ = ["HotDoGState", "coreset_mcmc", "hot_dog", "kl_gradient", "kl_gradient_from_target"]

Array = jax.Array
OPTIMIZERS = ("hot_dog", "adam")


# --------------------------------------------------------------------------------------------------------
# The estimator and the optimiser, each a small pure function.


def kl_gradient(coreset_lls: Array, subsample_lls: Array, weights: Array, subsample_weights: Array) -> Array:
    """The Coreset MCMC estimate of grad_w KL(pi_w || pi) (Chen & Campbell, Algorithm 1).

    Args:
      coreset_lls: (K, M) L_m(theta_k) at the K chain states.
      subsample_lls: (K, S) L_{n_s}(theta_k) on a data subsample drawn with probabilities u_n / sum(u).
      weights: (M,) the current weights w.
      subsample_weights: (S,) sum(u) / S each, so that sum_s (sum(u)/S) L_{n_s} is unbiased for
        sum_n u_n L_n (or u itself when the "subsample" is the whole data set).

    Returns:
      (M,) g_m = -(1/(K-1)) sum_k (L_km - mean_k L_km)(r_k - mean_k r_k), with the residual
      r_k = sum_s subsample_weights_s L_ks - w.L_k.
      With independent exact draws theta_k ~ pi_w and the subsample independent of them, its expectation is
      the exact gradient -Cov_{pi_w}(L_m, sum_n u_n L_n - sum_m' w_m' L_m').
    """
    return kl_gradient_from_target(coreset_lls, subsample_lls @ subsample_weights, weights)


def kl_gradient_from_target(coreset_lls: Array, target: Array, weights: Array) -> Array:
    """`kl_gradient` given the (K,) full-data log-likelihood estimates T(theta_k) directly (any estimate
    unbiased up to an offset shared by the K chains, e.g. `common.full_data_estimator`'s)."""
    masked = jnp.where(weights > 0, weights, 0.0)
    core = jnp.where(weights > 0, coreset_lls, 0.0) @ masked
    residual = target - core
    centred = coreset_lls - jnp.mean(coreset_lls, axis=0)
    k = coreset_lls.shape[0]
    return -(centred.T @ (residual - jnp.mean(residual))) / (k - 1)


class HotDoGState(NamedTuple):
    """initial: w_0 (distances are measured from it); distance: r_t per coordinate; sum_sq: v_t."""

    initial: Array
    distance: Array
    sum_sq: Array


def hot_dog(r: float = 1e-3) -> optax.GradientTransformation:
    """Coordinate-wise distance-over-gradients step (module docstring; DoG: Ivgi, Hinder & Carmon 2023).

    `update(grads, state, params)` needs the params (the distance is measured from w_0).
    """

    def init(params):
        return HotDoGState(params, r * (1.0 + jnp.abs(params)), jnp.zeros_like(params))

    def update(grads, state, params):
        distance = jnp.maximum(state.distance, jnp.abs(params - state.initial))
        sum_sq = state.sum_sq + jnp.square(grads)
        rate = jnp.where(sum_sq > 0, distance / jnp.sqrt(jnp.where(sum_sq > 0, sum_sq, 1.0)), 0.0)
        return -rate * grads, HotDoGState(state.initial, distance, sum_sq)

    return optax.GradientTransformation(init, update)


# --------------------------------------------------------------------------------------------------------
# The construction.


class CoresetMCMCState(NamedTuple):
    """weights: w; opt_state: the optimiser's; chains: the K kernel states; weight_sum: the running sum of
    the iterates in the averaging tail."""

    weights: Array
    opt_state: Any
    chains: Any
    weight_sum: Array


def coreset_mcmc(model: Model, size: int, kernel: str = "mala", num_chains: int = 4, num_iters: int = 1000,
                 num_warmup: int = 200, num_draws: int = 100, subsample: int = 100, optimizer: str = "hot_dog",
                 learning_rate: float = 0.1, r: float = 1e-3, control_variate: bool = True,
                 average_tail: float = 0.5, hot_start: bool = True):
    """Coreset MCMC of M = `size` uniformly subsampled points as a pure posterior-driven core.

    Args:
      model: the model.
      size: M.
      kernel: a registered kernel of `cj.inference.kernels` ("mala", "nuts", "hmc", "rwmh").
      num_chains: K >= 2 (the gradient is a covariance over chains).
      num_iters: weight updates (one chain step each).
      num_warmup: warm-up steps of the kernel tuning at w_0 before the first update (the hot start).
      num_draws: T, steps with the final weights fixed; returned as `info["samples"]` (K, T, D).
      subsample: S, data rows per gradient estimate.
      optimizer: "hot_dog" (learning-rate-free, default) or "adam" (with `learning_rate`).
      learning_rate: Adam's learning rate (unused by Hot DoG).
      r: Hot DoG's initial relative distance (0.001 in the paper).
      control_variate: estimate the full-data log-likelihood with the first-order control variate around
        pi_hat's mean (`common` module docstring): one O(N D) gradient pass, then subsample noise ~ 1/S
        instead of N/S. Off: the papers' plain subsample estimate.
      average_tail: the returned weights are the mean of the iterates over this last fraction of the
        iterations (Polyak-Ruppert; our addition): a learning-rate-free step decays only like
        1/sqrt(sum g^2), so the last iterate keeps the gradient noise of its last steps. 0: the last iterate.
      hot_start: start the chains at the Laplace approximation of pi_{w_0} (Newton on the M rows from
        pi_hat's mean) rather than at pi_hat (`common.coreset_start`).

    Returns:
      `solve(key, data, data_weights, start) -> (indices, weights, info)`; `info` holds `samples` (K, T, D),
      `acceptance_rate` (K,) over the T final draws, `initial_weights` (M,) and `final_iterate` (M,).
    """
    settings = check_kernel(kernel)
    check_count(num_chains, "num_chains", 2)
    for name, value in (("num_iters", num_iters), ("num_draws", num_draws), ("subsample", subsample)):
        check_count(value, name)
    check_count(num_warmup, "num_warmup", 0)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer: unknown value {optimizer!r}; expected one of {list(OPTIMIZERS)}")
    learning_rate = check_positive(learning_rate, "learning_rate")
    r = check_positive(r, "r")
    for name, value in (("control_variate", control_variate), ("hot_start", hot_start)):
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be True or False, got {value!r}")
    if isinstance(average_tail, bool) or not isinstance(average_tail, (int, float)) or not 0 <= average_tail < 1:
        raise ValueError(f"average_tail: must be a number in [0, 1), got {average_tail!r}")
    num_averaged = max(int(round(average_tail * num_iters)), 1)
    opt = hot_dog(r) if optimizer == "hot_dog" else optax.adam(learning_rate)

    def solve(key, data, data_weights, start):
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        k_core, k_chains, k_loop, k_draws = jax.random.split(key, 4)
        indices, w0 = initial_coreset(k_core, data_weights, size, dtype)
        rows = take_data(data, indices)
        live = w0 > 0
        estimate = full_data_estimator(model, data, data_weights, subsample, start.mean, dtype, control_variate)
        lls = jax.vmap(lambda th, d: log_likelihoods(model, th, d), in_axes=(0, None))

        chain_start = coreset_start(model, rows, w0, start) if hot_start else start
        chains, tuning = start_chains(k_chains, kernel, weighted_log_density(model, rows, w0), chain_start,
                                      num_chains, num_warmup, settings)

        def iteration(state, xs):
            key, t = xs
            k_step, k_sub = jax.random.split(key)
            chains, _ = step_chains(k_step, kernel, weighted_log_density(model, rows, state.weights),
                                    state.chains, tuning, settings)
            thetas = chains.position
            grad = kl_gradient_from_target(lls(thetas, rows).astype(dtype), estimate(k_sub, thetas),
                                           state.weights)
            grad = jnp.where(live & jnp.isfinite(grad), grad, 0.0)
            updates, opt_state = opt.update(grad, state.opt_state, state.weights)
            weights = jnp.where(live, jnp.maximum(state.weights + updates, 0.0), 0.0)
            in_tail = t >= num_iters - num_averaged
            return CoresetMCMCState(weights, opt_state, chains,
                                    state.weight_sum + jnp.where(in_tail, weights, 0.0)), None

        init = CoresetMCMCState(w0, opt.init(w0), chains, jnp.zeros_like(w0))
        state, _ = _progress.scan(iteration, init, (jax.random.split(k_loop, num_iters), jnp.arange(num_iters)),
                                  desc="coreset MCMC (iterations)")
        weights = state.weight_sum / num_averaged

        final_density = weighted_log_density(model, rows, weights)

        def draw(chains, key):
            chains, info = step_chains(key, kernel, final_density, chains, tuning, settings, refresh=False)
            return chains, (chains.position, info.acceptance_rate)

        chains = init_chains(kernel, final_density, state.chains.position, tuning, settings)
        _, (samples, acc) = _progress.scan(draw, chains, jax.random.split(k_draws, num_draws),
                                           desc="coreset MCMC (draws)")
        info = {"samples": jnp.swapaxes(samples, 0, 1), "acceptance_rate": jnp.mean(acc, axis=0),
                "initial_weights": w0, "final_iterate": state.weights}
        return indices, weights, info

    return solve
