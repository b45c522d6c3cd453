"""Row access that respects a device mesh: the one row accessor and the one top-k of the package.

Under a data mesh (`cj.shard`: every array with leading axis N split along all mesh axes), a dynamic gather
`x[idx]` makes XLA's partitioner all-gather the whole of x. `take_rows` instead reads each row on the device
that owns it and `psum`s it (the rows only), and `top_k` takes a local top-k per device, then the top k of
the gathered candidates. Without a mesh both are plain `x[idx]` and `lax.top_k`, so single-device code is
unchanged. Every solver, NNLS, refit and sampler gathers rows through here.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

__all__ = ["block_top_k", "current_axes", "fold_row_chunks", "inverse_cdf", "take_data", "take_rows", "top_k"]

Array = jax.Array


def current_axes(length: int) -> Optional[tuple]:
    """The current mesh's Auto axes of size > 1 (inside a shard_map body they are Manual: none left).

    None when there is no such mesh, or when `length` does not split evenly over it (a small array that is
    not indexed by N): then the plain operation is used, which is correct whatever the layout.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return None
    axes = tuple(a for a, t in zip(mesh.axis_names, mesh.axis_types)
                 if t == jax.sharding.AxisType.Auto and mesh.shape[a] > 1)
    if not axes or length % int(np.prod([mesh.shape[a] for a in axes])):
        return None
    return axes


def take_rows(x: Array, idx: Array) -> Array:
    """x[idx] along the leading axis (idx a scalar or a vector of row numbers).

    Under a data mesh: each device reads the rows it owns (zeros elsewhere) and a `psum` combines them, so
    the traffic is the rows themselves rather than an all-gather of x. Out-of-range idx gives zeros there
    instead of a clamped row.
    """
    axes = current_axes(x.shape[0])
    if axes is None:
        return x[idx]

    def local(xl, i):
        n = xl.shape[0]
        j = i - jax.lax.axis_index(axes) * n
        own = (j >= 0) & (j < n)
        rows = xl[jnp.clip(j, 0, n - 1)]
        own = own.reshape(own.shape + (1,) * (rows.ndim - own.ndim))
        if rows.dtype == jnp.bool_:  # psum promotes booleans to integers: sum as int32, then back
            return jax.lax.psum(jnp.where(own, rows, False).astype(jnp.int32), axes) > 0
        return jax.lax.psum(jnp.where(own, rows, jnp.zeros_like(rows)), axes)

    spec = P(axes)
    return jax.shard_map(local, in_specs=(spec, P()), out_specs=P())(x, idx)


def top_k(x: Array, k: int) -> tuple[Array, Array]:
    """`lax.top_k` of a vector of length N: (values, indices), largest first.

    Under a data mesh: a local top-k on each device (k capped at the local length), an all-gather of the D*k
    candidates with their global indices, then the top k of those. The result is the global top-k.

    float64 top_k is ~150x slower than float32 on CPU (notes.md), so for float64 x with 2k < N this takes 2k
    float32 candidates and chooses the top k among them in float64 (the candidates gathered with
    `take_rows`, so a sharded x is never all-gathered). Ties closer than float32 resolution may be ordered
    differently.

    Long float32 vectors (N >= 2^15, per device) take `block_top_k`: the same result, from block maxima.
    """
    if x.dtype == jnp.float64 and 2 * k < x.shape[0]:
        _, cand = _top_k(x.astype(jnp.float32), 2 * k)
        vals, pos = jax.lax.top_k(take_rows(x, cand), k)
        return vals, cand[pos]
    return _top_k(x, k)


def fold_row_chunks(fn, carry, data: Any, chunk: int):
    """Fold `fn(carry, rows, start, fresh) -> carry` over the rows of `data`, `chunk` (at most N) at a time.

    One `fori_loop` of ceil(N / chunk) steps over chunks of static shape: the last chunk starts at N - chunk,
    so `fn` is traced and compiled once (a separate remainder of N mod chunk rows would be a second copy of
    it), and `fresh` (chunk,) marks the rows that the chunk before did not cover. `start` is the chunk's first
    row (for in-place writes)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    chunk = min(chunk, n)

    def body(i, carry):
        start = jnp.minimum(i * chunk, n - chunk)
        rows = jax.tree_util.tree_map(lambda leaf: jax.lax.dynamic_slice_in_dim(leaf, start, chunk), data)
        return fn(carry, rows, start, start + jnp.arange(chunk) >= i * chunk)

    return jax.lax.fori_loop(0, -(-n // chunk), body, carry)


_BLOCK = 64  # entries per block of `block_top_k`
_BLOCKED_MIN = 1 << 15  # vectors at least this long (float32) take `block_top_k`


def block_top_k(x: Array, k: int, block: int = _BLOCK) -> tuple[Array, Array]:
    """`lax.top_k(x, k)` of a float32 vector, the same values and indices, from block maxima.

    OMP takes the top 8 of N scores every step; at N = 10^6 (logistic Fisher features, J = 160) XLA:CPU's TopK
    made a step 19.3 ms where this takes 18.4 ms (medians of 3 alternating runs on a shared 2-core CPU; the
    same coreset). Here: the maxima of blocks of `block` entries (one fused pass),
    the top k blocks, then the top k of those k * block entries. Exact: an entry among the top k (largest
    first, lower index first among equals, as `lax.top_k` orders them) lies in a block whose maximum precedes
    all but at most k - 1 other blocks' maxima in that order, so the top k blocks hold all of them; the
    chosen blocks are gathered in ascending order, so ties still go to the lower index. The comparisons are
    on the floats' order-preserving int32 keys, which order -0 < +0 and NaNs (by sign) the way lax.top_k's
    total order does.
    """
    n = x.shape[0]
    num_blocks = -(-n // block)
    if num_blocks < k:  # fewer blocks than k: nothing to gain
        return jax.lax.top_k(x, k)
    bits = jax.lax.bitcast_convert_type(x, jnp.int32)
    flip = lambda b: b ^ ((b >> 31) & jnp.int32(0x7FFFFFFF))  # noqa: E731  (an involution)
    low = jnp.iinfo(jnp.int32).min  # padding ranks below every key and has the highest indices
    keys = jnp.pad(flip(bits), (0, num_blocks * block - n), constant_values=low).reshape(num_blocks, block)
    # each block's maximum in the total order, back as a float: lax.top_k on floats is XLA's TopK (on the int32
    # keys it was a full sort of the block maxima, slower than one TopK over all N)
    maxima = jax.lax.bitcast_convert_type(flip(jnp.max(keys, axis=1)), x.dtype)
    _, blocks = jax.lax.top_k(maxima, k)
    blocks = jnp.sort(blocks)
    padded = jax.lax.bitcast_convert_type(flip(keys[blocks]), x.dtype).reshape(-1)
    _, pos = jax.lax.top_k(padded, k)
    idx = (blocks[pos // block] * block + pos % block).astype(jnp.int32)
    return x[idx], idx


def _local_top_k(x: Array, k: int) -> tuple[Array, Array]:
    """lax.top_k on one device; `block_top_k` for long float32 vectors and small k."""
    n = x.shape[0]
    if x.dtype == jnp.float32 and n >= _BLOCKED_MIN and 4 * k * _BLOCK <= n:
        return block_top_k(x, k)
    return jax.lax.top_k(x, k)


def _top_k(x: Array, k: int) -> tuple[Array, Array]:
    """The mesh-aware top-k in x's own dtype (`top_k`)."""
    axes = current_axes(x.shape[0])
    if axes is None:
        return _local_top_k(x, k)

    def local(xl):
        n = xl.shape[0]
        values, idx = _local_top_k(xl, min(k, n))
        idx = idx + jax.lax.axis_index(axes) * n
        values = jax.lax.all_gather(values, axes, tiled=True)
        idx = jax.lax.all_gather(idx, axes, tiled=True)
        best, pos = jax.lax.top_k(values, k)
        return best, idx[pos]

    return jax.shard_map(local, in_specs=P(axes), out_specs=(P(), P()), check_vma=False)(x)


def unit_weights(n: int, dtype) -> Array:
    """N ones: the row weights of a plain dataset, as a value XLA cannot fold. A constant `ones(N)` lets the
    GPU compiler evaluate `cumsum(ones(N))` (the subsampler's CDF) at compile time, seconds per fold at
    N = 10^6 on an H200; the barrier keeps that O(N) work at run time, where it is a microsecond pass."""
    return jax.lax.optimization_barrier(jnp.ones(n, dtype))


def inverse_cdf(weights: Array, u: Array, *, cumulative: bool = False) -> Array:
    """For each u, the number of entries of cumsum(weights) that are <= u: the row an inverse-CDF draw with
    uniform u * sum(weights) lands on (`searchsorted(cumsum(w), u, side="right")`).

    `cumulative=True`: `weights` is cumsum(w) already, so a caller that draws many times from the same w
    pays the O(N) cumsum once and each call only the O(len(u) log N) searches.

    Under a data mesh: each device scans its own rows offset by the totals of the devices before it (an
    all-gather of one float per device), counts locally, and a `psum` of the counts gives the global answer;
    the weights are never gathered.
    """
    axes = current_axes(weights.shape[0])
    if axes is None:
        return jnp.searchsorted(weights if cumulative else jnp.cumsum(weights), u, side="right")

    def local(wl, u):
        if cumulative:  # a global cumsum split along N: each device counts its own entries <= u
            return jax.lax.psum(jnp.searchsorted(wl, u, side="right"), axes)
        cdf = jnp.cumsum(wl)
        totals = jax.lax.all_gather(cdf[-1], axes, tiled=False)
        offset = jnp.sum(jnp.where(jnp.arange(totals.shape[0]) < jax.lax.axis_index(axes), totals, 0.0))
        return jax.lax.psum(jnp.searchsorted(cdf + offset, u, side="right"), axes)

    return jax.shard_map(local, in_specs=(P(axes), P()), out_specs=P(), check_vma=False)(weights, u)


def take_data(data: Any, idx: Array) -> Any:
    """The rows `idx` of every leaf of a data pytree (mesh-aware, as `take_rows`)."""
    return jax.tree_util.tree_map(lambda leaf: take_rows(jnp.asarray(leaf), idx), data)
