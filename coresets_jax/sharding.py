"""Data-parallel execution over a device mesh: the leading axis N is split across devices.

`shard(x)` places a dataset (or V) on a 1-D mesh over all devices, sharded along N. Public entry points then
run on every device and return the single-device result up to floating-point tolerance (api.md):

- `cj.project` maps the per-datum features over each device's own rows (`rowwise`, a `jax.shard_map`), so
  projection needs no communication and V comes out sharded like the data.
- `cj.build` jits the unchanged solver loop under the data mesh (`data_mesh`). XLA's partitioner (GSPMD)
  already does the right thing for the matvec V r (local product; a `psum` where a sum over N follows) and
  for `argmax` over N (a local argmax, then a gather of one candidate per device). What it does badly is a
  dynamic row gather `V[f]`: it all-gathers the whole of V. Solvers therefore read rows with `take_rows`,
  which under a data mesh reads the row on the device that owns it and `psum`s it (J floats), and take a
  global top-k with `top_k` (a local top-k, then a gather of the D*k candidates). Without a mesh both are
  plain `x[idx]` and `lax.top_k`, so single-device code is unchanged.
- The pure core `cj.build_fn(...)`, jitted by the user without `jax.set_mesh`, traces under the mesh its V
  lives on (`input_mesh`, from V's abstract value), so that call is gather-free too.

Convention: under a data mesh every array whose leading axis is N is split along all axes of the mesh, in
mesh order (what `shard` produces). An array laid out differently is still handled correctly (shard_map
reshards it), only not communication-free.

N must be divisible by the number of devices. `shard(V, pad=True)` appends zero rows, which every Hilbert
solver excludes (`Problem.valid`); data are never padded, since a zero datum need not have a zero
log-likelihood.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from .core import validate as _validate
from .core.rows import _current_axes, take_rows, top_k  # noqa: F401 (re-exported)
from .core import compiled

__all__ = ["DATA_AXIS", "data_mesh", "input_mesh", "leading_mesh", "make_data_mesh", "rowwise", "shard",
           "take_rows", "top_k"]

DATA_AXIS = "data"
Array = jax.Array


# --------------------------------------------------------------------------------------------------------
# Meshes and placement.


def make_data_mesh(devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A 1-D mesh named "data" over `devices` (all devices of all hosts by default), with Auto axis type.

    Auto (not JAX 0.10's default Explicit) lets ordinary jitted code index dynamically (notes.md).
    """
    devices = list(jax.devices() if devices is None else devices)
    return Mesh(np.asarray(devices), (DATA_AXIS,), axis_types=(jax.sharding.AxisType.Auto,))


def _auto(mesh: Mesh) -> Mesh:
    if all(t == jax.sharding.AxisType.Auto for t in mesh.axis_types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(jax.sharding.AxisType.Auto,) * len(mesh.axis_names))


def shard(x: Any, mesh: Optional[Mesh] = None, *, pad: bool = False) -> Any:
    """Place every leaf of `x` (a data pytree or V) on `mesh`, split along its leading axis N.

    Args:
      x: a data pytree whose leaves share leading axis N, or V of shape (N, J).
      mesh: a `jax.sharding.Mesh`; N is split over all of its axes. Default: `make_data_mesh()`, a 1-D mesh
        over every device. An Explicit-typed mesh is converted to Auto.
      pad: if N is not divisible by the number of devices, append zero rows up to the next multiple. Right
        for V (zero rows are never selected and do not change sum_n v_n; coreset indices stay < N); not for
        data, whose zero rows would still carry log-likelihood. Default False: raise instead.

    Returns:
      `x` with each leaf a `jax.Array` sharded as `PartitionSpec(mesh.axis_names)` on its leading axis.

    Several hosts (`jax.distributed`): `shard` expects the whole array on every process. When each process
    holds only its own rows, build the global array with `jax.make_array_from_process_local_data(
    NamedSharding(make_data_mesh(), P("data")), local_rows)` instead; everything downstream is the same.
    """
    mesh = make_data_mesh() if mesh is None else mesh
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh: expected a jax.sharding.Mesh, got {type(mesh).__name__}")
    mesh = _auto(mesh)
    n = _validate.num_rows(x, "x")
    count = int(mesh.devices.size)
    extra = (-n) % count
    if extra and not pad:
        raise ValueError(f"x: N = {n} rows cannot be split evenly over {count} devices; drop "
                         f"{n % count} rows, or for V pass pad=True (zero rows are never selected)")

    def place(leaf):
        leaf = jnp.asarray(leaf)
        if extra:
            leaf = jnp.concatenate([leaf, jnp.zeros((extra,) + leaf.shape[1:], leaf.dtype)])
        spec = P(tuple(mesh.axis_names), *([None] * (leaf.ndim - 1)))
        return jax.device_put(leaf, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map(place, x)


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
            return _auto(sharding.mesh)
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
