"""Bad input raises ValueError at the public boundary, naming the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def setup():
    ds = cj.data.synthetic_logistic(KEY, 100)
    model = cj.models.logistic_regression()
    thetas = jnp.zeros((8, 3)) + 0.1
    V = cj.project(model, ds.train, thetas, norm="l2")
    return model, ds.train, thetas, V


def test_nan_or_inf_in_data(setup):
    model, (X, y), thetas, _ = setup
    bad = X.at[4, 1].set(jnp.nan)
    for call in (lambda: cj.project(model, (bad, y), thetas, norm="l2"),
                 lambda: cj.laplace(model, (bad, y)),
                 lambda: cj.coreset(model, (bad, y), 5, key=KEY)):
        with pytest.raises(ValueError, match="data.*NaN or inf"):
            call()
    with pytest.raises(ValueError, match="NaN or inf"):
        cj.project(model, (X, y.at[0].set(jnp.inf)), thetas, norm="l2")


def test_nan_or_inf_in_V(setup):
    V = setup[3]
    for value in (jnp.nan, jnp.inf, -jnp.inf):
        with pytest.raises(ValueError, match="V.*NaN or inf"):
            cj.build(V.at[2, 3].set(value), 5, "frank_wolfe")


def test_mismatched_leading_axes(setup):
    model, (X, y), thetas, _ = setup
    with pytest.raises(ValueError, match="data: leading axes do not match"):
        cj.project(model, (X, y[:-1]), thetas, norm="l2")
    with pytest.raises(ValueError, match="leading axes"):
        cj.coreset(model, (X[:50], y), 5, key=KEY)


@pytest.mark.parametrize("size", [0, -3, 101, 2.5, True])
def test_bad_size(setup, size):
    model, data, _, V = setup
    with pytest.raises(ValueError, match="size"):
        cj.build(V, size, "frank_wolfe")
    with pytest.raises(ValueError, match="size"):
        cj.coreset(model, data, size, key=KEY)


def test_unknown_method_norm_and_option(setup):
    model, data, thetas, V = setup
    with pytest.raises(ValueError, match="method: unknown value 'fw'"):
        cj.build(V, 5, "fw")
    with pytest.raises(ValueError, match="method"):
        cj.coreset(model, data, 5, "nope", key=KEY)
    with pytest.raises(ValueError, match="norm: unknown value 'l1'"):
        cj.project(model, data, thetas, norm="l1")
    with pytest.raises(ValueError, match="norm"):
        cj.coreset(model, data, 5, key=KEY, norm="sup")
    with pytest.raises(ValueError, match="step_rule"):
        cj.build(V, 5, "frank_wolfe", step_rule="armijo")
    with pytest.raises(ValueError, match="tolerance: not an option"):
        cj.build(V, 5, "frank_wolfe", tolerance=1e-3)


def test_non_finite_log_likelihood_at_pi_hat_samples():
    # log(theta) is NaN for negative theta, which the prior's samples reach.
    model = cj.Model(log_likelihood=lambda theta, x: jnp.log(theta[0]) * x,
                     log_prior=lambda theta: -0.5 * jnp.sum(theta**2),
                     sample_prior=lambda key, num, data: jax.random.normal(key, (num, 1)))
    x = jnp.ones(20)
    with pytest.raises(ValueError, match="log_likelihood.*non-finite"):
        cj.coreset(model, x, 5, key=KEY, pi_hat="prior", norm="l2", num_features=10)
    with pytest.raises(ValueError, match="log_likelihood.*non-finite"):
        cj.project(model, x, -jnp.ones((3, 1)), norm="l2")


def test_random_methods_need_a_key_and_zero_V_is_rejected(setup):
    V = setup[3]
    with pytest.raises(ValueError, match="key"):
        cj.build(V, 5, "uniform")
    with pytest.raises(ValueError, match="key"):
        cj.build(V, 5, "importance", key=3)
    with pytest.raises(ValueError, match="V: every row is zero"):
        cj.build(jnp.zeros((10, 4)), 3, "frank_wolfe")
    with pytest.raises(ValueError, match="V: expected a 2-D"):
        cj.build(jnp.ones(10), 3, "frank_wolfe")


def test_thetas_and_pi_hat_checks(setup):
    model, data, _, _ = setup
    with pytest.raises(ValueError, match="thetas"):
        cj.project(model, data, jnp.zeros(3), norm="l2")
    with pytest.raises(ValueError, match="pi_hat"):
        cj.coreset(model, data, 5, key=KEY, pi_hat="mcmc")
    with pytest.raises(ValueError, match="init"):
        cj.laplace(cj.Model(lambda t, d: -t[0] ** 2 * d, lambda t: 0.0), jnp.ones(5))
    with pytest.raises(ValueError, match="key"):
        cj.project(model, data, jnp.zeros((4, 3)), norm="fisher", key=None)


def test_zero_weight_padding_repeats_a_weighted_row():
    # Padding slots are masked out of the density, but autodiff still evaluates them: a padding row that
    # overflows (here exp(100 theta)) would make the gradient NaN, 0 * inf. They repeat a weighted row instead.
    from coresets_jax.core.validate import weighted_rows
    model = cj.Model(lambda th, d: d[1] * (d[0] @ th) - jnp.exp(d[0] @ th), lambda th: -0.5 * jnp.sum(th ** 2))
    X = jnp.array([[100.0], [0.5], [1.0], [1.5], [2.0], [0.7], [0.9], [1.1], [1.2]])
    y = jnp.array([0.0, 2.0, 3.0, 5.0, 8.0, 2.0, 2.0, 3.0, 3.0])
    w = jnp.array([0.0, 1.0, 2.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0])
    rows, w_rows = weighted_rows((X, y), 9, w)
    assert w_rows.shape == (4,) and np.array_equal(np.asarray(w_rows), [1.0, 2.0, 3.0, 0.0])
    np.testing.assert_array_equal(np.asarray(rows[0])[3], np.asarray(X[1]))  # the padding repeats row 1
    grad = jax.grad(cj.core.weighted_log_density(model, rows, w_rows))(jnp.array([1.0]))
    expected = sum(wn * xn * (yn - np.exp(xn)) for wn, xn, yn in [(1, 0.5, 2), (2, 1.0, 3), (3, 2.0, 8)]) - 1.0
    np.testing.assert_allclose(np.asarray(grad), [expected], rtol=1e-5)


def test_cj_coreset_checks_the_data_once(monkeypatch):
    # Issue 23: cj.coreset validated model and data at its boundary and again inside cj.laplace (each an O(N)
    # finiteness and label scan). The Laplace fit of the pipeline now relies on the boundary's check.
    from coresets_jax.core import validate
    calls = []
    original = validate.check_data
    monkeypatch.setattr(validate, "check_data", lambda *a, **k: calls.append(1) or original(*a, **k))
    data = cj.data.synthetic_logistic(jax.random.key(0), 200).train
    cj.coreset(cj.models.logistic_regression(), data, 10, "giga", key=jax.random.key(1))
    assert len(calls) == 1
    calls.clear()
    cj.laplace(cj.models.logistic_regression(), data)  # the public fit still checks for itself
    assert len(calls) == 1
