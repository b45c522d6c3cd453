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

import os
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import checks as _checks
from ..core import validate as _validate
from ..construct.posterior import compiled_coreset_fn, start_from
from ..construct.vectors import build
from ..weighting.pihat import samples
from ..core.model import Model
from ..features.projection import project
from ..core import Coreset
from ..registry import resolve
from ..core.chunks import is_sliceable, iter_chunks
from .stream_checkpoint import Checkpoint, Node, load_checkpoint, run_fingerprint, save_checkpoint
from ..compilation import full_precision

__all__ = ["stream_coreset", "iter_chunks"]

Array = jax.Array


def _pad(node: Node, capacity: int) -> Node:
    extra = capacity - node.indices.shape[0]
    if extra <= 0:
        return node
    pad = lambda x: jnp.concatenate([x, jnp.zeros((extra,) + x.shape[1:], x.dtype)])
    return Node(pad(node.indices), pad(node.weights), pad(node.V), jax.tree_util.tree_map(pad, node.data))


def _take(node: Node, idx: Array, weights: Array) -> Node:
    take = lambda x: x[idx]
    return Node(node.indices[idx], weights, node.V[idx], jax.tree_util.tree_map(take, node.data))


def _merge(a: Node, b: Node) -> Node:
    cat = lambda x, y: jnp.concatenate([x, y])
    return Node(cat(a.indices, b.indices), cat(a.weights, b.weights), cat(a.V, b.V),
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


def _reduce(node: Node, size: int, method: _Method, key: Array) -> Node:
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


@full_precision
def stream_coreset(model: Model, chunks: Any, size: int, thetas: Array, key: Array, *, norm: str = "fisher",
                   method: Any = "frank_wolfe", chunk_size: Optional[int] = None, dtype=None,
                   checkpoint: Optional[str] = None, checkpoint_every: int = 1, tol: Optional[float] = None,
                   **options) -> Coreset:
    """A size-M coreset of a stream of data chunks by merge-reduce over a binary tree (LR §3.4); with `tol`,
    the smallest coreset whose certificate over the whole stream says KL(pi_w || pi) <= tol (`_stream_auto`).

    Args:
      model: the model (its log-likelihood is projected).
      chunks: an iterable of data chunks (pytrees like the model's data), or an array-like source read
        `chunk_size` rows at a time (see `iter_chunks`).
      size: M, the capacity of every coreset in the tree and of the result; at most the total N of the stream.
      thetas: (J, D) samples from pi_hat, fixed across chunks (e.g. a Laplace fit on a first chunk).
      key: PRNG key: one projection key for all chunks (fixed Fisher coordinates), and solver keys
        (`fold_in(key, node)` over a node counter, so a resumed run draws the same keys).
      norm: "fisher" | "l2" | "centered", as in `cj.project`.
      method: the construction for leaves and reductions: a name in `cj.METHODS` or
        `cj.POSTERIOR_METHODS`, or a `cj.Construction`. Posterior-driven methods skip the projection; their
        chains start at the mean of `thetas` with its covariance.
      chunk_size: rows per chunk for array sources.
      dtype: projection dtype.
      checkpoint: a file path. Every `checkpoint_every` chunks the merge-tree state (one coreset per level,
        the counters) is written there atomically (a temporary file, then `os.replace`), so a killed run
        loses at most that many chunks of work. If the file exists when the call starts, the run resumes
        from it: the chunks it had consumed are skipped (an array source is not even read; an iterable must
        yield the same chunks again), and the result is the same as an uninterrupted run with the same key.
        A checkpoint from a run with other settings is refused. The file is removed when the run finishes.
      checkpoint_every: k, the chunks between checkpoints.
      tol: nats. Build the stream's coreset at capacity `size` (the upper limit), then search sizes below it
        as `cj.coreset(..., tol=...)` does: at each size the size-`size` coreset is reduced with `method`
        (vector methods only), its posterior drawn by NUTS on the selected rows, and certified with one pass
        over the stream (`cj.certify` on the chunks). The source must be readable again (a list of chunks or
        an array source, not a one-shot generator). The result carries `certificate` and `info["path"]`.
      **options: solver options, as in `cj.build`.

    Returns:
      A `Coreset` of capacity M with global row indices (rows counted across chunks in arrival order).
      `info` holds "data" (the selected data rows, aligned with the slots, so inference needs no second pass
      over the stream), "V" (their projected rows), "num_rows" N, "num_chunks" B, "max_held" (the most
      coresets held at once) and "resumed_from" (chunks restored from a checkpoint, 0 if none).
    """
    construction = resolve(method)
    key = _validate.check_key(key)
    if tol is not None:
        return _stream_auto(model, chunks, size, thetas, key, tol, construction, chunk_size=chunk_size, norm=norm,
                            dtype=dtype, checkpoint=checkpoint, checkpoint_every=checkpoint_every, options=options)
    thetas = jnp.asarray(thetas)
    if thetas.ndim != 2 or thetas.shape[0] < 1:
        raise ValueError(f"thetas: expected shape (J, D) with J >= 1, got {thetas.shape}")
    start = start_from(samples(thetas), key) if construction.needs == "posterior" else None
    solver = _Method(construction, dict(options), model, start)
    size = _validate.check_positive_int(size, "size")
    _validate.check_finite(thetas, "thetas")
    if checkpoint is not None and not isinstance(checkpoint, (str, os.PathLike)):
        raise ValueError(f"checkpoint: expected a file path, got {type(checkpoint).__name__}")
    checkpoint_every = _validate.check_positive_int(checkpoint_every, "checkpoint_every")
    if is_sliceable(chunks):  # the total N is known up front
        total = _validate.num_rows(jax.tree_util.tree_map(lambda l: np.empty((l.shape[0], 0)), chunks), "chunks")
        if size > total:
            raise ValueError(f"size: must be at most the stream's N = {total} rows, got {size}")
    fingerprint = run_fingerprint(size, construction.name, norm, dtype, key, thetas, options)
    key_proj, key_solve = jax.random.split(key)
    state = Checkpoint({}, 0, 0, 0, 0)
    resume = checkpoint is not None and os.path.exists(checkpoint)
    resumed_from = 0

    def solver_key():
        nonlocal state
        state = state._replace(node_id=state.node_id + 1)
        return jax.random.fold_in(key_solve, state.node_id)

    def reduce(node):
        level = 0
        while level in state.levels:  # binary-counter carry: merge equal levels, then reduce
            node = _reduce(_merge(state.levels.pop(level), node), size, solver, solver_key())
            level += 1
        state.levels[level] = node

    skip_sliced = 0
    if resume and is_sliceable(chunks):  # restore now and start slicing after the consumed rows
        treedef = jax.tree_util.tree_structure(chunks)
        state = load_checkpoint(checkpoint, fingerprint, treedef)
        skip_sliced = resumed_from = state.count
    consumed = 0  # chunks of an iterable passed over on resume
    for chunk in iter_chunks(chunks, chunk_size, skip=skip_sliced):
        if resume and not skip_sliced:
            if consumed == 0:  # the first chunk tells the data structure of the stored rows
                state = load_checkpoint(checkpoint, fingerprint, jax.tree_util.tree_structure(chunk))
                resumed_from = state.count
            if consumed < resumed_from:
                consumed += 1
                continue
        index = state.count
        n = _checks.check_model_data(model, chunk, f"chunks (chunk {index})")
        try:
            _checks.check_theta(model, chunk, thetas, "thetas", ndim=2)
        except ValueError as err:
            raise ValueError(f"chunks: chunk {index} does not match thetas of shape {thetas.shape} "
                             f"(leaf shapes {[np.shape(l) for l in jax.tree_util.tree_leaves(chunk)]}): "
                             f"{err}") from err
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
        leaf = Node(idx.astype(jnp.int32) + state.offset, w, V[idx],
                     jax.tree_util.tree_map(lambda x: x[idx], chunk))
        del chunk, V
        reduce(_pad(leaf, size))
        state = state._replace(max_held=max(state.max_held, len(state.levels)), offset=state.offset + n,
                               count=state.count + 1)
        if checkpoint is not None and state.count % int(checkpoint_every) == 0:
            save_checkpoint(checkpoint, state, fingerprint)
    if resume and not skip_sliced and consumed < resumed_from:
        raise ValueError(f"chunks: the checkpoint {checkpoint!r} has consumed {resumed_from} chunks, but the "
                         f"stream yielded only {consumed}; it is not the stream that wrote the checkpoint")
    if state.count == 0:
        raise ValueError("chunks: the stream is empty")
    if size > state.offset:
        raise ValueError(f"size: must be at most the stream's N = {state.offset} rows (known when the stream "
                         f"ended), got {size}")
    levels = state.levels
    result = None
    for level in sorted(levels):  # final merge of the partial tree, smallest level first
        result = levels[level] if result is None else _reduce(_merge(result, levels[level]), size, solver,
                                                             solver_key())
    weights = jnp.where(result.weights > 0, result.weights, 0.0)
    indices = jnp.where(weights > 0, result.indices, 0)
    info = {"data": result.data, "V": result.V, "num_rows": state.offset, "num_chunks": state.count,
            "max_held": state.max_held, "resumed_from": resumed_from}
    if checkpoint is not None and os.path.exists(checkpoint):
        os.remove(checkpoint)
    return Coreset(indices, weights, info, f"stream_{construction.name}")


def _stream_auto(model, chunks, size, thetas, key, tol, construction, *, chunk_size, norm, dtype, checkpoint,
                 checkpoint_every, options) -> Coreset:
    """`stream_coreset(..., tol=...)`: one pass builds the size-`size` coreset; then the size search of
    `construct.auto_size` reduces it (on its rows' projections, targeting their weighted sum, as a merge-reduce
    node does), draws each candidate's posterior on the selected rows and certifies it over the stream."""
    from ..certification import certify
    from ..construct import auto_size
    from ..inference import sample

    tol = _validate.check_positive_float(tol, "tol")
    if construction.needs != "vectors":
        raise ValueError(f"method: tol= searches sizes with a vector method; {construction.name!r} is posterior-driven")
    if not is_sliceable(chunks) and iter(chunks) is chunks:
        raise ValueError("chunks: tol= certifies each size tried with a pass over the whole stream, so the source "
                         "must be readable again: a list of chunks or an array source, not a one-shot iterator")
    big = stream_coreset(model, chunks, size, thetas, key, norm=norm, method=construction, chunk_size=chunk_size,
                         dtype=dtype, checkpoint=checkpoint, checkpoint_every=checkpoint_every, **options)
    live = np.flatnonzero(np.asarray(big.weights) > 0)
    rows = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[live], big.info["data"])
    V, w, global_idx = jnp.asarray(big.info["V"])[live], jnp.asarray(big.weights)[live], jnp.asarray(big.indices)[live]
    node = Node(global_idx, w, V, rows)
    n = int(big.info["num_rows"])
    solver = _Method(construction, dict(options), model, None)

    def build_at(m: int) -> Coreset:
        """The size-m reduction of the stream's coreset, with global indices and `local` (its rows' positions)."""
        reduced = _reduce(node, m, solver, jax.random.fold_in(key, 7919 + m))
        weights = jnp.where(reduced.weights > 0, reduced.weights, 0.0)
        local = jnp.argmax(reduced.indices[:, None] == global_idx[None, :], axis=1).astype(jnp.int32)
        local = jnp.where(weights > 0, local, 0)
        return Coreset(jnp.where(weights > 0, reduced.indices, 0), weights, {"local": local},
                       f"stream_{construction.name}", {"N": n})

    def draw(cs, k, init):
        local = cs.info["local"]  # the search may pad the slots (weight 0) to a shared capacity
        local = Coreset(jnp.pad(local, (0, cs.capacity - local.shape[0])), cs.weights, {}, cs.method)
        return sample(model, rows, k, weights=local, init=init, warn=False, **auto_size.SAMPLING)

    def judge(cs, draws):
        return certify(model, chunks, cs, draws, chunk_size=chunk_size)

    dim = int(thetas.shape[1])
    out = auto_size.auto_coreset(model, rows, n, tol, min(size, live.size), construction, jax.random.fold_in(key, 1),
                                 build_at, draw=draw, judge=judge, dim=dim)
    info = dict(out.info, num_rows=n, num_chunks=big.info["num_chunks"], stream_size=size)
    info.pop("local", None)
    return Coreset(out.indices, out.weights, info, out.method, out.settings, out.certificate)
