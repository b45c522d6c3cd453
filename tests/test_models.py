"""Built-in models and the Laplace approximation against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import coresets_jax as cj


@pytest.fixture(scope="module")
def glm_data():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(50, 2)), np.ones((50, 1))], axis=1).astype(np.float32)
    theta = rng.normal(size=3).astype(np.float32)
    return X, theta


def test_logistic_log_likelihood_and_gradient_closed_form(glm_data):
    X, theta = glm_data
    y = np.where(np.arange(50) % 3 == 0, 1.0, -1.0).astype(np.float32)
    model = cj.models.logistic_regression()
    ll = cj.log_likelihoods(model, jnp.asarray(theta), (X, y))
    z = y * (X @ theta)
    np.testing.assert_allclose(ll, -np.log1p(np.exp(-z)), rtol=1e-5, atol=1e-6)
    grads = jax.vmap(model.grad_log_likelihood, (None, 0))(jnp.asarray(theta), (X, y))
    autodiff = jax.vmap(jax.grad(model.log_likelihood), (None, 0))(jnp.asarray(theta), (X, y))
    expected = (y / (1 + np.exp(z)))[:, None] * X
    np.testing.assert_allclose(grads, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(autodiff, expected, rtol=1e-5, atol=1e-6)


def test_poisson_log_likelihood_matches_scipy_and_gradient(glm_data):
    X, theta = glm_data
    rate = np.log1p(np.exp(X @ theta))
    y = np.random.default_rng(1).poisson(rate).astype(np.float32)
    model = cj.models.poisson_regression()
    ll = cj.log_likelihoods(model, jnp.asarray(theta), (X, y))
    np.testing.assert_allclose(ll, stats.poisson.logpmf(y, rate), rtol=1e-4, atol=1e-5)
    grads = jax.vmap(model.grad_log_likelihood, (None, 0))(jnp.asarray(theta), (X, y))
    autodiff = jax.vmap(jax.grad(model.log_likelihood), (None, 0))(jnp.asarray(theta), (X, y))
    np.testing.assert_allclose(grads, autodiff, rtol=1e-4, atol=1e-5)


def test_gaussian_prior_normalised():
    model = cj.models.logistic_regression(prior_scale=2.0)
    theta = jnp.array([0.3, -1.0, 2.0])
    expected = stats.multivariate_normal(np.zeros(3), 4.0 * np.eye(3)).logpdf(np.asarray(theta))
    np.testing.assert_allclose(model.log_prior(theta), expected, rtol=1e-5)


def test_gaussian_mean_posterior_matches_numpy_conjugate_update():
    rng = np.random.default_rng(2)
    y = rng.normal(size=(30, 3))
    w = rng.exponential(size=30)
    mu0 = np.array([0.5, -0.2, 1.0])
    # Conjugate Gaussian update written independently: precision adds, natural parameters add.
    prec = np.eye(3) + w.sum() * np.eye(3)
    cov = np.linalg.inv(prec)
    mean = cov @ (mu0 + (w[:, None] * y).sum(0))
    got_mean, got_cov = cj.models.gaussian_mean_posterior(jnp.asarray(y, jnp.float32),
                                                          jnp.asarray(w, jnp.float32), mu0)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-5)
    np.testing.assert_allclose(got_cov, cov, rtol=1e-5)


def test_gaussian_mean_fisher_vectors_have_eq_6_5_gram():
    rng = np.random.default_rng(3)
    y = rng.normal(size=(40, 2))
    mu = (y.sum(0)) / (1 + 40)
    K = 2.0 / (1 + 40) + (mu - y) @ (mu - y).T  # HC Eq. 6.5
    V = np.asarray(cj.models.gaussian_mean_fisher_vectors(jnp.asarray(y, jnp.float32)))
    np.testing.assert_allclose(V @ V.T, K, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("method", ["newton", "optax"])
def test_laplace_is_exact_for_the_gaussian_mean_model(method):
    y = cj.data.synthetic_gaussian(jax.random.key(0), 200, dim=3, mean=[1.0, -2.0, 0.5])
    model = cj.models.gaussian_mean(3)
    approx = cj.laplace(model, y, method=method)
    mean, cov = model.posterior(y, None)
    np.testing.assert_allclose(approx.mean, mean, atol=1e-4)
    np.testing.assert_allclose(approx.cov, cov, rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_laplace_on_logistic_finds_the_mode_and_subsample_is_close():
    ds = cj.data.synthetic_logistic(jax.random.key(1), 5_000)
    model = cj.models.logistic_regression()
    approx = cj.laplace(model, ds.train)
    grad = jax.grad(lambda t: cj.log_joint(model, t, ds.train))(approx.mean)
    assert float(jnp.max(jnp.abs(grad))) < 1e-2
    # Inverse covariance equals the negative Hessian of the log posterior at the mode.
    hess = jax.hessian(lambda t: cj.log_joint(model, t, ds.train))(approx.mean)
    np.testing.assert_allclose(np.linalg.inv(np.asarray(approx.cov)), -np.asarray(hess), rtol=1e-3)
    sub = cj.laplace(model, ds.train, key=jax.random.key(2), subsample=1_000)
    sd = np.sqrt(np.diag(approx.cov))
    assert np.all(np.abs(np.asarray(sub.mean - approx.mean)) < 6 * sd * np.sqrt(5))
    np.testing.assert_allclose(np.diag(sub.cov), np.diag(approx.cov), rtol=0.5)


def test_pi_hat_sampling_moments():
    approx = cj.GaussianApproximation(jnp.array([1.0, -1.0]), jnp.array([[2.0, 0.5], [0.5, 1.0]]))
    draws = np.asarray(approx.sample(jax.random.key(3), 20_000))
    np.testing.assert_allclose(draws.mean(0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(draws.T), [[2.0, 0.5], [0.5, 1.0]], atol=0.08)
    supplied = cj.samples(draws[:100])
    got = np.asarray(supplied.sample(jax.random.key(4), 100))
    np.testing.assert_allclose(np.sort(got, 0), np.sort(draws[:100], 0))
    with pytest.raises(ValueError, match="num"):
        supplied.sample(jax.random.key(4), 101)


def _two_component_mixture(n=2000):
    """A two-component Gaussian mixture, theta = (logit w, mu1, log(mu2 - mu1), log s1, log s2), N(0, 3^2)
    priors. From theta = 0 Newton's steepest-descent fallback walks towards w -> 0 (logit w -6), where the
    Hessian is indefinite."""
    rng = np.random.default_rng(12)
    z = rng.random(n) < 0.3
    y = np.where(z, rng.normal(-2, 1, n), rng.normal(1.5, 0.7, n)).astype(np.float32)

    def loglik(theta, yi):
        w, mu1 = jax.nn.sigmoid(theta[0]), theta[1]
        mu2, s1, s2 = mu1 + jnp.exp(theta[2]), jnp.exp(theta[3]), jnp.exp(theta[4])
        return jnp.logaddexp(jnp.log(w) + jax.scipy.stats.norm.logpdf(yi, mu1, s1),
                             jnp.log1p(-w) + jax.scipy.stats.norm.logpdf(yi, mu2, s2))

    def neg_log_post(t):  # the same posterior in float64 NumPy/SciPy
        w, mu1, mu2, s1, s2 = 1 / (1 + np.exp(-t[0])), t[1], t[1] + np.exp(t[2]), np.exp(t[3]), np.exp(t[4])
        yy = y.astype(np.float64)
        ll = np.logaddexp(np.log(w) + stats.norm.logpdf(yy, mu1, s1), np.log1p(-w) + stats.norm.logpdf(yy, mu2, s2))
        return -(ll.sum() + stats.norm.logpdf(t, 0.0, 3.0).sum())

    model = cj.Model(log_likelihood=loglik, log_prior=lambda t: jnp.sum(jax.scipy.stats.norm.logpdf(t, 0.0, 3.0)),
                     dim=5)
    return model, jnp.asarray(y), neg_log_post


def test_a_newton_fit_that_ends_off_the_mode_is_retried_with_lbfgs():
    from scipy import optimize

    from coresets_jax.weighting import pihat

    model, y, neg_log_post = _two_component_mixture()
    newton = pihat.laplace_fn(model)(y, jnp.zeros(5))
    assert not bool(newton.info["positive_definite"])  # the failure the retry is for
    approx = cj.laplace(model, y)
    assert approx.info["method"] == "optax" and "L-BFGS" in approx.info["fallback"]
    mode = optimize.minimize(neg_log_post, np.array([-0.85, -2.0, 1.25, 0.0, -0.35]), method="BFGS").x
    np.testing.assert_allclose(np.asarray(approx.mean), mode, atol=2e-2)
    assert np.all(np.linalg.eigvalsh(np.asarray(approx.cov, np.float64)) > 0)
    assert cj.laplace(cj.models.gaussian_mean(2), jnp.ones((50, 2))).info["fallback"] is None


def test_a_fit_that_neither_newton_nor_lbfgs_can_make_proper_still_raises():
    # A direction the posterior does not depend on (flat likelihood, flat prior): no optimiser gives a
    # negative definite Hessian (it is singular, so its inverse is not finite either), so the error stands.
    model = cj.Model(lambda theta, x: -0.5 * (theta[0] - x) ** 2, lambda theta: -0.5 * theta[0] ** 2, dim=2)
    with pytest.raises(ValueError, match="not negative definite|not finite"):
        cj.laplace(model, jnp.ones(20))
