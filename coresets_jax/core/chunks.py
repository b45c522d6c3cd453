"""Data in chunks: a source is an iterable of chunk pytrees, or an array-like (a memory map, a zarr array)
read a fixed number of rows at a time. Shared by `stream_coreset` and `cj.certify`."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

import jax
import numpy as np

from . import validate as _validate

__all__ = ["is_sliceable", "iter_chunks"]


def is_sliceable(x: Any) -> bool:
    """Whether `x` is read by slicing (an array-like or a pytree of them) rather than iterated (chunks)."""
    if isinstance(x, Iterator):  # a generator or iterator of chunks
        return False
    if isinstance(x, list) and x and not any(hasattr(e, "shape") for e in x):
        return False  # a list of chunk pytrees, e.g. [(X1, y1), (X2, y2)]
    leaves = jax.tree_util.tree_leaves(x)
    return bool(leaves) and all(hasattr(l, "shape") and hasattr(l, "__getitem__") for l in leaves)


def iter_chunks(source: Any, chunk_size: Optional[int] = None, *, skip: int = 0) -> Iterator[Any]:
    """Chunks of a data source, each a pytree of arrays with a shared leading axis.

    `source` is either an iterable of chunks (a generator, a list), or an array-like (or a pytree of them)
    that supports `shape` and slicing along its leading axis, e.g. `np.load(path, mmap_mode="r")` or a zarr
    array; it is then read `chunk_size` rows at a time, so only one chunk is ever in memory. `skip` chunks
    of an array source are skipped without being read (a resumed `stream_coreset`).
    """
    if is_sliceable(source):
        if chunk_size is None:
            raise ValueError("chunk_size: a positive integer is needed to slice an array source, got None")
        chunk_size = _validate.check_positive_int(chunk_size, "chunk_size")
        n = _validate.num_rows(jax.tree_util.tree_map(lambda l: np.empty((l.shape[0], 0)), source), "chunks")
        for start in range(int(skip) * int(chunk_size), n, int(chunk_size)):
            yield jax.tree_util.tree_map(lambda l: np.asarray(l[start:start + int(chunk_size)]), source)
        return
    if not isinstance(source, Iterable):
        raise ValueError(f"chunks: expected an iterable of data chunks or a sliceable array, got "
                         f"{type(source).__name__}")
    yield from source
