"""`cj.metrics.bridge_kl`: KL(pi_w || pi) from draws of both posteriors by bridge sampling, against closed-form
Gaussian KLs, and its independence of dimension where the two-moment KL is biased by about D^2 / (2 draws)."""

import numpy as np
import pytest

import coresets_jax as cj


def gaussian_logpdf(x, mean, cov):
    """log N(x | mean, cov) in plain NumPy, rows of x."""
    chol = np.linalg.cholesky(cov)
    z = np.linalg.solve(chol, (x - mean).T)
    return -0.5 * np.sum(z ** 2, 0) - np.sum(np.log(np.diag(chol))) - 0.5 * len(mean) * np.log(2 * np.pi)


def gaussian_kl_numpy(m_p, s_p, m_q, s_q):
    d = len(m_p)
    inv = np.linalg.inv(s_q)
    diff = m_q - m_p
    return 0.5 * (np.trace(inv @ s_p) + diff @ inv @ diff - d
                  + np.linalg.slogdet(s_q)[1] - np.linalg.slogdet(s_p)[1])


def two_moment_kl(draws, m_q, s_q):
    """The benchmarks' two-moment KL: KL(N(mean, cov of the draws) || N(m_q, s_q))."""
    return gaussian_kl_numpy(draws.mean(0), np.cov(draws, rowvar=False), m_q, s_q)


def pair(d, seed=0):
    """pi_w = N(m_w, S_w), pi = N(0, I) at a KL of about 0.12 nat."""
    rng = np.random.default_rng(seed)
    m_w = rng.normal(0.0, 0.25 / np.sqrt(d), d)
    a = rng.normal(0.0, 0.12 / np.sqrt(d), (d, d))
    s_w = np.eye(d) + (a + a.T) / 2
    return m_w, s_w, np.zeros(d), np.eye(d)


def test_bridge_kl_matches_the_closed_form_at_d_50_where_the_two_moment_kl_is_biased():
    d, n = 50, 4000
    m_w, s_w, m, s = pair(d)
    rng = np.random.default_rng(1)
    x_w = rng.multivariate_normal(m_w, s_w, n)
    x = rng.multivariate_normal(m, s, n)
    # r = log q - log q_w up to a constant shared by all draws (the normalising constants' ratio is unknown)
    r = lambda x_: gaussian_logpdf(x_, m, s) - gaussian_logpdf(x_, m_w, s_w) + 123.4
    out = cj.metrics.bridge_kl_from_log_ratios(r(x_w), r(x))
    exact = gaussian_kl_numpy(m_w, s_w, m, s)
    exact_reverse = gaussian_kl_numpy(m, s, m_w, s_w)
    assert 0.05 < exact < 0.3  # a KL near the tolerances the benchmarks score
    assert abs(out["kl"] - exact) < 0.02, (out, exact)
    assert abs(out["kl_reverse"] - exact_reverse) < 0.02, (out, exact_reverse)
    assert abs(out["log_z_ratio"] - 123.4) < 0.02  # both densities normalised: c is the constant added
    # the alternative it replaces: bias ~ D (D + 3) / (4 n) = 0.17 nat here, ten times the bridge's error
    assert two_moment_kl(x_w, m, s) - exact > 0.1


def test_bridge_kl_ignores_a_shared_constant_and_is_zero_for_one_posterior():
    rng = np.random.default_rng(2)
    r1, r2 = rng.normal(0.0, 0.3, 500), rng.normal(0.05, 0.3, 400)
    a = cj.metrics.bridge_kl_from_log_ratios(r1, r2)
    b = cj.metrics.bridge_kl_from_log_ratios(r1 - 1e3, r2 - 1e3)
    assert a["kl"] == pytest.approx(b["kl"], abs=1e-9) and a["kl_reverse"] == pytest.approx(b["kl_reverse"], abs=1e-9)
    same = cj.metrics.bridge_kl_from_log_ratios(np.full(300, 7.0), np.full(200, 7.0))
    assert same["kl"] == pytest.approx(0.0, abs=1e-12) and same["kl_reverse"] == pytest.approx(0.0, abs=1e-12)


def test_bridge_kl_of_a_coreset_against_the_exact_gaussian_mean_posteriors():
    d, n = 3, 400
    rng = np.random.default_rng(3)
    y = rng.normal(1.0, 1.0, (n, d))
    model = cj.models.gaussian_mean(d)
    w = np.maximum(1.0 + 0.3 * rng.standard_normal(n), 0.0)  # perturbed weights: a KL of about 0.1 nat
    mean, cov = map(np.asarray, model.posterior(y))
    mean_w, cov_w = map(np.asarray, model.posterior(y, w))
    draws_w = rng.multivariate_normal(mean_w, cov_w, 3000).reshape(2, 1500, d)  # as chains
    draws = rng.multivariate_normal(mean, cov, 3000)
    out = cj.metrics.bridge_kl(model, y, w, draws_w, draws)
    exact = gaussian_kl_numpy(mean_w, cov_w, mean, cov)
    assert 0.05 < exact < 2.0
    assert out["kl"] == pytest.approx(exact, rel=0.1, abs=0.01), (out, exact)
    assert out["kl_reverse"] == pytest.approx(gaussian_kl_numpy(mean, cov, mean_w, cov_w), rel=0.1, abs=0.01)
    # the same weights as a Coreset (slots, with a zero-weight slot) and the draws as Posterior-like objects
    live = np.flatnonzero(w)
    cs = cj.Coreset(np.r_[live, 0], np.r_[w[live], 0.0].astype(np.float32))
    class Draws:  # noqa: E306 (a cj.sample Posterior carries its draws as .samples)
        def __init__(self, samples):
            self.samples = samples
    same = cj.metrics.bridge_kl(model, y, cs, Draws(draws_w), Draws(draws))
    assert same["kl"] == pytest.approx(out["kl"], rel=1e-4, abs=1e-6)


def test_bridge_kl_bad_inputs_and_no_overlap():
    model, y = cj.models.gaussian_mean(2), np.ones((50, 2))
    w = np.ones(50)
    with pytest.raises(ValueError, match="full_draws"):
        cj.metrics.bridge_kl(model, y, w, np.zeros((100, 2)), np.zeros((100, 3)))
    with pytest.raises(ValueError, match="coreset_draws"):
        cj.metrics.bridge_kl(model, y, w, np.full((100, 2), np.nan), np.zeros((100, 2)))
    with pytest.raises(ValueError, match="r_full"):
        cj.metrics.bridge_kl_from_log_ratios(np.zeros(10), np.array([0.0, np.nan]))
    # pi has no mass at a draw of pi_w: KL(pi_w || pi) is infinite, not a finite number
    out = cj.metrics.bridge_kl_from_log_ratios(np.r_[np.zeros(10), -np.inf], np.zeros(10))
    assert out["kl"] == np.inf and np.isfinite(out["kl_reverse"])
