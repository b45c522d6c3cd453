"""Coreset MCMC's stopping rule (ours; coreset_mcmc.py step 5): the iterates kept as block averages, the
averages over the last two thirds of the run, and the KL drift between their posteriors."""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from .common import kl_estimate
from .compare import MARGIN, paired_kl_difference
from .natural import Preconditioner

__all__ = ["Blocks", "FIRST_BLOCK", "NUM_BLOCKS", "Plateau", "drift_kl", "init_blocks", "init_plateau", "plateau_check",
           "push_block", "stop_check", "thirds", "window_in_time_order"]

Array = jax.Array
NUM_BLOCKS = 60          # block averages kept by the stopping rule (a multiple of 6)
FIRST_BLOCK = 10         # iterations per block until the blocks fill up


class Blocks(NamedTuple):
    """Block averages of the iterates for the stopping rule: `sums` (NUM_BLOCKS, M) of the filled blocks,
    `count` of them, `length` iterations per block, and the running block `current` with `filled`
    iterations."""

    sums: Array
    count: Array
    length: Array
    current: Array
    filled: Array


def init_blocks(size: int, dtype) -> Blocks:
    return Blocks(jnp.zeros((NUM_BLOCKS, size), dtype), jnp.asarray(0), jnp.asarray(FIRST_BLOCK),
                  jnp.zeros(size, dtype), jnp.asarray(0))


def push_block(blocks: Blocks, weights: Array) -> tuple[Blocks, Array]:
    """Add one iterate; returns the blocks and whether a block was completed by it."""
    current = blocks.current + weights
    filled = blocks.filled + 1
    complete = filled >= blocks.length

    def close(_):
        sums = blocks.sums.at[blocks.count].set(current)
        count = blocks.count + 1
        full = count >= NUM_BLOCKS
        # Full: merge neighbours, so the blocks double in length and half the slots free up.
        merged = (sums[0::2] + sums[1::2])
        sums = jnp.where(full, jnp.concatenate([merged, jnp.zeros_like(merged)]), sums)
        return Blocks(sums, jnp.where(full, NUM_BLOCKS // 2, count), jnp.where(full, 2 * blocks.length,
                                                                               blocks.length),
                      jnp.zeros_like(current), jnp.zeros_like(filled))

    blocks = jax.lax.cond(complete, close, lambda _: Blocks(blocks.sums, blocks.count, blocks.length, current,
                                                            filled), None)
    return blocks, complete


def thirds(blocks: Blocks) -> tuple[Array, Array]:
    """(w_A, w_B): the averages over the second-to-last and the last third of the filled blocks."""
    third = blocks.count // 3
    slot = jnp.arange(NUM_BLOCKS)
    in_a = (slot >= blocks.count - 2 * third) & (slot < blocks.count - third)
    in_b = (slot >= blocks.count - third) & (slot < blocks.count)
    denom = jnp.maximum(third * blocks.length, 1).astype(blocks.sums.dtype)
    w_a = jnp.sum(jnp.where(in_a[:, None], blocks.sums, 0.0), axis=0) / denom
    w_b = jnp.sum(jnp.where(in_b[:, None], blocks.sums, 0.0), axis=0) / denom
    return w_a, w_b


def drift_kl(coreset_lls: Array, w_a: Array, w_b: Array) -> Array:
    """(1/2) Var[(w_b - w_a).L(theta)] over the rows of `coreset_lls` (R, M): the second-order expansion
    of KL(pi_{w_a} || pi_{w_b}) in the weights (the Fisher metric of the family pi_w is Cov(L))."""
    delta = jnp.where((w_a > 0) | (w_b > 0), w_b - w_a, 0.0)
    values = jnp.where((w_a > 0) | (w_b > 0), coreset_lls, 0.0) @ delta
    return 0.5 * jnp.var(values) * values.shape[0] / jnp.maximum(values.shape[0] - 1, 1)


def stop_check(blocks: Blocks, recent_lls: Callable[[], Array], pre: Preconditioner, passes: Array, step: Array,
               capped: Array, *, min_iters: int, tol: float, rel_tol: float) -> tuple[Array, Array]:
    """(drift, checks passed in a row) of the drift test (coreset_mcmc.py step 5) at a block end: the drift
    KL(pi_{w_A} || pi_{w_B}) on the recent states' coreset log-likelihoods `recent_lls()` is at most
    max(tol, rel_tol * level), `level` being the KL estimate of pi_{w_B} on the recorded window of `pre`,
    with at least 6 blocks and `min_iters` steps, and the trust region no longer shortening most steps
    (`capped` < 1/2)."""
    def check(_):
        w_a, w_b = thirds(blocks)
        window = jnp.arange(pre.history.shape[0]) < pre.filled
        level = kl_estimate(pre.history, pre.targets, w_b, window)
        drift = drift_kl(recent_lls(), w_a, w_b)
        passed = (step >= min_iters) & (drift <= jnp.maximum(tol, rel_tol * level)) & (capped < 0.5)
        return drift, jnp.where(passed, passes + 1, 0)

    return jax.lax.cond(blocks.count >= 6, check, lambda _: (jnp.asarray(jnp.inf, pre.history.dtype), passes),
                        None)


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
