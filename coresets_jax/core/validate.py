"""Input checks for the public boundary.

Every public function validates once, here, outside `jit`, and raises `ValueError` naming the argument.
Jitted kernels assume their inputs are valid and have static shapes.
"""

from __future__ import annotations

from typing import Any, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from . import compiled
from .coreset import Coreset
from .rows import take_data

__all__ = [
    "weighted_rows",
    "check_choice",
    "check_data",
    "check_finite",
    "check_key",
    "check_matrix",
    "check_size",
    "num_rows",
]


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray))


def num_rows(data: Any, name: str = "data") -> int:
    """Leading-axis length N shared by every leaf of a data pytree."""
    leaves = jax.tree_util.tree_leaves(data)
    if not leaves:
        raise ValueError(f"{name}: the data pytree has no arrays")
    sizes = []
    for leaf in leaves:
        if not _is_array(leaf) and not np.isscalar(leaf):
            raise ValueError(f"{name}: leaves must be arrays, got {type(leaf).__name__}")
        shape = np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(f"{name}: every leaf needs a leading axis N; got a scalar leaf")
        sizes.append(shape[0])
    if len(set(sizes)) != 1:
        raise ValueError(f"{name}: leading axes do not match across leaves: {sizes}")
    if sizes[0] < 1:
        raise ValueError(f"{name}: the dataset is empty (N = 0)")
    return int(sizes[0])


@compiled.jit
def _all_finite(x: jax.Array) -> jax.Array:
    # one executable per shape, not two eager ones (isfinite, all): each holds memory mappings (core/compiled.py)
    return jnp.all(jnp.isfinite(x))


def check_finite(x: Any, name: str) -> None:
    """Raise if any floating leaf of `x` holds NaN or inf (one device-to-host sync per leaf)."""
    for leaf in jax.tree_util.tree_leaves(x):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            if not bool(_all_finite(leaf)):
                bad = int(jnp.sum(~jnp.isfinite(leaf)))
                raise ValueError(f"{name}: contains {bad} NaN or inf value(s)")


def check_data(data: Any, name: str = "data") -> int:
    """Check a data pytree: shared leading axis and finite values. Returns N."""
    n = num_rows(data, name)
    check_finite(data, name)
    return n


def check_matrix(V: Any, name: str = "V") -> jax.Array:
    """Check the projected vectors: a finite 2-D (N, J) array with N, J >= 1; an integer V is cast to float."""
    if not _is_array(V):
        raise ValueError(f"{name}: expected a 2-D array of shape (N, J), got {type(V).__name__}")
    if np.ndim(V) != 2:
        raise ValueError(f"{name}: expected a 2-D array of shape (N, J), got shape {np.shape(V)}")
    if min(np.shape(V)) < 1:
        raise ValueError(f"{name}: has an empty axis, shape {np.shape(V)}")
    dtype = jnp.result_type(V)
    if jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.bool_):
        # integer (or boolean) vectors are cast, as NumPy and the reference library do: to the default
        # float dtype (float32, or float64 under jax_enable_x64)
        V = jnp.asarray(V, jnp.result_type(float))
    elif not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"{name}: expected a real (floating or integer) dtype, got {dtype}")
    V = jnp.asarray(V)
    check_finite(V, name)
    return V


def check_size(size: Any, n: int, name: str = "size") -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {size!r}")
    if size < 1:
        raise ValueError(f"{name}: must be at least 1, got {size}")
    if size > n:
        raise ValueError(f"{name}: must be at most N = {n}, got {size}")
    return int(size)


def check_choice(value: Any, choices: Iterable[str], name: str) -> str:
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {choices}")
    return value


def check_key(key: Any, name: str = "key") -> jax.Array:
    """Accept a typed key (`jax.random.key`) or a raw uint32 key (`jax.random.PRNGKey`)."""
    if key is None:
        raise ValueError(f"{name}: a PRNG key is required, e.g. jax.random.key(0)")
    if isinstance(key, (int, np.integer)):
        raise ValueError(f"{name}: expected a PRNG key such as jax.random.key({key}), got an int")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return key
    if key.dtype == jnp.uint32 and key.shape == (2,):
        return jax.random.wrap_key_data(key)
    raise ValueError(f"{name}: expected a PRNG key, got dtype {key.dtype} and shape {key.shape}")


def weighted_rows(data: Any, n: int, weights: Any):
    """Validate coreset weights and gather their rows: (rows, w) for the weighted density.

    `weights` is None (returns (data, None)), a `Coreset` (its fixed-capacity slots: indices in [0, N)), or
    a dense non-negative (N,) array (its non-zero rows, padded to a power of two so that similar sizes
    share one compilation). Raises ValueError for out-of-range indices, wrong shapes, NaN/inf, negative or
    all-zero weights.
    """
    if weights is None:
        return data, None
    if isinstance(weights, Coreset):
        idx = jnp.asarray(weights.indices)
        w = jnp.asarray(weights.weights)
        if idx.ndim != 1 or w.shape != idx.shape:
            raise ValueError(f"weights: the coreset's indices and weights must be 1-D of equal length, got "
                             f"{idx.shape} and {w.shape}")
        if idx.shape[0] > 0 and (int(jnp.min(idx)) < 0 or int(jnp.max(idx)) >= n):
            raise ValueError(f"weights: coreset indices must lie in [0, N = {n})")
    else:
        try:
            w = jnp.asarray(weights)
        except TypeError as err:
            raise ValueError(f"weights: expected None, a Coreset or an array of shape (N,), got "
                             f"{type(weights).__name__}") from err
        if w.shape != (n,):
            raise ValueError(f"weights: expected shape (N,) = ({n},), got {w.shape}")
        if not jnp.issubdtype(w.dtype, jnp.number) or jnp.issubdtype(w.dtype, jnp.complexfloating):
            raise ValueError(f"weights: expected real numbers, got dtype {w.dtype}")
        nonzero = np.flatnonzero(np.asarray(w) != 0)
        # Gather the non-zero rows, padded to a power of two so that similar sizes share one compilation.
        capacity = min(n, 1 << max(int(nonzero.size) - 1, 0).bit_length())
        if capacity >= n:
            idx = jnp.arange(n)
        else:
            idx = jnp.asarray(np.concatenate([nonzero, np.zeros(capacity - nonzero.size, np.int64)]))
            w = jnp.where(jnp.arange(capacity) < nonzero.size, w[idx], 0.0)
    if not jnp.issubdtype(w.dtype, jnp.floating):
        w = w.astype(jnp.float32)
    if not bool(jnp.all(jnp.isfinite(w))):
        raise ValueError("weights: contain NaN or inf")
    if bool(jnp.any(w < 0)):
        raise ValueError("weights: must be non-negative")
    if not bool(jnp.any(w > 0)):
        raise ValueError("weights: all weights are zero, so the target is the prior; pass weights=None "
                         "for the full data, or a coreset with positive weights")
    # Zero-weight slots (padding) repeat a weighted row: their terms are masked out of the density, but
    # autodiff still evaluates them, and an arbitrary row (say row 0) can overflow where the coreset's own
    # rows do not (exp(x theta) = inf gives 0 * inf = NaN in the gradient, and a failed Laplace fit).
    idx = jnp.where(w > 0, idx, idx[jnp.argmax(w > 0)])
    rows = take_data(data, idx)
    return rows, w
