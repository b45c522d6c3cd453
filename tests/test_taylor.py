"""Second-order features (features/taylor.py): against a NumPy closed form, their KL prediction against the
exact Gaussian KL, the gradient-only target and scores, and how cj.coreset chooses and records them."""

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.construct import pipeline
from coresets_jax.features import taylor


def _logistic(n=400, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = np.concatenate([np.ones((n, 1)), rng.normal(size=(n, d - 1))], axis=1).astype(np.float32)
    theta = rng.normal(size=d) / np.sqrt(d)
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-X @ theta)), 1.0, -1.0).astype(np.float32)
    return cj.models.logistic_regression(), (jnp.asarray(X), jnp.asarray(y))


def _numpy_features(X, y, mean, cov):
    """The whitened gradient and negative Hessian of log sigmoid(y x^T theta) at the mean, in float64."""
    X, y, mean = np.asarray(X, np.float64), np.asarray(y, np.float64), np.asarray(mean, np.float64)
    L = np.linalg.cholesky(np.asarray(cov, np.float64))
    m = y * (X @ mean)
    sig = 1 / (1 + np.exp(-m))
    Z = X @ L
    g = ((1 - sig) * y)[:, None] * Z
    s = sig * (1 - sig)
    d = X.shape[1]
    iu = np.triu_indices(d, 1)
    return np.concatenate([g, s[:, None] * Z ** 2 / np.sqrt(2), s[:, None] * Z[:, iu[0]] * Z[:, iu[1]]], axis=1)


def test_features_match_the_closed_form_of_logistic_regression():
    model, data = _logistic()
    approx = cj.laplace(model, data)
    V = taylor.taylor_features(model, data, approx.mean, approx.cov)
    assert V.shape == (400, taylor.num_features(6)) == (400, 27)
    np.testing.assert_allclose(np.asarray(V, np.float64), _numpy_features(*data, approx.mean, approx.cov),
                               rtol=2e-4, atol=1e-6)


def test_autodiff_and_a_closed_form_gradient_give_the_same_features():
    model, data = _logistic(n=50)
    approx = cj.laplace(model, data)
    bare = cj.Model(model.log_likelihood, model.log_prior, dim=6)  # no grad_log_likelihood: jax.grad
    np.testing.assert_allclose(taylor.taylor_features(bare, data, approx.mean, approx.cov),
                               taylor.taylor_features(model, data, approx.mean, approx.cov), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("scale", [0.2, 0.05, 0.01])
def test_half_the_squared_residual_is_the_gaussian_kl_to_second_order(scale):
    """The Gaussian-mean model is exactly quadratic, and its Laplace fit is its posterior (HC Eq. 6.2): for
    weights 1 + scale e, half the squared residual of the features matches the exact KL(pi_w || pi) of
    HC Eq. 6.4's Gaussians up to a relative error of order `scale`."""
    d, n = 3, 200
    rng = np.random.default_rng(1)
    y = jnp.asarray(rng.normal(size=(n, d)) + 1.0, jnp.float32)
    model = cj.models.gaussian_mean(d)
    mean, cov = cj.models.gaussian_mean_posterior(y)
    V = np.asarray(taylor.taylor_features(model, y, mean, cov), np.float64)
    w = 1.0 + scale * rng.normal(size=n)
    r = V.T @ (1.0 - w)
    predicted = float(taylor.predicted_kl(r @ r))
    # exact: p = N(m, I / (1 + N)), q = N(m_w, I / (1 + sum w)) (HC Eq. 6.4), both float64
    Y = np.asarray(y, np.float64)
    a, b = 1.0 + n, 1.0 + w.sum()
    m, mw = Y.sum(0) / a, (w @ Y) / b
    exact = 0.5 * (d * a / b - d + a * np.sum((m - mw) ** 2) + d * np.log(b / a))
    assert predicted == pytest.approx(exact, rel=3 * scale + 1e-3)


def test_the_gradient_only_target_is_the_sum_of_the_rows_features():
    """At a Laplace fit on every row, the target's Hessian part is the fit's own (I - L^T H_0 L): it equals
    the features' column sum; the scores follow the features' norms."""
    model, data = _logistic(n=3000, d=8, seed=2)
    approx = cj.laplace(model, data)
    V = np.asarray(taylor.taylor_features(model, data, approx.mean, approx.cov), np.float64)
    target, scores = taylor.target_and_scores(model, data, approx.mean, approx.cov, jax.random.key(0))
    np.testing.assert_allclose(np.asarray(target, np.float64), V.sum(0), atol=2e-4 * np.abs(V.sum(0)).max())
    exact_total, norms = taylor.taylor_sum_and_norms(model, data, approx.mean, approx.cov)
    np.testing.assert_allclose(np.asarray(exact_total), V.sum(0), atol=2e-4 * np.abs(V.sum(0)).max())
    np.testing.assert_allclose(np.asarray(norms), np.linalg.norm(V, axis=1), rtol=1e-4)
    assert np.corrcoef(np.asarray(scores), np.linalg.norm(V, axis=1))[0, 1] > 0.95


def test_coreset_switches_to_second_order_features_where_they_outnumber_the_projection():
    assert taylor.num_features(30) == 495 < 500 < taylor.num_features(31) == 527
    model, data = _logistic(n=800, d=31, seed=3)
    cs = cj.coreset(model, data, size=64, method="omp")
    assert cs.settings["norm"] == "taylor" and cs.settings["num_features"] == 527
    assert cs.info["features"]["norm"] == "taylor" and "527" in cs.info["features"]["reason"]
    assert cs.settings["options"]["compensated"] is False
    assert float(cs.info["predicted_kl"]) > 0
    narrow = cj.coreset(*_logistic(n=800, d=30, seed=3), size=64, method="omp")
    assert narrow.settings["norm"] == "fisher"
    given = cj.coreset(model, data, size=64, method="omp", norm="fisher")
    assert given.settings["norm"] == "fisher" and given.info["features"]["reason"] == "norm given"
    giga = cj.coreset(model, data, size=64, method="giga")
    assert giga.settings["norm"] == "fisher"  # the switch is OMP's: the other methods keep their features


def test_second_order_features_refuse_what_they_cannot_use():
    model, data = _logistic(n=300, d=31, seed=4)
    with pytest.raises(ValueError, match="num_features"):
        cj.coreset(model, data, size=16, method="omp", norm="taylor", num_features=100)
    with pytest.raises(ValueError, match="pi_hat"):
        cj.coreset(model, data, size=16, method="omp", norm="taylor", pi_hat="prior")
    prior = cj.coreset(model, data, size=16, method="omp", pi_hat="prior")
    assert prior.settings["norm"] == "fisher"  # automatic: a non-Gaussian pi_hat keeps the projection


def test_candidate_rows_beyond_the_budget_fit_the_full_sum(monkeypatch):
    """Past TAYLOR_BUDGET entries, V holds candidate rows, and the solver fits every row's feature sum: the
    residual that cj.coreset reports is the residual against the full data's features."""
    model, data = _logistic(n=4000, d=31, seed=5)
    monkeypatch.setattr(pipeline, "TAYLOR_BUDGET", 600 * taylor.num_features(31))
    cs = cj.coreset(model, data, size=80, method="omp")
    assert cs.info["features"]["candidate_rows"] == 600 and cs.settings["candidate_rows"] == 600
    approx = cj.laplace(model, data)
    V = np.asarray(taylor.taylor_features(model, data, approx.mean, approx.cov), np.float64)
    w = np.zeros(4000)
    np.add.at(w, np.asarray(cs.indices), np.asarray(cs.weights, np.float64))
    full = np.linalg.norm(V.sum(0) - w @ V) / np.linalg.norm(V.sum(0))
    assert full == pytest.approx(float(cs.info["relative_error"]), rel=2e-3)


@pytest.mark.slow
def test_the_automatic_size_certifies_the_size_the_residual_predicts():
    """tol= with second-order features: one OMP run predicts every size's KL, the size predicted at 0.8 tol is
    certified first, and the prediction is within a factor 1.5 of the certificate's KL."""
    model, data = _logistic(n=6000, d=32, seed=6)
    cs = cj.coreset(model, data, key=jax.random.key(0), tol=0.1)
    path = cs.info["path"]
    assert cs.info["features"]["norm"] == "taylor"
    assert all("predicted_kl" in e for e in path)
    first = path[0]
    assert first["predicted_kl"] <= 0.8 * 0.1
    assert first["kl"] == pytest.approx(first["predicted_kl"], rel=0.5)
    assert cs.certificate.verdict in ("good", "usable") and cs.certificate.kl + 2 * cs.certificate.kl_se <= 0.1


@pytest.mark.slow
def test_where_the_coreset_stops_growing_the_search_switches_to_more_features():
    """With J = 8 features OMP fits them all with a handful of points, the coreset stops growing, and the search
    grows the projection 4x (recorded in the path) instead of stopping with a warning."""
    model, data = _logistic(n=3000, d=4, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cs = cj.coreset(model, data, key=jax.random.key(0), tol=1e-4, num_features=8)
    strategies = {e.get("strategy") for e in cs.info["path"]}
    assert "32 features" in strategies
    assert any(e.get("strategy", "").startswith("refine") for e in cs.info["path"]) or \
        cj.construct.auto_size.passes(cs.certificate, 1e-4)
