"""Quasi-Newton coresets (Naik, Rousseau & Campbell, NeurIPS 2022), as their authors' code runs them
(`papers/quasi-newton-coresets.md` §2). Every default is the authors'; each departure is an option, listed
below, and `cj.refine(method="quasi_newton")` turns on the project's set of them.

1. **Points.** M rows drawn uniformly *with* replacement, duplicates merged into one point weighted
   N c_m / M by its count (`common.initial_coreset`, replace=True): there can be fewer than M points.
2. **Each evaluation draws fresh samples** of the current pi_w: S = 500 draws of one NUTS chain after
   1,000 warm-up steps of window adaptation (the authors run Stan this way), or exact draws where the model
   has a closed-form posterior (`model.posterior`; the authors' Gaussian and linear experiments). From C,
   the (M x S) log-likelihoods of the points centred over the draws, and rho, the centred residual
   T - w.L with T the exact full-data log-likelihood (every row, in chunks):

       g = -C rho / S  (Q4),   H = C C^T / S + tau I, tau = 0.01  (Q5),   d = H^{-1} g  (Q6).

   The direction and the gradient come from two separate fresh samples.
3. **First step: the authors' line search** (`an_opt`): a = 1, divided by 1.5 while every coordinate of
   w_0 - a d is negative; then up to 10 candidates w_0 - a d (clipped at 0), each tested on a fresh sample
   of its own posterior by the curvature ratio q = <g(w_c), d> / <g(w_0), d>: accept if 0 < q < 0.9, else
   divide a by 1.5. If no candidate passes, w_0 is returned (`info["fallback"]`): QNC is then uniform
   subsampling.
4. **Later steps**: unit steps w <- max(w - d, 0), at most 20, stopping early when the relative decrease of
   the gradient norm, (|g_{t-1}| - |g_t|) / |g_t|, is at most 0.1 (an increase also stops). If sum(w)
   falls to 0, the weights reset to w_0. The last iterate is returned, with the draws of its direction
   sample as `info["samples"]`.

Departures, each an option whose default is the authors' value (`REFINE_OPTIONS` sets the "ours" column):

| option | authors (default) | ours (`cj.refine`) | why |
|---|---|---|---|
| start | M uniform rows with replacement | the given coreset | refine a Hilbert coreset |
| kernel, num_chains, num_draws, num_warmup | NUTS, 1 chain x 500 draws after 1,000 warm-up steps ("exact" with `model.posterior`) | "slice" (preconditioned), 4 chains x 125 draws | |
| fresh_chains | True: every sample warms a chain up anew (from the last chain's position; the authors' Stan restarts at random) | False: persistent chains, burnt in to the hot-start test after each weight change (`max_burn`) | ~10x fewer kernel steps |
| separate_gradient_draws | True | False: one sample gives d and g | half the sampling |
| subsample, control_variate | every row, exact | max(4 M, 4096) rows above N = 20,000, with the control variate | the exact sum is O(N S) per evaluation |
| relative_tau | False: tau absolute | True: tau times the mean of diag Cov(L) | one default for every likelihood scale |
| chain_init | "standard_normal" | "laplace" | as Coreset MCMC's |
| keep_best | False: the last iterate | True: an iterate replaces the incumbent only if a paired comparison of their KLs (`compare.paired_kl_difference`) says so by `z` standard errors, confirmed on fresh draws against the start | the KL of noisy Newton iterates can rise |
| timed | False | True: refine's wall-clock budget (`budget.py`) | |

Cost per step: two samples of pi_w on M rows, S (M + N) likelihood evaluations (the exact T), and an
O(M^3) solve; with the subsample, no O(N) term after the control variate's one gradient pass.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..core import Model, weighted_log_density
from ..inference import kernels as _kernels
from ..inference.driver import run_chain, step_chains
from . import budget as _budget
from .common import (CHAIN_INITS, check_bool, check_count, check_kernel, check_positive, check_subsample,
                     default_subsample, kl_estimate, run_until_stationary, set_up)
from .compare import Z, better, paired_kl_difference

__all__ = ["REFINE_OPTIONS", "newton_direction", "quasi_newton"]

Array = jax.Array
SHRINK = 1.5        # the authors' line-search factor
CURVATURE = 0.9     # accept a first step whose curvature ratio q lies in (0, CURVATURE)

# The project's departures, as `cj.refine(method="quasi_newton")` runs them (module docstring's table).
REFINE_OPTIONS = {
    "kernel": "slice", "num_chains": 4, "num_draws": 125, "num_warmup": 0, "fresh_chains": False,
    "separate_gradient_draws": False, "subsample": 0, "control_variate": True, "relative_tau": True,
    "chain_init": "laplace", "keep_best": True, "timed": True,
}


def newton_direction(coreset_lls: Array, target: Array, weights: Array, tau, live=None,
                     relative_tau: bool = True) -> tuple[Array, Array]:
    """(H^{-1} g, g) from S samples of pi_w (Eqs. Q4-Q6 of quasi-newton-coresets.md).

    Args:
      coreset_lls: (S, M) L_m(theta_s).
      target: (S,) the (estimated) full-data log-likelihood sum_n u_n L_n(theta_s).
      weights: (M,) w.
      tau: the ridge: H = Cov(L) + tau I (the authors'), or with `relative_tau`
        H = Cov(L) + tau * mean(diag Cov(L)) I.
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
    scale = jnp.sum(jnp.diag(cov)) / jnp.maximum(jnp.sum(live), 1) if relative_tau else 1.0
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


def quasi_newton(model: Model, size: int, kernel: str = "auto", kernel_settings: tuple = (),
                 num_chains: int = 1, num_iters: int = 20, num_draws: int = 500, num_warmup: int = 1000,
                 fresh_chains: bool = True, separate_gradient_draws: bool = True, subsample: Any = None,
                 control_variate: bool = False, tau: float = 1e-2, relative_tau: bool = False,
                 num_tries: int = 10, early_stop: float = 0.1, chain_init: str = "standard_normal",
                 max_burn: int = 1000, keep_best: bool = False, z: float = Z, timed: bool = False):
    """Quasi-Newton coresets of M = `size` points as a pure posterior-driven core (module docstring).

    Args:
      model: the model.
      size: M (draws with replacement: the coreset can have fewer points).
      kernel: "auto" (the authors': "exact" where `model.posterior` exists, else "nuts"), "exact", or a
        registered kernel ("slice", "mala", ...).
      kernel_settings: the kernel's settings as (name, value) pairs (`cj.coreset` accepts a dict).
      num_chains, num_draws: S = num_chains x num_draws samples per evaluation (the authors' 1 x 500).
      num_iters: the most unit steps after the line-searched first step (the authors' 20; alias `num_steps`).
      num_warmup: each fresh chain's warm-up (the authors' 1,000; window adaptation for NUTS).
      fresh_chains: warm a chain up anew for every sample (the authors'); False: persistent chains.
      separate_gradient_draws: the gradient from a sample of its own (the authors'); False: shared.
      subsample: rows of the full-data estimate; None (the authors') every row; 0 (ours) every row up to
        N = 20,000, else max(4 M, 4096); or an int.
      control_variate: the first-order control variate for a subsampled full-data estimate (ours).
      tau, relative_tau: the ridge of H (module docstring).
      num_tries: the line search's most candidates (the authors' 10).
      early_stop: stop when the gradient norm's relative decrease is at most this (the authors' 0.1).
      chain_init: where chains start (`common.set_up`).
      max_burn: persistent chains' cap on the stationarity-tested burn-in after each weight change.
      keep_best, z: the paired choice of the incumbent (ours; module docstring).
      timed: look at `cj.refine`'s wall-clock budget between steps (`budget.py`).

    Returns:
      `solve(key, data, start, data_weights, initial=None) -> (indices, weights, info)`; `info` holds
      `samples` (K, num_draws, D) of the returned weights' posterior, `steps`, `fallback`, `first_step`,
      `line_search_tries`, `kl_estimates` (each round's own estimate), `initial_weights`, `final_iterate`;
      with `keep_best` also `best_step`, `kl_differences`, `confirmed`, `final_difference`.
    """
    exact = kernel == "exact" or (kernel == "auto" and model.posterior is not None)
    if kernel == "auto":
        kernel = "exact" if exact else "nuts"
    if exact:
        if model.posterior is None:
            raise ValueError("kernel: 'exact' needs a model with a closed-form posterior (model.posterior)")
        if kernel_settings:
            raise ValueError("kernel_settings: 'exact' draws take no settings")
        settings = {}
    else:
        settings = check_kernel(kernel, kernel_settings)
    check_count(num_chains, "num_chains", 1)
    for name, value in (("num_iters", num_iters), ("num_draws", num_draws), ("num_tries", num_tries)):
        check_count(value, name)
    for name, value in (("max_burn", max_burn), ("num_warmup", num_warmup)):
        check_count(value, name, 0)
    check_subsample(subsample)
    if num_chains * num_draws < 2:
        raise ValueError("num_draws: num_chains * num_draws must be at least 2 (H and g are sample covariances)")
    if chain_init not in CHAIN_INITS:
        raise ValueError(f"chain_init: unknown value {chain_init!r}; expected one of {list(CHAIN_INITS)}")
    tau = check_positive(tau, "tau")
    early_stop = check_positive(early_stop, "early_stop")
    z = check_positive(z, "z")
    fresh_chains, separate_gradient_draws, control_variate, relative_tau, keep_best, timed = (
        check_bool(v, n) for v, n in ((fresh_chains, "fresh_chains"),
                                      (separate_gradient_draws, "separate_gradient_draws"),
                                      (control_variate, "control_variate"), (relative_tau, "relative_tau"),
                                      (keep_best, "keep_best"), (timed, "timed")))
    chain_kernel = "slice" if exact else kernel  # exact draws need no chains; set_up still makes cheap ones

    def solve(key, data, start, data_weights, initial=None):
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        if timed:  # the budget's clock starts before any work (compilation is not counted)
            data_weights = data_weights + _budget.start_clock().astype(data_weights.dtype)
        k_core, k_chains, k_first, k_search, k_loop, k_last = jax.random.split(key, 6)
        chain_settings = check_kernel(chain_kernel, ()) if exact else settings
        indices, w0, live, rows, estimate, lls, chains, tuning = set_up(
            (k_core, k_chains), model, data, data_weights, start, initial, size=size,
            rows_per_estimate=default_subsample(subsample, size, data_weights.shape[0]),
            control_variate=control_variate, chain_init=chain_init, kernel=chain_kernel, num_chains=num_chains,
            num_warmup=0 if fresh_chains else num_warmup, settings=chain_settings, dtype=dtype, replace=True)
        d = start.mean.shape[0]

        def draw(key, chains, weights):
            """(chains, (num_draws, K, D) draws) of pi_w: exact, fresh chains, or persistent chains."""
            density = weighted_log_density(model, rows, weights)
            if exact:
                mean, cov = model.posterior(rows, jnp.where(live, weights, 0.0))
                chol = jnp.linalg.cholesky(cov.astype(dtype))
                z = jax.random.normal(key, (num_draws, num_chains, d), dtype)
                return chains, (mean.astype(dtype) + z @ chol.T)
            if fresh_chains:
                chain = run_chain(kernel, density, settings, num_draws, num_warmup, 1)
                tuning0 = _kernels.initial_tuning(kernel, tuning_cov, settings)
                draws, _ = jax.vmap(chain, in_axes=(0, 0, None))(jax.random.split(key, num_chains),
                                                                  chains.position, tuning0)
                positions = draws[:, -1]
                chains = chains._replace(position=positions, logdensity=jax.vmap(density)(positions))
                return chains, jnp.swapaxes(draws, 0, 1).astype(dtype)
            k_burn, k_draw = jax.random.split(key)
            chains = chains._replace(logdensity=jax.vmap(density)(chains.position))  # the target moved
            chains, _, _, _ = run_until_stationary(k_burn, kernel, density, chains, tuning, settings, max_burn, d)

            def one(chains, k):
                chains, _ = step_chains(k, kernel, density, chains, tuning, settings, refresh=False)
                return chains, chains.position

            return jax.lax.scan(one, chains, jax.random.split(k_draw, num_draws))

        tuning_cov = jnp.eye(d, dtype=dtype) if chain_init == "standard_normal" else start.cov.astype(dtype)

        def summarise(key, chains, kept, weights) -> Sampled:
            flat = kept.reshape(-1, d)
            core = lls(flat)
            target = estimate(key, flat).astype(dtype)
            direction, grad = newton_direction(core, target, weights, tau, live, relative_tau)
            return Sampled(chains, kept, core, target, grad, direction, kl_estimate(core, target, weights),
                           jnp.asarray(0))

        def sample(key, chains, weights) -> Sampled:
            """A round at `weights`: the direction's draws, and (separate_gradient_draws) the gradient from
            draws of its own."""
            k_dir, k_sub, k_grad, k_sub2 = jax.random.split(key, 4)
            chains, kept = draw(k_dir, chains, weights)
            out = summarise(k_sub, chains, kept, weights)
            if separate_gradient_draws:
                chains, kept2 = draw(k_grad, chains, weights)
                out = out._replace(chains=chains, grad=summarise(k_sub2, chains, kept2, weights).grad)
            return out

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

        # ---- later unit steps with the authors' early stop
        def step_cond(s):
            out_of_time = _budget.expired(s.step, every=1) if timed else jnp.asarray(False)
            return (~s.done) & (s.step <= num_iters) & ~out_of_time

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
            step = s.step + 1
            if keep_best:
                wins, delta = challenge(s.best_weights, s.best_sampled, weights, sampled)
            else:
                wins, delta = jnp.asarray(True), jnp.asarray(jnp.nan, dtype)
            return StepState(weights, sampled, norm, step, stop, jnp.where(wins, weights, s.best_weights),
                             choose(wins, sampled, s.best_sampled), jnp.where(wins, step, s.best_step),
                             s.kls.at[step].set(sampled.kl), s.diffs.at[step].set(delta), key)

        kls = jnp.full(num_iters + 2, jnp.nan, dtype).at[0].set(first.kl)
        diffs = jnp.full(num_iters + 2, jnp.nan, dtype).at[0].set(0.0)
        if keep_best:
            wins, delta = challenge(w0, first, search.weights, search.sampled)
            wins = wins & ~fallback
        else:
            wins, delta = ~fallback, jnp.asarray(jnp.nan, dtype)
        state = StepState(search.weights, search.sampled, jnp.linalg.norm(search.sampled.grad), jnp.asarray(1),
                          fallback, jnp.where(wins, search.weights, w0), choose(wins, search.sampled, first),
                          jnp.where(wins, 1, 0), kls.at[1].set(jnp.where(fallback, jnp.nan, search.sampled.kl)),
                          diffs.at[1].set(jnp.where(fallback, jnp.nan, delta)), k_loop)
        state = _progress.while_loop(step_cond, step_body, state, desc="quasi-Newton (steps)", every=1,
                                     total=num_iters + 1)

        info = {"steps": state.step, "fallback": fallback, "first_step": search.a,
                "start_samples": jnp.swapaxes(first.draws, 0, 1),
                "line_search_tries": search.tries, "kl_estimates": state.kls, "start_kl_estimate": first.kl,
                "initial_weights": w0, "final_iterate": state.weights}
        if not keep_best:  # the authors' answer: the last iterate, and its direction sample's draws
            weights = jnp.where(jnp.sum(state.weights) > 0, state.weights, w0)
            info.update(samples=jnp.swapaxes(state.sampled.draws, 0, 1), kl_estimate=state.sampled.kl)
            return indices, jnp.where(live, weights, 0.0), info

        # ---- ours: confirm the incumbent on fresh rounds of it and of the start (no draw reused)
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
        info.update(samples=jnp.swapaxes(final.draws, 0, 1), best_step=jnp.where(confirmed, state.best_step, 0),
                    chosen_step=state.best_step, confirmed=confirmed, final_difference=jnp.stack([delta, se]),
                    kl_differences=state.diffs, best_kl_estimate=state.best_sampled.kl, kl_estimate=final.kl)
        return indices, weights, info

    return solve
