"""Shared pieces of the posterior-driven constructions: the control-variate estimate of the full-data
log-likelihood (unbiased, and N-fold less noisy near the anchor) and the hot start at pi_{w_0}'s Laplace fit,
each against a plain-NumPy computation or a closed form."""

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj
from coresets_jax.posterior_driven.common import coreset_start, full_data_estimator, subsampler
from coresets_jax.registry import Start


def logistic_total_numpy(X, y, u, theta):
    """sum_n u_n L_n(theta), L_n = -log(1 + exp(-y_n x_n . theta)), in float64."""
    return float(u @ -np.logaddexp(0.0, -y * (X @ theta)))


def test_control_variate_estimate_is_unbiased_and_far_less_noisy_near_the_anchor():
    N, S, R = 5000, 50, 400
    X, y = cj.data.synthetic_logistic(jax.random.key(0), N).train
    Xn, yn = np.asarray(X, np.float64), np.asarray(y, np.float64)
    u = np.random.default_rng(0).uniform(0.5, 1.5, N)  # non-uniform data weights
    model = cj.models.logistic_regression()
    anchor = cj.laplace(model, (X, y)).mean
    sd = np.sqrt(np.diag(np.asarray(cj.laplace(model, (X, y)).cov)))
    # Two thetas a few posterior sds from the anchor: the estimates are defined up to a shared offset, so
    # the difference is what is unbiased.
    thetas = jnp.stack([anchor + 2.0 * jnp.asarray(sd, anchor.dtype), anchor - 1.5 * jnp.asarray(sd, anchor.dtype)])
    exact = (logistic_total_numpy(Xn, yn, u, np.asarray(thetas[0], np.float64))
             - logistic_total_numpy(Xn, yn, u, np.asarray(thetas[1], np.float64)))
    keys = jax.random.split(jax.random.key(1), R)
    diffs = {}
    for cv in (True, False):
        est = full_data_estimator(model, (X, y), jnp.asarray(u, jnp.float32), S, anchor, jnp.float32, cv)
        out = np.asarray(jax.jit(jax.vmap(lambda k: est(k, thetas)))(keys), np.float64)
        diffs[cv] = out[:, 0] - out[:, 1]
    for cv, d in diffs.items():
        se = d.std(ddof=1) / np.sqrt(R)
        assert abs(d.mean() - exact) < 5 * se + 1e-3 * abs(exact), (cv, d.mean(), exact, se)
    # Theory: the plain estimate's variance is ~ N/S, the control variate's ~ 1/S (common's docstring);
    # the ratio measured here is ~2e-5.
    assert diffs[True].var() < diffs[False].var() / 1000, (diffs[True].var(), diffs[False].var())


def test_control_variate_is_exact_for_a_quadratic_log_likelihood():
    # Gaussian mean model: L_n(theta) = -|y_n - theta|^2 / 2, so the Taylor remainder -|theta - anchor|^2 / 2
    # is the same for every row, and any subsample gives the exact difference.
    N, D = 300, 3
    yv = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D))
    model = cj.models.gaussian_mean(D)
    u = jnp.asarray(np.random.default_rng(1).uniform(0.5, 1.5, N), jnp.float32)
    est = full_data_estimator(model, yv, u, 7, jnp.zeros(D), jnp.float32, True)
    thetas = jnp.asarray([[0.3, -0.2, 1.0], [1.1, 0.9, 0.8]], jnp.float32)
    yn, un, tn = np.asarray(yv, np.float64), np.asarray(u, np.float64), np.asarray(thetas, np.float64)
    total = lambda t: -0.5 * un @ np.sum((yn - t) ** 2, axis=1)
    exact = total(tn[0]) - total(tn[1])
    for seed in range(5):
        out = np.asarray(est(jax.random.key(seed), thetas), np.float64)
        np.testing.assert_allclose(out[0] - out[1], exact, rtol=1e-4)


def test_hot_start_is_the_closed_form_posterior_of_the_initial_coreset():
    N, D, M = 200, 2, 10
    yv = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D))
    model = cj.models.gaussian_mean(D)
    rows = yv[:M]
    w = jnp.full(M, N / M, jnp.float32)
    far = Start(jnp.asarray([40.0, -40.0]), jnp.eye(D) * 100.0)  # a poor pi_hat, far from pi_w0
    got = coreset_start(model, rows, w, far)
    mean, cov = cj.models.gaussian_mean_posterior(rows, w)
    np.testing.assert_allclose(np.asarray(got.mean), np.asarray(mean), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got.cov), np.asarray(cov), rtol=1e-3, atol=1e-8)


def test_relative_log_likelihoods_and_sums_against_numpy_float64():
    # Rows are taken relative to an anchor (common.relative_lls, full_data_estimator) so that w.L and T
    # sum O(1) terms, not terms as large as log y!. Checked against NumPy float64 differences on Poisson
    # counts ~ 30 (log y! ~ 75).
    from scipy.special import gammaln

    from coresets_jax.posterior_driven.common import relative_lls

    rng = np.random.default_rng(0)
    n, m = 5000, 40
    X = np.column_stack([rng.standard_normal(n) * 0.3, np.ones(n)])
    theta = np.array([0.5, 30.0])
    y = rng.poisson(np.logaddexp(0, X @ theta)).astype(np.float64)
    model = cj.models.poisson_regression()
    data = (jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32))
    thetas = theta + rng.standard_normal((16, 2)) * np.array([0.001, 0.02])
    anchor = jnp.asarray(theta, jnp.float32)

    def lls64(T, Xr, yr):
        rate = np.logaddexp(0, T @ Xr.T)
        return yr * np.log(rate) - rate - gammaln(yr + 1)

    idx = rng.choice(n, m, replace=False)
    got = np.asarray(relative_lls(model, (data[0][idx], data[1][idx]), anchor, jnp.float32)(
        jnp.asarray(thetas, jnp.float32)), np.float64)
    exact = lls64(thetas, X[idx], y[idx]) - lls64(theta[None], X[idx], y[idx])
    np.testing.assert_allclose(got, exact, atol=2e-4)            # float32 rounding of rows of ~100
    total = full_data_estimator(model, data, jnp.ones(n), n, anchor, jnp.float32)(
        jax.random.key(0), jnp.asarray(thetas, jnp.float32))
    full = lls64(thetas, X, y).sum(1) - lls64(theta[None], X, y).sum()
    np.testing.assert_allclose(np.asarray(total, np.float64), full, atol=0.02)


def test_subsample_rows_follow_the_data_weights_equal_or_not():
    """Rows are drawn with probability u_n / sum(u) (equal weights by row number, others by the CDF search),
    each weighted sum(u) / S: the draw frequencies pass a chi-square test against u / sum(u)."""
    N, S, R = 40, 16, 2000
    for u in (np.ones(N), np.where(np.arange(N) % 4 == 0, 3.0, 0.5)):
        draw = jax.jit(subsampler(jnp.asarray(u, jnp.float32), S, jnp.float32))
        idx, row_weights = jax.vmap(draw)(jax.random.split(jax.random.key(0), R))
        np.testing.assert_allclose(np.asarray(row_weights), u.sum() / S, rtol=1e-6)
        counts = np.bincount(np.asarray(idx).ravel(), minlength=N)
        expected = R * S * u / u.sum()
        chi2 = float(np.sum((counts - expected) ** 2 / expected))
        assert chi2 < N - 1 + 5 * np.sqrt(2 * (N - 1)), (u[:4], chi2)  # 5 sd above the chi2(N - 1) mean
    # Not vacuous: counts from the other distribution fail the same bound.
    wrong = R * S * np.ones(N) / N
    assert float(np.sum((counts - wrong) ** 2 / wrong)) > N - 1 + 5 * np.sqrt(2 * (N - 1))
