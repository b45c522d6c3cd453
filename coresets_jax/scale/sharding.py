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

from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from ..core import validate as _validate
# The mesh detection, contexts and row-wise map live in the core, which every stage may import; they are
# re-exported here, where the convention is documented.
from ..core.mesh import auto_mesh, data_mesh, input_mesh, leading_mesh, rowwise  # noqa: F401 (re-exported)
from ..core.rows import take_rows, top_k  # noqa: F401 (re-exported)

__all__ = ["DATA_AXIS", "data_mesh", "input_mesh", "leading_mesh", "make_data_mesh", "rowwise", "shard",
           "take_rows", "top_k"]

DATA_AXIS = "data"


# --------------------------------------------------------------------------------------------------------
# Meshes and placement.


def make_data_mesh(devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A 1-D mesh named "data" over `devices` (all devices of all hosts by default), with Auto axis type.

    Auto (not JAX 0.10's default Explicit) lets ordinary jitted code index dynamically (notes.md).
    """
    devices = list(jax.devices() if devices is None else devices)
    return Mesh(np.asarray(devices), (DATA_AXIS,), axis_types=(jax.sharding.AxisType.Auto,))


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
    mesh = auto_mesh(mesh)
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
