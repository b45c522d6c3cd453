"""Coreset MCMC's stopping rules, at checkpoints t_k = first x 2^k of training (coreset_mcmc.py step 5).

- **Drift** (every optimizer; `checkpoint`): the posterior of the iterate now against the one at the last
  checkpoint, by the second-order expansion of their KL in the weights (the Fisher metric of the family
  pi_w is Cov(L)),

      KL(pi_{w_then} || pi_{w_now}) ~ (1/2) Var_{pi_w}[(w_now - w_then).L(theta)],

  on the coreset log-likelihoods of the recorded window of recent chain states: O(R M), no full-data term,
  so the rule costs nothing that grows with N. Training stops when it is at most `tol` nats at `checks`
  checkpoints in a row: doubling the run no longer moves the posterior by more than `tol`. Gradient noise
  that keeps the iterate wandering counts as drift, so a noisy iterate stops only once its wandering is
  below `tol` too. The returned weights (last iterate or the average since the last checkpoint) are the
  ones compared.
- **Plateau** (ours, for `cj.refine`; `plateau_check`): the KL itself, by the paired estimate of
  KL(pi_now || pi) - KL(pi_then || pi) from the full-data estimates T on the window; stop when it has not
  fallen by `z` standard errors.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .compare import MARGIN, paired_kl_difference
from .natural import Preconditioner

__all__ = ["Checkpoints", "Plateau", "checkpoint", "drift_kl", "init_checkpoints", "init_plateau", "iterate", "num_checkpoints",
           "plateau_check", "push_iterate", "window_in_time_order"]

Array = jax.Array


def drift_kl(coreset_lls: Array, w_a: Array, w_b: Array, mask=None) -> Array:
    """(1/2) Var[(w_b - w_a).L(theta)] over the rows of `coreset_lls` (R, M) selected by `mask` (R,): the
    second-order expansion of KL(pi_{w_a} || pi_{w_b}) in the weights."""
    mask = jnp.ones(coreset_lls.shape[0], bool) if mask is None else mask
    delta = jnp.where((w_a > 0) | (w_b > 0), w_b - w_a, 0.0)
    values = jnp.where((w_a > 0) | (w_b > 0), coreset_lls, 0.0) @ delta
    count = jnp.maximum(jnp.sum(mask), 2).astype(values.dtype)
    mean = jnp.sum(jnp.where(mask, values, 0.0)) / count
    return 0.5 * jnp.sum(jnp.where(mask, jnp.square(values - mean), 0.0)) / (count - 1.0)


class Checkpoints(NamedTuple):
    """The drift rule's state: the step of the next checkpoint (`check_at`), the compared iterates at the last
    two (`saved`, `saved2`; `count_saved` of them valid), the sum and count of the iterates since the last one
    (for the average), the last drifts (nats) to the previous checkpoint's iterate (`drift`) and to the one
    before it (`drift2`), the checkpoints passed in a row, and the record of every checkpoint so far
    (`history_weights` (C, M), `history_drifts` (C, 2), `taken`) for `info`."""

    check_at: Array
    saved: Array
    saved2: Array
    count_saved: Array
    running: Array
    count: Array
    drift: Array
    drift2: Array
    passes: Array
    history_weights: Array
    history_drifts: Array
    taken: Array


def num_checkpoints(num_iters: int, first: int) -> int:
    """Checkpoints at first x 2^k up to num_iters (at least one slot)."""
    count, at = 0, first
    while at <= num_iters:
        count, at = count + 1, 2 * at
    return max(count, 1)


def init_checkpoints(weights: Array, first: int, slots: int = 1) -> Checkpoints:
    inf = jnp.asarray(jnp.inf, weights.dtype)
    return Checkpoints(jnp.asarray(first), jnp.zeros_like(weights), jnp.zeros_like(weights), jnp.asarray(0),
                       jnp.zeros_like(weights), jnp.asarray(0), inf, inf, jnp.asarray(0),
                       jnp.zeros((slots,) + weights.shape, weights.dtype), jnp.full((slots, 2), jnp.inf, weights.dtype),
                       jnp.asarray(0))


def push_iterate(cp: Checkpoints, weights: Array) -> Checkpoints:
    """Add one iterate to the running average since the last checkpoint."""
    return cp._replace(running=cp.running + weights, count=cp.count + 1)


def iterate(cp: Checkpoints, weights: Array, average: bool) -> Array:
    """The weights to return: the last iterate, or (`average`) the average of the iterates since the last
    checkpoint (the latest half of a run stopped at a checkpoint; Polyak-Ruppert)."""
    if not average:
        return weights
    return jnp.where(cp.count > 0, cp.running / jnp.maximum(cp.count, 1).astype(weights.dtype), weights)


def checkpoint(cp: Checkpoints, pre: Preconditioner, weights: Array, *, average: bool, tol: float,
               checks: int) -> Checkpoints:
    """At a checkpoint: the drifts between the compared iterate now and at the last two checkpoints, on the
    recorded window; start the next interval (checkpoint at twice the step)."""
    now = iterate(cp, weights, average)
    window = jnp.arange(pre.history.shape[0]) < pre.filled
    drift = jnp.where(cp.count_saved >= 1, drift_kl(pre.history, cp.saved, now, window), jnp.inf)
    drift2 = jnp.where(cp.count_saved >= 2, drift_kl(pre.history, cp.saved2, now, window), jnp.inf)
    passes = jnp.where(drift <= tol, cp.passes + 1, 0)
    slot = jnp.minimum(cp.taken, cp.history_weights.shape[0] - 1)
    return Checkpoints(2 * cp.check_at, now, cp.saved, cp.count_saved + 1, jnp.zeros_like(cp.running),
                       jnp.asarray(0), drift.astype(cp.drift.dtype), drift2.astype(cp.drift.dtype), passes,
                       cp.history_weights.at[slot].set(now),
                       cp.history_drifts.at[slot].set(jnp.stack([drift, drift2]).astype(cp.drift.dtype)),
                       cp.taken + 1)


class Plateau(NamedTuple):
    """The plateau test's state: the recorded window (coreset log-likelihoods `lls` (R, M) and full-data
    estimates `targets` (R,), in time order) and the iterate `weights` at the last checkpoint, whether there
    is one (`saved`), the step of the next checkpoint (`check_at`), checkpoints in a row at which the KL did
    not fall (`passes`), and whether the test has passed (`flat`)."""

    lls: Array
    targets: Array
    weights: Array
    saved: Array
    check_at: Array
    passes: Array
    flat: Array


def init_plateau(pre: Preconditioner, weights: Array, first: int) -> Plateau:
    return Plateau(jnp.zeros_like(pre.history), jnp.zeros_like(pre.targets), jnp.zeros_like(weights),
                   jnp.asarray(False), jnp.asarray(first), jnp.asarray(0), jnp.asarray(False))


def window_in_time_order(pre: Preconditioner) -> tuple[Array, Array]:
    """The preconditioner's ring of recorded states, oldest first (for batch means over time)."""
    shift = pre.filled % pre.history.shape[0]
    return jnp.roll(pre.history, -shift, axis=0), jnp.roll(pre.targets, -shift)


def plateau_check(plateau: Plateau, pre: Preconditioner, weights: Array, num_chains: int, z: float,
                  checks: int = 1) -> Plateau:
    """At a checkpoint (steps first, 2 first, 4 first, ...): compare the iterate with the last checkpoint's,
    each with the recorded window of chain states that followed it, by the paired estimate of
    KL(pi_now || pi) - KL(pi_then || pi) (`compare.paired_kl_difference`). The KL has stopped falling (`flat`)
    when the pairing holds and the estimate is not below -MARGIN by `z` standard errors at `checks`
    checkpoints in a row: the last doublings of the run did not measurably bring the posterior closer.
    Far-apart posteriors (the pairing fails) are still travelling."""
    lls, targets = window_in_time_order(pre)
    comparison = paired_kl_difference(plateau.lls, plateau.targets, plateau.weights, lls, targets, weights,
                                      num_chains)
    flat = plateau.saved & comparison.paired & (comparison.delta + z * comparison.se >= -MARGIN)
    passes = jnp.where(flat, plateau.passes + 1, 0)
    return Plateau(lls, targets, weights, jnp.asarray(True), 2 * plateau.check_at, passes, passes >= checks)
