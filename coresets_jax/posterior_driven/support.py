"""Where the refinements' points come from (`cj.coreset(support=...)`, ours): a vector method's coreset on
projected features, its candidates taken from at most `support_rows` rows.

The start only has to put the points in good places; Coreset MCMC and quasi-Newton then optimise their
weights against the full data's KL. Storing V costs O(N J) memory and the greedy solver O(N J) per
iteration, which at N = 10^6 (J = 500) is ~10 s on a 2-core CPU: more than the refinement itself, and
several times the 1/50-of-full-NUTS budget of issue 21. Above `SUPPORT_ROWS` rows, the candidates are a
uniform subsample of R rows, but the target stays the full sum (HC Eq. 3.3):

    sum_{n <= N} v_n   ~   V_R^T w,   w >= 0,

computed in one streamed pass over the N rows (chunks of `CHUNK` rows, memory O(CHUNK J)), so the solver
reads an R x J matrix. Fitting the subsample's own sum scaled by N / R instead is a uniform coreset of R
rows in disguise: on biketrips (N = 15,641, heavy-tailed counts) its posterior was 8-19 sd off (z2 69-354
at R = 3,000-10,000; benchmarks/investigations/support_rows.py). `info["support_rows"]` records R.

The target pass still evaluates J features on every row, J full-data gradient passes: at N = 10^6 and
J = 500 that alone is several seconds, a tenth of full-data NUTS. So when the rows are subsampled, the start
also uses only the first J_s = min(J, max(32, 8 D)) of the feature draws (`support_features`): the features
span the posterior's D directions with room to spare, and the refinement then fits the weights against the
full KL anyway. Measured on BINARY10 (D = 11) and at N = 10^6 in benchmarks/README.md.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Coreset, Model, take_data
from ..features.projection import SUM_CHUNK, feature_sum_fn, project
from ..registry import Construction, resolve
from ..solvers.base import make_problem, run

__all__ = ["SUPPORT_ROWS", "compact_start", "pad_result", "resolve_rows", "resolve_support", "support_start"]

SUPPORT_ROWS = 50_000   # rows projected for the start by default (benchmarks/investigations/support_rows.py)
MIN_ROWS_PER_POINT = 4  # a start of M points is built on at least 4 M rows
CHUNK = SUM_CHUNK        # rows per step of the streamed pass for the target
FEATURES_PER_DIM = 8    # subsampled starts use J_s = min(J, max(MIN_FEATURES, 8 D)) features
MIN_FEATURES = 32


def support_features(num_features: int, dim: int) -> int:
    """J_s, the features a subsampled start projects (module docstring)."""
    return min(num_features, max(MIN_FEATURES, FEATURES_PER_DIM * dim))


def resolve_rows(support_rows: Any, n: int, size: int) -> int:
    """The number of rows R to project: None -> min(N, max(SUPPORT_ROWS, 4 M)); an int R >= 1 -> min(N,
    max(R, 4 M)) (R >= N: every row). ValueError for anything else."""
    if support_rows is None:
        support_rows = SUPPORT_ROWS
    elif isinstance(support_rows, bool) or not isinstance(support_rows, int) or support_rows < 1:
        raise ValueError(f"support_rows: must be None or a positive integer, got {support_rows!r}")
    return min(n, max(support_rows, MIN_ROWS_PER_POINT * size))


@functools.lru_cache(maxsize=32)
def _solve_fn(method: str, size: int):
    """Jitted `(V, target, key) -> (indices, weights, info)` of a vector method against a given target."""
    solver = resolve(method, needs="vectors").make(size)

    def solve(V, target, key):
        return run(solver, make_problem(V, target), key)

    return jax.jit(solve)


def support_start(model: Model, data: Any, size: int, method: Any, thetas: jax.Array, key: jax.Array, *,
                  rows: int, build: Callable, norm: str = "fisher", dtype=None,
                  features: Optional[int] = None) -> tuple[Coreset, Optional[jax.Array]]:
    """The starting coreset of `size` slots: `method`'s coreset on projected features, with candidates from
    all rows or a uniform subsample of `rows` of them (then on the first `support_features` of the feature
    draws, or `features` of them) and the full-data sum as the target (module docstring).

    Returns (coreset with indices into the full data, V): V is the (N, J) projection when every row was
    projected, else None (V_R's rows are a subsample)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    if rows >= n:
        V = project(model, data, thetas, norm=norm, key=key, dtype=dtype)
        return build(V, size, method, key), V
    k_rows, k_proj = jax.random.split(key)
    name = resolve(method, needs="vectors").name
    thetas = thetas[: features or support_features(thetas.shape[0], thetas.shape[1])]
    picked = jax.random.choice(k_rows, n, (rows,), replace=False).astype(jnp.int32)
    V = project(model, take_data(data, picked), thetas, norm=norm, key=k_proj, dtype=dtype)
    compute = jnp.promote_types(jnp.float32 if dtype is None else dtype, jnp.float32)
    target = feature_sum_fn(model, norm, jnp.dtype(compute), n, min(CHUNK, n))(
        k_proj, jax.tree_util.tree_map(jnp.asarray, data), thetas.astype(compute))
    # One power of two for V and the target, as `build` rescales V (the problem is scale invariant).
    peak = float(jnp.max(jnp.abs(V)))
    scale = 1.0 if peak == 0.0 or 2.0 ** -20 <= peak <= 2.0 ** 20 else 2.0 ** -round(float(jnp.log2(peak)))
    indices, weights, info = _solve_fn(name, size)(V * scale, target * scale, k_proj)
    live = weights > 0
    return Coreset(jnp.where(live, picked[indices], 0).astype(jnp.int32), jnp.where(live, weights, 0.0),
                   dict(info), name), None


def compact_start(start: Coreset, size: int) -> tuple[tuple[jax.Array, jax.Array], int]:
    """The start's live points first, in `slots` = the next power of two >= their number (at most `size`):
    the refinement only moves live weights, and its chains then evaluate `slots` rows, not `size` (a greedy
    support of 21 points at M = 1000 costs 1/48 as much per step). Powers of two bound the compilations."""
    weights = np.asarray(start.weights)
    live = np.flatnonzero(weights > 0)
    if live.size == 0:
        raise ValueError("support: the starting coreset has no point with positive weight")
    slots = min(size, 1 << int(np.ceil(np.log2(max(live.size, 2)))))
    order = np.concatenate([live, np.flatnonzero(weights <= 0)])[:slots]
    return (jnp.asarray(np.asarray(start.indices)[order], jnp.int32), jnp.asarray(weights[order])), slots


def pad_result(cs: Coreset, size: int, support: str) -> Coreset:
    """A refinement run on compacted slots, padded back to `size` (padding: row 0, weight 0)."""
    pad = size - cs.weights.shape[0]
    info = dict(cs.info, support=support)
    for name in ("initial_weights", "final_iterate"):
        if name in info:
            info[name] = jnp.pad(info[name], (0, pad))
    return Coreset(jnp.pad(cs.indices, (0, pad)), jnp.pad(cs.weights, (0, pad)), info, cs.method)


def resolve_support(support: Any, construction: Construction) -> Optional[Construction]:
    """None for the papers' uniform start, else the vector method whose coreset starts the optimisation."""
    if support is None:
        if construction.default_support is None:
            return None
        support = construction.default_support
    if isinstance(support, str) and support == "uniform":
        return None
    if construction.needs != "posterior":
        raise ValueError(f"support: only posterior-driven methods take a support; {construction.name} is a "
                         "vector method (leave support unset)")
    method = resolve(support, needs="vectors", argument="support")
    if method.name == "uniform":
        return None
    if not construction.takes_start:
        raise ValueError(f"support: {construction.name} builds its own support and takes no starting coreset; "
                         "leave support unset")
    return method
