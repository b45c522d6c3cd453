"""Sensitivity-based (uniform-norm) coresets: LR Algorithm 1 for logistic regression, HC Eq. 6.3 for the
Gaussian mean.

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

import functools
import math
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from .core import checks as _checks
from .core import validate as _validate
from .core import Coreset
from .models.glm import logistic_regression as _logistic_regression
from .solvers.base import aggregate_draws
from .core import compiled

__all__ = [
    "KMeans",
    "gaussian_mean_coreset",
    "gaussian_mean_sensitivity",
    "kmeans",
    "logistic_sensitivity",
    "sensitivity_coreset",
    "sensitivity_sample",
]

Array = jax.Array
CENTERS = ("original", "exact")
_LOGISTIC = _logistic_regression()  # only its data spec is used: (X, y), y in {-1, +1} or {0, 1}


# --------------------------------------------------------------------------------------------------------
# k-means++ (seeding by D^2 sampling, then Lloyd iterations).


class KMeans(NamedTuple):
    """Centres (k, D), nearest-centre labels (N,), cluster sizes (k,), sums (k, D), and the score I."""

    centers: Array
    labels: Array
    counts: Array
    sums: Array
    score: Array


def _nearest(Z: Array, centers: Array) -> tuple[Array, Array]:
    """(label, squared distance) of each row's nearest centre; O(Nk) memory-light via expanded norms."""
    d2 = (jnp.sum(jnp.square(Z), 1)[:, None] - 2.0 * Z @ centers.T + jnp.sum(jnp.square(centers), 1)[None])
    d2 = jnp.maximum(d2, 0.0)
    labels = jnp.argmin(d2, axis=1)
    return labels, jnp.take_along_axis(d2, labels[:, None], 1)[:, 0]


def _seed(key: Array, Z: Array, k: int) -> Array:
    """k-means++ seeding: first centre uniform, each next one drawn with probability ∝ D(z)^2."""
    key, sub = jax.random.split(key)
    first = Z[jax.random.randint(sub, (), 0, Z.shape[0])]
    centers = jnp.zeros((k, Z.shape[1]), Z.dtype).at[0].set(first)
    d2 = jnp.sum(jnp.square(Z - first), 1)

    def body(i, carry):
        centers, d2, key = carry
        key, sub = jax.random.split(key)
        logits = jnp.where(d2 > 0, jnp.log(jnp.where(d2 > 0, d2, 1.0)), -jnp.inf)
        logits = jnp.where(jnp.any(d2 > 0), logits, 0.0)  # all points coincide with centres: uniform
        c = Z[jax.random.categorical(sub, logits)]
        return centers.at[i].set(c), jnp.minimum(d2, jnp.sum(jnp.square(Z - c), 1)), key

    centers, _, _ = jax.lax.fori_loop(1, k, body, (centers, d2, key))
    return centers


@compiled.jit(static_argnames=("k", "iterations"))
def _lloyd(key: Array, Z: Array, k: int, iterations: int) -> Array:
    centers = _seed(key, Z, k)

    def body(_, centers):
        labels, _ = _nearest(Z, centers)
        counts = jnp.zeros(k, Z.dtype).at[labels].add(1.0)
        sums = jnp.zeros_like(centers).at[labels].add(Z)
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], centers)

    return jax.lax.fori_loop(0, iterations, body, centers)


@compiled.jit
def _assign(Z: Array, centers: Array) -> KMeans:
    labels, d2 = _nearest(Z, centers)
    k = centers.shape[0]
    counts = jnp.zeros(k, jnp.int32).at[labels].add(1)
    sums = jnp.zeros_like(centers).at[labels].add(Z)
    return KMeans(centers, labels, counts, sums, jnp.mean(d2))


def kmeans(Z: Any, k: int, key: Array, *, subsample: Optional[int] = None, iterations: int = 50) -> KMeans:
    """k-means++ on a uniform subsample of Z (LR App. E), then assignment of every row.

    Args:
      Z: (N, D) points.
      k: number of clusters.
      key: PRNG key (subsample and seeding).
      subsample: L, the rows the centres are fitted on; default min(1000k, ceil(0.025N)), at least k.
      iterations: Lloyd iterations after seeding.

    Returns:
      `KMeans` over all N rows; `score` is the mean squared distance to the nearest centre.
    """
    Z = _validate.check_matrix(Z, "Z")
    n = Z.shape[0]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"k: must be an integer in [1, N = {n}], got {k!r}")
    key = _validate.check_key(key)
    if subsample is None:
        subsample = min(1000 * k, math.ceil(0.025 * n))
    subsample = int(min(n, max(k, subsample)))
    key_sub, key_fit = jax.random.split(key)
    rows = jax.random.choice(key_sub, n, (subsample,), replace=False) if subsample < n else jnp.arange(n)
    centers = _lloyd(key_fit, Z[rows], k, int(iterations))
    return _assign(Z, centers)


# --------------------------------------------------------------------------------------------------------
# Logistic regression: Lemma 3.1.


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


def _logistic_z(data: Any) -> Array:
    """Z_n = y_n x_n with y in {-1, +1}; labels in {0, 1} are read as 2y - 1, like the logistic model."""
    _checks.check_model_data(_LOGISTIC, data)
    X, y = data
    X = jnp.asarray(X)
    y = jnp.asarray(y)
    dtype = jnp.promote_types(X.dtype, jnp.float32)
    return jnp.where(y == 0, -1.0, y).astype(dtype)[:, None] * X.astype(dtype)


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


@compiled.jit(static_argnames=("size",))
def _sample(key: Array, sensitivity: Array, size: int):
    # Inverse-CDF draws, O(N + M log N); `jax.random.categorical` with shape (M,) would hold M x N noise.
    cdf = jnp.cumsum(sensitivity)
    total = cdf[-1]
    u = jax.random.uniform(key, (size,), cdf.dtype) * total
    draws = jnp.clip(jnp.searchsorted(cdf, u, side="right"), 0, sensitivity.shape[0] - 1)
    amounts = total / (sensitivity[draws] * size)  # 1 / (p_n M), p_n = m_n / sum m
    support = aggregate_draws(draws, amounts, sensitivity.dtype)
    return support.indices, support.weights


def sensitivity_sample(sensitivity: Any, size: int, key: Array, method: str = "sensitivity") -> Coreset:
    """Draw (K_1..K_N) ~ Multi(M, p), p_n = m_n / sum m, and weight gamma_n = K_n / (p_n M).

    LR Algorithm 1 lines 7-13 and HC Eq. 2.5; E[gamma_n] = 1. Repeated draws of one row share a slot, so
    `num_points` can be below M.
    """
    sensitivity = jnp.asarray(sensitivity)
    if sensitivity.ndim != 1 or sensitivity.shape[0] < 1:
        raise ValueError(f"sensitivity: expected a non-empty vector (N,), got shape {sensitivity.shape}")
    _validate.check_finite(sensitivity, "sensitivity")
    if bool(jnp.any(sensitivity < 0)) or not bool(jnp.any(sensitivity > 0)):
        raise ValueError("sensitivity: must be non-negative with at least one positive entry")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"size: must be a positive integer, got {size!r}")
    sensitivity = sensitivity.astype(jnp.promote_types(sensitivity.dtype, jnp.float32))
    indices, weights = _sample(_validate.check_key(key), sensitivity, int(size))
    return Coreset(indices, weights, {}, method)


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


# --------------------------------------------------------------------------------------------------------
# The Gaussian mean model of HC §6.


@compiled.jit
def _gaussian_mean_sensitivity(y: Array) -> Array:
    n = y.shape[0]
    ybar = jnp.mean(y, axis=0)
    dev = jnp.sum(jnp.square(y - ybar), 1)
    spread = jnp.mean(dev)  # = mean ||y||^2 - ||ybar||^2 (HC Eq. C.2), without the cancellation
    return (1.0 + dev / spread) / n


def gaussian_mean_sensitivity(y: Any) -> Array:
    """HC Eq. 6.3 (derived in HC App. C): sigma_n = (1/N)(1 + ||y_n - ybar||^2 / (mean ||y||^2 - ||ybar||^2)).

    The sensitivity of observation y_n for the mean of N(mu, I) data. sum_n sigma_n = 2 for every dataset,
    since the second term averages to 1.
    """
    y = _validate.check_matrix(y, "y")
    if y.shape[0] < 2:
        raise ValueError(f"y: needs at least 2 rows, got {y.shape[0]}")
    y = y.astype(jnp.promote_types(y.dtype, jnp.float32))
    sens = _gaussian_mean_sensitivity(y)
    if not bool(jnp.all(jnp.isfinite(sens))):
        raise ValueError("y: all rows are identical, so the sensitivity (Eq. 6.3) is undefined")
    return sens


def gaussian_mean_coreset(y: Any, size: int, key: Array) -> Coreset:
    """HC §6's "Unif" baseline: the uniform (sensitivity) coreset of Eq. 2.5 with Eq. 6.3's sensitivities."""
    y = _validate.check_matrix(y, "y")
    size = _validate.check_size(size, y.shape[0])
    return sensitivity_sample(gaussian_mean_sensitivity(y), size, key, method="unif")
