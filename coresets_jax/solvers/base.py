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
from jax.sharding import PartitionSpec as P

from .. import progress
from ..core.rows import current_axes, take_rows, top_k  # mesh-aware x[idx], lax.top_k
from .least_squares import two_sum

__all__ = [
    "Problem",
    "Solver",
    "Support",
    "column_sum",
    "make_problem",
    "problem_spec",
    "masked_argmax",
    "matvec",
    "run",
    "sequential_under_vmap",
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


def make_problem(V: Array, target: Any = None) -> Problem:
    """Row norms, accumulated in at least float32, and the target: sum_n v_n, correctly rounded
    (`column_sum`), or a given `target` (J,) when V holds only candidate rows of a larger sum
    (`cj.coreset(..., candidate_rows=R)`)."""
    acc = jnp.promote_types(V.dtype, jnp.float32)
    Vf = V.astype(acc)
    norms = jnp.sqrt(jnp.sum(jnp.square(Vf), axis=1))
    target = column_sum(V, acc) if target is None else jnp.asarray(target).astype(acc)
    return Problem(V, norms, target, norms > 0)


def problem_spec(shape: tuple, dtype) -> Problem:
    """The shapes and dtypes of `make_problem(V)` for V of `shape` (N, J) and `dtype`, as ShapeDtypeStructs,
    without tracing it: `jax.eval_shape(make_problem, V)` traces the compensated target sum (0.08-0.1 s of
    Python, on the critical path of a first `cj.coreset`)."""
    acc = jnp.promote_types(dtype, jnp.float32)
    n, dim = shape
    spec = jax.ShapeDtypeStruct
    return Problem(spec((n, dim), dtype), spec((n,), acc), spec((dim,), acc), spec((n,), jnp.bool_))


# Rows per step of `column_sum`'s loop. With 16, the loop ran N / 16 steps of a few microseconds of thunk
# overhead each: 0.35 s of OMP's 3.9 s at N = 10^6 (XLA:CPU profile); with 1024, about 0.04 s.
_BLOCK = 1024


def _column_sum_pair(V: Array, dtype) -> tuple[Array, Array]:
    """sum_n v_n as a pair (hi, lo) with hi + lo within ~N eps^2 sum_n |v_n| of the exact sum: blocks of
    _BLOCK rows are added by TwoSum into a (_BLOCK, J) accumulator whose errors are summed on the side, then
    the accumulator and the last N mod _BLOCK rows are summed by a pairwise TwoSum tree. The blocks are
    dynamic slices of V (a reshape of V's first rows would copy them when N is not a multiple of _BLOCK)."""
    n, dim = V.shape
    m = n // _BLOCK

    def body(i, c):
        hi, lo = c
        hi, e = two_sum(hi, jax.lax.dynamic_slice_in_dim(V, i * _BLOCK, _BLOCK).astype(dtype))
        return hi, lo + e

    tail = V[m * _BLOCK:].astype(dtype)
    if m:
        zero = jnp.zeros((_BLOCK, dim), dtype)
        hi, lo = jax.lax.fori_loop(0, m, body, (zero, zero))
        hi, lo = jnp.concatenate([hi, tail]), jnp.sum(lo, axis=0)
    else:
        hi, lo = tail, jnp.zeros((dim,), dtype)
    while hi.shape[0] > 1:  # static: ceil(log2(rows)) levels
        if hi.shape[0] % 2:
            hi = jnp.concatenate([hi, jnp.zeros_like(hi[:1])])
        hi, e = two_sum(hi[0::2], hi[1::2])
        lo = lo + jnp.sum(e, axis=0)
    return two_sum(hi[0], lo)


def column_sum(V: Array, dtype=None) -> Array:
    """sum_n v_n (the target), correctly rounded to `dtype` (default: V's, at least float32) up to ~N eps^2.

    A plain float32 sum is off by ~1e-7 relative for Fisher features (their rows cancel: sum_n ||v_n|| is
    ~40 ||y||), and by a different amount for every row order, sharding or batching; solvers that fit the
    target below that level (OMP reaches ~5e-7) then give answers that depend on the layout. Compensated
    (TwoSum) accumulation gives the same, correctly rounded, target for any order. Cost about one pass over V.

    Under a data mesh each device sums its own rows, and the per-device pairs are gathered (2 J numbers per
    device) and added in device order, so V is never gathered.
    """
    dtype = jnp.promote_types(V.dtype, jnp.float32) if dtype is None else dtype
    axes = current_axes(V.shape[0])
    if axes is None:
        if _mesh_axes():  # a mesh that does not split N evenly: a plain sum, which any layout allows
            return jnp.sum(V.astype(dtype), axis=0)
        return _column_sum_pair(V, dtype)[0]

    def local(vl):
        hi, lo = _column_sum_pair(vl, dtype)
        parts = jax.lax.all_gather(jnp.stack([hi, lo]), axes, tiled=True)  # (2 D, J): hi, lo per device
        hi, lo = parts[0], parts[1]
        for d in range(1, parts.shape[0] // 2):
            hi, e = two_sum(hi, parts[2 * d])
            lo = lo + (e + parts[2 * d + 1])
        return hi + lo

    return jax.shard_map(local, in_specs=P(axes), out_specs=P(), check_vma=False)(V)


def _mesh_axes() -> bool:
    """Whether the current mesh has an Auto axis of size > 1 (data may be sharded along it)."""
    mesh = jax.sharding.get_abstract_mesh()
    return (not mesh.empty) and any(t == jax.sharding.AxisType.Auto and mesh.shape[a] > 1
                                    for a, t in zip(mesh.axis_names, mesh.axis_types))


def sequential_under_vmap(fn: Callable) -> Callable:
    """`fn` with a batching rule that runs the unbatched `fn` once per batch element (`lax.map`), so that a
    vmapped call gives bit for bit what a Python loop gives. Batched kernels (a batched matvec, batched
    reductions) round differently from the unbatched ones; a greedy solver that chooses among near-ties
    (OMP) then follows another path. The batch costs what a loop costs, which is also what a batched
    matvec over separate V's costs (each V is read once either way)."""
    batched_fn = jax.custom_batching.custom_vmap(fn)

    @batched_fn.def_vmap
    def rule(axis_size, in_batched, *args):
        del axis_size
        flat, tree = jax.tree.flatten(args)
        flags = jax.tree.leaves(in_batched)

        def one(mapped):
            it = iter(mapped)
            return fn(*jax.tree.unflatten(tree, [next(it) if b else a for a, b in zip(flat, flags)]))

        out = jax.lax.map(one, [a for a, b in zip(flat, flags) if b])
        return out, jax.tree.map(lambda _: True, out)

    return batched_fn


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
