"""Random projection (HC Algorithm 3) against closed forms and Theorem 5.2."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj


@pytest.fixture(scope="module")
def logistic():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 300)
    model = cj.models.logistic_regression()
    thetas = cj.GaussianApproximation(jnp.array([3.0, 3.0, 0.0]), 0.1 * jnp.eye(3)).sample(
        jax.random.key(1), 40)
    return model, ds.train, thetas


def test_fisher_features_by_vmap_grad_equal_logistic_closed_form(logistic):
    model, (X, y), thetas = logistic
    generic = model._replace(grad_log_likelihood=None)  # forces the vmap(grad) path
    key = jax.random.key(5)
    V = np.asarray(cj.project(generic, (X, y), thetas, norm="fisher", key=key))
    V_closed = np.asarray(cj.project(model, (X, y), thetas, norm="fisher", key=key))
    # Plain NumPy: d_j drawn with the same key, gradient y x sigmoid(-y x.theta).
    J, D = thetas.shape
    coords = np.asarray(jax.random.randint(key, (J,), 0, D))
    Xn, yn, T = np.asarray(X, np.float64), np.asarray(y, np.float64), np.asarray(thetas, np.float64)
    z = yn[:, None] * (Xn @ T.T)  # (N, J)
    grads = yn[:, None] / (1 + np.exp(z)) * Xn[:, coords]
    expected = np.sqrt(D / J) * grads
    np.testing.assert_allclose(V, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(V_closed, expected, rtol=1e-4, atol=1e-6)


def test_l2_and_centered_features_match_numpy(logistic):
    model, (X, y), thetas = logistic
    J = thetas.shape[0]
    lls = -np.log1p(np.exp(-np.asarray(y)[:, None] * (np.asarray(X) @ np.asarray(thetas).T)))
    V_l2 = cj.project(model, (X, y), thetas, norm="l2")
    V_c = cj.project(model, (X, y), thetas, norm="centered", chunk_size=7)  # ragged last chunk
    np.testing.assert_allclose(V_l2, lls / np.sqrt(J), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(V_c, (lls - lls.mean(1, keepdims=True)) / np.sqrt(J), rtol=1e-4, atol=1e-5)


def test_float64_on_request():
    model, y = cj.models.gaussian_mean(2), cj.data.synthetic_gaussian(jax.random.key(0), 10)
    with pytest.raises(ValueError, match="dtype"):
        cj.project(model, y, jnp.zeros((4, 2)), norm="l2", dtype=jnp.float64)
    with jax.enable_x64(True):
        V = cj.project(model, y, jnp.zeros((4, 2)), norm="l2", dtype=jnp.float64)
        assert V.dtype == jnp.float64
    assert cj.project(model, y, jnp.zeros((4, 2)), norm="l2").dtype == jnp.float32


def _gaussian_exact_grams(y):
    """Exact Fisher and L2 Gram matrices for the Gaussian mean model with pi_hat = pi (HC §6)."""
    n, d = y.shape
    mean = y.sum(0) / (1 + n)
    s = 1.0 / (1 + n)
    fisher = d * s + (mean - y) @ (mean - y).T  # Eq. 6.5 for any D
    # L_n(mu) = c - |y_n - mu|^2 / 2 with mu ~ N(mean, s I); a = y_n - mean, b = y_m - mean.
    c = -0.5 * d * np.log(2 * np.pi)
    a2 = ((y - mean) ** 2).sum(1)
    ab = (y - mean) @ (y - mean).T
    e_a2 = a2 + d * s
    e_a2b2 = np.outer(a2, a2) + d * s * (a2[:, None] + a2[None, :]) + 4 * s * ab + s**2 * (d**2 + 2 * d)
    l2 = c**2 - 0.5 * c * (e_a2[:, None] + e_a2[None, :]) + 0.25 * e_a2b2
    return fisher, l2


@pytest.mark.parametrize("norm", ["fisher", "l2"])
def test_projected_inner_products_converge_as_J_grows(norm):
    """Theorem 5.2: <v_n, v_m> -> <L_n, L_m> as J grows; error at J = 5000 well below J = 50."""
    y = cj.data.synthetic_gaussian(jax.random.key(2), 30, dim=2, mean=[1.0, -1.0])
    model = cj.models.gaussian_mean(2)
    mean, cov = model.posterior(y, None)
    exact = _gaussian_exact_grams(np.asarray(y, np.float64))[0 if norm == "fisher" else 1]
    errors = {}
    for J in (50, 5000):
        trials = []
        for t in range(5):
            kt, kp = jax.random.split(jax.random.key(10 + t))
            thetas = cj.GaussianApproximation(mean, cov).sample(kt, J)
            V = np.asarray(cj.project(model, y, thetas, norm=norm, key=kp), np.float64)
            trials.append(np.linalg.norm(V @ V.T - exact) / np.linalg.norm(exact))
        errors[J] = np.median(trials)
    assert errors[5000] < errors[50] / 4, errors  # Monte Carlo rate 1/sqrt(J) predicts a factor 10


def test_all_zero_rows_are_excluded_not_divided_by():
    V = jnp.asarray(np.random.default_rng(0).normal(size=(20, 5)), jnp.float32).at[3].set(0.0).at[7].set(0.0)
    for method in ("importance", "frank_wolfe"):
        cs = cj.build(V, 10, method, key=jax.random.key(0))
        assert np.all(np.isfinite(cs.weights))
        chosen = set(np.asarray(cs.indices)[np.asarray(cs.weights) > 0].tolist())
        assert not chosen & {3, 7}


@pytest.mark.parametrize("dim,size,rows,expected", [
    (10, 100, None, 160), (10, 300, None, 300), (10, None, None, 160), (2, 10, None, 64), (50, 100, None, 500),
    (9, 2000, None, 500), (31, 1, None, 496),
    (10, 100, 100_000, 500), (10, 100, 1 << 17, 500), (10, 100, 200_000, 335), (10, 100, 1_000_000, 160),
    (10, 200, 1_000_000, 200), (2, None, 10_000_000, 64), (50, 100, 10_000_000, 500)])
def test_default_num_features_follows_the_rule(dim, size, rows, expected):
    # J = min(500, max(64, 16 D, M, 2^26 // rows)); M and rows drop out when not given
    assert cj.features.projection.auto_num_features(dim, size, rows) == expected


def _pi_hat_dim_model(model):
    """The logistic model without dim or init_params: D is only known from pi_hat (here, given samples)."""
    return cj.Model(model.log_likelihood, model.log_prior)


def test_coreset_projects_to_the_default_num_features_and_records_it(monkeypatch):
    ds = cj.data.synthetic_binary(jax.random.key(3), 2000, 10)  # D = 10 (an intercept among the columns)
    model, key = cj.models.logistic_regression(), jax.random.key(4)
    dim = int(ds.train[0].shape[1])
    expected = 16 * dim
    # small N keeps J = 500 (V far below the budget) ...
    assert cj.coreset(model, ds.train, 40, "omp", key=key).settings["num_features"] == 500
    # ... and beyond it J shrinks to the floor; a budget of 2000 rows x 100 features stands in for 2^26
    monkeypatch.setattr(cj.features.projection, "FEATURE_BUDGET", 2000 * 100)
    cs, V = cj.coreset(model, ds.train, 40, "omp", key=key, return_vectors=True)
    assert V.shape == (2000, expected) and cs.settings["num_features"] == expected
    same = cj.coreset(model, ds.train, 40, "omp", key=key, num_features=expected)  # the rule is just J
    np.testing.assert_array_equal(np.asarray(cs.indices), np.asarray(same.indices))
    np.testing.assert_array_equal(np.asarray(cs.weights), np.asarray(same.weights))
    # the other methods keep J = 500 (A-IHT II lost its accuracy at the floor)
    for method in ("iht2", "giga"):
        assert cj.coreset(model, ds.train, 40, method, key=key).settings["num_features"] == 500
    # a size above 16 D raises J to M, so that the solver may keep M points
    assert cj.coreset(model, ds.train, 250, "omp", key=key).settings["num_features"] == 250
    # the automatic size has no M yet: J from D alone
    assert cj.coreset(model, ds.train, key=key, tol=1.0).settings["num_features"] == expected
    # D from pi_hat's samples when the model states neither dim nor init_params
    thetas = cj.laplace(model, ds.train, key=key).sample(jax.random.key(5), 400)
    bare = cj.coreset(_pi_hat_dim_model(model), ds.train, 40, "omp", key=key, pi_hat=thetas)
    assert bare.settings["num_features"] == expected
    # ... and no more features than samples given
    fewer = cj.coreset(_pi_hat_dim_model(model), ds.train, 40, "omp", key=key, pi_hat=thetas[:64])
    assert fewer.settings["num_features"] == 64


@pytest.mark.parametrize("bad", [0, -3, 2.5, "auto", True])
def test_num_features_rejects_anything_but_none_or_a_positive_int(bad):
    ds = cj.data.synthetic_binary(jax.random.key(3), 200, 5)
    with pytest.raises(ValueError, match="num_features"):
        cj.coreset(cj.models.logistic_regression(), ds.train, 10, "omp", num_features=bad)
