"""Compressed projections: V ~= A B^T with B (J, r) orthonormal, so solvers run on A (N, r).

Every Hilbert solver only uses inner products <v_n, x> with x in the span of the rows of V (the target
sum_n v_n, the running approximation V^T w, the rows themselves). Write V = A B^T + E with B orthonormal
and the rows of E orthogonal to span(B). Then <v_n, v_m> = <a_n, a_m> + <e_n, e_m>, and for any weights w

    ||sum_n v_n - V^T w||^2 = ||sum_n a_n - A^T w||^2 + ||E^T (1 - w)||^2,                       (*)

the two terms being orthogonal. A solver run on A therefore minimises the first term exactly; the second is
the only change, and ||E^T (1 - w)|| <= sigma_{r+1}(V) ||1 - w||. When V has exact rank <= r, E = 0 and the
solvers see exactly the same inner products (same support and weights up to rounding).

How B is found (`compress`):
1. length-squared row sampling (Frieze, Kannan & Vempala 2004): S rows drawn with p_n ∝ ||v_n||^2 and
   rescaled by 1 / sqrt(S p_n) give an unbiased estimate of the J x J Gram V^T V at a cost of S J^2 flops
   instead of N J^2 (when N <= S every row is used once, i.e. the exact Gram);
2. its eigen-decomposition, in float32 with precision=HIGHEST, gives the candidate directions; r is the
   smallest rank whose estimated discarded energy is below tol / 2, rounded up to a multiple of `multiple`
   (with the next eigen-directions, not zeros, so padding only lowers the error) so that jitted solvers see
   few distinct shapes;
3. A = V B in one pass, and the discarded energy is then measured exactly on V:
   ||E||_F^2 = ||V||_F^2 - ||A||_F^2. If it exceeds tol ||V||_F (the sample missed something), the exact
   Gram of all rows is used instead.

The float32 Gram resolves singular values down to about sqrt(eps) ~ 3e-4 of the largest, so tolerances
below ~1e-3 are not meaningful in float32.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from ..core import compiled
from ..core.rows import inverse_cdf, take_rows
from ..core.validate import check_float
from ..core.mesh import input_mesh
from ..compilation import full_precision

__all__ = ["AUTO_METHODS", "Compressed", "auto_compress", "compress"]

Array = jax.Array
_HIGHEST = jax.lax.Precision.HIGHEST


class Compressed(NamedTuple):
    """V ~= A B^T.

    Attributes:
      A: (N, r) coordinates of the rows in the basis B (same dtype as V's accumulation type).
      B: (J, r) orthonormal basis.
      rank: r (a Python int, a multiple of `multiple` unless r = J).
      discarded_norm: ||E||_F = ||V - A B^T||_F, measured on V (Python float).
      relative_discarded: ||E||_F / ||V||_F.
      sigma_next: estimate of sigma_{r+1}(V) = ||E||_2, the constant of the bound below (*) (0 if r = J).
      target: sum_n v_n of the uncompressed V (J,), for evaluating errors on V.
      sampled: whether B came from the row sample (True) or the exact Gram (False).
    """

    A: Array
    B: Array
    rank: int
    discarded_norm: float
    relative_discarded: float
    sigma_next: float
    target: Array
    sampled: bool


@compiled.jit(static_argnames=("num",))
def _sampled_gram(V: Array, key: Array, num: int) -> Array:
    """The length-squared estimate of V^T V from `num` rows (module docstring, step 1).

    The draw is `jax.random.choice(key, N, (num,), p=p)` written with the mesh-aware `inverse_cdf` and
    `take_rows`, so that on a V sharded along N each device reads its own rows and V is never gathered.
    """
    with input_mesh(V):
        acc = jnp.promote_types(V.dtype, jnp.float32)
        sq = jnp.sum(jnp.square(V.astype(acc)), axis=1)
        p = sq / jnp.sum(sq)
        u = jnp.sum(p) * (1.0 - jax.random.uniform(key, (num,), dtype=acc))
        rows = jnp.minimum(inverse_cdf(p, u), V.shape[0] - 1)
        scale = jax.lax.rsqrt(num * jnp.maximum(take_rows(p, rows), jnp.finfo(acc).tiny))
        Vs = take_rows(V, rows).astype(acc) * scale[:, None]
        return jnp.dot(Vs.T, Vs, precision=_HIGHEST)


@compiled.jit
def _gram(V: Array) -> Array:
    Vf = V.astype(jnp.promote_types(V.dtype, jnp.float32))
    return jnp.dot(Vf.T, Vf, precision=_HIGHEST)


@compiled.jit
def _eig_desc(G: Array) -> tuple[Array, Array]:
    lam, U = jnp.linalg.eigh(G)
    return jnp.maximum(lam[::-1], 0.0), U[:, ::-1]


@compiled.jit
def _project_rows(V: Array, B: Array) -> tuple[Array, Array, Array, Array]:
    """A = V B, ||V||_F^2, ||A||_F^2 and sum_n v_n in one jitted pass."""
    acc = B.dtype
    Vf = V.astype(acc)
    A = jnp.dot(Vf, B, precision=_HIGHEST)
    return A, jnp.sum(jnp.square(Vf)), jnp.sum(jnp.square(A)), jnp.sum(Vf, axis=0)


def _choose_rank(lam: np.ndarray, tol: float, multiple: int, max_rank: int) -> int:
    tail = np.cumsum(lam[::-1])[::-1]  # tail[r] = sum_{i >= r} lam_i, estimated discarded energy at rank r
    total = max(float(tail[0]), np.finfo(np.float64).tiny)
    ok = np.nonzero(np.append(tail[1:], 0.0) <= (0.5 * tol) ** 2 * total)[0]
    r = int(ok[0]) + 1 if ok.size else lam.shape[0]
    r = int(math.ceil(r / multiple) * multiple)
    return max(1, min(r, max_rank, lam.shape[0]))


@full_precision
def compress(V: Array, tol: float = 3e-3, *, max_rank: Optional[int] = None, multiple: int = 16,
             num_samples: Optional[int] = None, key: Optional[Array] = None) -> Optional[Compressed]:
    """Factor V ~= A B^T with ||V - A B^T||_F <= tol ||V||_F (see the module docstring).

    Args:
      V: (N, J) projected vectors.
      tol: bound on the relative discarded norm ||E||_F / ||V||_F.
      max_rank: largest acceptable r (default J). If no r <= max_rank meets tol, returns None.
      multiple: r is rounded up to a multiple of this (fewer distinct shapes, so fewer recompiles).
      num_samples: rows in the length-squared sample (default max(2048, 4 J)); N <= num_samples uses all.
      key: PRNG key for the sample (default key(0): deterministic).

    Returns:
      A `Compressed`, or None if tol cannot be met with rank <= max_rank.
    """
    tol = check_float(tol, "compress_tol", 0, 1, open_high=True)
    n, j = V.shape
    max_rank = j if max_rank is None else int(max_rank)
    num = max(2048, 4 * j) if num_samples is None else int(num_samples)
    key = jax.random.key(0) if key is None else key
    attempts = [True, False] if n > num else [False]
    for sampled in attempts:
        G = _sampled_gram(V, key, num) if sampled else _gram(V)
        lam, U = _eig_desc(G)
        lam = np.asarray(lam, np.float64)
        r = _choose_rank(lam, tol, multiple, max_rank)
        A, fro2, kept2, target = _project_rows(V, U[:, :r])
        fro2, kept2 = float(fro2), float(kept2)
        disc = math.sqrt(max(fro2 - kept2, 0.0))
        rel = disc / math.sqrt(fro2) if fro2 > 0 else 0.0
        if rel <= tol:
            sigma_next = math.sqrt(lam[r]) if r < j else 0.0
            return Compressed(A, U[:, :r], r, disc, rel, sigma_next, target, sampled)
    return None


# Greedy solvers whose iteration is one pass over V (so compression divides the per-iteration cost by J / r),
# with the smallest V (entries) at which "auto" compresses them. GIGA and FW: at the reference library's own
# setting (N = 20000, J = 500, 1e7 entries) compression is what makes them >= 20x the reference library at an
# error ratio <= 1.007 (benchmarks/results/fidelity.json). A-IHT: from 2^24 entries, as measured at N >= 1e5
# (benchmarks/results/perf.json). OMP never: its exact NNLS has at most rank(A) = r positive weights.
AUTO_MIN_ENTRIES = {"giga": 1 << 22, "frank_wolfe": 1 << 22, "iht": 1 << 24, "iht2": 1 << 24}
AUTO_METHODS = tuple(AUTO_MIN_ENTRIES)


def auto_compress(V: Array, method: str, size: int, options: Optional[dict] = None, tol: float = 3e-3,
                  min_entries: Optional[int] = None) -> Optional[Compressed]:
    """The `compress="auto"` policy as a function: a `Compressed` when compressing pays, else None.

    Compresses when the method is a greedy one-pass-per-iteration solver (AUTO_METHODS), it runs at least 16
    iterations (options' max_iter, else size), V has at least `min_entries` entries (default: the method's
    AUTO_MIN_ENTRIES), and some rank r <= J / 2 meets `tol` (so each iteration reads at most half of V). The
    error of any weights w changes by at most sigma_{r+1} ||1 - w|| (module docstring, Eq. (*)); this does
    not prove that the greedy path is unchanged, so the thresholds are measured ones.

    Measured (benchmarks/results/fidelity.json, N = 20000, J = 500, M = 500, centred L2 features of
    synthetic logistic regression, float32 V, 2-core CPU): GIGA and FW on the rank-16 factor run 5x faster
    than on V, at relative errors within 0.7% of the exact run's.
    """
    options = options or {}
    if method not in AUTO_METHODS:
        return None
    n, j = V.shape
    iterations = options.get("max_iter", size)
    min_entries = AUTO_MIN_ENTRIES[method] if min_entries is None else min_entries
    if n * j < min_entries or iterations < 16:
        return None
    return compress(V, tol, max_rank=j // 2)
