"""Metrics against closed forms and brute-force NumPy references."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import metrics


def _random_spd(rng, d):
    a = rng.normal(size=(d, d))
    return a @ a.T + d * np.eye(d)


def _numpy_kl(m0, S0, m1, S1):
    d = m0.shape[0]
    S1inv = np.linalg.inv(S1)
    diff = m1 - m0
    return 0.5 * (np.trace(S1inv @ S0) + diff @ S1inv @ diff - d
                  + np.log(np.linalg.det(S1) / np.linalg.det(S0)))


@pytest.mark.slow
def test_gaussian_kl_matches_numpy_both_directions():
    rng = np.random.default_rng(0)
    for d in (1, 2, 5):
        m0, m1 = rng.normal(size=d), rng.normal(size=d)
        S0, S1 = _random_spd(rng, d), _random_spd(rng, d)
        fwd, rev = metrics.gaussian_kls(m0, S0, m1, S1)
        assert np.isclose(float(fwd), _numpy_kl(m0, S0, m1, S1), rtol=1e-4)
        assert np.isclose(float(rev), _numpy_kl(m1, S1, m0, S0), rtol=1e-4)
        assert np.isclose(float(metrics.gaussian_kl(m0, S0, m0, S0)), 0.0, atol=1e-5)


def test_wasserstein1_is_exact_in_one_dimension():
    """For equal-size 1-D sets the optimal plan matches order statistics: W1 = mean |sort(a) - sort(b)|."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.0, 1.0, 600), rng.normal(0.4, 1.0, 600)
    exact = np.mean(np.abs(np.sort(a) - np.sort(b)))
    assert np.isclose(metrics.wasserstein1(a, b), exact, rtol=1e-10)


def test_wasserstein1_between_shifted_gaussians():
    """W1(N(mu1, s^2), N(mu2, s^2)) = |mu1 - mu2|, recovered up to sampling error."""
    rng = np.random.default_rng(2)
    for shift in (0.5, 2.0):
        a = rng.normal(0.0, 1.0, (1000, 1))
        b = rng.normal(shift, 1.0, (1000, 1))
        assert abs(metrics.wasserstein1(a, b) - shift) < 0.1
    x = rng.normal(size=(300, 3))
    assert metrics.wasserstein1(x, x) == 0.0
    # A pure translation in D dimensions costs exactly its length.
    assert np.isclose(metrics.wasserstein1(x, x + np.array([0.3, 0.4, 0.0])), 0.5, rtol=1e-9)
    # Chains layout (C, S, D) is flattened.
    assert np.isclose(metrics.wasserstein1(x.reshape(3, 100, 3), x), 0.0)


def test_wasserstein1_brute_force_small():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    best = min(np.mean(np.linalg.norm(a - b[list(p)], axis=1)) for p in itertools.permutations(range(6)))
    assert np.isclose(metrics.wasserstein1(a, b), best, rtol=1e-10)


def test_mmd_zero_for_identical_and_grows_with_shift():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(500, 3))
    assert metrics.mmd(x, x) == pytest.approx(0.0, abs=1e-6)
    values = [metrics.mmd(x, x + s) for s in (0.05, 0.2, 0.5, 1.0)]
    assert all(v2 > v1 > 0 for v1, v2 in zip(values, values[1:]))


def test_mmd_matches_brute_force():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(40, 2)), rng.normal(0.3, 1.2, size=(30, 2))
    k = lambda x, y: (x @ y.T + 1.0) ** 3
    ref = np.sqrt(k(a, a).mean() + k(b, b).mean() - 2 * k(a, b).mean())
    assert np.isclose(metrics.mmd(a, b), ref, rtol=1e-8)


def test_test_log_likelihood_matches_numpy():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 50, num_test=40)
    model = cj.models.logistic_regression()
    thetas = np.random.default_rng(6).normal(size=(2, 25, 3)) + np.array([3.0, 3.0, 0.0])
    X, y = np.asarray(ds.Xt, np.float64), np.asarray(ds.yt, np.float64)
    flat = thetas.reshape(-1, 3)
    lik = 1.0 / (1.0 + np.exp(-y[None, :] * (flat @ X.T)))  # (S, T)
    ref = np.mean(np.log(lik.mean(axis=0)))
    got = metrics.test_log_likelihood(model, ds.test, jnp.asarray(thetas, jnp.float32))
    assert np.isclose(float(got), ref, rtol=1e-4)


def test_normalisations():
    assert float(metrics.normalized_test_log_likelihood(-0.6, -0.3)) == pytest.approx(2.0)
    assert float(metrics.normalized_test_log_likelihood(-0.3, -0.3)) == pytest.approx(1.0)
    rng = np.random.default_rng(7)
    runs = [rng.normal(size=(200, 1)) + 0.1 * i for i in range(4)]
    # Independently of metrics.wasserstein1: in 1-D, W1 between equal-size sets is mean |sort(a) - sort(b)|.
    pairs = [np.mean(np.abs(np.sort(a[:, 0]) - np.sort(b[:, 0]))) for a, b in itertools.combinations(runs, 2)]
    ref = metrics.median_pairwise_wasserstein1(runs)
    assert ref == pytest.approx(np.median(pairs), rel=1e-9)
    assert float(metrics.normalized_wasserstein1(2 * ref, ref)) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="runs"):
        metrics.median_pairwise_wasserstein1(runs[:1])


@pytest.mark.slow
def test_laplace_kl_exact_for_linear_regression():
    """The Laplace fit of a Gaussian posterior is exact, so laplace_kl equals the closed-form KLs."""
    rng = np.random.default_rng(8)
    n = 400
    X = jnp.asarray(rng.normal(size=(n, 3)), jnp.float32)
    y = X @ jnp.array([1.0, -2.0, 0.5]) + 0.5 * jnp.asarray(rng.normal(size=n), jnp.float32)
    model = cj.models.linear_regression(noise_scale=0.5, prior_scale=2.0)
    w = np.zeros(n, np.float32)
    w[:40] = n / 40
    got = metrics.laplace_kl(model, (X, y), jnp.asarray(w))
    full, part = model.posterior((X, y), None), model.posterior((X, y), jnp.asarray(w))
    assert float(got["forward"]) == pytest.approx(float(metrics.gaussian_kl(*full, *part)), rel=1e-2)
    assert float(got["reverse"]) == pytest.approx(float(metrics.gaussian_kl(*part, *full)), rel=1e-2)
    assert float(got["forward"]) > 0.01
    same = metrics.laplace_kl(model, (X, y), jnp.ones(n))
    assert abs(float(same["forward"])) < 1e-3 and abs(float(same["reverse"])) < 1e-3


def test_metric_input_errors():
    with pytest.raises(ValueError, match="samples_b"):
        metrics.wasserstein1(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="samples_a"):
        metrics.mmd(np.full((5, 2), np.nan), np.zeros((5, 2)))
