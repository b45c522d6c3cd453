"""k-means++ for the sensitivity bound of LR Lemma 3.1: D^2 seeding (Arthur & Vassilvitskii 2007), then Lloyd
iterations, on a uniform subsample (LR App. E); every row is then assigned to its nearest centre."""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from ..core import validate as _validate
from ..core import compiled

__all__ = ["KMeans", "default_subsample", "kmeans", "kmeans_fn"]

Array = jax.Array


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
    k = _validate.check_int(k, "k", 1, n)
    key = _validate.check_key(key)
    subsample = default_subsample(n, k) if subsample is None else int(min(n, max(k, subsample)))
    return kmeans_fn(k, subsample, int(iterations))(key, Z)


def kmeans_fn(k: int, subsample: int, iterations: int = 50):
    """The pure core of `kmeans`: `(key, Z) -> KMeans`, with a static k and subsample size (jittable)."""

    def fit(key: Array, Z: Array) -> KMeans:
        n = Z.shape[0]
        key_sub, key_fit = jax.random.split(key)
        rows = jax.random.choice(key_sub, n, (subsample,), replace=False) if subsample < n else jnp.arange(n)
        return _assign(Z, _lloyd(key_fit, Z[rows], k, iterations))

    return fit


def default_subsample(n: int, k: int) -> int:
    """LR App. E: L = min(1000k, 0.025N) rows for the centres, at least k and at most N."""
    return int(min(n, max(k, min(1000 * k, math.ceil(0.025 * n)))))
