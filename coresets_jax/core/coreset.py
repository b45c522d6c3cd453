"""The result type of every construction: a weighted subset of fixed capacity.

A `Coreset` is a pytree, so it passes through `jit` and `vmap`. Under `vmap` (batched trials) its arrays gain
leading batch axes; every method here works on any number of them: `capacity` is the last axis, `num_points`
is then an integer array, and `dense(N)` has shape `(..., N)`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Coreset"]

Array = jax.Array


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Coreset:
    """A weighted subset of fixed capacity.

    Attributes:
      indices: (..., capacity) int rows of the dataset; unused slots hold 0 with weight 0.
      weights: (..., capacity) non-negative weights; 0 on padding.
      info: dict of array diagnostics from the construction (e.g. `finite`, `relative_error`).
      method: the construction's name (static).
      settings: how it was built (size, options, norm, J, key, time), set by the public entry points on
        the host for saving and reports; not part of the pytree, so it does not survive `jit`/`vmap`.
      certificate: a `cj.Certificate` of its posterior against the full data (`cj.certify`, or
        `cj.coreset(..., certify=True)`), or None; host-side like `settings`.
    """

    indices: Array
    weights: Array
    info: dict = dataclasses.field(default_factory=dict)
    method: str = ""
    settings: dict = dataclasses.field(default_factory=dict, compare=False)
    certificate: object = dataclasses.field(default=None, compare=False)

    def tree_flatten(self):
        return (self.indices, self.weights, self.info), self.method

    @classmethod
    def tree_unflatten(cls, method, children):
        indices, weights, info = children
        return cls(indices, weights, info, method)

    @property
    def capacity(self) -> int:
        return int(np.shape(self.indices)[-1])

    @property
    def batch_shape(self) -> tuple:
        """Leading batch axes (empty for a single coreset)."""
        return tuple(np.shape(self.indices)[:-1])

    @property
    def num_points(self):
        """Rows with weight > 0: a Python int, or an int array of `batch_shape` (not usable under `jit`)."""
        count = np.count_nonzero(np.asarray(self.weights) > 0, axis=-1)
        return int(count) if np.ndim(count) == 0 else count

    def dense(self, n: int) -> Array:
        """The full weight vector, shape (..., N)."""
        weights, indices = jnp.asarray(self.weights), jnp.asarray(self.indices)
        flat_w = weights.reshape(-1, weights.shape[-1])
        flat_i = indices.reshape(-1, indices.shape[-1])
        rows = jax.vmap(lambda i, w: jnp.zeros(n, w.dtype).at[i].add(w))(flat_i, flat_w)
        return rows.reshape(weights.shape[:-1] + (n,))

    def compact(self) -> "Coreset":
        """Only the slots with positive weight (a concrete, variable-size coreset; unbatched only)."""
        if self.batch_shape:
            raise ValueError("compact: a batched coreset has no single support; index one element first")
        keep = np.asarray(self.weights) > 0
        return Coreset(jnp.asarray(self.indices)[keep], jnp.asarray(self.weights)[keep], self.info,
                       self.method, self.settings, self.certificate)

    def with_certificate(self, certificate) -> "Coreset":
        """The same coreset carrying `certificate` (from `cj.certify`)."""
        return dataclasses.replace(self, certificate=certificate)

    def __getitem__(self, item) -> "Coreset":
        """Index the batch axes: `batch[3]` is the fourth trial's coreset."""
        if not self.batch_shape:
            raise TypeError("Coreset: only a batched coreset can be indexed")
        pick = lambda a: a[item] if np.ndim(a) >= len(self.batch_shape) else a
        return Coreset(self.indices[item], self.weights[item], jax.tree_util.tree_map(pick, self.info),
                       self.method)

    def __repr__(self) -> str:
        parts = [f"method={self.method!r}"]
        if self.batch_shape:
            points = np.asarray(self.num_points)
            parts += [f"batch={self.batch_shape}", f"capacity={self.capacity}",
                      f"points={int(points.min())}..{int(points.max())}"]
        else:
            parts += [f"capacity={self.capacity}", f"points={self.num_points}"]
            error = self.info.get("relative_error") if isinstance(self.info, dict) else None
            if error is not None and np.ndim(error) == 0:
                parts.append(f"relative_error={float(error):.3g}")
        if self.certificate is not None:
            parts.append(f"certificate={self.certificate.brief()}")
        return f"Coreset({', '.join(parts)})"
