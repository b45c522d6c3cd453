"""Preconditioned hit-and-run slice sampling (Neal 2003), on BlackJAX's slice kernel.

One transition makes `passes` univariate slice moves. Each move draws a direction d = L u, with u uniform on
the unit sphere and L the lower Cholesky factor of a covariance estimate, and slices the target along the
line theta + t d: a level y = log pi(theta) + log U, an interval around t = 0 by Neal's doubling procedure
(Fig. 4), then shrinkage (Fig. 5) with the doubling acceptance test (Fig. 6). In z = L^{-1} theta this is
the hit-and-run slice sampler that Chen & Campbell run for Coreset MCMC (unit directions, initial width 10,
at most 20 doublings, 3 passes per iteration; `papers/hot-dog.md` §4.1). The preconditioner is our
addition: it makes `width` a multiple of the target's own scale along d, so one default serves every
parameterisation (a posterior sd of 1e-3 and one of 10 cost the same number of evaluations).

The kernel has nothing to tune that can go stale: doubling widens the interval and shrinkage narrows it at
every move, so when the target changes between steps (Coreset MCMC's weights move), the next move is
still exact for the new target. That is why it is the default kernel of the posterior-driven methods.

The interval is found by doubling *sequentially*: it stops at the first level whose two ends lie outside
the slice, so a move costs 2 + (number of doublings) evaluations, plus the shrinkage steps, rather than the
2 (max_expansions + 1) that BlackJAX's vectorised `doubling` always evaluates. The acceptance test then
bisects the final interval as Neal's Fig. 6 does. Both are pluggable `interval` callables of
`blackjax.mcmc.slice.build_kernel`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm, build_sampling_algorithm
from blackjax.mcmc import slice as _bj_slice

__all__ = ["SliceInfo", "build_kernel", "doubling_acceptance", "preconditioned_direction",
           "sequential_doubling", "slice_sampler"]

Array = jax.Array
init = _bj_slice.init


class SliceInfo(NamedTuple):
    """Per-transition diagnostics.

    acceptance_rate: the fraction of the moves whose shrinkage found a point (1 unless the density is NaN
      or the shrinkage budget ran out, which leaves the chain in place; the stuck-chain checks read it).
    num_evaluations: density evaluations spent by the transition (its cost).
    """

    acceptance_rate: Array
    num_evaluations: Array


def sequential_doubling(rng_key: Array, in_slice: Callable, width, max_expansions: int):
    """Neal (2003) Fig. 4 in t-space (the current point at t = 0), stopping at the first level whose two
    ends are both outside the slice. Returns `(left, right, num_expansions, accept_fn)`, the protocol of
    BlackJAX's `interval` callables; `accept_fn` is Fig. 6's test on this bracket."""
    k_start, k_sides = jax.random.split(rng_key)
    left = -width * jax.random.uniform(k_start)
    right = left + width
    sides = jax.random.bernoulli(k_sides, 0.5, (max_expansions,))

    def cond(carry):
        _, _, k, inside_left, inside_right = carry
        return (k < max_expansions) & (inside_left | inside_right)

    def body(carry):
        left, right, k, inside_left, inside_right = carry
        grow_left = sides[k]
        span = right - left
        new_left = jnp.where(grow_left, left - span, left)
        new_right = jnp.where(grow_left, right, right + span)
        # Only the moved end needs a new evaluation.
        moved = in_slice(jnp.where(grow_left, new_left, new_right))
        return (new_left, new_right, k + 1, jnp.where(grow_left, moved, inside_left),
                jnp.where(grow_left, inside_right, moved))

    left, right, k, _, _ = jax.lax.while_loop(cond, body, (left, right, jnp.asarray(0), in_slice(left),
                                                           in_slice(right)))
    return left, right, k, lambda t: doubling_acceptance(in_slice, t, left, right, width)


def doubling_acceptance(in_slice: Callable, t, left, right, width):
    """Neal (2003) Fig. 6: accept t only if doubling from t would have found the same interval (needed for
    reversibility). Bisects [left, right] towards t until it is about `width` long (the 1.1 guards
    rounding); rejects if, after the halves of t and 0 separate, both ends of the half are outside."""

    def cond(carry):
        left, right, _, ok = carry
        return (right - left > 1.1 * width) & ok

    def body(carry):
        left, right, differ, _ = carry
        mid = 0.5 * (left + right)
        differ = differ | ((0.0 < mid) & (t >= mid)) | ((0.0 >= mid) & (t < mid))
        right = jnp.where(t < mid, mid, right)
        left = jnp.where(t >= mid, mid, left)
        ok = ~(differ & ~in_slice(left) & ~in_slice(right))
        return left, right, differ, ok

    _, _, _, ok = jax.lax.while_loop(cond, body, (left, right, jnp.asarray(False), jnp.asarray(True)))
    return ok


def preconditioned_direction(chol: Array) -> Callable:
    """A BlackJAX proposal generator: the line theta + t L u, u uniform on the unit sphere."""

    def proposal_generator(rng_key, position, logdensity_fn):
        u = jax.random.normal(rng_key, position.shape, position.dtype)
        direction = chol @ (u / jnp.linalg.norm(u))

        def slice_fn(t):
            x = position + t.astype(position.dtype) * direction
            return _bj_slice.SliceState(x, logdensity_fn(x)), True

        return slice_fn

    return proposal_generator


def build_kernel(passes: int = 3, max_expansions: int = 20, max_shrinkage: int = 100) -> Callable:
    """`one_step(rng_key, state, logdensity_fn, width, chol) -> (SliceState, SliceInfo)`: `passes` moves."""
    move = _bj_slice.build_kernel(sequential_doubling, max_expansions, max_shrinkage)

    def one_step(rng_key, state, logdensity_fn, width, chol):
        proposal = preconditioned_direction(chol)

        def one_move(state, key):
            new, info = move(key, state, logdensity_fn, proposal, width)
            # 2 ends + one per doubling + the shrinkage draws (the acceptance test's bisections re-evaluate
            # at most log2(interval / width) more ends; not counted).
            evals = 2 + info.num_expansions + info.num_shrink
            return new, (info.is_accepted, evals)

        state, (accepted, evals) = jax.lax.scan(one_move, state, jax.random.split(rng_key, passes))
        return state, SliceInfo(jnp.mean(accepted.astype(state.position.dtype)), jnp.sum(evals))

    return one_step


def slice_sampler(logdensity_fn: Callable, width, chol: Array, passes: int = 3, max_expansions: int = 20,
                  max_shrinkage: int = 100) -> SamplingAlgorithm:
    """A BlackJAX `SamplingAlgorithm` with `width` (in units of the preconditioned direction) and the
    Cholesky factor `chol` bound."""
    kernel = build_kernel(passes, max_expansions, max_shrinkage)
    return build_sampling_algorithm(kernel, init, logdensity_fn, (), (width, chol))
