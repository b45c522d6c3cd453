"""Synthetic generators of the papers' datasets: shapes, labels and the generating parameters recovered
by simple estimators (frequencies, class means, MLE) at the stated settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj


@pytest.mark.slow
def test_logistic_and_poisson_hc_7_2():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 20_000, num_test=1000)
    assert ds.X.shape == (20_000, 3) and ds.Xt.shape == (1000, 3)
    np.testing.assert_array_equal(np.unique(np.asarray(ds.y)), [-1.0, 1.0])
    mode = cj.laplace(cj.models.logistic_regression(prior_scale=100.0), ds.train).mean
    np.testing.assert_allclose(mode, [3.0, 3.0, 0.0], atol=0.25)
    ds = cj.data.synthetic_poisson(jax.random.key(1), 20_000)
    mode = cj.laplace(cj.models.poisson_regression(prior_scale=100.0), ds.train).mean
    np.testing.assert_allclose(mode, [1.0, 0.0], atol=0.08)


@pytest.mark.parametrize("dim", [5, 10])
def test_binary_lr_4(dim):
    ds = cj.data.synthetic_binary(jax.random.key(dim), 200_000, dim)
    X = np.asarray(ds.X)
    assert X.shape == (200_000, dim) and set(np.unique(X)) <= {0.0, 1.0}
    p = np.asarray(cj.data.BINARY_P[:dim])
    assert np.all(np.abs(X.mean(0) - p) <= 4 * np.sqrt(p * (1 - p) / 2e5) + 1e-9)
    # positive rates of LR Table 1: 9.5% (BINARY5) and 8.9% (BINARY10)
    pos = float(np.mean(np.asarray(ds.y) > 0))
    assert abs(pos - {5: 0.095, 10: 0.089}[dim]) < 0.01


def test_mixture_lr_4():
    ds = cj.data.synthetic_mixture(jax.random.key(3), 100_000)
    X, y = np.asarray(ds.X), np.asarray(ds.y)
    assert X.shape == (100_000, 10)
    assert abs(np.mean(y > 0) - 0.5) < 0.01
    first = (np.arange(10) < 5).astype(float)
    np.testing.assert_allclose(X[y > 0].mean(0), first, atol=0.02)
    np.testing.assert_allclose(X[y < 0].mean(0), 1 - first, atol=0.02)
    np.testing.assert_allclose(X[y > 0].std(0), 1.0, atol=0.02)


def test_gaussian_mean_iht_5_1():
    ds = cj.data.synthetic_gaussian_mean(jax.random.key(4), n=600, dim=200)
    assert ds.X.shape == (600, 200) and ds.theta_true.shape == (200,)
    resid = np.asarray(ds.X - ds.theta_true)
    assert abs(resid.mean()) < 0.01 and abs(resid.std() - 1.0) < 0.01


@pytest.mark.slow
def test_vmf_six_poles():
    ds = cj.data.synthetic_vmf(jax.random.key(5), n=6000, num_test=600)
    X, lab = np.asarray(ds.X), np.asarray(ds.y).astype(int)
    assert X.shape == (6000, 3) and ds.Xt.shape == (600, 3)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    poles = np.concatenate([np.eye(3), -np.eye(3)])
    # mean resultant length per component: A_3(50) = coth(50) - 1/50 = 0.98
    for k in range(6):
        cos = X[lab == k] @ poles[k]
        assert abs(cos.mean() - (1 / np.tanh(50.0) - 1 / 50.0)) < 0.003
    assert np.all(np.bincount(lab, minlength=6) > 800)


@pytest.mark.slow
def test_rbf_coordinates():
    ds = cj.data.synthetic_rbf(jax.random.key(6), n=1000, num_test=100)
    assert ds.X.shape == (1000, 2) and ds.y.shape == (1000,) and ds.Xt.shape == (100, 2)
    assert np.all(np.isfinite(np.asarray(ds.y))) and 9.0 < float(jnp.mean(ds.y)) < 15.0


def test_binary_rejects_other_dims():
    with pytest.raises(ValueError, match="dim"):
        cj.data.synthetic_binary(jax.random.key(0), 10, 7)
