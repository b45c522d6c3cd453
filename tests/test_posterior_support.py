"""The support= start on a row subsample (`posterior_driven/support.py`): row counts, the subsample's coreset
mapped back to the data with weights scaled by N / R, and the options' checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.construct import build
from coresets_jax.features.projection import feature_sum_fn
from coresets_jax.posterior_driven.support import SUPPORT_ROWS, resolve_rows, support_features, support_start


def test_rows_resolve_to_the_cap_at_least_four_per_point_and_at_most_n():
    assert resolve_rows(None, 10_000, 100) == 10_000
    assert resolve_rows(None, 10 ** 6, 100) == SUPPORT_ROWS
    assert resolve_rows(None, 10 ** 6, 20_000) == 80_000
    assert resolve_rows(3000, 10 ** 5, 100) == 3000
    assert resolve_rows(3000, 10 ** 5, 1000) == 4000
    assert resolve_rows(10 ** 7, 10 ** 5, 10) == 10 ** 5
    assert support_features(500, 3) == 32 and support_features(500, 11) == 88 and support_features(20, 50) == 20
    for bad in (0, -5, 2.5, True, "all"):
        with pytest.raises(ValueError, match="support_rows"):
            resolve_rows(bad, 100, 10)


def test_streamed_target_is_the_full_sum_of_the_projected_rows():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 4000)
    model, data = cj.models.logistic_regression(), ds.train
    thetas = cj.laplace(model, data).sample(jax.random.key(1), 50)
    key = jax.random.key(3)
    V = np.asarray(cj.project(model, data, thetas, norm="fisher", key=key), np.float64)
    for chunk in (1500, 4000):  # 3 chunks with a masked tail; one chunk
        got = feature_sum_fn(model, "fisher", jnp.dtype(jnp.float32), 4000, chunk)(key, data, thetas)
        np.testing.assert_allclose(np.asarray(got), V.sum(0), rtol=1e-4, atol=1e-3 * np.abs(V).sum(0).max())


def test_subsample_start_fits_the_full_sum_from_subsampled_candidates():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 4000)
    model, data = cj.models.logistic_regression(), ds.train
    thetas = cj.laplace(model, data).sample(jax.random.key(1), 50)
    key = jax.random.key(2)
    cs, V = support_start(model, data, 30, "omp", thetas, key, rows=1000, build=build)
    assert V is None
    k_rows, k_proj = jax.random.split(key)
    picked = np.asarray(jax.random.choice(k_rows, 4000, (1000,), replace=False))
    live = np.asarray(cs.weights) > 0
    assert live.sum() > 0 and set(np.asarray(cs.indices)[live]) <= set(picked)
    # HC Eq. 3.2 against the full sum, by hand in NumPy on all 4000 projected rows.
    Vf = np.asarray(cj.project(model, data, thetas, norm="fisher", key=k_proj), np.float64)
    w = np.zeros(4000)
    np.add.at(w, np.asarray(cs.indices)[live], np.asarray(cs.weights, np.float64)[live])
    error = np.linalg.norm(Vf.sum(0) - Vf.T @ w) / np.linalg.norm(Vf.sum(0))
    full, V = support_start(model, data, 30, "omp", thetas, key, rows=4000, build=build)
    assert V.shape == (4000, 50)
    wf = np.asarray(full.dense(4000), np.float64)
    full_error = np.linalg.norm(Vf.sum(0) - Vf.T @ wf) / np.linalg.norm(Vf.sum(0))
    # The candidates are a quarter of the rows, the target is exact: close to the full-data solve, and far
    # below the error of the subsample's own sum scaled by N / R (what a uniform subsample would give).
    scaled = np.linalg.norm(Vf.sum(0) - 4.0 * Vf[picked].sum(0)) / np.linalg.norm(Vf.sum(0))
    assert error < max(3 * full_error, 0.05) and error < 0.2 * scaled, (error, full_error, scaled)


@pytest.mark.slow
def test_coreset_reports_its_support_rows_and_checks_them():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 600)
    model, data = cj.models.logistic_regression(), ds.train
    opts = dict(num_iters=3, num_draws=10, num_warmup=50, num_tries=2)
    cs = cj.coreset(model, data, 10, "quasi_newton", key=jax.random.key(1), support="omp", support_rows=200, **opts)
    assert int(cs.info["support_rows"]) == 200 and cs.settings["support_rows"] == 200
    idx, w = np.asarray(cs.indices), np.asarray(cs.weights)
    assert np.all((idx >= 0) & (idx < 600)) and np.all(np.isfinite(w)) and w.sum() > 0
    with pytest.raises(ValueError, match="support_rows"):
        cj.coreset(model, data, 10, "quasi_newton", support="omp", support_rows=0, **opts)
    with pytest.raises(ValueError, match="support_rows"):
        cj.coreset(model, data, 10, "giga", support_rows=200)
    with pytest.raises(ValueError, match="support_rows"):
        cj.coreset(model, data, 10, "quasi_newton", support="uniform", support_rows=200, **opts)
