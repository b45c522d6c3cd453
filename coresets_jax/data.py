"""Datasets: synthetic generators from the papers and a loader for `.npz` files (keys X, y, Xt, yt)."""

from __future__ import annotations

import os
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .core import validate as _validate

__all__ = ["BINARY_P", "BINARY_THETA", "Dataset", "load_npz", "synthetic_binary", "synthetic_gaussian",
           "synthetic_gaussian_mean", "synthetic_logistic", "synthetic_mixture", "synthetic_poisson",
           "synthetic_bradley_terry", "synthetic_rbf", "synthetic_sparse_regression", "synthetic_vmf"]

# LR §4: feature frequencies p and coefficients theta of BINARY10; BINARY5 takes the first 5 of each.
BINARY_P = (1.0, 0.2, 0.3, 0.5, 0.01, 0.1, 0.2, 0.007, 0.005, 0.001)
BINARY_THETA = (-3.0, 1.2, -0.5, 0.8, 3.0, -1.0, -0.7, 4.0, 3.5, 4.5)


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


def _glm_data(key, n: int, theta, num_test: int, dtype, response) -> Dataset:
    """HC §7.2's GLM data: x ~ N(0, I_{D-1}), X = [x, 1] (an intercept column), and y = response(key, X theta)
    drawn given the linear predictor; the last `num_test` rows are held out."""
    key = _validate.check_key(key)
    theta = jnp.asarray(theta, dtype)
    kx, ky = jax.random.split(key)
    total = n + num_test
    X = jnp.concatenate([jax.random.normal(kx, (total, theta.shape[0] - 1), dtype),
                         jnp.ones((total, 1), dtype)], axis=1)
    y = response(ky, X @ theta).astype(dtype)
    return _split(key, X, y, theta, num_test)


def synthetic_logistic(key: jax.Array, n: int = 10_000, theta=(3.0, 3.0, 0.0), num_test: int = 0,
                       dtype=jnp.float32) -> Dataset:
    """HC §7.2: x ~ N(0, I_{D-1}), X = [x, 1], y ~ ±1 with P(y = 1) = sigmoid(X theta); theta = [3, 3, 0]."""
    def labels(k, eta):
        return jnp.where(jax.random.uniform(k, eta.shape, eta.dtype) < jax.nn.sigmoid(eta), 1.0, -1.0)

    return _glm_data(key, n, theta, num_test, dtype, labels)


def synthetic_poisson(key: jax.Array, n: int = 10_000, theta=(1.0, 0.0), num_test: int = 0,
                      dtype=jnp.float32) -> Dataset:
    """HC §7.2: x ~ N(0, I_{D-1}), X = [x, 1], y ~ Poisson(log(1 + exp(X theta))); theta = [1, 0]."""
    return _glm_data(key, n, theta, num_test, dtype,
                     lambda k, eta: jax.random.poisson(k, jax.nn.softplus(eta), eta.shape))


def synthetic_bradley_terry(key: jax.Array, n: int = 20_000, num_players: int = 50, num_test: int = 0,
                            spread: float = 1.0) -> Dataset:
    """Paired comparisons for `cj.models.bradley_terry`: strengths theta_i ~ N(0, spread^2), each game a
    uniformly random pair of distinct players (X of shape (N, 2), int32), y = 1 if the first player won,
    with P = sigmoid(theta_a - theta_b), else 0."""
    key = _validate.check_key(key)
    if num_players < 2:
        raise ValueError(f"num_players: must be at least 2, got {num_players}")
    k_theta, k_a, k_b, k_y = jax.random.split(key, 4)
    total = n + num_test
    theta = spread * jax.random.normal(k_theta, (num_players,))
    a = jax.random.randint(k_a, (total,), 0, num_players)
    b = (a + jax.random.randint(k_b, (total,), 1, num_players)) % num_players  # uniform over b != a
    pairs = jnp.stack([a, b], axis=1).astype(jnp.int32)
    y = (jax.random.uniform(k_y, (total,)) < jax.nn.sigmoid(theta[a] - theta[b])).astype(jnp.float32)
    return _split(key, pairs, y, theta, num_test)


def synthetic_sparse_regression(key: jax.Array, n: int = 50_000, beta=(0.0,) * 5 + (5.0,) * 5,
                                noise: float = 25.0, num_test: int = 0, dtype=jnp.float32) -> Dataset:
    """The sparse regression of the Coreset MCMC experiments (coreset-mcmc.md §4.1): x ~ N(0, I_p),
    y = x^T beta + noise * eps, with beta = (0, 0, 0, 0, 0, 5, 5, 5, 5, 5) and noise sd 25."""
    key = _validate.check_key(key)
    beta = jnp.asarray(beta, dtype)
    kx, ke = jax.random.split(key)
    total = n + num_test
    X = jax.random.normal(kx, (total, beta.shape[0]), dtype)
    y = X @ beta + noise * jax.random.normal(ke, (total,), dtype)
    return _split(key, X, y, beta, num_test)


def synthetic_gaussian(key: jax.Array, n: int, dim: int = 2, mean=None, dtype=jnp.float32) -> jax.Array:
    """HC §6: y_n ~ N(mu, I) with mu = 0 by default; returns the (N, D) array."""
    key = _validate.check_key(key)
    mu = jnp.zeros(dim, dtype) if mean is None else jnp.asarray(mean, dtype)
    return mu + jax.random.normal(key, (n, dim), dtype)


def synthetic_gaussian_mean(key: jax.Array, n: int = 600, dim: int = 200, num_test: int = 0,
                            dtype=jnp.float32) -> Dataset:
    """IHT §5.1 (and HC §6 with dim = 2): theta ~ N(0, I_D), x_n ~ N(theta, I_D); X holds the x_n, y is None.

    IHT §5.1 uses D = 200, N = 600 (the defaults).
    """
    key = _validate.check_key(key)
    if n < 1 or dim < 1:
        raise ValueError(f"n, dim: must be positive, got n = {n}, dim = {dim}")
    k_theta, k_x = jax.random.split(key)
    theta = jax.random.normal(k_theta, (dim,), dtype)
    X = theta + jax.random.normal(k_x, (n + num_test, dim), dtype)
    if num_test == 0:
        return Dataset(X, None, theta_true=theta)
    return Dataset(X[:n], None, X[n:], None, theta)


def synthetic_binary(key: jax.Array, n: int = 1_000_000, dim: int = 10, num_test: int = 0,
                     dtype=jnp.float32) -> Dataset:
    """LR §4 BINARY5 (dim = 5) and BINARY10 (dim = 10): X_nd ~ Bern(p_d) independently, y_n ~ logistic(X_n
    theta) in {-1, +1}, with p and theta from LR §4 (`BINARY_P`, `BINARY_THETA`; their first `dim` entries).

    p_1 = 1, so the first feature is the intercept. Rare features (p = 0.01 .. 0.001) carry large
    coefficients: the "rare but highly predictive" regime the paper targets.
    """
    key = _validate.check_key(key)
    if dim not in (5, 10):
        raise ValueError(f"dim: LR §4 defines BINARY5 and BINARY10 only, got {dim}")
    p = jnp.asarray(BINARY_P[:dim], dtype)
    theta = jnp.asarray(BINARY_THETA[:dim], dtype)
    kx, ky = jax.random.split(key)
    total = n + num_test
    X = (jax.random.uniform(kx, (total, dim), dtype) < p).astype(dtype)
    prob = jax.nn.sigmoid(X @ theta)
    y = jnp.where(jax.random.uniform(ky, (total,), dtype) < prob, 1.0, -1.0).astype(dtype)
    return _split(key, X, y, theta, num_test)


def synthetic_mixture(key: jax.Array, n: int = 1_000_000, num_test: int = 0, dtype=jnp.float32) -> Dataset:
    """LR §4 MIXTURE: y_n ~ Bern(1/2) in {-1, +1}, x_n ~ N(mu_{y_n}, I_10) with
    mu_{-1} = (0,0,0,0,0,1,1,1,1,1) and mu_{+1} = (1,1,1,1,1,0,0,0,0,0). theta_true is None (the model is
    not logistic)."""
    key = _validate.check_key(key)
    ky, kx = jax.random.split(key)
    total = n + num_test
    y = jnp.where(jax.random.bernoulli(ky, 0.5, (total,)), 1.0, -1.0).astype(dtype)
    first = (jnp.arange(10) < 5).astype(dtype)
    mean = jnp.where((y > 0)[:, None], first, 1.0 - first)
    X = mean + jax.random.normal(kx, (total, 10), dtype)
    return _split(key, X, y, None, num_test)


def synthetic_vmf(key: jax.Array, n: int = 10_000, num_test: int = 0, tau: float = 50.0,
                  dtype=jnp.float32) -> Dataset:
    """HC §7.2 directional clustering: an equally weighted mixture of 6 vMF(mu_k, tau) on S^2, one mode at
    each axis pole (+-e_1, +-e_2, +-e_3). X holds the unit vectors, y the component labels, and theta_true
    the packed [mu_1..mu_6, omega] (`cj.models.vmf.pack`)."""
    from .models.vmf import VMFParams, pack, sample_vmf

    key = _validate.check_key(key)
    if not tau > 0:
        raise ValueError(f"tau: must be positive, got {tau}")
    poles = jnp.concatenate([jnp.eye(3, dtype=dtype), -jnp.eye(3, dtype=dtype)])
    kz, kx = jax.random.split(key)
    total = n + num_test
    labels = jax.random.randint(kz, (total,), 0, 6)
    X = jax.vmap(sample_vmf, in_axes=(0, 0, None))(jax.random.split(kx, total), poles[labels],
                                                   jnp.asarray(tau, dtype))
    theta = pack(VMFParams(poles, jnp.full(6, 1.0 / 6.0, dtype)))
    return _split(key, X.astype(dtype), labels.astype(dtype), theta, num_test)


def synthetic_rbf(key: jax.Array, n: int = 1000, num_test: int = 0, dtype=jnp.float32) -> Dataset:
    """Synthetic 2-D coordinates standing in for IHT §5.2's UK house-price data (which is not shipped):
    locations from a mixture of 8 Gaussian "towns" with spread 0.3-1.5 in a 10 x 6 box, and log-prices
    y = 12 + a smooth field (sum of 5 random bumps of width 1-3) + N(0, 0.3^2) noise.

    X holds the coordinates (N, 2); theta_true is None (the field is not in the model's span).
    """
    key = _validate.check_key(key)
    k_town, k_spread, k_pick, k_loc, k_bump, k_amp, k_width, k_noise = jax.random.split(key, 8)
    total = n + num_test
    box = jnp.asarray([10.0, 6.0], dtype)
    towns = jax.random.uniform(k_town, (8, 2), dtype) * box
    spread = jax.random.uniform(k_spread, (8,), dtype, 0.3, 1.5)
    which = jax.random.randint(k_pick, (total,), 0, 8)
    X = towns[which] + spread[which, None] * jax.random.normal(k_loc, (total, 2), dtype)
    bumps = jax.random.uniform(k_bump, (5, 2), dtype) * box
    amp = jax.random.normal(k_amp, (5,), dtype)
    width = jax.random.uniform(k_width, (5,), dtype, 1.0, 3.0)
    field = jnp.exp(-0.5 * jnp.sum(jnp.square(X[:, None] - bumps), -1) / width**2) @ amp
    y = 12.0 + field + 0.3 * jax.random.normal(k_noise, (total,), dtype)
    return _split(key, X, y, None, num_test)


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
