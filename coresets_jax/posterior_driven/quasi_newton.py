"""Quasi-Newton coresets (Naik, Rousseau & Campbell, NeurIPS 2022, "Fast Bayesian coresets via subsampling
and quasi-Newton refinement", Algorithm 1; the full text is not in /work/shared/papers, so no equation
numbers are claimed).

1. Subsample M rows with probability proportional to the data weights u (uniform for a plain dataset),
   without replacement, each weighted sum(u) / M (N / M for a plain dataset).
2. `num_steps` quasi-Newton steps on KL(pi_w || pi). Step t:
   - sample pi_w: K chains of a registered kernel (default NUTS), warm-started from the previous step's
     final states (started at the Laplace fit of pi_{w_0} and tuned once by a warm-up at w_0), take
     `num_burn` steps after the weights moved, then `draws` steps whose states are kept: S = K * draws
     samples theta_s;
   - draw a data subsample (probabilities u_n / sum(u), size `subsample`) and estimate the full-data log
     likelihood t_s = sum_n u_n L_n(theta_s) at each sample: by default with the first-order control
     variate of `common.full_data_estimator` (our addition; noise ~ 1/S' instead of N/S'), or the paper's
     plain (sum(u) / S') sum_{s'} L_{n_s'}(theta_s) with `control_variate=False`;
   - form, with sample covariances over the S draws,
         G = Cov(L_m, L_m') + tau I,        g = -Cov(L_m, t - sum_m' w_m' L_m')      (g: the KL gradient)
     where tau = `tau` * mean_m Cov(L_m, L_m) (relative, so one default fits every likelihood scale);
   - update w <- max(w - alpha_t G^{-1} g, 0).
   The result is the mean of the last `average` iterates (Polyak-Ruppert): at full steps each iterate
   carries the subsample noise of its own g, which averaging reduces (our addition; `average=1` is off).
   A `subsample` >= N uses every row, exactly.
   G is the covariance of the coreset log-likelihoods, the Fisher information of the exponential family
   {pi_w}, so G^{-1} g is the natural-gradient (Gauss-Newton) direction; on a Gaussian problem where the
   full-data log-likelihood is a linear combination of the coreset ones, alpha = 1 reaches it in one step.

Step sizes. The first step's alpha_1 comes from a backtracking line search on the candidates 1, 1/2, ...,
2^-(num_backtracks-1): take the largest candidate whose new weights w' both (a) keep the importance weights
exp((w' - w).L_s) of the current samples usable, with effective sample size at least S/4, and (b) decrease
the importance-sampling estimate of KL(pi_w' || pi) - KL(pi_w || pi) =
E_w'[(w' - .)L - t] - E_w[(w - .)L - t] - log E_w[exp((w' - w).L)]; if none does, the smallest. Later steps
use alpha_t = min(step_size, 2^(t-1) alpha_1): the step doubles back towards the full quasi-Newton step once
the first, largest move is made.

Cost: each step is K (num_burn + draws) kernel steps on M rows, plus O(S (M + S') D) for the lls and an
O(M^3) solve; no O(N) term after the initial subsample and the control variate's one gradient pass.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..core import Model, log_likelihoods, take_data, weighted_log_density
from ..inference.driver import init_chains, step_chains
from .common import (check_count, check_kernel, check_positive, coreset_start, full_data_estimator,
                     initial_coreset, start_chains)

__all__ = ["kl_change", "newton_direction", "quasi_newton"]

Array = jax.Array


def newton_direction(coreset_lls: Array, target: Array, weights: Array, tau, live=None) -> tuple[Array, Array]:
    """(G^{-1} g, g) from S samples of pi_w (Naik et al., Algorithm 1).

    Args:
      coreset_lls: (S, M) L_m(theta_s).
      target: (S,) the (estimated) full-data log-likelihood sum_n u_n L_n(theta_s).
      weights: (M,) w.
      tau: relative regularisation: G = Cov(L) + tau * mean(diag Cov(L)) I.
      live: (M,) bool, the slots that may move (default: all); the others (padding) have rows of G equal
        to the identity and g = 0. A live slot at w = 0 can come back: the clip at 0 is not a mask.
    """
    live = jnp.ones(weights.shape, bool) if live is None else live
    lls = jnp.where(live, coreset_lls, 0.0)
    s = lls.shape[0]
    centred = lls - jnp.mean(lls, axis=0)
    residual = target - lls @ jnp.where(live, weights, 0.0)
    grad = -(centred.T @ (residual - jnp.mean(residual))) / (s - 1)
    cov = centred.T @ centred / (s - 1)
    scale = jnp.sum(jnp.diag(cov)) / jnp.maximum(jnp.sum(live), 1)
    both = live[:, None] & live[None, :]
    m = weights.shape[0]
    hessian = jnp.where(both, cov, 0.0) + jnp.diag(jnp.where(live, tau * scale, 1.0))
    hessian = hessian + jnp.eye(m, dtype=cov.dtype) * jnp.finfo(cov.dtype).tiny
    direction = jnp.linalg.solve(hessian, jnp.where(live, grad, 0.0))
    return jnp.where(live, direction, 0.0), grad


def kl_change(coreset_lls: Array, target: Array, weights: Array, new_weights: Array) -> tuple[Array, Array]:
    """Importance-sampling estimate of KL(pi_w' || pi) - KL(pi_w || pi) from samples of pi_w, and the ESS.

    With l_s = (w' - w).L_s and a = softmax(l): E_w'[f] ~ sum_s a_s f_s and Z_w'/Z_w ~ mean_s exp(l_s), so
    the change is sum_s a_s (w'.L_s - t_s) - mean_s (w.L_s - t_s) - logmeanexp(l) (the prior and log Z of
    the full-data posterior cancel).
    """
    lls = jnp.where((weights > 0) | (new_weights > 0), coreset_lls, 0.0)
    shift = lls @ (new_weights - weights)
    log_a = jax.nn.log_softmax(shift)
    a = jnp.exp(log_a)
    log_ratio = jax.scipy.special.logsumexp(shift) - jnp.log(shift.shape[0])
    change = a @ (lls @ new_weights - target) - jnp.mean(lls @ weights - target) - log_ratio
    return change, 1.0 / jnp.sum(a * a)


class QuasiNewtonState(NamedTuple):
    """weights: w; alpha: the current step size; chains: K kernel states; key: the PRNG stream."""

    weights: Array
    alpha: Array
    chains: Any
    key: Array


def quasi_newton(model: Model, size: int, kernel: str = "nuts", num_chains: int = 4, num_steps: int = 20,
                 draws: int = 25, num_burn: int = 10, num_warmup: int = 200, subsample: int = 1000,
                 tau: float = 1e-2, step_size: float = 1.0, num_backtracks: int = 8, average: int = 5,
                 control_variate: bool = True, hot_start: bool = True):
    """Quasi-Newton refinement of M = `size` uniformly subsampled points, as a pure posterior-driven core.

    Args:
      model: the model.
      size: M.
      kernel: the registered kernel sampling pi_w ("nuts" default, "hmc", "mala", "rwmh").
      num_chains: K chains (S = K * draws samples per step).
      num_steps: quasi-Newton steps (about 20 in Naik et al.).
      draws: kept steps per chain per quasi-Newton step.
      num_burn: discarded steps per chain after each weight update.
      num_warmup: warm-up steps of the kernel tuning at w_0.
      subsample: S', data rows (drawn with replacement) for the full-data log-likelihood estimate.
      tau: relative Tikhonov regularisation of G (module docstring).
      step_size: the largest alpha after the first step.
      num_backtracks: candidates 1, 1/2, ... of the first step's line search.
      average: the result is the mean of the last `average` iterates (1: the last iterate).
      control_variate: estimate the full-data log-likelihood with the first-order control variate around
        pi_hat's mean (`common` module docstring); off: the plain subsample estimate.
      hot_start: start the chains at the Laplace approximation of pi_{w_0} (`common.coreset_start`).

    Returns:
      `solve(key, data, data_weights, start) -> (indices, weights, info)`; `info` holds `samples` (K, draws,
      D): the last step's draws, which target pi at the second-to-last weights; `first_step` (alpha_1);
      `initial_weights`.
    """
    settings = check_kernel(kernel)
    check_count(num_chains, "num_chains", 1)
    for name, value in (("num_steps", num_steps), ("draws", draws), ("subsample", subsample),
                        ("num_backtracks", num_backtracks)):
        check_count(value, name)
    check_count(average, "average")
    if average > num_steps:
        raise ValueError(f"average: must be at most num_steps = {num_steps}, got {average}")
    check_count(num_burn, "num_burn", 0)
    check_count(num_warmup, "num_warmup", 0)
    if num_chains * draws < 2:
        raise ValueError("draws: num_chains * draws must be at least 2 (G and g are sample covariances)")
    for name, value in (("control_variate", control_variate), ("hot_start", hot_start)):
        if not isinstance(value, bool):
            raise ValueError(f"{name}: must be True or False, got {value!r}")
    tau = check_positive(tau, "tau")
    step_size = check_positive(step_size, "step_size")
    candidates = 0.5 ** jnp.arange(num_backtracks)

    def solve(key, data, data_weights, start):
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        k_core, k_chains, k_loop = jax.random.split(key, 3)
        indices, w0 = initial_coreset(k_core, data_weights, size, dtype)
        rows = take_data(data, indices)
        estimate = full_data_estimator(model, data, data_weights, subsample, start.mean, dtype, control_variate)
        lls = jax.vmap(lambda th, d: log_likelihoods(model, th, d), in_axes=(0, None))
        chain_start = coreset_start(model, rows, w0, start) if hot_start else start
        chains, tuning = start_chains(k_chains, kernel, weighted_log_density(model, rows, w0), chain_start,
                                      num_chains, num_warmup, settings)

        def sample(key, chains, weights):
            density = weighted_log_density(model, rows, weights)

            def one(chains, key):
                chains, _ = step_chains(key, kernel, density, chains, tuning, settings, refresh=False)
                return chains, chains.position

            chains = init_chains(kernel, density, chains.position, tuning, settings)
            chains, kept = jax.lax.scan(one, chains, jax.random.split(key, num_burn + draws))
            return chains, jnp.swapaxes(kept[num_burn:], 0, 1)  # (K, draws, D)

        def step(state, xs):
            key, t = xs
            k_sample, k_sub = jax.random.split(key)
            chains, thetas = sample(k_sample, state.chains, state.weights)
            flat = thetas.reshape(-1, thetas.shape[-1])
            core = lls(flat, rows).astype(dtype)
            target = estimate(k_sub, flat)
            direction, _ = newton_direction(core, target, state.weights, tau, w0 > 0)
            direction = jnp.where(jnp.isfinite(direction), direction, 0.0)

            def search(_):
                proposals = jnp.maximum(state.weights[None, :] - candidates[:, None] * direction[None, :], 0.0)
                change, ess = jax.vmap(lambda w: kl_change(core, target, state.weights, w))(proposals)
                ok = (ess >= flat.shape[0] / 4.0) & (change < 0) & jnp.isfinite(change)
                return jnp.where(jnp.any(ok), candidates[jnp.argmax(ok)], candidates[-1]).astype(dtype)

            alpha = jax.lax.cond(t == 0, search,
                                 lambda _: jnp.minimum(2.0 * state.alpha, step_size).astype(dtype), None)
            weights = jnp.where(w0 > 0, jnp.maximum(state.weights - alpha * direction, 0.0), 0.0)
            return QuasiNewtonState(weights, alpha, chains, state.key), (thetas, alpha, weights)

        init = QuasiNewtonState(w0, jnp.asarray(step_size, dtype), chains, k_loop)
        state, (thetas, alphas, path) = _progress.scan(step, init, (jax.random.split(k_loop, num_steps),
                                                                    jnp.arange(num_steps)),
                                                       desc="quasi-Newton (steps)", every=1)
        # Polyak-Ruppert averaging over the last `average` iterates: each full step re-solves with fresh
        # subsample noise in g, and averaging divides that noise's variance by `average`.
        weights = jnp.mean(path[num_steps - average:], axis=0)
        info = {"samples": thetas[-1], "first_step": alphas[0], "step_sizes": alphas, "initial_weights": w0,
                "final_iterate": state.weights}
        return indices, weights, info

    return solve
