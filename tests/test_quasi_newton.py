"""Quasi-Newton coresets (Naik, Rousseau & Campbell 2022): one step against a plain-NumPy Newton step, the
refined method's Gaussian-mean KL against its uniform start and its paired choice of iterates, and the
compositions (the published defaults: test_published_methods.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from posterior_plumbing import check_merged_is_the_union_of_shard_runs, check_streamed
from coresets_jax.posterior_driven.common import kl_estimate
from coresets_jax.posterior_driven.quasi_newton import newton_direction


def gaussian_lls_numpy(thetas, rows):
    d = rows.shape[1]
    return -0.5 * ((thetas[:, None, :] - rows[None, :, :]) ** 2).sum(-1) - 0.5 * d * np.log(2 * np.pi)


def newton_step_numpy(thetas, y, core_idx, w, tau):
    """w - G^{-1} g with G = Cov(L_core) + tau mean(diag) I, g = -Cov(L_core, sum_n L_n - w.L_core)."""
    core = gaussian_lls_numpy(thetas, y[core_idx])
    full = gaussian_lls_numpy(thetas, y).sum(1)
    c = np.cov(np.column_stack([core, full - core @ w]), rowvar=False)
    m = len(w)
    G = c[:m, :m] + tau * np.trace(c[:m, :m]) / m * np.eye(m)
    g = -c[:m, m]
    return np.maximum(w - np.linalg.solve(G, g), 0.0)


@pytest.mark.slow
def test_one_step_with_exact_samples_matches_numpy_newton_and_reaches_the_posterior():
    D, N, M, S, tau = 2, 200, 8, 4000, 1e-3
    y = np.asarray(cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D)), np.float64)
    rng = np.random.default_rng(1)
    core_idx = rng.choice(N, M, replace=False)
    w = np.full(M, N / M)
    dense = np.zeros(N)
    dense[core_idx] = w
    precision = 1.0 + w.sum()
    thetas = dense @ y / precision + rng.standard_normal((S, D)) / np.sqrt(precision)  # exact pi_w draws
    expected = newton_step_numpy(thetas, y, core_idx, w, tau)

    model = cj.models.gaussian_mean(D)
    lls = jax.vmap(lambda th, rows: cj.log_likelihoods(model, th, rows), in_axes=(0, None))
    t32 = jnp.asarray(thetas, jnp.float32)
    core = lls(t32, jnp.asarray(y[core_idx], jnp.float32))
    target = jnp.sum(lls(t32, jnp.asarray(y, jnp.float32)), axis=1)
    direction, _ = newton_direction(core, target, jnp.asarray(w, jnp.float32), tau)
    got = np.maximum(w - np.asarray(direction, np.float64), 0.0)
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=1e-2 * N / M)
    # Theory: L_n is quadratic, so the full step lands on a coreset matching sum_n 1 and sum_n y_n, whose
    # pi_w is the full-data posterior (HC Eq. 6.4).
    np.testing.assert_allclose(got.sum(), N, rtol=1e-2)
    np.testing.assert_allclose(got @ y[core_idx], y.sum(0), rtol=2e-2)


def test_kl_estimate_matches_the_closed_form_gaussian_kl():
    # KL(pi_w || pi) = log E_{pi_w}[exp(r)] - E_{pi_w}[r] + const-free, r = sum_n L_n - sum_m w_m L_m
    # (the normalising constants cancel): estimated from exact pi_w draws against the closed form.
    # M = N / 2: KL of order 1, where S = 20000 draws resolve it (the estimate is biased low when the
    # importance weights are heavy-tailed, at KL >> 1).
    D, N, M, S = 2, 100, 50, 20000
    y = np.asarray(cj.data.synthetic_gaussian(jax.random.key(2), N, dim=D, mean=jnp.ones(D)), np.float64)
    rng = np.random.default_rng(3)
    core_idx = rng.choice(N, M, replace=False)
    model = cj.models.gaussian_mean(D)
    yj = jnp.asarray(y, jnp.float32)
    lls = jax.vmap(lambda th, rows: cj.log_likelihoods(model, th, rows), in_axes=(0, None))
    for scale in (1.0, 0.8):
        w = np.full(M, scale * N / M) * rng.uniform(0.8, 1.2, M)
        dense = np.zeros(N)
        dense[core_idx] = w
        q = cj.models.gaussian_mean_posterior(yj, jnp.asarray(dense, jnp.float32))
        exact = float(cj.metrics.gaussian_kl(*q, *cj.models.gaussian_mean_posterior(yj)))
        precision = 1.0 + w.sum()
        thetas = dense @ y / precision + rng.standard_normal((S, D)) / np.sqrt(precision)
        t = jnp.asarray(thetas, jnp.float32)
        got = float(kl_estimate(lls(t, yj[core_idx]), jnp.sum(lls(t, yj), axis=1), jnp.asarray(w, jnp.float32)))
        assert got == pytest.approx(exact, rel=0.1, abs=0.02), (scale, got, exact)
        assert exact > 0.1  # not vacuous


def test_quasi_newton_options_are_checked():
    model = cj.models.gaussian_mean(2)
    y = jnp.zeros((10, 2))
    for bad, match in [(dict(kernel="gibbs"), "kernel"), (dict(num_iters=0), "num_iters"),
                       (dict(tau=-1.0), "tau"), (dict(num_tries=0), "num_tries"), (dict(max_burn=-1), "max_burn"),
                       (dict(early_stop=-0.1), "early_stop"),
                       (dict(kernel="slice", kernel_settings={"passes": 0}), "passes"),
                       (dict(kernel_settings={"passes": 3}), "exact"),  # the Gaussian model's default is exact
                       (dict(control_variate="on"), "control_variate"), (dict(fresh_chains=0), "fresh_chains"),
                       (dict(relative_tau="no"), "relative_tau"), (dict(chain_init="prior"), "chain_init"),
                       (dict(subsample=-1), "subsample"), (dict(num_warmup=-1), "num_warmup")]:
        with pytest.raises(ValueError, match=match):
            cj.coreset(model, y, 2, "quasi_newton", **bad)


@pytest.mark.slow
@pytest.mark.extended
def test_quasi_newton_through_merged_coreset():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 300)
    model, data = cj.models.logistic_regression(), ds.train
    n = data[0].shape[0]
    opts = dict(num_iters=3, num_draws=10, max_burn=60, subsample=50, num_tries=3)
    merged = check_merged_is_the_union_of_shard_runs(model, data, "quasi_newton", 4, 3, jax.random.key(2), **opts)
    check_streamed(merged, n, 12)  # streamed: the entry-point test in test_published_methods.py


@pytest.mark.slow
def test_refined_quasi_newton_gaussian_location_against_the_exact_kl_and_never_worse_than_its_start():
    # cj.refine(method="quasi_newton"): the project's departures (persistent chains, the paired choice of
    # iterates) from a uniform start; the exact KL must fall far below uniform's and never rise.
    D, N, M = 5, 500, 20
    y = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D))
    model = cj.models.gaussian_mean(D)
    mean, cov = cj.models.gaussian_mean_posterior(y)
    kl = lambda w: float(cj.metrics.gaussian_kl(*cj.models.gaussian_mean_posterior(y, w), mean, cov))  # noqa: E731
    qn, start = [], []
    for seed in range(3):
        unif = cj.coreset(model, y, M, "uniform", key=jax.random.key(seed))
        cs = cj.refine(model, y, unif, jax.random.key(10 + seed), method="quasi_newton", time_budget=float("inf"))
        qn.append(kl(cs.dense(N)))
        start.append(kl(unif.dense(N)))
        # The in-loop choice is the best by the paired estimate, and it tracks the exact KL.
        assert float(cs.info["best_kl_estimate"]) <= float(cs.info["start_kl_estimate"])
    assert all(q <= s * 1.05 + 1e-3 for q, s in zip(qn, start)), (qn, start)
    assert np.median(qn) < 0.1 * np.median(start), (qn, start)
