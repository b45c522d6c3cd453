"""Input checks for the public boundary.

Every public function validates once, here, outside `jit`, and raises `ValueError` naming the argument.
Jitted kernels assume their inputs are valid and have static shapes.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation import fast_jit
from . import compiled
from .coreset import Coreset
from .rows import take_data
from .arguments import (check_bool, check_float, check_fraction, check_int, check_nonneg_float,  # noqa: F401
                        check_nonneg_int, check_positive_float, check_positive_int)

__all__ = [
    "HOST_CHECK_MAX",
    "weighted_rows",
    "check_bool",
    "check_choice",
    "check_float",
    "check_fraction",
    "check_int",
    "check_nonneg_float",
    "check_nonneg_int",
    "check_positive_float",
    "check_positive_int",
    "check_data",
    "check_finite",
    "check_key",
    "check_matrix",
    "check_size",
    "count_nonfinite",
    "host_array",
    "host_view",
    "num_rows",
    "split_key",
]

# Arrays of up to this many elements are checked with NumPy on the host. An eager jnp check compiles one
# XLA program per operation and shape (20-80 ms each on a first call, a dozen of them per public call);
# copying 4 MB to the host costs about a millisecond, and nothing on a CPU backend.
HOST_CHECK_MAX = 1 << 20


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


def host_array(x: Any) -> Any:
    """`x` as a NumPy array when it is NumPy already, or small (`HOST_CHECK_MAX`) and on this process's
    devices; None for a large or multi-process `jax.Array` (check those with one jitted reduction)."""
    if isinstance(x, jax.Array):
        if x.size <= HOST_CHECK_MAX and x.is_fully_addressable:
            return np.asarray(x)
        return None
    return np.asarray(x)


def host_view(x: Any) -> Optional[np.ndarray]:
    """`x` itself as a NumPy array, without a copy: a NumPy array, or a `jax.Array` held whole by one CPU device
    (JAX's CPU buffers are host memory, and `np.asarray` maps them read-only); None for anything else (an
    accelerator's array, or one sharded over devices), which would have to be copied."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, jax.Array) and x.is_fully_addressable and len(x.sharding.device_set) == 1 \
            and next(iter(x.sharding.device_set)).platform == "cpu":
        return np.asarray(x)
    return None


HOST_BLOCK = 1 << 20  # elements per step of a host-side check: its temporaries stay a few MB


@compiled.jit
def _count_nonfinite(x: jax.Array) -> jax.Array:
    return jnp.sum(~jnp.isfinite(x))


def count_nonfinite(x: Any) -> int:
    """Number of NaN or inf entries of one array: NumPy for small arrays and for arrays already in host memory
    (a CPU device's, in blocks of HOST_BLOCK: no compilation, at the memory's speed), else one jitted pass."""
    host = host_array(x)
    if host is None:
        host = host_view(x)
    if host is not None:
        flat = host.reshape(-1)
        return sum(int(np.count_nonzero(~np.isfinite(flat[i:i + HOST_BLOCK])))
                   for i in range(0, flat.size, HOST_BLOCK))
    return int(_count_nonfinite(x))


def check_finite(x: Any, name: str) -> None:
    """Raise if any floating leaf of `x` holds NaN or inf (one device-to-host sync per leaf)."""
    for leaf in jax.tree_util.tree_leaves(x):
        if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            bad = count_nonfinite(leaf)
            if bad:
                raise ValueError(f"{name}: contains {bad} NaN or inf value(s)")


def check_data(data: Any, name: str = "data") -> int:
    """Check a data pytree: shared leading axis and finite values. Returns N."""
    n = num_rows(data, name)
    check_finite(data, name)
    return n


def check_matrix(V: Any, name: str = "V", finite: bool = True) -> jax.Array:
    """Check the projected vectors: a finite 2-D (N, J) array with N, J >= 1; an integer V is cast to float.
    `finite=False` leaves the finiteness check to the caller (`cj.build` folds it into one pass over V)."""
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
    if finite:
        check_finite(V, name)
    return V


def check_size(size: Any, n: int, name: str = "size") -> int:
    """A coreset size: an integer in [1, N]."""
    size = check_positive_int(size, name)
    if size > n:
        raise ValueError(f"{name}: must be at most N = {n}, got {size}")
    return size


def check_choice(value: Any, choices: Iterable[str], name: str) -> str:
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"{name}: unknown value {value!r}; expected one of {choices}")
    return value


@functools.lru_cache(maxsize=None)
def _splitter(num: int):
    return fast_jit(lambda key: tuple(jax.random.split(key, num)))


def split_key(key: jax.Array, num: int) -> tuple:
    """`tuple(jax.random.split(key, num))` as one compiled program (eagerly it is two: split, unstack)."""
    return _splitter(int(num))(key)


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
    # Coreset weights are small: every check below runs in NumPy on the host (no XLA compilations).
    if isinstance(weights, Coreset):
        idx = np.asarray(weights.indices)
        w = np.asarray(weights.weights)
        if idx.ndim != 1 or w.shape != idx.shape:
            raise ValueError(f"weights: the coreset's indices and weights must be 1-D of equal length, got "
                             f"{idx.shape} and {w.shape}")
        if idx.shape[0] > 0 and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise ValueError(f"weights: coreset indices must lie in [0, N = {n})")
    else:
        try:
            w = np.asarray(weights)
        except TypeError as err:
            raise ValueError(f"weights: expected None, a Coreset or an array of shape (N,), got "
                             f"{type(weights).__name__}") from err
        if w.shape != (n,):
            raise ValueError(f"weights: expected shape (N,) = ({n},), got {w.shape}")
        if not np.issubdtype(w.dtype, np.number) or np.issubdtype(w.dtype, np.complexfloating):
            raise ValueError(f"weights: expected real numbers, got dtype {w.dtype}")
        nonzero = np.flatnonzero(w != 0)
        # Gather the non-zero rows, padded to a power of two so that similar sizes share one compilation.
        capacity = min(n, 1 << max(int(nonzero.size) - 1, 0).bit_length())
        if capacity >= n:
            idx = np.arange(n)
        else:
            idx = np.concatenate([nonzero, np.zeros(capacity - nonzero.size, np.int64)])
            w = np.where(np.arange(capacity) < nonzero.size, w[idx], 0)
    if not np.issubdtype(w.dtype, np.floating):
        w = w.astype(np.float32)
    if not np.all(np.isfinite(w)):
        raise ValueError("weights: contain NaN or inf")
    if np.any(w < 0):
        raise ValueError("weights: must be non-negative")
    if not np.any(w > 0):
        raise ValueError("weights: all weights are zero, so the target is the prior; pass weights=None "
                         "for the full data, or a coreset with positive weights")
    # Zero-weight slots (padding) repeat a weighted row: their terms are masked out of the density, but
    # autodiff still evaluates them, and an arbitrary row (say row 0) can overflow where the coreset's own
    # rows do not (exp(x theta) = inf gives 0 * inf = NaN in the gradient, and a failed Laplace fit).
    idx = np.where(w > 0, idx, idx[np.argmax(w > 0)]).astype(np.int32)
    return jax.tree_util.tree_map(lambda leaf: gather(leaf, idx), data), jax.device_put(w)


def gather(leaf: Any, idx: np.ndarray) -> jax.Array:
    """leaf[idx]: in NumPy for a leaf in host memory (`host_view`) or a small one on one device (an eager gather
    is a compilation per shape), one compiled gather for a large one on an accelerator (eagerly, `x[idx]`
    compiles three or four small programs), else the mesh-aware `take_data`."""
    single = isinstance(leaf, jax.Array) and len(leaf.sharding.device_set) == 1
    host = host_view(leaf)
    if host is None and single and leaf.size <= HOST_CHECK_MAX:
        host = np.asarray(leaf)
    if host is not None:  # jnp.asarray of a host array compiles a program per shape
        return jax.device_put(host[idx])
    if single:
        return _take_rows(leaf, jax.device_put(idx))
    return take_data(leaf, jnp.asarray(idx))


@compiled.jit
def _take_rows(leaf: jax.Array, idx: jax.Array) -> jax.Array:
    return leaf[idx]
