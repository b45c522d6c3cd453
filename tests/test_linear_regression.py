"""Bayesian linear regression with known noise: exact weighted posterior (used by IHT §5.2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(200, 4)), jnp.float32)
    y = X @ jnp.array([0.5, -1.0, 2.0, 0.0]) + 0.3 * jnp.asarray(rng.normal(size=200), jnp.float32)
    return X, y


def test_posterior_matches_numpy_and_laplace(problem):
    X, y = problem
    model = cj.models.linear_regression(noise_scale=0.3, prior_scale=2.0, prior_mean=0.1)
    mean, cov = model.posterior((X, y), None)
    Xn, yn = np.asarray(X, np.float64), np.asarray(y, np.float64)
    prec = np.eye(4) / 4.0 + Xn.T @ Xn / 0.09
    ref_cov = np.linalg.inv(prec)
    ref_mean = ref_cov @ (0.1 * np.ones(4) / 4.0 + Xn.T @ yn / 0.09)
    assert np.allclose(np.asarray(mean), ref_mean, atol=1e-4)
    assert np.allclose(np.asarray(cov), ref_cov, rtol=1e-3, atol=1e-8)
    lap = cj.laplace(model, (X, y))  # a Gaussian posterior: Laplace is exact
    assert np.allclose(np.asarray(lap.mean), ref_mean, atol=1e-4)


def test_weights_equal_duplicated_rows(problem):
    X, y = problem
    model = cj.models.linear_regression(noise_scale=0.3)
    w = jnp.zeros(200).at[:10].set(3.0)
    m_w, c_w = model.posterior((X, y), w)
    Xd, yd = jnp.concatenate([X[:10]] * 3), jnp.concatenate([y[:10]] * 3)
    m_d, c_d = model.posterior((Xd, yd), None)
    assert np.allclose(np.asarray(m_w), np.asarray(m_d), atol=1e-4)
    assert np.allclose(np.asarray(c_w), np.asarray(c_d), rtol=1e-3)


@pytest.mark.slow
def test_sample_recovers_weighted_linear_regression(problem):
    X, y = problem
    model = cj.models.linear_regression(noise_scale=0.3)
    w = jnp.zeros(200).at[:30].set(200 / 30)
    post = cj.sample(model, (X, y), jax.random.key(0), weights=w, method="mala", num_samples=1000,
                     num_warmup=500, num_chains=2)
    mean, cov = model.posterior((X, y), w)
    sd = np.sqrt(np.diag(np.asarray(cov)))
    assert np.all(np.abs((np.asarray(post.mean) - np.asarray(mean)) / sd) < 0.25)


def test_bad_scales():
    with pytest.raises(ValueError, match="noise_scale"):
        cj.models.linear_regression(noise_scale=0.0)
    with pytest.raises(ValueError, match="prior_scale"):
        cj.models.linear_regression(prior_scale=-1.0)
