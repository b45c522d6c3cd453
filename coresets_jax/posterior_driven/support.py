"""Where the refinements' points come from (`cj.coreset(support=...)`, ours): a vector method's coreset on
projected features, built on at most `support_rows` rows.

The start only has to put the points in good places; Coreset MCMC and quasi-Newton then optimise their
weights against the full data's KL. Projecting all N rows costs O(N J D) and the greedy solver O(N J) per
iteration, which at N = 10^6 (J = 500) is ~10 s on a 2-core CPU: more than the refinement itself, and 5x the
1/50-of-full-NUTS budget of issue 21. Above `SUPPORT_ROWS` rows, the start is built on a uniform
subsample of R rows instead (the papers' own points come from a uniform subsample too), its weights scaled
by N / R so that they estimate the full sum (HC Eq. 3.2 on the subsample, an unbiased estimate of the full
sum's vector). `benchmarks/support_rows.py` measures the start and the refined coresets against the
row cap on several models; `info["support_rows"]` records R.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from ..core import Coreset, Model, take_data
from ..projection import project

__all__ = ["SUPPORT_ROWS", "resolve_rows", "support_start"]

SUPPORT_ROWS = 50_000   # rows projected for the start by default (benchmarks/support_rows.py)
MIN_ROWS_PER_POINT = 4  # a start of M points is built on at least 4 M rows


def resolve_rows(support_rows: Any, n: int, size: int) -> int:
    """The number of rows R to project: None -> min(N, max(SUPPORT_ROWS, 4 M)); an int R >= 1 -> min(N,
    max(R, 4 M)) (R >= N: every row). ValueError for anything else."""
    if support_rows is None:
        support_rows = SUPPORT_ROWS
    elif isinstance(support_rows, bool) or not isinstance(support_rows, int) or support_rows < 1:
        raise ValueError(f"support_rows: must be None or a positive integer, got {support_rows!r}")
    return min(n, max(support_rows, MIN_ROWS_PER_POINT * size))


def support_start(model: Model, data: Any, size: int, method: Any, thetas: jax.Array, key: jax.Array, *,
                  rows: int, build: Callable, norm: str = "fisher", dtype=None) -> tuple[Coreset, Optional[jax.Array]]:
    """The starting coreset of `size` slots: `method`'s coreset on the projected features of `rows` rows
    (all of them, or a uniform subsample without replacement, weights scaled by N / rows).

    Returns (coreset with indices into the full data, V): V is the (N, J) projection when every row was
    projected, else None (the subsample's features are not the data's)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    k_rows, k_proj = jax.random.split(key)
    if rows >= n:
        V = project(model, data, thetas, norm=norm, key=key, dtype=dtype)
        return build(V, size, method, key), V
    picked = jax.random.choice(k_rows, n, (rows,), replace=False).astype(jnp.int32)
    V = project(model, take_data(data, picked), thetas, norm=norm, key=k_proj, dtype=dtype)
    cs = build(V, size, method, k_proj)
    weights = cs.weights * (n / rows)
    return Coreset(picked[cs.indices], weights.astype(cs.weights.dtype), cs.info, cs.method), None
