"""`cj.certify` over a source of data chunks (as `cj.stream_coreset` takes): one chunk on the device at a time,
plus the coreset's rows, picked up as their chunks pass."""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Coreset, Model
from ..core import checks as _checks
from ..core.chunks import iter_chunks
from .passes import combine, coreset_term, full_term, pass_draws, precision_scope

__all__ = ["live_rows", "streamed_log_ratio"]


def live_rows(coreset: Any) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights) of the positive-weight rows of a Coreset or a dense weight vector."""
    if isinstance(coreset, Coreset):
        indices, weights = np.asarray(coreset.indices), np.asarray(coreset.weights)
    else:
        weights = np.asarray(coreset)
        indices = np.arange(weights.size)
    live = weights > 0
    return indices[live], weights[live]


def streamed_log_ratio(model: Model, source: Any, coreset: Any, draws: np.ndarray, chunk_size: Optional[int],
                        precision: str) -> tuple[np.ndarray, int, int]:
    """`log_ratio` over a source of data chunks (`chunks.iter_chunks`): one chunk on the device at a time,
    plus the coreset's rows, picked up as their chunks pass. Returns (r, zero-weight draws, N)."""
    indices, weights = live_rows(coreset)
    picked, full, flags, offset = {}, 0.0, 0, 0
    with precision_scope(precision):
        thetas, reference = pass_draws(draws, precision)
        for chunk in iter_chunks(source, chunk_size):
            rows = _checks.check_model_data(model, chunk, "data (a chunk)")
            if offset == 0:
                _checks.check_theta(model, chunk, draws, "draws")
            for slot in np.flatnonzero((indices >= offset) & (indices < offset + rows)):
                picked[slot] = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf[indices[slot] - offset]), chunk)
            part, part_flags = full_term(model, chunk, thetas, reference, chunk_size)
            full, flags, offset = full + part, flags | part_flags, offset + rows
        if offset == 0:
            raise ValueError("data: the source of chunks yielded no rows")
        if indices.size and int(indices.max()) >= offset:
            raise ValueError(f"coreset: its indices reach {int(indices.max())}, but the data have N = {offset} rows")
        rows = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[picked[s] for s in range(indices.size)])
        core, core_flags = coreset_term(model, rows, jnp.asarray(weights), thetas, reference)
        r, zero = combine(full, flags, np.asarray(core, np.float64), np.asarray(core_flags))
    return r, zero, offset


