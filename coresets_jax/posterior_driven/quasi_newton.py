"""Quasi-Newton coresets (Naik, Rousseau & Campbell, NeurIPS 2022), as their authors' code runs them
(`papers/quasi-newton-coresets.md` §2), made safe.

1. **Points.** M rows drawn with probabilities proportional to the data weights u, without replacement,
   each weighted sum(u) / M; or, with `support=` in `cj.coreset`, a Hilbert coreset's points and weights.
2. **Each step** draws S = `num_chains` x `num_draws` samples of the current pi_w: the chains (default the
   tuning-free slice kernel, persistent across steps) first run until their log potentials pass the
   hot-start stationarity test (hot-dog.md §2.1, capped at `max_burn`), so every step's samples are of the
   current weights. From them, with C the (M x S) centred coreset log-likelihoods and rho the centred
   residual T - w.L (T the full-data log-likelihood, exact up to N = 20,000, else subsampled with the
   control variate of `common.full_data_estimator`):

       g = -C rho / S  (Q4),   H = C C^T / S + tau * mean_m H_mm I  (Q5),   d = H^{-1} g  (Q6)

   (tau relative, so one default fits every likelihood scale; the authors' tau = 0.01 is absolute).
3. **First step: the authors' line search** (`an_opt`): a = 1, divided by 1.5 while every coordinate of
   w_0 - a d is negative; then up to `num_tries` candidates w_0 - a d (clipped at 0), each tested on a fresh
   sample of its own posterior by the curvature ratio q = <g(w_c), d> / <g(w_0), d>: accept if 0 < q < 0.9,
   else divide a by 1.5. If no candidate passes, the authors' fallback: return w_0 (`info["fallback"]`).
4. **Later steps**: unit steps w <- max(w - d, 0), stopping early when the relative decrease of the
   gradient norm, (|g_{t-1}| - |g_t|) / |g_t|, is at most `early_stop` (the authors' 0.1; an increase also
   stops). If sum(w) falls to 0, the weights reset to w_0.
5. **Never worse than the start** (ours): the start is the incumbent; each later iterate replaces it only
   if a paired comparison of the two (`compare.paired_kl_difference`: the difference of their KLs from
   both rounds' draws, common random numbers through the weights) says it is better by `z` standard
   errors. The incumbent is then re-sampled, and so is the start, and the same test on those fresh draws
   must pass again, or the start is returned (`info["confirmed"]`). `info` reports `best_step` (0 is the
   start), `kl_estimates` (each round's own estimate), `kl_differences` (each iterate against the
   incumbent of its time) and `start_kl_estimate`. Choosing the smallest of the independent estimates, as
   before, picked iterates by their noise (benchmarks/README.md).

Cost per step: the chains' steps on M rows, S (M + S') likelihood evaluations (S' rows for T), and an
O(M^3) solve; no O(N) term after the control variate's one gradient pass.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..core import Model, weighted_log_density
from ..inference.driver import step_chains
from .common import (check_bool, check_count, check_kernel, check_positive, default_subsample, kl_estimate,
                     run_until_stationary, set_up)
from .compare import Z, better, paired_kl_difference

__all__ = ["newton_direction", "quasi_newton"]

Array = jax.Array
SHRINK = 1.5        # the authors' line-search factor
CURVATURE = 0.9     # accept a first step whose curvature ratio q lies in (0, CURVATURE)


def newton_direction(coreset_lls: Array, target: Array, weights: Array, tau, live=None) -> tuple[Array, Array]:
    """(H^{-1} g, g) from S samples of pi_w (Eqs. Q4-Q6 of quasi-newton-coresets.md).

    Args:
      coreset_lls: (S, M) L_m(theta_s).
      target: (S,) the (estimated) full-data log-likelihood sum_n u_n L_n(theta_s).
      weights: (M,) w.
      tau: relative regularisation: H = Cov(L) + tau * mean(diag Cov(L)) I.
      live: (M,) bool, the slots that may move (default: all); the others (padding) have rows of H equal
        to the identity and g = 0. A live slot at w = 0 can come back: the clip at 0 is not a mask.
    """
    live = jnp.ones(weights.shape, bool) if live is None else live
    lls = jnp.where(live, coreset_lls, 0.0)
    s = lls.shape[0]
    centred = lls - jnp.mean(lls, axis=0)
    residual = target - lls @ jnp.where(live, weights, 0.0)
    grad = -(centred.T @ (residual - jnp.mean(residual))) / s
    cov = centred.T @ centred / s
    scale = jnp.sum(jnp.diag(cov)) / jnp.maximum(jnp.sum(live), 1)
    both = live[:, None] & live[None, :]
    m = weights.shape[0]
    hessian = jnp.where(both, cov, 0.0) + jnp.diag(jnp.where(live, tau * scale, 1.0))
    hessian = hessian + jnp.eye(m, dtype=cov.dtype) * jnp.finfo(cov.dtype).tiny
    direction = jax.scipy.linalg.solve(hessian, jnp.where(live, grad, 0.0), assume_a="pos")
    return jnp.where(live & jnp.isfinite(direction), direction, 0.0), grad


class Sampled(NamedTuple):
    """What one round of sampling pi_w gives: the (num_draws, K, D) draws, the (S, M) coreset
    log-likelihoods, the (S,) full-data estimates, the gradient, the Newton direction and the KL estimate,
    plus the chains to continue and the burn-in length."""

    chains: Any
    draws: Array
    lls: Array
    target: Array
    grad: Array
    direction: Array
    kl: Array
    burn: Array


class SearchState(NamedTuple):
    """The first step's line search: the step `a`, tries so far, whether one passed, and its samples."""

    a: Array
    tries: Array
    accepted: Array
    weights: Array
    sampled: Sampled
    key: Array


class StepState(NamedTuple):
    """weights: w_t; sampled: pi_{w_t}'s round; previous_norm: |g_{t-1}|; step: t; done: stopped early;
    best_*: the incumbent (its weights, its round, its step); kls: (num_iters + 1,) each round's own KL
    estimate; diffs: (num_iters + 1,) each iterate's paired KL difference to the incumbent of its time; key."""

    weights: Array
    sampled: Sampled
    previous_norm: Array
    step: Array
    done: Array
    best_weights: Array
    best_sampled: Sampled
    best_step: Array
    kls: Array
    diffs: Array
    key: Array


def quasi_newton(model: Model, size: int, kernel: str = "slice", kernel_settings: tuple = (),
                 num_chains: int = 4, num_iters: int = 20, num_draws: int = 125, max_burn: int = 1000,
                 num_warmup: int = 0, subsample: int = 0, tau: float = 1e-2, num_tries: int = 10,
                 early_stop: float = 0.1, control_variate: bool = True, hot_start: bool = True, z: float = Z):
    """Quasi-Newton refinement of M = `size` points as a pure posterior-driven core (module docstring).

    Args:
      model: the model.
      size: M.
      kernel: the registered kernel sampling pi_w ("slice" default). The option names are shared by every
        posterior-driven method (`posterior_driven/options.py`); `cj.sample` names its kernel `method=`, an
        argument of the public sampling function rather than a construction option.
      kernel_settings: the kernel's settings as (name, value) pairs (`cj.coreset` accepts a dict).
      num_chains: K chains; S = K * num_draws samples per step (the authors' S = 500).
      num_iters: the most quasi-Newton steps (the authors' 20; alias `num_steps`).
      num_draws: kept draws per chain per step.
      max_burn: the cap on the stationarity-tested burn-in after each weight change.
      num_warmup: tuning warm-up steps at w_0 (for kernels that adapt).
      subsample: S', rows of the full-data estimate; 0: every row up to N = 20,000, else max(4 M, 4096).
      tau: relative ridge of H (module docstring).
      num_tries: the line search's most candidates (the authors' 10).
      early_stop: stop when the gradient norm's relative decrease is at most this (the authors' 0.1).
      control_variate: the first-order control variate for a subsampled full-data estimate.
      hot_start: start the chains at the Laplace fit of pi_{w_0} (`common.coreset_start`).
      z: an iterate replaces the incumbent when its paired KL difference is below -z standard errors
        (step 5; `compare.better`).

    Returns:
      `solve(key, data, start, data_weights, initial=None) -> (indices, weights, info)`; `info` holds
      `samples` (K, num_draws, D) of the returned weights' posterior, `best_step`, `kl_estimates`,
      `kl_differences`, `start_kl_estimate`, `best_kl_estimate` (the chosen iterate's, from the round that
      chose it), `kl_estimate` (from a fresh round at the returned weights), `confirmed` (the fresh rounds'
      test passed; False: the start is returned), `final_difference` (that test's KL difference and
      standard error), `steps`, `fallback`, `first_step`, `initial_weights`.
    """
    settings = check_kernel(kernel, kernel_settings)
    check_count(num_chains, "num_chains", 1)
    for name, value in (("num_iters", num_iters), ("num_draws", num_draws), ("num_tries", num_tries)):
        check_count(value, name)
    for name, value in (("max_burn", max_burn), ("num_warmup", num_warmup), ("subsample", subsample)):
        check_count(value, name, 0)
    if num_chains * num_draws < 2:
        raise ValueError("num_draws: num_chains * num_draws must be at least 2 (H and g are sample covariances)")
    tau = check_positive(tau, "tau")
    early_stop = check_positive(early_stop, "early_stop")
    z = check_positive(z, "z")
    control_variate, hot_start = check_bool(control_variate, "control_variate"), check_bool(hot_start, "hot_start")

    def solve(key, data, start, data_weights, initial=None):
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        k_core, k_chains, k_first, k_search, k_loop, k_last = jax.random.split(key, 6)
        indices, w0, live, rows, estimate, lls, chains, tuning = set_up(
            (k_core, k_chains), model, data, data_weights, start, initial, size=size,
            rows_per_estimate=default_subsample(subsample, size, data_weights.shape[0]),
            control_variate=control_variate, hot_start=hot_start, kernel=kernel, num_chains=num_chains,
            num_warmup=num_warmup, settings=settings, dtype=dtype)
        d = start.mean.shape[0]

        def sample(key, chains, weights) -> Sampled:
            """Burn in to the stationarity test, then draw; the lls, T, g, d and the KL estimate."""
            k_burn, k_draw, k_sub = jax.random.split(key, 3)
            density = weighted_log_density(model, rows, weights)
            chains = chains._replace(logdensity=jax.vmap(density)(chains.position))  # the target moved
            chains, burn, _, _ = run_until_stationary(k_burn, kernel, density, chains, tuning, settings,
                                                      max_burn, d)

            def one(chains, k):
                chains, _ = step_chains(k, kernel, density, chains, tuning, settings, refresh=False)
                return chains, chains.position

            chains, kept = jax.lax.scan(one, chains, jax.random.split(k_draw, num_draws))
            flat = kept.reshape(-1, d)
            core = lls(flat)
            target = estimate(k_sub, flat).astype(dtype)
            direction, grad = newton_direction(core, target, weights, tau, live)
            return Sampled(chains, kept, core, target, grad, direction, kl_estimate(core, target, weights), burn)

        first = sample(k_first, chains, w0)

        # ---- the first step's line search (the authors' an_opt)
        slope0 = jnp.dot(first.grad, first.direction)
        # a = 1.5^-k for the smallest k such that some coordinate of w_0 - a d is non-negative.
        some = lambda a: jnp.any(live & (w0 - a * first.direction >= 0))  # noqa: E731
        a0 = jax.lax.while_loop(lambda a: (~some(a)) & (a > 1e-30), lambda a: a / SHRINK,
                                jnp.asarray(1.0, dtype))

        def search_cond(s):
            return (~s.accepted) & (s.tries < num_tries)

        def search_body(s):
            key, k_try = jax.random.split(s.key)
            candidate = jnp.where(live, jnp.maximum(w0 - s.a * first.direction, 0.0), 0.0)
            tried = sample(k_try, first.chains, candidate)
            q = jnp.dot(tried.grad, first.direction) / slope0
            ok = (q > 0) & (q < CURVATURE) & jnp.isfinite(q) & (jnp.sum(candidate) > 0)
            return SearchState(jnp.where(ok, s.a, s.a / SHRINK), s.tries + 1, ok,
                               jnp.where(ok, candidate, s.weights), jax.tree_util.tree_map(
                                   lambda new, old: jnp.where(ok, new, old), tried, s.sampled), key)

        search = jax.lax.while_loop(search_cond, search_body,
                                    SearchState(a0, jnp.asarray(0), jnp.asarray(False), w0, first, k_search))
        fallback = ~search.accepted

        # ---- later unit steps with the authors' early stop; the best iterate by the KL estimate
        def step_cond(s):
            return (~s.done) & (s.step < num_iters)

        def challenge(best_w, best, weights, sampled):
            """(replace the incumbent?, the paired KL difference) for a new round against the incumbent's."""
            comp = paired_kl_difference(best.lls, best.target, best_w, sampled.lls, sampled.target, weights,
                                        num_chains)
            return better(comp, best.kl, sampled.kl, z), comp.delta

        def choose(flag, new, old):
            return jax.tree_util.tree_map(lambda a, b: jnp.where(flag, a, b), new, old)

        def step_body(s):
            key, k_sample = jax.random.split(s.key)
            weights = jnp.where(live, jnp.maximum(s.weights - s.sampled.direction, 0.0), 0.0)
            weights = jnp.where(jnp.sum(weights) > 0, weights, w0)
            sampled = sample(k_sample, s.sampled.chains, weights)
            norm = jnp.linalg.norm(sampled.grad)
            stop = (s.previous_norm - norm) / jnp.maximum(norm, jnp.finfo(dtype).tiny) <= early_stop
            wins, delta = challenge(s.best_weights, s.best_sampled, weights, sampled)
            step = s.step + 1
            return StepState(weights, sampled, norm, step, stop, jnp.where(wins, weights, s.best_weights),
                             choose(wins, sampled, s.best_sampled), jnp.where(wins, step, s.best_step),
                             s.kls.at[step].set(sampled.kl), s.diffs.at[step].set(delta), key)

        kls = jnp.full(num_iters + 1, jnp.nan, dtype).at[0].set(first.kl)
        diffs = jnp.full(num_iters + 1, jnp.nan, dtype).at[0].set(0.0)
        wins, delta = challenge(w0, first, search.weights, search.sampled)
        wins = wins & ~fallback
        state = StepState(search.weights, search.sampled, jnp.linalg.norm(search.sampled.grad), jnp.asarray(1),
                          fallback, jnp.where(wins, search.weights, w0), choose(wins, search.sampled, first),
                          jnp.where(wins, 1, 0), kls.at[1].set(jnp.where(fallback, jnp.nan, search.sampled.kl)),
                          diffs.at[1].set(jnp.where(fallback, jnp.nan, delta)), k_loop)
        state = _progress.while_loop(step_cond, step_body, state, desc="quasi-Newton (steps)", every=1,
                                     total=num_iters)

        # ---- confirm on fresh rounds of the incumbent and the start (no draw is reused from the choice)
        best = jnp.where(live, state.best_weights, 0.0)
        final = sample(k_last, state.sampled.chains, best)

        def confirm(_):
            again = sample(jax.random.fold_in(k_last, 1), final.chains, w0)
            comp = paired_kl_difference(again.lls, again.target, w0, final.lls, final.target, best, num_chains)
            return better(comp, again.kl, final.kl, z), comp.delta, comp.se, again

        confirmed, delta, se, again = jax.lax.cond(
            state.best_step > 0, confirm,
            lambda _: (jnp.asarray(True), jnp.asarray(0.0, dtype), jnp.asarray(0.0, dtype), final), None)
        weights = jnp.where(confirmed, best, w0)
        final = choose(confirmed, final, again)
        info = {"samples": jnp.swapaxes(final.draws, 0, 1), "best_step": jnp.where(confirmed, state.best_step, 0),
                "chosen_step": state.best_step, "confirmed": confirmed, "final_difference": jnp.stack([delta, se]),
                "kl_estimates": state.kls, "kl_differences": state.diffs, "start_kl_estimate": first.kl,
                "best_kl_estimate": state.best_sampled.kl, "kl_estimate": final.kl, "steps": state.step,
                "fallback": fallback, "first_step": search.a, "line_search_tries": search.tries,
                "initial_weights": w0, "final_iterate": state.weights}
        return indices, weights, info

    return solve
