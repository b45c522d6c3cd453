"""Coreset MCMC (Chen & Campbell, AISTATS 2024) with the Hot DoG step and hot start (Chen, Huggins &
Campbell, 2024), as their authors run it (`papers/coreset-mcmc.md` §2, `papers/hot-dog.md` §2). Every
default is the authors'; each departure is an option, listed below, and `cj.refine` turns on the
project's set of them.

1. **Points.** M rows drawn without replacement with probabilities proportional to the data weights u
   (uniform for a plain dataset), each weighted sum(u) / M = N / M (coreset-mcmc.md §2.1 step 1); or a
   given starting coreset (`initial`, as `cj.refine` passes).
2. **Chains.** K = 2 chains of the hit-and-run slice sampler (random unit direction, initial width 10, at
   most 20 doublings and 1,024 shrinks, 3 passes per iteration; hot-dog.md §4.1), started from
   N(theta_0, I), the authors' N(0, I) (coreset-mcmc.md §5.7), theta_0 the model's zero or `init`.
3. **Hot start** (hot-dog.md §2.1). The chains run at w_0, recording their log potentials, until the
   stationarity statistic (H1, `optimizers.stationarity_statistic`) has median over chains <= 0.5,
   checked every 30 steps from step 3 D on, or until 10,000 steps. If the test never passes, the weights
   are never trained, as in the authors' code (hot-dog.md §5.5): the result is the uniform start, and
   `info["hot_start_converged"]` and `info["trained"]` are False (`train_after_cap=True` trains anyway).
4. **Training**, one weight update per chain step (coreset-mcmc.md §2.1 step 3): step every chain
   against the current pi_w; estimate the full-data log-likelihood T(theta_k) at each state from S = M
   rows, (N/S) sum_s L_{n_s}(theta_k) (hot-dog.md §2.2, `proj_n` = M); estimate the KL gradient
   g = -Cov_k(L(theta_k), T(theta_k) - w.L(theta_k)) over the K chains (Eq. C3,
   `kl_gradient_from_target`); take a Hot DoG step (Eqs. H2-H4, r = 0.001, `optimizers.hot_dog`) and clip
   at 0. The budget is the authors' T = 200,000 iterations, hot start included.
5. **An optional stopping rule** (ours; off by default): at checkpoints 500, 1,000, 2,000, ... training
   iterations, the returned iterate is compared with the one at the last checkpoint by the KL between
   their posteriors, (1/2) Var[(w_now - w_then).L] on the recent chain states (`stopping.checkpoint`, no
   full-data term), and training stops once that drift is at most `stop_tol` nats at `stop_checks`
   checkpoints in a row. benchmarks/coreset_mcmc_stop.py measured the published method's answer at every
   checkpoint of its 200,000 iterations: it still improves to the end (Gaussian location, M = 100: exact
   KL 14 at 8,000 iterations, 8.7 at 32,000, 4.8 at 200,000), and the last iterate wanders by 10-50 nats
   between checkpoints, so no rule stopped early without changing the answer; `stop_tol = 0` (the default)
   runs the authors' whole budget.
6. **Output.** The last iterate (the authors'), and `num_draws` further steps of the chains with those
   weights fixed: `info["samples"]`, shape (K, num_draws, D), MCMC draws of the returned coreset's
   posterior (the authors' post-training draws, coreset-mcmc.md §2.1 step 4).

Departures, each an option whose default is the authors' value (`cj.refine` sets the "ours" column;
`REFINE_OPTIONS`):

| option | authors (default) | ours (`cj.refine`) | why |
|---|---|---|---|
| start | M uniform rows, N/M each | the given coreset | refine a Hilbert coreset (e.g. OMP's) |
| kernel_settings | unit directions, width 10, 1,024 shrinks | directions from the start's covariance (`precondition`), width 3, 100 shrinks | one width fits every parameterisation: a posterior sd of 1e-3 and of 10 cost the same |
| chain_init | "standard_normal": N(theta_0, I) | "laplace": the Laplace fit of pi_{w_0} on the M rows | chains start at the coreset posterior's mode, whatever pi_hat was; O(M D^2), no full-data pass |
| subsample | None: S = M, the plain estimate | 0: max(2 M, 2048) rows | |
| control_variate | False | True: G.(theta - theta_0) + subsampled Taylor remainder (`common`) | the plain estimate's variance grows like N/S; the remainder's like 1/S (one O(N D) gradient pass) |
| optimizer | "hot_dog" (r = 0.001) | "newton": the window gradient preconditioned by the inverse Fisher matrix Cov(L) of recent states, in a trust region of `trust` nats (`natural.py`) | one noisy single-state gradient, rescaled coordinate-wise, made Hot DoG's distance term blow up on real data |
| num_iters | 200,000 (hot start included) | 20,000 | refine also has a time budget |
| train_after_cap | False: a hot start that never passes its test leaves w_0 untrained | True: train from the cap | refine's chains start at the coreset posterior's mode, and its certificate keeps the start if training did not help |
| stop_tol | 0: no early stop | 0, with the plateau test below | step 5 |
| iterate | "last" | "average": the mean of the iterates since the last checkpoint | the last iterate carries the gradient noise |
| plateau_z | 0 (off) | 1: stop when the paired KL estimate stopped falling (`stopping.plateau_check`) | needs the control variate's T |
| start_draws | False | True: draws at w_0 too (`info["start_samples"]`), for refine's certificate of the start | |
| timed | False | True: the loop looks at refine's wall-clock budget (`budget.py`) | |
| adapt_gain | kernels that adapt a step size (MALA, NUTS) keep adapting it as w moves | | the slice sampler adapts nothing |

Where the published method fails: Hot DoG's step grows with the distance each weight has travelled (Eq. H3),
so a gradient biased one way for a few hundred steps grows the weights geometrically. The gradient is
unbiased only when the chains are draws from the current pi_w, and slice-sampler chains appear to lag behind
a moving pi_w in 50 dimensions: on Bradley-Terry (50 players, M = 100) the weights summed to 10 N after 1,000
training iterations and to about 200 N after 30,000, while the same run with NUTS chains kept them below N
(benchmarks/investigations/hot_dog_weights.py). `cj.coreset` warns when the trained weights sum to more
than 10x the start's total.

Cost per iteration: K steps of the kernel on M rows, K (M + S) likelihood evaluations for the gradient,
O(K M) optimiser work. With the authors' settings nothing in the loop grows with N (tests check the
loop's jaxpr); the control variate and S = N are the only O(N) options.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from .. import progress as _progress
from ..core import Model, weighted_log_density
from ..core.arguments import check_float
from ..core import validate as _validate
from ..inference import kernels as _kernels
from ..inference.driver import step_chains
from . import budget as _budget
from .common import (CHAIN_INITS, check_bool, check_count, check_fraction, check_kernel, check_positive,
                     check_subsample, default_subsample, run_until_stationary, set_up)
from .draws import paired_draws, stack
from .gradient import kl_gradient, kl_gradient_from_target
from .natural import effective_dimension, empty_preconditioner, natural_step, push_history
from .optimizers import dog_cumulative, hot_dog
from .stopping import (Checkpoints, Plateau, checkpoint, init_checkpoints, init_plateau, num_checkpoints,
                       plateau_check, push_iterate)
from .stopping import iterate as returned_iterate

__all__ = ["PUBLISHED_SLICE", "REFINE_OPTIONS", "STOP_TOL", "coreset_mcmc", "kl_gradient", "kl_gradient_from_target"]

Array = jax.Array
OPTIMIZERS = ("hot_dog", "newton", "adam", "dog_cumulative")
ITERATES = ("last", "average")
HOT_START_EVERY = 30     # hot-dog.md §2.1: the test runs every 30 steps
HOT_START_THRESHOLD = 0.5
# The authors' hit-and-run slice sampler (hot-dog.md §4.1); the registry's "slice" defaults are ours.
PUBLISHED_SLICE = {"width": 10.0, "max_expansions": 20, "max_shrinkage": 1024, "passes": 3, "precondition": False}
STOP_TOL = 0.0           # off: the authors' whole budget (benchmarks/coreset_mcmc_stop.py; step 5)
STOPPED_BY = ("budget", "drift", "plateau", "time")

# The project's departures, as `cj.refine(method="coreset_mcmc")` runs them (module docstring's table).
REFINE_OPTIONS = {
    "kernel_settings": (("max_shrinkage", 100), ("precondition", True), ("width", 3.0)),
    "chain_init": "laplace", "subsample": 0, "control_variate": True, "optimizer": "newton",
    "num_iters": 20_000, "iterate": "average", "plateau_z": 1.0, "start_draws": True, "timed": True,
    "num_draws": 500, "train_after_cap": True,
}


class TrainState(NamedTuple):
    """weights: w; opt_state: the optimiser's; window: recent chain states' coreset log-likelihoods and
    full-data estimates (`natural.Preconditioner`: the stopping rules' window and the "newton" step's
    preconditioner); chains, tuning: the kernel's; checkpoints, plateau: the stopping rules'; step:
    training iterations so far; capped: moving average of whether the trust region shortened the "newton"
    step; stopped_by: index into STOPPED_BY; acceptance: summed per-chain acceptance; evaluations: density
    evaluations of all chains' steps; key: the PRNG stream."""

    weights: Array
    opt_state: Any
    window: Any
    chains: Any
    tuning: Any
    checkpoints: Checkpoints
    plateau: Plateau
    step: Array
    capped: Array
    stopped_by: Array
    acceptance: Array
    evaluations: Array
    key: Array


def _optimizer(name: str, r: float, learning_rate: float, decay: float) -> optax.GradientTransformation:
    if name == "hot_dog":
        return hot_dog(r)
    if name == "adam":  # the original Coreset MCMC's ADAM with gamma t^{-p} (p = 0: constant)
        return optax.adam(lambda t: learning_rate * (t + 1.0) ** -float(decay))
    if name == "dog_cumulative":
        return dog_cumulative(r)
    return optax.identity()  # "newton" makes its own step


def coreset_mcmc(model: Model, size: int, kernel: str = "slice", kernel_settings: tuple = (),
                 num_chains: int = 2, num_iters: int = 200_000, stop_tol: float = STOP_TOL, stop_first: int = 500,
                 stop_checks: int = 2, max_hot_start: int = 10_000, hot_start: bool = True, num_warmup: int = 0,
                 num_draws: int = 1000, subsample: Any = None, control_variate: bool = False,
                 chain_init: str = "standard_normal", optimizer: str = "hot_dog", r: float = 1e-3,
                 learning_rate: float = 0.1, learning_rate_decay: float = 0.0, iterate: str = "last",
                 start_draws: bool = False, plateau_z: float = 0.0, plateau_checks: int = 1,
                 step_fraction: float = 0.5, trust: float = 1e-3, tau: float = 1e-2, history: int = 256,
                 refresh: int = 32, adapt_gain: float = 0.05, timed: bool = False, train_after_cap: bool = False):
    """Coreset MCMC of M = `size` points as a pure posterior-driven core (module docstring).

    Args:
      model: the model.
      size: M.
      kernel: a registered kernel of `cj.inference.kernels` ("slice", the authors'; "mala", "nuts", "hmc",
        "rwmh", or one added with `register_kernel`).
      kernel_settings: the kernel's settings as (name, value) pairs (`cj.coreset` accepts a dict); for
        "slice" they override the authors' `PUBLISHED_SLICE`.
      num_chains: K >= 2 (the gradient is a covariance over chains; the authors use 2).
      num_iters: the budget T in iterations, hot start included (the authors' 200,000).
      stop_tol, stop_first, stop_checks: the optional stopping rule (step 5): drift at most `stop_tol` nats
        at `stop_checks` checkpoints in a row, the checkpoints at `stop_first` x 2^k training iterations
        (also those of the plateau test); stop_tol = 0 (default) runs the whole budget.
      max_hot_start: the hot start's cap (the authors' 10,000); hot_start: False trains from the first step.
      train_after_cap: False (the authors'): a hot start that reaches its cap without passing the test
        leaves the weights at w_0 (no training; `info["trained"]` False); True (ours) trains from the cap.
      num_warmup: tuning warm-up steps at w_0 for kernels that adapt (0 for the slice sampler).
      num_draws: steps with the final weights fixed, returned as `info["samples"]` (K, num_draws, D).
      subsample: S, data rows per full-data estimate: None (the authors') S = M; 0 (ours) max(2 M, 2048);
        an int S; S >= N uses every row (exact).
      control_variate: the first-order control variate for the full-data estimate (ours; one O(N D) pass).
      chain_init: "standard_normal" (the authors'), "start" (pi_hat) or "laplace" (ours); `common.set_up`.
      optimizer: "hot_dog" (the authors'), "newton" (ours), "adam" (the original Coreset MCMC, with
        `learning_rate` gamma and `learning_rate_decay` p: gamma t^{-p}), "dog_cumulative" (an earlier one of
        ours).
      r: Hot DoG's initial step (0.001 in the paper).
      iterate: "last" (the authors') or "average" (ours; `stopping.iterate`).
      start_draws: also draw `num_draws` steps at w_0, continuing the hot start's chains
        (`info["start_samples"]`).
      plateau_z, plateau_checks: the plateau test (ours; 0 = off) at the same checkpoints.
      step_fraction, trust, tau, history, refresh: the "newton" step's (`natural.natural_step`); `history`
        is also the window of recorded states (rows = states) the stopping rules read.
      adapt_gain: the constant Robbins-Monro gain on log step size for kernels that adapt one.
      timed: look at `cj.refine`'s wall-clock budget every few iterations (`budget.py`).

    Returns:
      `solve(key, data, start, data_weights, initial=None) -> (indices, weights, info)`.
    """
    if kernel == "slice":
        kernel_settings = {**PUBLISHED_SLICE, **dict(kernel_settings)}
    settings = check_kernel(kernel, kernel_settings)
    check_count(num_chains, "num_chains", 2)
    for name, value in (("num_iters", num_iters), ("num_draws", num_draws), ("max_hot_start", max_hot_start),
                        ("stop_checks", stop_checks), ("plateau_checks", plateau_checks), ("refresh", refresh)):
        check_count(value, name)
    check_count(stop_first, "stop_first", 2)
    check_count(history, "history", 2)
    check_count(num_warmup, "num_warmup", 0)
    check_subsample(subsample)
    _validate.check_choice(optimizer, OPTIMIZERS, "optimizer")
    _validate.check_choice(iterate, ITERATES, "iterate")
    _validate.check_choice(chain_init, CHAIN_INITS, "chain_init")
    check_float(learning_rate_decay, "learning_rate_decay", 0, 1)
    check_float(plateau_z, "plateau_z", 0)
    check_float(stop_tol, "stop_tol", 0)
    learning_rate, r, trust, tau = (check_positive(v, n) for v, n in (
        (learning_rate, "learning_rate"), (r, "r"), (trust, "trust"), (tau, "tau")))
    check_fraction(adapt_gain, "adapt_gain")
    check_fraction(step_fraction, "step_fraction")
    control_variate, hot_start, start_draws, timed, train_after_cap = (check_bool(v, n) for v, n in (
        (control_variate, "control_variate"), (hot_start, "hot_start"), (start_draws, "start_draws"),
        (timed, "timed"), (train_after_cap, "train_after_cap")))
    newton, average = optimizer == "newton", iterate == "average"
    rule_on = stop_tol > 0 or plateau_z > 0
    opt = _optimizer(optimizer, r, learning_rate, learning_rate_decay)
    spec = _kernels.KERNELS[kernel]
    adapts = spec.adapts_step_size
    target_accept = float(settings["target_accept"]) if adapts else 0.0  # declared by the spec

    def solve(key, data, start, data_weights, initial=None):
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        if timed:  # the budget's clock starts before any work (compilation is not counted)
            data_weights = data_weights + _budget.start_clock().astype(data_weights.dtype)
        k_core, k_chains, k_hot, k_loop, k_draws = jax.random.split(key, 5)
        rows_per_estimate = default_subsample(subsample, size, data_weights.shape[0], per_step=True)
        indices, w0, live, rows, estimate, lls, chains, tuning = set_up(
            (k_core, k_chains), model, data, data_weights, start, initial, size=size,
            rows_per_estimate=rows_per_estimate, control_variate=control_variate, chain_init=chain_init,
            kernel=kernel, num_chains=num_chains, num_warmup=num_warmup, settings=settings, dtype=dtype)
        d = start.mean.shape[0]
        m = w0.shape[0]
        density = lambda w: weighted_log_density(model, rows, w)  # noqa: E731

        # ---- hot start at w_0 (hot-dog.md §2.1), recording the states in the window
        def record(carry, chains):
            window, key = carry
            key, k_sub = jax.random.split(key)
            return push_history(window, lls(chains.position), estimate(k_sub, chains.position)), key

        window0 = empty_preconditioner(history, m, dtype)
        at_start, hot_steps, hot_done, (window, _) = run_until_stationary(
            k_hot, kernel, density(w0), chains, tuning, settings, max_hot_start if hot_start else 0, d,
            HOT_START_EVERY, HOT_START_THRESHOLD, record, (window0, jax.random.fold_in(k_hot, 1)))
        chains = at_start
        # hot-dog.md §5.5: the authors' code trains only once the hot start has passed its test
        trains = hot_done | (not hot_start) | train_after_cap
        budget = jnp.where(trains, num_iters - hot_steps, 0)

        # ---- training
        def train_cond(s):
            return (s.stopped_by < 0) & (s.step < budget)

        def train_body(s):
            key, k_step, k_sub = jax.random.split(s.key, 3)
            chains, info = step_chains(k_step, kernel, density(s.weights), s.chains, s.tuning, settings)
            acc = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0).astype(dtype)
            evals = jnp.sum(_kernels.density_evals(kernel, info)).astype(dtype)
            tuning = s.tuning
            if adapts:  # keep the step size valid for the moving target
                tuning = tuning._replace(step_size=tuning.step_size * jnp.exp(adapt_gain * (acc - target_accept)))
            core = lls(chains.position)
            target = estimate(k_sub, chains.position)
            window = push_history(s.window, core, target)
            opt_state, capped = s.opt_state, s.capped
            if newton:  # natural_step returns the step along the gradient: descend
                ascent, window, capped = natural_step(window, s.weights, live, s.step, capped, refresh=refresh,
                                                      tau=tau, step_fraction=step_fraction, trust=trust)
                update = -ascent
            else:
                grad = kl_gradient_from_target(core, target, s.weights)
                grad = jnp.where(live & jnp.isfinite(grad), grad, 0.0)
                update, opt_state = opt.update(grad, s.opt_state, s.weights)
            weights = jnp.where(live, jnp.maximum(s.weights + update, 0.0), 0.0)
            cp = push_iterate(s.checkpoints, weights)
            step = s.step + 1
            at_check = step == cp.check_at
            cp = jax.lax.cond(at_check, lambda c: checkpoint(c, window, weights, average=average, tol=stop_tol,
                                                             checks=stop_checks), lambda c: c, cp)
            plateau = s.plateau
            if plateau_z > 0:
                plateau = jax.lax.cond(at_check, lambda p: plateau_check(p, window, iterate_of(cp, weights),
                                                                         num_chains, plateau_z, plateau_checks),
                                       lambda p: p, plateau)
            drifted = (cp.passes >= stop_checks) if stop_tol > 0 else jnp.asarray(False)
            out_of_time = _budget.expired(step) if timed else jnp.asarray(False)
            stopped_by = jnp.where(drifted, 1, jnp.where(plateau.flat, 2, jnp.where(out_of_time, 3, -1)))
            return TrainState(weights, opt_state, window, chains, tuning, cp, plateau, step, capped, stopped_by,
                              s.acceptance + acc, s.evaluations + evals, key)

        def iterate_of(cp, weights):
            # The compared iterate of a checkpoint just taken is its `saved` one.
            return jnp.where(cp.count_saved > 0, cp.saved, weights) if average else weights

        init = TrainState(w0, opt.init(w0), window, chains, tuning, init_checkpoints(w0, stop_first, num_checkpoints(num_iters, stop_first)),
                          init_plateau(window, w0, stop_first), jnp.asarray(0), jnp.asarray(1.0 if newton else 0.0, dtype),
                          jnp.asarray(-1), jnp.zeros(num_chains, dtype), jnp.asarray(0.0, dtype), k_loop)
        state = _progress.while_loop(train_cond, train_body, init, desc="coreset MCMC (iterations)",
                                     every=max(num_iters // 20, 1), total=num_iters)
        cp = state.checkpoints
        stopped_by = jnp.maximum(state.stopped_by, 0)  # -1: the loop ran out of budget
        weights = returned_iterate(cp, state.weights, average)
        if average:  # stopped at a checkpoint: its interval's average is the saved iterate
            weights = jnp.where((cp.count == 0) & (cp.count_saved > 0), cp.saved, weights)
        weights = jnp.where(live, weights, 0.0)

        # ---- draws with the returned weights fixed (and at the start, continuing the hot start's chains)
        if start_draws:
            pair, chain_sets, tunings = jnp.stack([weights, w0]), stack(state.chains, at_start), stack(state.tuning, tuning)
            keys = jnp.stack([k_draws, jax.random.fold_in(k_draws, 2)])
        else:
            one = lambda x: x[None]  # noqa: E731
            pair, chain_sets = weights[None], jax.tree_util.tree_map(one, state.chains)
            tunings, keys = jax.tree_util.tree_map(one, state.tuning), k_draws[None]
        draws, accs = paired_draws(kernel, settings, density, pair, chain_sets, tunings, keys, num_draws,
                                   "coreset MCMC (draws)")
        steps = jnp.maximum(state.step, 1).astype(dtype)
        info = {"samples": jnp.swapaxes(draws[:, 0], 0, 1), "acceptance_rate": jnp.mean(accs[:, 0], axis=0),
                "training_acceptance_rate": state.acceptance / steps, "initial_weights": w0,
                "final_iterate": state.weights, "iterations": state.step, "hot_start_steps": hot_steps,
                "hot_start_converged": hot_done | (not hot_start), "trained": trains,
                "converged": (stopped_by == 1) | (stopped_by == 2) | (not rule_on),
                "stopped_by": stopped_by, "drift_kl": cp.drift, "plateau": state.plateau.flat,
                "checkpoint_weights": cp.history_weights, "checkpoint_drifts": cp.history_drifts,
                "checkpoints": cp.taken, "window_states": state.window.filled,
                "effective_dimension": effective_dimension(state.window) if newton else jnp.asarray(jnp.nan, dtype),
                "density_evaluations_per_step": state.evaluations / (steps * num_chains),
                "subsample_rows": rows_per_estimate}
        if start_draws:
            info["start_samples"] = jnp.swapaxes(draws[:, 1], 0, 1)
        return indices, weights, info

    return solve
