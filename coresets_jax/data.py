"""Datasets: synthetic generators from the papers and a loader for `.npz` files (keys X, y, Xt, yt)."""

from __future__ import annotations

import os
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .core import validate as _validate

__all__ = ["Dataset", "load_npz", "synthetic_gaussian", "synthetic_logistic", "synthetic_poisson"]


class Dataset(NamedTuple):
    """Train data (X, y) and optional held-out test data; `train`/`test` are the model's data pytrees."""

    X: jax.Array
    y: jax.Array
    Xt: Optional[jax.Array] = None
    yt: Optional[jax.Array] = None
    theta_true: Optional[jax.Array] = None

    @property
    def train(self):
        return (self.X, self.y)

    @property
    def test(self):
        return None if self.Xt is None else (self.Xt, self.yt)


def _split(key, X, y, theta, num_test):
    if num_test == 0:
        return Dataset(X, y, theta_true=theta)
    return Dataset(X[:-num_test], y[:-num_test], X[-num_test:], y[-num_test:], theta)


def synthetic_logistic(key: jax.Array, n: int = 10_000, theta=(3.0, 3.0, 0.0), num_test: int = 0,
                       dtype=jnp.float32) -> Dataset:
    """HC §7.2: x ~ N(0, I_{D-1}), X = [x, 1], y ~ ±1 with P(y = 1) = sigmoid(X theta); theta = [3, 3, 0]."""
    key = _validate.check_key(key)
    theta = jnp.asarray(theta, dtype)
    kx, ky = jax.random.split(key)
    total = n + num_test
    X = jnp.concatenate([jax.random.normal(kx, (total, theta.shape[0] - 1), dtype),
                         jnp.ones((total, 1), dtype)], axis=1)
    p = jax.nn.sigmoid(X @ theta)
    y = jnp.where(jax.random.uniform(ky, (total,), dtype) < p, 1.0, -1.0).astype(dtype)
    return _split(key, X, y, theta, num_test)


def synthetic_poisson(key: jax.Array, n: int = 10_000, theta=(1.0, 0.0), num_test: int = 0,
                      dtype=jnp.float32) -> Dataset:
    """HC §7.2: x ~ N(0, I_{D-1}), X = [x, 1], y ~ Poisson(log(1 + exp(X theta))); theta = [1, 0]."""
    key = _validate.check_key(key)
    theta = jnp.asarray(theta, dtype)
    kx, ky = jax.random.split(key)
    total = n + num_test
    X = jnp.concatenate([jax.random.normal(kx, (total, theta.shape[0] - 1), dtype),
                         jnp.ones((total, 1), dtype)], axis=1)
    y = jax.random.poisson(ky, jax.nn.softplus(X @ theta), (total,)).astype(dtype)
    return _split(key, X, y, theta, num_test)


def synthetic_gaussian(key: jax.Array, n: int, dim: int = 2, mean=None, dtype=jnp.float32) -> jax.Array:
    """HC §6: y_n ~ N(mu, I) with mu = 0 by default; returns the (N, D) array."""
    key = _validate.check_key(key)
    mu = jnp.zeros(dim, dtype) if mean is None else jnp.asarray(mean, dtype)
    return mu + jax.random.normal(key, (n, dim), dtype)


def load_npz(path: str | os.PathLike, dtype=jnp.float32) -> Dataset:
    """Load a dataset saved as `.npz` with keys X, y and optionally Xt, yt (the papers' format)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"path: no such file {path!r}")
    with np.load(path) as f:
        missing = [k for k in ("X", "y") if k not in f]
        if missing:
            raise ValueError(f"path: {path!r} lacks key(s) {missing}; expected X, y (and Xt, yt)")
        arrays = {k: jnp.asarray(f[k], dtype) for k in ("X", "y", "Xt", "yt") if k in f}
    if arrays["X"].ndim != 2:
        raise ValueError(f"path: X in {path!r} must be 2-D, got shape {arrays['X'].shape}")
    _validate.check_data((arrays["X"], arrays["y"]), f"data in {path!r}")
    return Dataset(arrays["X"], arrays["y"], arrays.get("Xt"), arrays.get("yt"))
