"""Merged coresets: independent coresets on C shards, then their union (HC §4.3; LR §3.4, observation 1).

Each shard c holds a block of rows of V and runs the solver for M iterations on its own block, with no
communication. The union keeps every shard's weights unchanged. Its error obeys HC Corollary 4.6 for
Frank–Wolfe (Eq. 4.14) and Corollary 4.5 for importance sampling (Eq. 4.13):

    ||L(w) - L|| <= sum_c sigma_c etabar_c / sqrt(M) <= sigma etabar / sqrt(M)          (FW)

by the triangle inequality over shards, Theorem 4.4 on each, sum_c sigma_c = sigma and etabar_c <= etabar.

Against the exact sharded path (`cj.build` on a sharded V), which exchanges one argmax candidate per device
and one row of V (J floats) per iteration, the merged coreset exchanges nothing until the final gather of
its C*M (index, weight) pairs, at the price of a larger coreset (capacity C*M) or a larger error at the same
total size.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from . import _validate, sharding as _sharding
from .construct import _check_options
from .solvers import RANDOM_METHODS, REGISTRY, Coreset, make_problem, run

__all__ = ["merged_coreset"]


def _solve_blocks(solver, blocks: jax.Array, keys: jax.Array, first_block: jax.Array):
    """Run `solver` on each (n_c, J) block; returns global indices and weights of shape (C_local, M)."""

    def one(block, key):
        indices, weights, info = run(solver, make_problem(block), key)
        # A block of zero rows has nothing to approximate: sigma_c = 0 makes FW's weights 0/0.
        empty = ~jnp.any(jnp.sum(jnp.square(block.astype(jnp.float32)), axis=1) > 0)
        return indices, jnp.where(empty, jnp.zeros_like(weights), weights), info

    indices, weights, info = jax.vmap(one)(blocks, keys)
    block_ids = first_block + jnp.arange(blocks.shape[0])
    return indices + (block_ids * blocks.shape[1])[:, None].astype(indices.dtype), weights, info


@functools.lru_cache(maxsize=64)
def _compiled(method: str, size: int, options: tuple, num_shards: int, mesh):
    solver = REGISTRY[method](size, **dict(options))

    if mesh is None:
        @jax.jit
        def merged(V, keys):
            blocks = V.reshape(num_shards, V.shape[0] // num_shards, V.shape[1])
            return _solve_blocks(solver, blocks, keys, jnp.asarray(0))
        return merged

    axes = tuple(mesh.axis_names)
    per_device = num_shards // mesh.devices.size

    def local(V, keys):  # this device's rows and its shards' keys: no communication at all
        blocks = V.reshape(per_device, V.shape[0] // per_device, V.shape[1])
        return _solve_blocks(solver, blocks, keys, jax.lax.axis_index(axes) * per_device)

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(axes), P(axes)), out_specs=P(axes),
                                 check_vma=False))


def merged_coreset(V: Any, size: int, num_shards: Optional[int] = None, method: str = "frank_wolfe",
                   key: Optional[jax.Array] = None, **options) -> Coreset:
    """Union of size-M coresets built independently on C contiguous shards of V (HC §4.3).

    Args:
      V: projected vectors (N, J), e.g. from `cj.project`; may be sharded along N (`cj.shard`), in which case
        each device solves its own shards locally (C must then be a multiple of the device count).
      size: M, the capacity (and, for greedy methods, iteration budget) of each shard's coreset.
      num_shards: C. Default: the number of devices holding V (all devices if V is not sharded).
      method: any name in `cj.METHODS`.
      key: PRNG key, split across shards; required by the random methods.
      **options: solver options, as in `cj.build`.

    Returns:
      A `Coreset` of capacity C*M with global row indices; shard c's slots are [c*M, (c+1)*M). Weights are
      the shards' own, unmodified. If C does not divide N, the last shard is shorter (zero rows pad it).
    """
    _validate.check_choice(method, REGISTRY, "method")
    V = _validate.check_matrix(V, "V")
    n = V.shape[0]
    mesh = _sharding.leading_mesh(V)
    devices = 1 if mesh is None else int(mesh.devices.size)
    if num_shards is None:
        num_shards = devices if mesh is not None else jax.device_count()
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or not 1 <= num_shards <= n:
        raise ValueError(f"num_shards: must be an integer in [1, N = {n}], got {num_shards!r}")
    rows = -(-n // num_shards)
    size = _validate.check_size(size, rows, "size")
    if method in RANDOM_METHODS:
        key = _validate.check_key(key)
    else:
        key = jax.random.key(0) if key is None else _validate.check_key(key)
    opts = _check_options(method, options)
    if mesh is not None and (num_shards % devices or n != rows * num_shards):
        raise ValueError(f"num_shards: with V sharded over {devices} devices, num_shards must be a multiple "
                         f"of {devices} that divides N = {n}; got {num_shards}")
    if n != rows * num_shards:
        V = jnp.concatenate([V, jnp.zeros((rows * num_shards - n, V.shape[1]), V.dtype)])
    keys = jax.random.split(key, num_shards)
    if mesh is not None:
        keys = jax.device_put(keys, jax.sharding.NamedSharding(mesh, P(tuple(mesh.axis_names))))
    indices, weights, info = _compiled(method, size, opts, num_shards, mesh)(V, keys)
    if not bool(jnp.all(jnp.isfinite(weights))):
        raise FloatingPointError(f"method {method!r} produced non-finite weights; please report this")
    indices = jnp.where(weights > 0, indices, 0).reshape(-1)
    return Coreset(indices, weights.reshape(-1), info, f"merged_{method}")
