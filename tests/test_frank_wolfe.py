"""Hilbert Frank–Wolfe (HC Algorithm 2) and importance sampling (HC Algorithm 1) against theory and NumPy."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.solvers import importance, make_problem, run


def numpy_frank_wolfe(V, M):
    """Plain NumPy HC Algorithm 2 with greedy init (Eq. 4.7) and exact line search (Eq. 4.9)."""
    sig_n = np.linalg.norm(V, axis=1)
    sig = sig_n.sum()
    L = V.sum(0)
    w = np.zeros(V.shape[0])
    f = np.argmax(V @ L / sig_n)
    w[f] = sig / sig_n[f]
    for _ in range(M - 1):
        Lw = w @ V
        f = np.argmax(V @ (L - Lw) / sig_n)
        u = sig / sig_n[f] * V[f] - Lw
        gamma = u @ (L - Lw) / (u @ u)
        w = (1 - gamma) * w
        w[f] += gamma * sig / sig_n[f]
    return w


def test_frank_wolfe_matches_numpy_reference():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(60, 8)) + 0.5
    with jax.enable_x64(True):
        cs = cj.build(jnp.asarray(V), 15, "frank_wolfe")
        got = np.asarray(cs.dense(60))
    expected = numpy_frank_wolfe(V, 15)
    np.testing.assert_array_equal(np.flatnonzero(got > 0), np.flatnonzero(expected > 0))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def gaussian_problem(seed, n=1000, d=2):
    """HC §6: data, exact Eq. 6.5 vectors (pi_hat = pi) and the exact posterior."""
    y = cj.data.synthetic_gaussian(jax.random.key(seed), n, dim=d)
    V = cj.models.gaussian_mean_fisher_vectors(y)
    return y, V, cj.models.gaussian_mean_posterior(y)


def coreset_kl(y, weights, exact):
    mean_w, cov_w = cj.models.gaussian_mean_posterior(y, weights)
    return float(cj.metrics.gaussian_kl(exact[0], exact[1], mean_w, cov_w))  # HC Eq. 6.6


def eta_bar(V):
    U = V / np.linalg.norm(V, axis=1, keepdims=True)
    sq = (U**2).sum(1)
    return np.sqrt(max(0.0, (sq[:, None] + sq[None, :] - 2 * U @ U.T).max()))  # HC Eq. 3.3


@pytest.mark.slow
def test_frank_wolfe_gaussian_kl_falls_with_M_and_obeys_theorem_4_4():
    sizes = (2, 5, 10, 20, 50)
    kls = {M: [] for M in sizes}
    for seed in range(5):
        y, V, exact = gaussian_problem(seed)
        Vn = np.asarray(V, np.float64)
        sigma, etabar = np.linalg.norm(Vn, axis=1).sum(), eta_bar(Vn)
        target = np.linalg.norm(Vn.sum(0))
        for M in sizes:
            cs = cj.build(V, M, "frank_wolfe")
            kls[M].append(coreset_kl(y, cs.dense(1000), exact))
            err = float(cj.relative_error(V, cs)) * target
            assert err <= sigma * etabar / np.sqrt(M), (M, err)  # Theorem 4.4
            gammas = np.asarray(cs.info["gammas"])[: M - 1]
            assert np.all(gammas >= -1e-6) and np.all(gammas <= 1 + 1e-6)  # Lemma 4.3
    medians = [np.median(kls[M]) for M in sizes]
    assert all(b < a for a, b in zip(medians, medians[1:])), medians


@pytest.mark.slow
def test_fixed_step_rule_obeys_eq_4_12():
    y, V, _ = gaussian_problem(7)
    Vn = np.asarray(V, np.float64)
    sigma, etabar = np.linalg.norm(Vn, axis=1).sum(), eta_bar(Vn)
    for M in (5, 20, 50):
        cs = cj.build(V, M, "frank_wolfe", step_rule="fixed")
        err = float(cj.relative_error(V, cs)) * np.linalg.norm(Vn.sum(0))
        assert err <= 2 * sigma * etabar / np.sqrt(3 * M + 1)
        np.testing.assert_allclose(cs.info["gammas"][:3], [2 / 7, 2 / 10, 2 / 13], rtol=1e-6)


@pytest.mark.slow
def test_frank_wolfe_beats_uniform_by_10x_at_M_50():
    fw, unif = [], []
    for trial in range(20):
        y, V, exact = gaussian_problem(100 + trial)
        fw.append(coreset_kl(y, cj.build(V, 50, "frank_wolfe").dense(1000), exact))
        unif.append(coreset_kl(y, cj.build(V, 50, "uniform", key=jax.random.key(trial)).dense(1000), exact))
    assert np.median(fw) * 10 <= np.median(unif), (np.median(fw), np.median(unif))


@pytest.mark.slow
def test_importance_sampling_is_unbiased_and_matches_eq_4_1():
    rng = np.random.default_rng(1)
    V = jnp.asarray(rng.normal(size=(12, 4)) + 0.3, jnp.float32)
    M, draws = 6, 20_000
    problem = make_problem(V)
    solve = jax.jit(jax.vmap(lambda k: run(importance(M), problem, k)))
    indices, weights, _ = solve(jax.random.split(jax.random.key(0), draws))
    dense = jax.vmap(lambda i, w: jnp.zeros(12).at[i].add(w))(indices, weights)
    dense = np.asarray(dense, np.float64)
    # E[W] = 1 (Eq. 4.1's premise): every coordinate's mean within 5 standard errors of 1.
    z = (dense.mean(0) - 1.0) / (dense.std(0) / np.sqrt(draws))
    assert np.max(np.abs(z)) < 5, z
    # E||L(W) - L||^2 = sigma^2 eta^2 / M with eta^2 = 1 - ||L||^2 / sigma^2.
    Vn = np.asarray(V, np.float64)
    sq_err = (((dense - 1.0) @ Vn) ** 2).sum(1)
    sigma = np.linalg.norm(Vn, axis=1).sum()
    expected = (sigma**2 - np.linalg.norm(Vn.sum(0)) ** 2) / M
    assert abs(sq_err.mean() - expected) < 5 * sq_err.std() / np.sqrt(draws)


@pytest.mark.parametrize("method", ["uniform", "importance", "frank_wolfe"])
def test_same_key_same_coreset(method):
    V = jnp.asarray(np.random.default_rng(2).normal(size=(200, 10)) + 0.2, jnp.float32)
    a = cj.build(V, 30, method, key=jax.random.key(3))
    b = cj.build(V, 30, method, key=jax.random.key(3))
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.weights.shape == (30,) and a.num_points <= 30
    assert np.all(np.asarray(a.weights) >= 0)
    if method != "frank_wolfe":
        c = cj.build(V, 30, method, key=jax.random.key(4))
        assert not np.array_equal(a.dense(200), c.dense(200))


@pytest.mark.slow
def test_pipeline_reproducible_and_better_than_uniform():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 2_000)
    model = cj.models.logistic_regression()
    a = cj.coreset(model, ds.train, 50, "frank_wolfe", jax.random.key(1), num_features=100)
    b = cj.coreset(model, ds.train, 50, "frank_wolfe", jax.random.key(1), num_features=100)
    np.testing.assert_array_equal(a.dense(2_000), b.dense(2_000))
    assert a.method == "frank_wolfe" and 1 <= a.num_points <= 50
