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
