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
import inspect
from typing import Any, Callable, Optional

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from . import compiled

__all__ = ["auto_mesh", "data_mesh", "input_mesh", "leading_mesh", "on_auto_mesh", "rowwise", "traced_explicit_mesh",
           "with_auto_axes"]


def auto_mesh(mesh: Mesh) -> Mesh:
    """`mesh` with every axis Auto, so ordinary jitted code may index dynamically (notes.md)."""
    if all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(jax.sharding.AxisType.Auto,) * len(mesh.axis_names))


def _on_explicit_mesh(leaf: Any) -> bool:
    """Whether `leaf` is a concrete array sharded over a mesh with an Explicit axis."""
    if not isinstance(leaf, jax.Array) or isinstance(leaf, jax.core.Tracer):
        return False
    sharding = getattr(leaf, "sharding", None)
    return isinstance(sharding, NamedSharding) and jax.sharding.AxisType.Explicit in sharding.mesh.axis_types


def on_auto_mesh(tree: Any) -> Any:
    """`tree` with every concrete array that is sharded over a mesh with Explicit axes put on the same mesh
    with Auto axes: the same devices and layout, so no data moves between devices.

    `jax.make_mesh` gives Explicit axes by default, under which dynamic row reads (`V[f]`) and contractions
    over the sharded axis raise `ShardingTypeError`; the package's programs are written for Auto axes
    (notes.md). The public functions call this on their arguments (`compilation.full_precision`).
    """
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=_opaque)
    if not any(_on_explicit_mesh(leaf) for leaf in leaves):
        return tree
    return jax.tree_util.tree_map(
        lambda leaf: jax.device_put(leaf, NamedSharding(auto_mesh(leaf.sharding.mesh), leaf.sharding.spec))
        if _on_explicit_mesh(leaf) else leaf, tree, is_leaf=_opaque)


def _opaque(x: Any) -> bool:
    """Iterables that are not pytree containers (a stream's chunk source, an iterator): left whole, never
    iterated (JAX warns on them, and walking into one would consume it)."""
    return hasattr(x, "__iter__") and not isinstance(x, (list, tuple, dict, str, bytes, jax.Array, np.ndarray))


def traced_explicit_mesh(x: Any):
    """The abstract mesh of a traced `x` (its first leaf) that is sharded over a mesh with an Explicit axis,
    else None: a user's `jax.jit` over data on `jax.make_mesh`'s default axes, which `on_auto_mesh`
    cannot move (it is not concrete). The caller then runs its core under `jax.sharding.auto_axes`."""
    leaf = next(iter(jax.tree_util.tree_leaves(x)), None)
    if leaf is None or not isinstance(leaf, jax.core.Tracer):
        return None
    mesh = getattr(getattr(jax.typeof(leaf), "sharding", None), "mesh", None)
    types = () if mesh is None or mesh.empty else tuple(mesh.axis_types)
    # inside a shard_map (Manual axes) the core runs per device as it is
    if jax.sharding.AxisType.Explicit not in types or jax.sharding.AxisType.Manual in types:
        return None
    return mesh


def with_auto_axes(fn: Callable, data_arg: int, rows_out: bool = False) -> Callable:
    """A pure core `fn` that also runs when its argument `data_arg` is traced on Explicit axes (a user's
    `jax.jit` over data on `jax.make_mesh`'s default mesh): then the same program runs under
    `jax.sharding.auto_axes` on that mesh. Its output comes back replicated, or with `rows_out` (a V of
    rows) split along its leading axis as the data is; without Explicit axes `fn` runs as it is."""

    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        positional = signature.bind(*args, **kwargs).args  # the data may come by keyword
        mesh = traced_explicit_mesh(positional[data_arg]) if len(positional) > data_arg else None
        if mesh is None:
            return fn(*args, **kwargs)
        args = positional  # auto_axes passes positional arguments
        leaf = jax.tree_util.tree_leaves(args[data_arg])[0]
        lead = tuple(jax.typeof(leaf).sharding.spec)[:1] if rows_out else ()
        with jax.sharding.use_abstract_mesh(mesh):
            return jax.sharding.auto_axes(fn, out_sharding=P(*lead))(*args)

    return call


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
