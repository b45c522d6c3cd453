"""Coreset MCMC (Chen & Campbell, AISTATS 2024) with the Hot DoG step and hot start (Chen, Huggins &
Campbell), as their authors run it (`papers/coreset-mcmc.md` §2.1, `papers/hot-dog.md` §2), plus a stopping
rule and the safeguards below (ours).

1. **Points.** M rows drawn without replacement with probabilities proportional to the data weights u
   (uniform for a plain dataset), each weighted sum(u) / M (coreset-mcmc.md §2.1 step 1); or, with
   `support=` set in `cj.coreset`, the points and weights of a Hilbert coreset (`common.hilbert_support`).
2. **Chains.** K chains of a registered kernel (default "slice", the authors' tuning-free hit-and-run slice
   sampler, preconditioned by the covariance of the start) start at the Laplace fit of pi_{w_0}
   (`common.coreset_start`, ours) and, for kernels that adapt, warm their tuning up at w_0.
3. **Hot start** (hot-dog.md §2.1). The chains run at w_0, recording their log potentials, until the
   stationarity statistic (H1, `optimizers.stationarity_statistic`) has median over chains <= 0.5,
   checked every 30 steps from step 3 D on, or until `max_hot_start` steps. At the cap, training starts
   anyway and `info["hot_start_converged"]` is False.
4. **Training**, one weight update per chain step (coreset-mcmc.md §2.1 step 3): step every chain
   against the current pi_w; estimate the full-data log-likelihood T(theta_k) at each chain state from
   `subsample` rows (with the control variate of `common.full_data_estimator`, ours); estimate the KL
   gradient g_m = -Cov_k(L_m(theta_k), T(theta_k) - w.L(theta_k)) over the K chains (Eq. C3,
   `kl_gradient_from_target`); take a step and clip at 0. Kernels whose warm-up adapts a step size keep
   adapting it towards their target acceptance (Robbins-Monro with a constant gain), so their tuning stays
   valid while w moves. The step (`optimizer`):
   - "newton" (default, ours): the gradient averaged over a window of the last `history` chain states
     (`window_gradient`), preconditioned by the inverse Fisher matrix of the coreset log-likelihoods on
     that window (ridge `tau`, refreshed every `refresh` steps; `natural_direction`), times
     `step_fraction`, and shortened so that its predicted KL change (1/2)|Phi delta|^2 is at most `trust`
     nats. One noisy single-state gradient, rescaled coordinate-wise, is what made Hot DoG's distance term
     blow up on real data (benchmarks/README.md).
   - "hot_dog": the paper's update exactly (hot-dog.md §2.2, `optimizers.hot_dog`, r = 0.001).
   - "adam" (with `learning_rate` gamma and `learning_rate_decay` p: gamma t^{-p}, the original Coreset MCMC;
     the Hot DoG paper's baseline is p = 0.5) and "dog_cumulative" (our earlier update).
5. **Stopping rule** (ours). The iterates are kept as block averages (at most 60 blocks, whose length
   doubles when they fill up). At each block end with at least 6 blocks, let w_A and w_B be the averages
   of the second-to-last and the last third of the run. Their posteriors differ by

       KL(pi_{w_A} || pi_{w_B}) ~ (1/2) Var_{pi_w}[(w_B - w_A).L(theta)],

   estimated on the chain states of recent iterations. Training stops when this drift is below
   max(`tol`, `rel_tol` KL) nats for two checks in a row (after `min_iters`), KL being the estimate of
   KL(pi_{w_B} || pi) on the recorded window, while (newton) the trust region shortens under half of the
   recent steps (a run still shortened is travelling); or when the KL has stopped falling (the plateau test,
   "newton" only): at steps `plateau_first` x 1, 2, 4, ... the iterate is compared with the last
   checkpoint's, each with the window of chain states recorded after it, by the paired estimate of the KL
   difference (`compare.paired_kl_difference`, as in step 7), and training stops when the pairing holds and
   the KL fell by less than `plateau_z` standard errors (`stopping.plateau_check`; `info["plateau"]`): weights
   that still wander under gradient noise can fail the drift test for ever while the posterior no longer
   improves. Otherwise after `num_iters`; `info["converged"]` says whether a test passed. The
   returned weights are w_B (Polyak-Ruppert averaging over the last third).
6. **Draws.** The chains then take `num_draws` steps with the returned weights fixed: `info["samples"]`,
   shape (K, num_draws, D), are MCMC draws of the returned coreset's posterior.
7. **Never worse than the start** (ours): K more chains draw `num_draws` steps at the start w_0, continuing
   from the hot start's stationary states (kept for this; with `hot_start` off the stationarity-tested run
   at w_0 still runs, for them only), in the same loop as step 6 (one compiled kernel for both rounds), and
   the trained weights are kept only if a paired comparison of the two
   rounds (`compare.paired_kl_difference`) finds their KL(pi_w || pi) lower by `z` standard errors;
   otherwise the start and its draws are returned (`info["fell_back"]`, `info["kl_difference"]`).
   Comparing two independent KL estimates, as before, decided by their noise (benchmarks/README.md).

Cost per iteration: K steps of the kernel on M rows, K (M + S) likelihood evaluations for the gradient,
O(K M) optimiser work; no O(N) term after the control variate's one gradient pass.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from .. import progress as _progress
from ..core import Model, weighted_log_density
from ..core.arguments import check_float
from ..inference import kernels as _kernels
from ..inference.driver import step_chains
from .common import (check_bool, check_count, check_fraction, check_kernel, check_positive, default_subsample,
                     run_until_stationary, set_up)
from .compare import Z, better, paired_kl_difference
from .draws import kl_at_draws, paired_draws, stack
from .gradient import kl_gradient, kl_gradient_from_target
from .natural import effective_dimension, empty_preconditioner, newton_step, push_history
from .optimizers import dog_cumulative, hot_dog
from .stopping import Blocks, Plateau, init_blocks, init_plateau, plateau_check, push_block, stop_check, thirds

__all__ = ["coreset_mcmc", "kl_gradient", "kl_gradient_from_target"]

Array = jax.Array
OPTIMIZERS = ("newton", "hot_dog", "adam", "dog_cumulative")
RESERVOIR = 16           # recent iterations whose chain states estimate the drift's variance
HOT_START_EVERY = 30     # hot-dog.md §2.1: the test runs every 30 steps
HOT_START_THRESHOLD = 0.5


# --------------------------------------------------------------------------------------------------------
# Loop states.


class TrainState(NamedTuple):
    """weights: w; opt_state: the optimiser's; precond: the natural-gradient preconditioner; chains,
    tuning: the kernel's; blocks, plateau: the stopping rule's; recent: (RESERVOIR, K, D) chain states of recent
    iterations; step: iterations so far; passes: checks passed in a row; drift: the last drift estimate
    (nats); capped: moving average of whether the trust region shortened the step; done: a stopping
    test passed; acceptance: summed per-chain acceptance; evaluations: density evaluations of all chains'
    steps (each costs one likelihood evaluation per live coreset row); key: the PRNG stream."""

    weights: Array
    opt_state: Any
    precond: Any
    chains: Any
    tuning: Any
    blocks: Blocks
    recent: Array
    step: Array
    passes: Array
    drift: Array
    capped: Array
    plateau: Plateau
    done: Array
    acceptance: Array
    evaluations: Array
    key: Array


# --------------------------------------------------------------------------------------------------------
# The construction.


def coreset_mcmc(model: Model, size: int, kernel: str = "slice", kernel_settings: tuple = (),
                 num_chains: int = 2, num_iters: int = 20_000, min_iters: int = 300, tol: float = 1e-3,
                 rel_tol: float = 1e-2, plateau_first: int = 500, plateau_z: float = 1.0,
                 plateau_checks: int = 1,
                 num_warmup: int = 0, max_hot_start: int = 10_000, num_draws: int = 500,
                 subsample: int = 0, optimizer: str = "newton", learning_rate: float = 0.1,
                 learning_rate_decay: float = 0.0, r: float = 1e-3,
                 step_fraction: float = 0.5, trust: float = 1e-3, tau: float = 1e-2, history: int = 256,
                 refresh: int = 32,
                 control_variate: bool = True, hot_start: bool = True, adapt_gain: float = 0.05, z: float = Z):
    """Coreset MCMC of M = `size` points as a pure posterior-driven core (module docstring).

    Args:
      model: the model.
      size: M.
      kernel: a registered kernel of `cj.inference.kernels` ("slice" default; "mala", "nuts", "hmc",
        "rwmh", or one added with `register_kernel`); option names as in `posterior_driven/options.py`.
      kernel_settings: the kernel's settings as (name, value) pairs (`cj.coreset` accepts a dict).
      num_chains: K >= 2 (the gradient is a covariance over chains; the authors use 2).
      num_iters: the most weight updates (one chain step each).
      min_iters: weight updates before the stopping rule may end training.
      tol, rel_tol: the stopping rule's threshold on the drift KL(pi_{w_A} || pi_{w_B}):
        max(tol, rel_tol * KL), with KL the importance-sampling estimate of KL(pi_{w_B} || pi) on the
        recorded window (a coreset that cannot beat 1 nat need not be resolved to 0.001).
      plateau_first, plateau_z, plateau_checks: the plateau test's first checkpoint (then every doubling), its
        z, and the checkpoints in a row it must pass (step 5); plateau_z = 0 switches the test off.
      num_warmup: tuning warm-up steps at w_0 before the hot start (for kernels that adapt).
      max_hot_start: the hot start's cap (hot-dog.md: 10,000).
      num_draws: steps with the final weights fixed, returned as `info["samples"]` (K, num_draws, D).
      subsample: S, data rows per full-data estimate; 0: min(N, max(2 M, 2048)) (`common.default_subsample`;
        S >= N uses every row).
      optimizer: "newton" (default, ours; step 4), "hot_dog" (the paper's), "adam" (with `learning_rate`,
        the original Coreset MCMC) or "dog_cumulative" (our earlier coordinate-wise DoG).
      step_fraction, trust, tau, history, refresh: the "newton" step's (step 4).
      learning_rate, learning_rate_decay: Adam's step gamma t^{-p} at its t-th update (t from 1; p = 0:
        constant).
      r: Hot DoG's initial step (0.001 in the paper).
      control_variate: the first-order control variate for the full-data estimate (`common`).
      hot_start: start the chains at the Laplace fit of pi_{w_0} (`common.coreset_start`) and run the
        stationarity-tested hot start; off: start at pi_hat and train at once (a stationarity-tested run at
        w_0 still gives step 7 its chains).
      adapt_gain: the constant Robbins-Monro gain on log step size for kernels that adapt one.
      z: the trained weights are kept only if a paired comparison with fresh draws at the start finds their
        KL lower by z standard errors (step 7; `compare.better`).

    Returns:
      `solve(key, data, start, data_weights, initial=None) -> (indices, weights, info)`.
    """
    settings = check_kernel(kernel, kernel_settings)
    check_count(num_chains, "num_chains", 2)
    for name, value in (("num_iters", num_iters), ("num_draws", num_draws), ("max_hot_start", max_hot_start)):
        check_count(value, name)
    check_count(plateau_first, "plateau_first", 2)
    check_count(plateau_checks, "plateau_checks")
    for name, value in (("min_iters", min_iters), ("num_warmup", num_warmup), ("subsample", subsample)):
        check_count(value, name, 0)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer: unknown value {optimizer!r}; expected one of {list(OPTIMIZERS)}")
    check_float(learning_rate_decay, "learning_rate_decay", 0, 1)
    check_float(plateau_z, "plateau_z", 0)
    learning_rate, r, tol, rel_tol = (check_positive(v, n) for v, n in (
        (learning_rate, "learning_rate"), (r, "r"), (tol, "tol"), (rel_tol, "rel_tol")))
    check_fraction(adapt_gain, "adapt_gain")
    z = check_positive(z, "z")
    control_variate, hot_start = check_bool(control_variate, "control_variate"), check_bool(hot_start, "hot_start")
    check_fraction(step_fraction, "step_fraction")
    trust = check_positive(trust, "trust")
    tau = check_positive(tau, "tau")
    check_count(history, "history", 2)
    check_count(refresh, "refresh")
    newton = optimizer == "newton"
    opt = {"newton": lambda: optax.identity(), "hot_dog": lambda: hot_dog(r),
           "adam": lambda: optax.adam(
               lambda t: learning_rate * (t + 1.0) ** -float(learning_rate_decay)), "dog_cumulative": lambda: dog_cumulative(r)}[optimizer]()
    spec = _kernels.KERNELS[kernel]
    adapts = spec.adapts_step_size
    target_accept = float(settings["target_accept"]) if adapts else 0.0  # declared by the spec

    def solve(key, data, start, data_weights, initial=None):
        dtype = jnp.result_type(start.mean.dtype, jnp.float32)
        k_core, k_chains, k_hot, k_loop, k_draws = jax.random.split(key, 5)
        rows_per_estimate = default_subsample(subsample, size, data_weights.shape[0], per_step=True)
        indices, w0, live, rows, estimate, lls, chains, tuning = set_up(
            (k_core, k_chains), model, data, data_weights, start, initial, size=size,
            rows_per_estimate=rows_per_estimate, control_variate=control_variate, hot_start=hot_start,
            kernel=kernel, num_chains=num_chains, num_warmup=num_warmup, settings=settings, dtype=dtype)
        d = start.mean.shape[0]

        # ---- hot start at w_0 (hot-dog.md §2.1), recording the states for the preconditioner
        m = w0.shape[0]
        precond0 = empty_preconditioner(history, m, dtype)

        def record(carry, chains):
            pre, key = carry
            key, k_sub = jax.random.split(key)
            return push_history(pre, lls(chains.position), estimate(k_sub, chains.position)), key

        # The stationary chains at w_0 also give step 7's draws at the start, so no second burn-in is needed.
        # Without the hot start, training starts from pi_hat's start and an empty preconditioner at once.
        at_start, hot_steps, hot_done, (precond, _) = run_until_stationary(
            k_hot, kernel, weighted_log_density(model, rows, w0), chains, tuning, settings, max_hot_start, d,
            HOT_START_EVERY, HOT_START_THRESHOLD, record, (precond0, jax.random.fold_in(k_hot, 1)))
        if hot_start:
            chains = at_start
        else:
            precond = precond0

        # ---- training
        def train_cond(s):
            return (~s.done) & (s.step < num_iters)

        def train_body(s):
            key, k_step, k_sub = jax.random.split(s.key, 3)
            chains, info = step_chains(k_step, kernel, weighted_log_density(model, rows, s.weights), s.chains,
                                       s.tuning, settings)
            acc = jnp.where(jnp.isfinite(info.acceptance_rate), info.acceptance_rate, 0.0).astype(dtype)
            evals = jnp.sum(_kernels.density_evals(kernel, info)).astype(dtype)
            tuning = s.tuning
            if adapts:  # keep the step size valid for the moving target
                tuning = tuning._replace(step_size=tuning.step_size * jnp.exp(adapt_gain * (acc - target_accept)))
            thetas = chains.position
            core = lls(thetas)
            target = estimate(k_sub, thetas)
            grad = kl_gradient_from_target(core, target, s.weights)
            grad = jnp.where(live & jnp.isfinite(grad), grad, 0.0)
            precond, capped = s.precond, s.capped
            if newton:  # a descent step, negated below to undo optax's sign convention
                grad, precond, capped = newton_step(precond, core, target, s.weights, live, s.step, capped,
                                                    refresh=refresh, tau=tau, step_fraction=step_fraction,
                                                    trust=trust)
            updates, opt_state = opt.update(grad, s.opt_state, s.weights)
            if newton:
                updates = -updates
            weights = jnp.where(live, jnp.maximum(s.weights + updates, 0.0), 0.0)
            recent = s.recent.at[s.step % RESERVOIR].set(thetas.astype(dtype))
            blocks, complete = push_block(s.blocks, weights)
            step = s.step + 1

            drift, passes = jax.lax.cond(
                complete, lambda _: stop_check(blocks, lambda: lls(recent.reshape(-1, d)), precond, s.passes, step,
                                               capped, min_iters=min_iters, tol=tol, rel_tol=rel_tol),
                lambda _: (s.drift, s.passes), None)
            plateau = s.plateau
            if newton and plateau_z > 0:  # the recorded window is current only for "newton", which keeps it
                plateau = jax.lax.cond(
                    step == plateau.check_at,
                    lambda p: plateau_check(p, precond, weights, num_chains, plateau_z, plateau_checks),
                    lambda p: p, plateau)
            return TrainState(weights, opt_state, precond, chains, tuning, blocks, recent, step, passes, drift,
                              capped, plateau, (passes >= 2) | plateau.flat, s.acceptance + acc,
                              s.evaluations + evals, key)

        blocks = init_blocks(m, dtype)
        recent = jnp.broadcast_to(chains.position.astype(dtype), (RESERVOIR, num_chains, d))
        init = TrainState(w0, opt.init(w0), precond, chains, tuning, blocks, recent, jnp.asarray(0), jnp.asarray(0),
                          jnp.asarray(jnp.inf, dtype), jnp.asarray(1.0 if newton else 0.0, dtype),
                          init_plateau(precond, w0, plateau_first), jnp.asarray(False), jnp.zeros(num_chains, dtype),
                          jnp.asarray(0.0, dtype), k_loop)
        state = _progress.while_loop(train_cond, train_body, init, desc="coreset MCMC (iterations)",
                                     every=max(num_iters // 20, 1), total=num_iters)
        w_a, w_b = thirds(state.blocks)
        weights = jnp.where(state.blocks.count >= 3, w_b, state.weights)
        weights = jnp.where(live, weights, 0.0)

        # ---- draws with the returned weights fixed, and at the start from the stationary chains at w_0, in one
        # loop (one compiled kernel for both); never worse than the start by a paired comparison
        pair = jnp.stack([weights, w0])
        pair_keys = jnp.stack([k_draws, jax.random.fold_in(k_draws, 2)])
        draws, accs = paired_draws(kernel, settings, lambda w: weighted_log_density(model, rows, w), pair,
                                   stack(state.chains, at_start), stack(state.tuning, tuning), pair_keys, num_draws,
                                   "coreset MCMC (draws)")

        kls, cores, targets = kl_at_draws(pair, draws, pair_keys, lls, estimate, dtype)
        samples, samples0, acc, acc0 = draws[:, 0], draws[:, 1], accs[:, 0], accs[:, 1]
        trained_kl, start_kl, core, core0, target, target0 = kls[0], kls[1], cores[0], cores[1], targets[0], targets[1]
        comparison = paired_kl_difference(core0, target0, w0, core, target, weights, num_chains)
        fell_back = ~better(comparison, start_kl, trained_kl, z)
        weights = jnp.where(fell_back, w0, weights)
        samples, acc = jnp.where(fell_back, samples0, samples), jnp.where(fell_back, acc0, acc)
        final_kl = jnp.where(fell_back, start_kl, trained_kl)
        steps = jnp.maximum(state.step, 1).astype(dtype)
        info = {"samples": jnp.swapaxes(samples, 0, 1), "acceptance_rate": jnp.mean(acc, axis=0),
                "training_acceptance_rate": state.acceptance / steps, "initial_weights": w0,
                "final_iterate": state.weights, "iterations": state.step, "hot_start_steps": hot_steps,
                "hot_start_converged": hot_done | (not hot_start), "converged": state.done,
                "plateau": state.plateau.flat,
                "drift_kl": state.drift, "kl_estimate": final_kl,
                "effective_dimension": effective_dimension(state.precond) if newton else jnp.nan,
                "trained_kl_estimate": trained_kl, "trust_capped": state.capped, "start_kl_estimate": start_kl,
                "fell_back": fell_back, "density_evaluations_per_step": state.evaluations / (steps * num_chains),
                "subsample_rows": rows_per_estimate, "kl_difference": jnp.stack([comparison.delta, comparison.se])}
        return indices, weights, info

    return solve
