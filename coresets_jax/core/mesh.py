"""Where an array lives, for the stages that run on a device mesh: the mesh a sharded input lives on
(`leading_mesh`), contexts that make it current while tracing (`data_mesh`, `input_mesh`), and the row-wise
map that keeps per-datum work on each device's own rows (`rowwise`).

They sit in the core because projection, compression, construction and certification all use them; placing
data on a mesh (`cj.shard`) and the multi-device entry points are the scale stage's (`coresets_jax.scale`),
whose `sharding` module re-exports these names and documents the convention (`cj.sharding`).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from . import compiled

__all__ = ["auto_mesh", "data_mesh", "input_mesh", "leading_mesh", "rowwise"]


def auto_mesh(mesh: Mesh) -> Mesh:
    """`mesh` with every axis Auto, so ordinary jitted code may index dynamically (notes.md)."""
    if all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(jax.sharding.AxisType.Auto,) * len(mesh.axis_names))


def leading_mesh(x: Any) -> Optional[Mesh]:
    """The mesh if some leaf of `x` is a `jax.Array` whose leading axis is split over more than one device.

    Returns None for unsharded or replicated input (the single-device path).
    """
    for leaf in jax.tree_util.tree_leaves(x):
        sharding = getattr(leaf, "sharding", None)
        if not isinstance(sharding, NamedSharding) or np.ndim(leaf) == 0:
            continue
        spec = tuple(sharding.spec)
        if not spec or spec[0] is None:
            continue
        axes = spec[0] if isinstance(spec[0], tuple) else (spec[0],)
        if int(np.prod([sharding.mesh.shape[a] for a in axes])) > 1:
            return auto_mesh(sharding.mesh)
    return None


def data_mesh(x: Any):
    """A context that makes `x`'s data mesh current while tracing (`jax.set_mesh`), or a no-op.

    `take_rows`/`top_k` read the current mesh at trace time, and `jit`'s cache is keyed on it, so the same
    jitted solver serves sharded and unsharded V with separate compilations.
    """
    mesh = leading_mesh(x)
    return contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh)


def input_mesh(x: Any):
    """A context that makes the mesh `x` lives on current, for code that may be traced without one.

    `jax.jit(cj.build_fn(...))(V_sharded, key)` traces with no mesh set (no `jax.set_mesh`), so `take_rows`
    and `top_k` would take their plain forms and XLA would all-gather V for every row read. Inside a trace
    the input's abstract value still carries the mesh it lives on (not its Auto axes' layout, which is why
    the convention of `shard` is assumed: split along N over all axes); this makes that mesh current with
    `jax.sharding.use_abstract_mesh`. A no-op under a current mesh, for unsharded input, and outside a trace
    for a concrete `x` it is `data_mesh(x)`.
    """
    if not jax.sharding.get_abstract_mesh().empty:
        return contextlib.nullcontext()
    leaf = next(iter(jax.tree_util.tree_leaves(x)), None)
    if leaf is None or not isinstance(leaf, jax.core.Tracer):
        return data_mesh(x)
    mesh = getattr(getattr(jax.typeof(leaf), "sharding", None), "mesh", None)
    if mesh is None or mesh.empty or not any(t == jax.sharding.AxisType.Auto and mesh.shape[a] > 1
                                             for a, t in zip(mesh.axis_names, mesh.axis_types)):
        return contextlib.nullcontext()
    return jax.sharding.use_abstract_mesh(mesh)


# --------------------------------------------------------------------------------------------------------
# Row-wise maps (projection).


@functools.lru_cache(maxsize=64)
def _rowwise_compiled(fn: Callable, mesh: Mesh, prefix: tuple, suffix: tuple, num_replicated: int):
    axes = tuple(mesh.axis_names)

    def local(data, *replicated):
        return fn(*prefix, data, *replicated, *suffix)

    mapped = jax.shard_map(local, mesh=mesh, in_specs=(P(axes),) + (P(),) * num_replicated,
                           out_specs=P(axes))
    return compiled.jit(mapped)


def rowwise(fn: Callable, data: Any, *replicated: Any, prefix: tuple = (), suffix: tuple = ()) -> Any:
    """fn(*prefix, data, *replicated, *suffix), where fn maps rows to rows (output leading axis N).

    If `data` is sharded along N, fn runs on each device's own rows (`jax.shard_map`; `replicated` arrays are
    copied to every device) and the output is sharded the same way: no communication. Otherwise a plain
    call. `prefix` and `suffix` hold hashable static arguments (model, options); compiled maps are cached on
    them.
    """
    mesh = leading_mesh(data)
    if mesh is None:
        return fn(*prefix, data, *replicated, *suffix)
    return _rowwise_compiled(fn, mesh, tuple(prefix), tuple(suffix), len(replicated))(data, *replicated)
