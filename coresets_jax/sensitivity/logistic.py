"""LR Algorithm 1: sensitivity coresets for logistic regression, with App. E's choices.

A sensitivity coreset samples M points with probabilities p_n ∝ m_n, an upper bound on the sensitivity
sigma_n = sup_theta N f_n(theta) / sum_l f_l(theta), and weights each draw 1 / (p_n M) (LR Alg. 1, lines
7-11; HC Eq. 2.5: W_n = (sigma / sigma_n)(M_n / M) is the same formula).

Logistic regression (LR §3.1), with Z_n = y_n x_n and the parameter space B_R = {||theta|| <= R}:

    m_n = N / (1 + sum_i |G_i^(-n)| exp(-R ||Zbar_{G,i}^(-n) - Z_n||))            (Lemma 3.1, Eq. 3.1)

for any k-clustering with centres Q_i, G_i = points nearest Q_i, G_i^(-n) = G_i minus n, and Zbar^(-n) the
mean of G_i^(-n). Following LR App. E:
- centres come from k-means++ (seeding plus Lloyd iterations, here in JAX) on a uniform subsample of
  L = min(1000k, 0.025N) rows (at least k); every row is then assigned to its nearest centre;
- `centers="original"` (default, App. E) puts the centres Q_i in place of Zbar^(-n); `centers="exact"` uses
  the leave-one-out cluster means, which Lemma 3.1 proves to be an upper bound (same O(Nk) cost here);
- R = a / sqrt(I), where I is the normalised k-means score on the full data, which we take to be the mean
  squared distance to the nearest centre, I = (1/N) sum_n min_i ||Z_n - Q_i||^2 (App. E does not spell out
  the normalisation; with this one R ||Z_n - Q_i|| ≈ a for a typical point);
- M is given, or M = ceil(c mbar / eps^2 ((D + 1) log mbar + log(1/delta))) (Alg. 1 line 5), where c is the
  unspecified universal constant of Theorem B.1 (an argument, 1 by default).
"""


from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp

from ..core import Coreset
from ..core import checks as _checks
from ..core import validate as _validate
from ..core import compiled
from ..models.glm import logistic_regression as _logistic_regression
from .clustering import KMeans, default_subsample, kmeans, kmeans_fn
from .sampling import sensitivity_sample, sensitivity_sample_core
from ..compilation import full_precision

__all__ = ["logistic_sensitivity", "sensitivity_coreset", "sensitivity_construction"]

Array = jax.Array
CENTERS = ("original", "exact")
_LOGISTIC = _logistic_regression()  # only its data spec is used: (X, y), y in {-1, +1} or {0, 1}


@compiled.jit(static_argnames=("exact",))
def _lemma_3_1(Z: Array, clusters: KMeans, radius: Array, exact: bool) -> Array:
    """m_n of Eq. 3.1, streamed over rows (each row needs its k distances, O(k D))."""
    n = Z.shape[0]
    k = clusters.centers.shape[0]
    counts = clusters.counts.astype(Z.dtype)

    def row(args):
        z, label = args
        own = jnp.arange(k) == label
        sizes = counts - own  # |G_i^(-n)|
        if exact:  # leave-one-out means of the clusters (Lemma 3.1 as proved)
            centres = (clusters.sums - jnp.where(own[:, None], z, 0.0)) / jnp.maximum(sizes, 1.0)[:, None]
        else:  # the original centres Q_i (App. E)
            centres = clusters.centers
        dist = jnp.sqrt(jnp.sum(jnp.square(centres - z), axis=1))
        terms = jnp.where(sizes > 0, sizes * jnp.exp(-radius * dist), 0.0)
        return n / (1.0 + jnp.sum(terms))

    return jax.lax.map(row, (Z, clusters.labels), batch_size=min(n, 8192))


def _signed_features(X: Array, y: Array) -> Array:
    """Z_n = y_n x_n with y in {-1, +1}; labels in {0, 1} are read as 2y - 1, like the logistic model."""
    dtype = jnp.promote_types(X.dtype, jnp.float32)
    return jnp.where(y == 0, -1.0, y).astype(dtype)[:, None] * X.astype(dtype)


def _logistic_z(data: Any) -> Array:
    _checks.check_model_data(_LOGISTIC, data)
    X, y = data
    return _signed_features(jnp.asarray(X), jnp.asarray(y))


def logistic_sensitivity(data: Any, key: Array, k: int = 6, a: float = 3.0, *, radius: Optional[float] = None,
                         centers: str = "original", subsample: Optional[int] = None,
                         iterations: int = 50) -> tuple[Array, dict]:
    """Sensitivity upper bounds m_n for logistic regression on B_R (LR Lemma 3.1 with App. E's choices).

    Args:
      data: (X, y), y in {-1, +1} or {0, 1} (0 means -1); Z_n = y_n x_n (X carries any intercept column).
      key: PRNG key for the k-means++ subsample and seeding.
      k: number of clusters (LR uses 4 to 6).
      a: R = a / sqrt(I) unless `radius` is given.
      radius: R, the radius of the parameter ball B_R; overrides `a`.
      centers: "original" (Q_i, App. E) or "exact" (leave-one-out means, the bound Lemma 3.1 proves).
      subsample, iterations: passed to `kmeans`.

    Returns:
      (m, info): m of shape (N,), each in [1, N]; info has "radius", "kmeans_score", "mean_sensitivity",
      "centers", "counts".
    """
    _validate.check_data(data)
    _validate.check_choice(centers, CENTERS, "centers")
    Z = _logistic_z(data)
    clusters = kmeans(Z, k, key, subsample=subsample, iterations=iterations)
    if radius is None:
        if not a > 0:
            raise ValueError(f"a: must be positive, got {a}")
        score = float(clusters.score)
        radius = a / math.sqrt(score) if score > 0 else float("inf")
        if not math.isfinite(radius):
            raise ValueError("data: every point coincides with a cluster centre (k-means score 0), so "
                             "R = a / sqrt(I) is infinite; pass radius= explicitly")
    elif not radius > 0:
        raise ValueError(f"radius: must be positive, got {radius}")
    m = _lemma_3_1(Z, clusters, jnp.asarray(radius, Z.dtype), centers == "exact")
    info = {"radius": jnp.asarray(radius, Z.dtype), "kmeans_score": clusters.score,
            "mean_sensitivity": jnp.mean(m), "centers": clusters.centers, "counts": clusters.counts}
    return m, info


def _size_from_tolerance(mbar: float, dim: int, epsilon, delta, c: float) -> int:
    """Alg. 1 line 5: M = ceil(c mbar / eps^2 ((D + 1) log mbar + log(1 / delta)))."""
    if epsilon is None or delta is None:
        raise ValueError("size: give size, or both epsilon and delta to derive it (LR Algorithm 1, line 5)")
    if not epsilon > 0:
        raise ValueError(f"epsilon: must be positive, got {epsilon}")
    if not 0 < delta < 1:
        raise ValueError(f"delta: must lie in (0, 1), got {delta}")
    if not c > 0:
        raise ValueError(f"c: must be positive, got {c}")
    m = c * mbar / epsilon**2 * ((dim + 1) * math.log(max(mbar, 1.0)) + math.log(1.0 / delta))
    return max(1, math.ceil(m))


@full_precision
def sensitivity_coreset(data: Any, size: Optional[int] = None, key: Optional[Array] = None, k: int = 6,
                        a: float = 3.0, epsilon: Optional[float] = None, delta: Optional[float] = None, *,
                        radius: Optional[float] = None, centers: str = "original", c: float = 1.0,
                        subsample: Optional[int] = None) -> Coreset:
    """Logistic-regression coreset by sensitivity sampling, LR Algorithm 1 with App. E's choices.

    Args:
      data: (X, y) with y in {-1, +1} or {0, 1} (0 means -1).
      size: M, the number of draws. If None, derived from epsilon and delta (Alg. 1 line 5).
      key: PRNG key (clustering and sampling).
      k, a: clusters and R = a / sqrt(I) (LR uses k in 4..6, a = 3).
      epsilon, delta: tolerance and failure rate, used only when size is None.
      radius: R directly, overriding a.
      centers: "original" (App. E) or "exact" (Lemma 3.1's leave-one-out means).
      c: the constant of Theorem B.1 in the size formula.
      subsample: rows for k-means++ (default min(1000k, 0.025N), at least k).

    Returns:
      A `Coreset` of capacity M; `info` holds "sensitivity_mean" (mbar), "radius", "kmeans_score",
      "centers" and "size".
    """
    key = _validate.check_key(key)
    n = _validate.check_data(data)
    if size is not None:
        size = _validate.check_size(size, n)
    key_cluster, key_sample = jax.random.split(key)
    m, info = logistic_sensitivity(data, key_cluster, k, a, radius=radius, centers=centers,
                                   subsample=subsample)
    mbar = float(info["mean_sensitivity"])
    if size is None:
        dim = int(jnp.shape(data[0])[1])
        size = _size_from_tolerance(mbar, dim, epsilon, delta, c)
        if size > n:
            raise ValueError(f"epsilon: the size derived from epsilon = {epsilon} and delta = {delta} is "
                             f"M = {size} > N = {n}; loosen epsilon or delta, or pass size")
    cs = sensitivity_sample(m, size, key_sample)
    return Coreset(cs.indices, cs.weights,
                   {"sensitivity_mean": info["mean_sensitivity"], "radius": info["radius"],
                    "kmeans_score": info["kmeans_score"], "centers": info["centers"],
                    "size": jnp.asarray(size)}, "sensitivity")


def sensitivity_construction(model, size: int, k: int = 6, a: float = 3.0, centers: str = "original",
                             iterations: int = 50):
    """LR Algorithm 1 as a registered construction: `cj.coreset(model, data, M, "sensitivity", key=key)`,
    and so `cj.merged_coreset` and `cj.stream_coreset` too. The pure core is

        solve(key, data, start, data_weights) -> (indices, weights, info)

    with the k-means++ bound of Lemma 3.1 (R = a / sqrt(I)) computed inside. Rows weighted u_n (a merged
    node of a stream) are drawn with p_n ∝ u_n m_n and weighted u_n / (p_n M), so the estimate of
    sum_n u_n L_n stays unbiased. `start` is unused. Logistic regression only: the bound is its own.
    """
    if getattr(model, "name", None) != "logistic_regression":
        raise ValueError(f"model: the sensitivity construction bounds logistic regression's sensitivities (LR "
                         f"Lemma 3.1); got model {getattr(model, 'name', model)!r}; use cj.models.logistic_regression()")
    k = _validate.check_positive_int(k, "k")
    a = _validate.check_positive_float(a, "a")
    _validate.check_choice(centers, CENTERS, "centers")

    def solve(key, data, start, data_weights):
        X, y = data
        Z = _signed_features(jnp.asarray(X), jnp.asarray(y))
        key_cluster, key_sample = jax.random.split(key)
        clusters = kmeans_fn(min(k, Z.shape[0]), default_subsample(Z.shape[0], k), iterations)(key_cluster, Z)
        radius = a / jnp.sqrt(jnp.maximum(clusters.score, jnp.finfo(Z.dtype).tiny))
        m = _lemma_3_1(Z, clusters, radius, centers == "exact")
        u = jnp.where(data_weights > 0, data_weights, 0.0).astype(m.dtype)
        indices, weights = sensitivity_sample_core(key_sample, u * m, size)
        info = {"sensitivity_mean": jnp.mean(m), "radius": radius, "kmeans_score": clusters.score}
        return indices, weights * u[indices], info

    return solve
