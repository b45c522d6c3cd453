"""Streaming merge-reduce coresets (LR §3.4; HC §4.3): bounded memory for data larger than RAM.

Data arrive as B chunks. Each chunk is projected with one fixed set of pi_hat samples (and one fixed set of
Fisher coordinates: the same projection key for every chunk), so all chunks live in the same R^J, and a
size-M coreset is built on it. Coresets are then merged up a binary tree, as in a binary counter:

    merge (LR §3.4, observation 1): the union of two weighted coresets approximates the union of their data;
    reduce (observation 2):          a coreset of the union, built by the same solver.

Only one coreset per tree level is held, so at most ceil(log2 B) + 1 coresets of M rows plus one chunk are in
memory at once.

Reducing a weighted set. The merged points carry weights w_m and projected rows v_m; the target is
sum_m w_m v_m. The solvers approximate the plain sum of their rows, so we solve on u_m = w_m v_m, getting
w'_m with sum_m w'_m u_m ≈ sum_m u_m, and return weights w_m w'_m. Zero-weight (padding) slots give zero rows,
which every solver excludes.

Error. With Frank–Wolfe, each reduction of a node with norm sum sigma_node errs by at most
sigma_node etabar / sqrt(M) (HC Theorem 4.4), FW keeps sum_m sigma_m w_m = sigma_node, and the normalised
vectors of any subset have etabar no larger than the full data's. Summing over the nodes of each of the
1 + ceil(log2 B) levels (triangle inequality, as for HC Corollary 4.6) bounds the streamed coreset's error by
(1 + ceil(log2 B)) sigma etabar / sqrt(M).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Iterator, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .core import validate as _validate
from .construct import build, compiled_coreset_fn
from .registry import Start
from .core.model import Model
from .projection import project
from .core import Coreset
from .registry import resolve

__all__ = ["stream_coreset", "iter_chunks"]

Array = jax.Array


class _Node(NamedTuple):
    """A weighted coreset in the tree: global row indices, weights, projected rows, data rows."""

    indices: Array
    weights: Array
    V: Array
    data: Any


def _is_sliceable(x: Any) -> bool:
    if isinstance(x, Iterator):  # a generator or iterator of chunks
        return False
    if isinstance(x, list) and x and not any(hasattr(e, "shape") for e in x):
        return False  # a list of chunk pytrees, e.g. [(X1, y1), (X2, y2)]
    leaves = jax.tree_util.tree_leaves(x)
    return bool(leaves) and all(hasattr(l, "shape") and hasattr(l, "__getitem__") for l in leaves)


def iter_chunks(source: Any, chunk_size: Optional[int] = None) -> Iterator[Any]:
    """Chunks of a data source, each a pytree of arrays with a shared leading axis.

    `source` is either an iterable of chunks (a generator, a list), or an array-like (or a pytree of them)
    that supports `shape` and slicing along its leading axis, e.g. `np.load(path, mmap_mode="r")` or a zarr
    array; it is then read `chunk_size` rows at a time, so only one chunk is ever in memory.
    """
    if _is_sliceable(source):
        if chunk_size is None or isinstance(chunk_size, bool) or int(chunk_size) < 1:
            raise ValueError(f"chunk_size: a positive integer is needed to slice an array source, "
                             f"got {chunk_size!r}")
        n = _validate.num_rows(jax.tree_util.tree_map(lambda l: np.empty((l.shape[0], 0)), source), "chunks")
        for start in range(0, n, int(chunk_size)):
            yield jax.tree_util.tree_map(lambda l: np.asarray(l[start:start + int(chunk_size)]), source)
        return
    if not isinstance(source, Iterable):
        raise ValueError(f"chunks: expected an iterable of data chunks or a sliceable array, got "
                         f"{type(source).__name__}")
    yield from source


def _pad(node: _Node, capacity: int) -> _Node:
    extra = capacity - node.indices.shape[0]
    if extra <= 0:
        return node
    pad = lambda x: jnp.concatenate([x, jnp.zeros((extra,) + x.shape[1:], x.dtype)])
    return _Node(pad(node.indices), pad(node.weights), pad(node.V), jax.tree_util.tree_map(pad, node.data))


def _take(node: _Node, idx: Array, weights: Array) -> _Node:
    take = lambda x: x[idx]
    return _Node(node.indices[idx], weights, node.V[idx], jax.tree_util.tree_map(take, node.data))


def _merge(a: _Node, b: _Node) -> _Node:
    cat = lambda x, y: jnp.concatenate([x, y])
    return _Node(cat(a.indices, b.indices), cat(a.weights, b.weights), cat(a.V, b.V),
                 jax.tree_util.tree_map(cat, a.data, b.data))


class _Method(NamedTuple):
    """The construction used at every node, with what it needs bound (model and pi_hat's start)."""

    construction: Any
    options: dict
    model: Any
    start: Any


def _solve(method: _Method, U: Array, data: Any, data_weights: Array, size: int, key: Array) -> Coreset:
    """A size-`size` coreset of a (weighted) node. Vector methods solve on U = diag(u) V and return weights
    relative to u; posterior-driven methods target sum_n u_n L_n themselves and return absolute weights."""
    if method.construction.needs == "vectors":
        return build(U, size, method.construction, key, **method.options)
    opts = method.construction.check_options(method.options)
    cs = compiled_coreset_fn(method.model, method.construction, size, opts)(key, data, method.start, data_weights)
    if not bool(cs.info["finite"]):
        raise FloatingPointError(f"method {method.construction.name!r} produced non-finite weights")
    return cs


def _reduce(node: _Node, size: int, method: _Method, key: Array) -> _Node:
    """Compress a weighted set to `size` slots: solve on u_m = w_m v_m, then multiply the weights back."""
    U = node.weights[:, None].astype(node.V.dtype) * node.V
    live_rows = jnp.any(U != 0, axis=1) if method.construction.needs == "vectors" else node.weights > 0
    live = int(jnp.count_nonzero(live_rows))
    if live <= size:  # already small enough: keep the positive slots as they are
        order = jnp.argsort(-(node.weights > 0).astype(jnp.int32), stable=True)[:size]
        return _pad(_take(node, order, node.weights[order]), size)
    cs = _solve(method, U, node.data, node.weights, size, key)
    if method.construction.needs == "posterior":
        return _take(node, cs.indices, cs.weights.astype(node.weights.dtype))
    return _take(node, cs.indices, node.weights[cs.indices] * cs.weights.astype(node.weights.dtype))


def stream_coreset(model: Model, chunks: Any, size: int, thetas: Array, key: Array, *, norm: str = "fisher",
                   method: Any = "frank_wolfe", chunk_size: Optional[int] = None, dtype=None,
                   **options) -> Coreset:
    """A size-M coreset of a stream of data chunks by merge-reduce over a binary tree (LR §3.4).

    Args:
      model: the model (its log-likelihood is projected).
      chunks: an iterable of data chunks (pytrees like the model's data), or an array-like source read
        `chunk_size` rows at a time (see `iter_chunks`).
      size: M, the capacity of every coreset in the tree and of the result.
      thetas: (J, D) samples from pi_hat, fixed across chunks (e.g. a Laplace fit on a first chunk).
      key: PRNG key: one projection key for all chunks (fixed Fisher coordinates), and solver keys.
      norm: "fisher" | "l2" | "centered", as in `cj.project`.
      method: the construction for leaves and reductions: a name in `cj.METHODS` or
        `cj.POSTERIOR_METHODS`, or a `cj.Construction`. Posterior-driven methods skip the projection; their
        chains start at the mean of `thetas` with its covariance.
      chunk_size: rows per chunk for array sources.
      dtype: projection dtype.
      **options: solver options, as in `cj.build`.

    Returns:
      A `Coreset` of capacity M with global row indices (rows counted across chunks in arrival order).
      `info` holds "data" (the selected data rows, aligned with the slots, so inference needs no second pass
      over the stream), "V" (their projected rows), "num_rows" N, "num_chunks" B and "max_held" (the most
      coresets held at once).
    """
    construction = resolve(method)
    key = _validate.check_key(key)
    thetas = jnp.asarray(thetas)
    if thetas.ndim != 2 or thetas.shape[0] < 1:
        raise ValueError(f"thetas: expected shape (J, D) with J >= 1, got {thetas.shape}")
    start = None
    if construction.needs == "posterior":
        d = thetas.shape[1]
        cov = (jnp.cov(thetas, rowvar=False).reshape(d, d) if thetas.shape[0] > 1 else jnp.eye(d, dtype=thetas.dtype))
        start = Start(jnp.mean(thetas, axis=0), cov + 1e-6 * jnp.eye(d, dtype=thetas.dtype))
    solver = _Method(construction, dict(options), model, start)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"size: must be a positive integer, got {size!r}")
    size = int(size)
    key_proj, key_solve = jax.random.split(key)
    levels: dict[int, _Node] = {}
    offset, count, max_held, node_id = 0, 0, 0, 0

    def solver_key():
        nonlocal node_id
        node_id += 1
        return jax.random.fold_in(key_solve, node_id)

    for chunk in iter_chunks(chunks, chunk_size):
        n = _validate.check_data(chunk, "chunks")
        chunk = jax.tree_util.tree_map(jnp.asarray, chunk)
        if construction.needs == "vectors":
            V = project(model, chunk, thetas, norm=norm, key=key_proj, dtype=dtype)
        else:  # posterior-driven: no projection; a zero column keeps the node layout
            V = jnp.zeros((n, 1), jnp.promote_types(jnp.result_type(thetas), jnp.float32))
        m = min(size, n)
        if construction.needs == "posterior" or bool(jnp.any(V != 0)):
            cs = _solve(solver, V, chunk, jnp.ones(n, V.dtype), m, solver_key())
            idx, w = cs.indices, cs.weights
        else:  # nothing to approximate in this chunk
            idx, w = jnp.zeros(m, jnp.int32), jnp.zeros(m, V.dtype)
        leaf = _Node(idx.astype(jnp.int32) + offset, w, V[idx],
                     jax.tree_util.tree_map(lambda x: x[idx], chunk))
        node = _pad(leaf, size)
        del chunk, V
        level = 0
        while level in levels:  # binary-counter carry: merge equal levels, then reduce
            node = _reduce(_merge(levels.pop(level), node), size, solver, solver_key())
            level += 1
        levels[level] = node
        max_held = max(max_held, len(levels))
        offset += n
        count += 1
    if count == 0:
        raise ValueError("chunks: the stream is empty")
    result = None
    for level in sorted(levels):  # final merge of the partial tree, smallest level first
        result = levels[level] if result is None else _reduce(_merge(result, levels[level]), size, solver,
                                                             solver_key())
    weights = jnp.where(result.weights > 0, result.weights, 0.0)
    indices = jnp.where(weights > 0, result.indices, 0)
    info = {"data": result.data, "V": result.V, "num_rows": offset, "num_chunks": count, "max_held": max_held}
    return Coreset(indices, weights, info, f"stream_{construction.name}")
