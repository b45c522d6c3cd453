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

from . import sharding as _sharding
from ..construct.posterior import coreset_fn, default_start, resolve_pi_hat, start_from
from ..construct.vectors import build_fn, key_for, rescaled
from ..core import Coreset, Model
from ..core import validate as _validate
from ..registry import Construction, resolve
from ..core import compiled as _compiled_fns
from ..compilation import full_precision

__all__ = ["merged_coreset"]


def _solve_blocks(solve, blocks: jax.Array, keys: jax.Array, first_block: jax.Array):
    """Run the pure core `solve` on each (n_c, J) block; global indices and weights of shape (C_local, M)."""

    def one(block, key):
        cs = solve(block, key)
        # A block of zero rows has nothing to approximate: sigma_c = 0 makes FW's weights 0/0.
        empty = ~jnp.any(jnp.sum(jnp.square(block.astype(jnp.float32)), axis=1) > 0)
        weights = jnp.where(empty, jnp.zeros_like(cs.weights), cs.weights)
        return cs.indices, weights, dict(cs.info, finite=jnp.all(jnp.isfinite(weights)))

    indices, weights, info = jax.vmap(one)(blocks, keys)
    block_ids = first_block + jnp.arange(blocks.shape[0])
    return indices + (block_ids * blocks.shape[1])[:, None].astype(indices.dtype), weights, info


@functools.lru_cache(maxsize=64)
def _compiled(construction: Construction, size: int, options: tuple, num_shards: int, mesh):
    solve = build_fn(construction, size, **dict(options))

    if mesh is None:
        @_compiled_fns.jit
        def merged(V, keys):
            blocks = V.reshape(num_shards, V.shape[0] // num_shards, V.shape[1])
            return _solve_blocks(solve, blocks, keys, jnp.asarray(0))
        return merged

    axes = tuple(mesh.axis_names)
    per_device = num_shards // mesh.devices.size

    def local(V, keys):  # this device's rows and its shards' keys: no communication at all
        blocks = V.reshape(per_device, V.shape[0] // per_device, V.shape[1])
        return _solve_blocks(solve, blocks, keys, jax.lax.axis_index(axes) * per_device)

    return _compiled_fns.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(axes), P(axes)), out_specs=P(axes),
                                           check_vma=False))


def _merged_posterior(construction, model, data, size, num_shards, key, approx, options) -> Coreset:
    """Posterior-driven methods: the same union, each shard's core run on its own rows (padding weight 0)."""
    if not isinstance(model, Model):
        raise ValueError(f"model: a posterior-driven method needs model=cj.Model, got {type(model).__name__}")
    if data is None:
        raise ValueError("data: a posterior-driven method needs the data pytree (data=...)")
    n = _validate.check_data(data)
    num_shards = _validate.check_int(num_shards, "num_shards", 1, n)
    rows = -(-n // num_shards)
    size = _validate.check_size(size, rows, "size")
    key = key_for(construction, key)
    extra = rows * num_shards - n
    pad = lambda a: jnp.concatenate([jnp.asarray(a), jnp.repeat(jnp.asarray(a)[-1:], extra, axis=0)])
    blocks = jax.tree_util.tree_map(lambda a: pad(a).reshape((num_shards, rows) + jnp.shape(a)[1:]), data)
    leaf = jax.tree_util.tree_leaves(data)[0]
    dtype = jnp.promote_types(jnp.result_type(leaf), jnp.float32)
    data_weights = (jnp.arange(rows * num_shards) < n).astype(dtype).reshape(num_shards, rows)
    k_pi, k_start, k_solve = jax.random.split(key, 3)
    if approx is None and not construction.uses_pi_hat:  # no full-data pass, as cj.coreset
        start = default_start(model, data)
    else:
        start = start_from(resolve_pi_hat(approx, model, data, k_pi), k_start)
    solve = coreset_fn(model, construction, size, **dict(construction.check_options(options)))
    # One shard after another (lax.map), each the unbatched program: a vmapped run would step every shard's
    # chains until the slowest finishes its trajectory, and batched linear algebra rounds differently, which
    # MCMC then amplifies; run this way a shard's slots equal `cj.coreset_fn` run alone on its rows.
    run = lambda args: solve(args[0], args[1], start, args[2])  # noqa: E731
    cs = jax.jit(lambda keys, b, dw: jax.lax.map(run, (keys, b, dw)))(jax.random.split(k_solve, num_shards),
                                                                       blocks, data_weights)
    if not bool(jnp.all(cs.info["finite"])):
        raise FloatingPointError(f"method {construction.name!r} produced non-finite weights")
    indices = cs.indices + (jnp.arange(num_shards) * rows)[:, None].astype(cs.indices.dtype)
    weights = cs.weights
    indices = jnp.where(weights > 0, indices, 0).reshape(-1)
    return Coreset(indices, weights.reshape(-1), cs.info, f"merged_{construction.name}")


def _default_shards(num_shards: Optional[int], x: Any, name: str) -> int:
    """C as given; when None, the number of devices `x` is sharded over. Never the machine's device count
    for unsharded input: the same script would then build a different coreset on another machine."""
    if num_shards is not None:
        return num_shards
    mesh = _sharding.leading_mesh(x)
    if mesh is None:
        raise ValueError(f"num_shards: required when {name} is not sharded over devices (it sets the coreset, "
                         "so it is not taken from the machine); e.g. merged_coreset(V, size, num_shards=4)")
    return int(mesh.devices.size)


@full_precision
def merged_coreset(V: Any, size: int, num_shards: Optional[int] = None, method: Any = "frank_wolfe",
                   key: Optional[jax.Array] = None, *, model: Optional[Model] = None, data: Any = None,
                   pi_hat: Any = None, **options) -> Coreset:
    """Union of size-M coresets built independently on C contiguous shards of V (HC §4.3).

    Args:
      V: projected vectors (N, J), e.g. from `cj.project`; may be sharded along N (`cj.shard`), in which case
        each device solves its own shards locally (C must then be a multiple of the device count).
      size: M, the capacity (and, for greedy methods, iteration budget) of each shard's coreset.
      num_shards: C. Default: the number of devices V (or the data) is sharded over; required for unsharded
        input, so that a script builds the same coreset on every machine.
      method: any name in `cj.METHODS` or `cj.POSTERIOR_METHODS`, or a `cj.Construction`.
      key: PRNG key, split across shards; required by the random methods. A posterior-driven method's shard c
        runs its core with key `split(split(key, 3)[2], C)[c]` (the first two: pi_hat's fit and its start),
        so a shard's slots equal `cj.coreset_fn(...)` run alone on its rows (tests/posterior_plumbing.py).
      model, data, pi_hat: for posterior-driven methods, which need the model and the data instead of V
        (pass V=None): each shard's rows get their own run of the method's pure core, one after another
        in one compiled call; pi_hat ("laplace", the default: a Laplace fit on all the data; "prior"; an (S, D) array of
        samples; or an object with `.sample`, as in `cj.coreset`) starts and preconditions the chains
        (methods that need no pi_hat, `Construction.uses_pi_hat` False, start from the model's zero theta
        unless it is given, as in `cj.coreset`).
      **options: the method's options, as in `cj.build` / `cj.coreset`.

    Returns:
      A `Coreset` of capacity C*M with global row indices; shard c's slots are [c*M, (c+1)*M). Weights are
      the shards' own, unmodified. If C does not divide N, the last shard is shorter (zero rows pad it).
    """
    construction = resolve(method)
    if construction.needs == "posterior":
        return _merged_posterior(construction, model, data, size, _default_shards(num_shards, data, "data"), key,
                                 pi_hat, options)
    V = rescaled(_validate.check_matrix(V, "V"))
    n = V.shape[0]
    mesh = _sharding.leading_mesh(V)
    devices = 1 if mesh is None else int(mesh.devices.size)
    num_shards = _default_shards(num_shards, V, "V")
    num_shards = _validate.check_int(num_shards, "num_shards", 1, n)
    rows = -(-n // num_shards)
    size = _validate.check_size(size, rows, "size")
    key = key_for(construction, key)
    refit = options.pop("refit", False)
    opts = construction.check_options(options) + ((("refit", True),) if refit else ())
    if mesh is not None and (num_shards % devices or n != rows * num_shards):
        raise ValueError(f"num_shards: with V sharded over {devices} devices, num_shards must be a multiple "
                         f"of {devices} that divides N = {n}; got {num_shards}")
    if n != rows * num_shards:
        V = jnp.concatenate([V, jnp.zeros((rows * num_shards - n, V.shape[1]), V.dtype)])
    keys = jax.random.split(key, num_shards)
    if mesh is not None:
        keys = jax.device_put(keys, jax.sharding.NamedSharding(mesh, P(tuple(mesh.axis_names))))
    indices, weights, info = _compiled(construction, size, opts, num_shards, mesh)(V, keys)
    if not bool(jnp.all(info["finite"])):
        raise FloatingPointError(f"method {construction.name!r} produced non-finite weights; please report this")
    indices = jnp.where(weights > 0, indices, 0).reshape(-1)
    return Coreset(indices, weights.reshape(-1), info, f"merged_{construction.name}")
