"""The support= start on a row subsample (`posterior_driven/support.py`): row counts, the subsample's coreset
mapped back to the data with weights scaled by N / R, and the options' checks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.construct import build
from coresets_jax.posterior_driven.support import SUPPORT_ROWS, resolve_rows, support_start


def test_rows_resolve_to_the_cap_at_least_four_per_point_and_at_most_n():
    assert resolve_rows(None, 10_000, 100) == 10_000
    assert resolve_rows(None, 10 ** 6, 100) == SUPPORT_ROWS
    assert resolve_rows(None, 10 ** 6, 20_000) == 80_000
    assert resolve_rows(3000, 10 ** 5, 100) == 3000
    assert resolve_rows(3000, 10 ** 5, 1000) == 4000
    assert resolve_rows(10 ** 7, 10 ** 5, 10) == 10 ** 5
    for bad in (0, -5, 2.5, True, "all"):
        with pytest.raises(ValueError, match="support_rows"):
            resolve_rows(bad, 100, 10)


def test_subsample_start_is_the_subsample_coreset_scaled_to_the_data():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 4000)
    model, data = cj.models.logistic_regression(), ds.train
    thetas = cj.laplace(model, data).sample(jax.random.key(1), 50)
    key = jax.random.key(2)
    cs, V = support_start(model, data, 30, "omp", thetas, key, rows=1000, build=build)
    assert V is None
    # The same rows and projection key, by hand: OMP on the subsample's features, weights x N / R.
    k_rows, k_proj = jax.random.split(key)
    picked = np.asarray(jax.random.choice(k_rows, 4000, (1000,), replace=False))
    sub = jax.tree_util.tree_map(lambda a: a[picked], data)
    ref = build(cj.project(model, sub, thetas, norm="fisher", key=k_proj), 30, "omp", k_proj)
    np.testing.assert_array_equal(np.asarray(cs.indices), picked[np.asarray(ref.indices)])
    np.testing.assert_allclose(np.asarray(cs.weights), np.asarray(ref.weights) * 4.0, rtol=1e-6)
    # Every row: the plain start, with V.
    full, V = support_start(model, data, 30, "omp", thetas, key, rows=4000, build=build)
    assert V.shape == (4000, 50) and int(full.num_points) > 0


@pytest.mark.slow
def test_coreset_reports_its_support_rows_and_checks_them():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 600)
    model, data = cj.models.logistic_regression(), ds.train
    opts = dict(num_iters=3, num_draws=10, max_burn=60, num_tries=2)
    cs = cj.coreset(model, data, 10, "quasi_newton", key=jax.random.key(1), support_rows=200, **opts)
    assert int(cs.info["support_rows"]) == 200 and cs.settings["support_rows"] == 200
    idx, w = np.asarray(cs.indices), np.asarray(cs.weights)
    assert np.all((idx >= 0) & (idx < 600)) and np.all(np.isfinite(w)) and w.sum() > 0
    with pytest.raises(ValueError, match="support_rows"):
        cj.coreset(model, data, 10, "quasi_newton", support_rows=0, **opts)
    with pytest.raises(ValueError, match="support_rows"):
        cj.coreset(model, data, 10, "giga", support_rows=200)
    with pytest.raises(ValueError, match="support_rows"):
        cj.coreset(model, data, 10, "quasi_newton", support="uniform", support_rows=200, **opts)
