import pytest
"""RBF regression (IHT §5.2): basis layout, and the closed-form weighted posterior and the exact centred
L2(pi) vectors against direct NumPy linear algebra written here."""

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj


def _problem(n=120, per_scale=4):
    ds = cj.data.synthetic_rbf(jax.random.key(0), n=n)
    return ds, cj.models.rbf_regression(jax.random.key(1), ds.X, ds.y, per_scale=per_scale)


@pytest.mark.slow
def test_basis_layout_and_features():
    ds, p = _problem()
    B, y = p.data
    assert B.shape == (120, 6 * 4 + 1)
    np.testing.assert_allclose(p.basis.scales[:4], 0.2)
    np.testing.assert_allclose(p.basis.scales[-1], 100.0)
    np.testing.assert_allclose(p.basis.means[-1], np.mean(np.asarray(ds.X), 0), rtol=1e-5)
    X, mu, s = map(np.asarray, (ds.X, p.basis.means, p.basis.scales))
    ref = np.exp(-0.5 * ((X[:, None, :] - mu[None]) ** 2).sum(-1) / s**2)
    np.testing.assert_allclose(B, ref, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(B[:, -1]) > 0.99)  # the near-constant basis
    # hyperparameters of IHT §5.2: noise = std(y), prior mean/second moment of y
    np.testing.assert_allclose(p.noise_scale, np.std(np.asarray(y)), rtol=1e-5)
    np.testing.assert_allclose(p.prior_scale**2, np.mean(np.asarray(y) ** 2), rtol=1e-5)


@pytest.mark.slow
def test_weighted_posterior_matches_numpy():
    with jax.enable_x64(True):
        ds = cj.data.synthetic_rbf(jax.random.key(0), n=120, dtype=jnp.float64)
        p = cj.models.rbf_regression(jax.random.key(1), ds.X, ds.y, per_scale=4)
        rng = np.random.default_rng(0)
        w = np.where(rng.uniform(size=120) < 0.3, rng.exponential(3.0, 120), 0.0)
        mean, cov = cj.models.rbf_posterior(p, jnp.asarray(w))
        B, y = map(np.asarray, p.data)
        s2, s02, m0 = p.noise_scale**2, p.prior_scale**2, p.prior_mean
        prec = np.eye(B.shape[1]) / s02 + B.T @ np.diag(w) @ B / s2
        cov_ref = np.linalg.inv(prec)
        mean_ref = cov_ref @ (m0 * np.ones(B.shape[1]) / s02 + B.T @ (w * y) / s2)
        np.testing.assert_allclose(cov, cov_ref, rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(mean, mean_ref, rtol=1e-7, atol=1e-8)
        # weights of one reproduce the full posterior
        full = cj.models.rbf_posterior(p)
        np.testing.assert_allclose(full[0], cj.models.rbf_posterior(p, jnp.ones(120))[0], rtol=1e-10)


@pytest.mark.slow
def test_exact_centered_vectors_match_monte_carlo_gram():
    with jax.enable_x64(True):
        ds = cj.data.synthetic_rbf(jax.random.key(2), n=30, dtype=jnp.float64)
        p = cj.models.rbf_regression(jax.random.key(3), ds.X, ds.y, per_scale=2)
        V = np.asarray(cj.models.exact_centered_vectors(p))
        mean, cov = map(np.asarray, cj.models.rbf_posterior(p))
        B, y = map(np.asarray, p.data)
        alphas = np.random.default_rng(1).multivariate_normal(mean, cov, size=200_000)
        L = -0.5 * (y[None, :] - alphas @ B.T) ** 2 / p.noise_scale**2  # constants cancel when centred
        G = np.cov(L.T, bias=True)
        gram = V @ V.T
        # Monte Carlo error of a covariance from 2e5 draws: a few tenths of a percent of the scale
        np.testing.assert_allclose(gram, G, atol=0.02 * np.abs(G).max())
