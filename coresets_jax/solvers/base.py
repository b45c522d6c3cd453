"""The solver interface every construction shares.

All Hilbert-coreset solvers approximate the vector sum of the projected log-likelihoods,

    min_w ||sum_n v_n - V^T w||^2  s.t.  w >= 0, ||w||_0 <= M          (HC Eq. 3.2, IHT Eq. 2)

A solver is a `Solver(init, step, done, extract)` of pure functions, with its hyperparameters (capacity M,
step rule, tolerances) bound by its constructor:

    state = init(problem, key)        # first iterate, cached quantities
    state = step(problem, state)      # one iteration
    done(state) -> bool scalar        # stop predicate
    extract(state) -> (indices, weights, info)

`run(solver, problem, key)` drives any solver in one `lax.while_loop`. `Problem` carries V together with the
quantities every solver needs (row norms sigma_n, target sum_n v_n), so each is computed once. V is passed
explicitly, never closed over, so that the same compiled loop serves any V of the same shape, a sharded V
(XLA partitions the matvecs and reductions), or a compressed factor A of V = A B^T with B orthonormal (which
preserves every inner product the solvers use).

Shared pieces live here once: the bounded-capacity support (`Support`), masked argmax over valid rows,
and the residual bookkeeping.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from .. import progress
from ..core.rows import take_rows, top_k  # mesh-aware x[idx], lax.top_k

__all__ = [
    "Problem",
    "Solver",
    "Support",
    "make_problem",
    "masked_argmax",
    "matvec",
    "run",
    "support_add",
    "support_empty",
    "support_scale",
    "take_rows",
    "top_k",
]

Array = jax.Array


# --------------------------------------------------------------------------------------------------------
# The problem: V plus the cached quantities every solver uses.


class Problem(NamedTuple):
    """V (N, J) with its row norms sigma_n = ||v_n|| and target sum_n v_n (HC Eq. 3.3).

    `valid` masks rows with sigma_n > 0: zero rows cannot help approximate the sum and are never selected
    nor divided by.
    """

    V: Array
    norms: Array
    target: Array
    valid: Array


def make_problem(V: Array) -> Problem:
    """Row norms and target in one pass, accumulated in at least float32."""
    acc = jnp.promote_types(V.dtype, jnp.float32)
    Vf = V.astype(acc)
    norms = jnp.sqrt(jnp.sum(jnp.square(Vf), axis=1))
    return Problem(V, norms, jnp.sum(Vf, axis=0), norms > 0)


def matvec(problem: Problem, x: Array) -> Array:
    """V x, the one pass over V per iteration. V may be stored in bfloat16/float16 (half the bytes read);
    the products accumulate in float32 and come back in the solver's working dtype."""
    return jnp.matmul(problem.V, x.astype(problem.V.dtype),
                      preferred_element_type=problem.target.dtype).astype(problem.target.dtype)


def masked_argmax(scores: Array, valid: Array) -> Array:
    """argmax over valid rows; invalid rows score -inf."""
    return jnp.argmax(jnp.where(valid, scores, -jnp.inf))


# --------------------------------------------------------------------------------------------------------
# A support of bounded capacity, for solvers that add one point per iteration.


class Support(NamedTuple):
    """Selected rows and their weights; slots [0, count) are in use."""

    indices: Array
    weights: Array
    count: Array


def support_empty(capacity: int, dtype) -> Support:
    return Support(jnp.zeros(capacity, jnp.int32), jnp.zeros(capacity, dtype), jnp.asarray(0, jnp.int32))


def support_slot(support: Support, row: Array) -> tuple[Array, Array]:
    """(slot holding `row` or the next free slot, whether `row` is already present)."""
    slots = jnp.arange(support.indices.shape[0])
    hit = (support.indices == row) & (slots < support.count)
    present = jnp.any(hit)
    return jnp.where(present, jnp.argmax(hit), support.count), present


def support_add(support: Support, row: Array, amount: Array) -> Support:
    """Add `amount` to row's weight, taking a new slot if the row is new.

    The caller guarantees capacity (greedy solvers add at most one row per iteration, and run at most
    `capacity` iterations); a full support re-uses the last slot rather than writing out of bounds.
    """
    slot, present = support_slot(support, row)
    slot = jnp.minimum(slot, support.indices.shape[0] - 1)
    return Support(support.indices.at[slot].set(row.astype(jnp.int32)),
                   support.weights.at[slot].add(amount.astype(support.weights.dtype)),
                   support.count + jnp.where(present, 0, 1).astype(jnp.int32))


def support_scale(support: Support, factor: Array) -> Support:
    return support._replace(weights=support.weights * factor.astype(support.weights.dtype))


# --------------------------------------------------------------------------------------------------------
# The protocol and its driver.


class Solver(NamedTuple):
    """A sparse non-negative vector-sum solver as pure functions (see the module docstring)."""

    init: Callable[[Problem, Array], Any]
    step: Callable[[Problem, Any], Any]
    done: Callable[[Any], Array]
    extract: Callable[[Any], tuple[Array, Array, dict]]


def run(solver: Solver, problem: Problem, key: Array) -> tuple[Array, Array, dict]:
    """Drive `solver` to completion in one `lax.while_loop`; traceable, so jit it from the outside."""
    state = solver.init(problem, key)
    # A tqdm report every ~2^30 / (N J) iterations; a plain lax.while_loop when progress is off or V is so
    # small that reports would be over 16 iterations apart (sub-second runs; and a program holding a
    # callback is never written to the persistent compilation cache).
    every = progress.every_for(problem.V.size)
    loop = progress.while_loop if every <= 16 else (lambda c, b, s, **_: jax.lax.while_loop(c, b, s))
    state = loop(lambda s: jnp.logical_not(solver.done(s)), lambda s: solver.step(problem, s), state,
                 desc="solver (iterations)", every=every)
    return solver.extract(state)


def aggregate_draws(draws: Array, amounts: Array, dtype) -> Support:
    """Merge repeated draws into unique rows with summed weights (capacity = number of draws).

    Used by the sampling constructions, where the multinomial counts M_n become weights (HC Algorithm 1).
    """
    order = jnp.argsort(draws)
    rows, amounts = draws[order], amounts[order].astype(dtype)
    first = jnp.concatenate([jnp.ones((1,), bool), rows[1:] != rows[:-1]])
    group = jnp.cumsum(first) - 1
    capacity = draws.shape[0]
    indices = jnp.zeros(capacity, jnp.int32).at[group].set(rows.astype(jnp.int32))
    weights = jnp.zeros(capacity, dtype).at[group].add(amounts)
    return Support(indices, weights, group[-1] + 1)


def one_shot(construct: Callable[[Problem, Array], Support]) -> Solver:
    """A non-iterative construction (uniform, importance sampling) as a Solver: init does the work."""
    return Solver(
        init=construct,
        step=lambda problem, state: state,
        done=lambda state: jnp.asarray(True),
        extract=lambda state: (state.indices, state.weights, {}),
    )
