"""SG-MCMC baselines (`coresets_jax/baselines/sgmcmc.py`): the control-variate gradient estimator against a
NumPy gradient, and SGLD / SGHMC draws on a Gaussian-location posterior against its closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.baselines import cv_grad_estimator, sgmcmc


def logistic_grad_numpy(theta, X, y):
    """sum_n grad log sigmoid(y_n x_n . theta) - theta (prior N(0, I))."""
    m = y * (X @ theta)
    return (X * (y / (1 + np.exp(m)))[:, None]).sum(0) - theta


def test_cv_gradient_is_exact_at_the_anchor_and_unbiased_elsewhere():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 2000)
    X, y = (np.asarray(a, np.float64) for a in ds.train)
    model = cj.models.logistic_regression()
    anchor = jnp.asarray([2.5, 2.5, 0.2], jnp.float32)
    grad_fn, draw_for = cv_grad_estimator(model, ds.train, anchor)
    draw = draw_for(50)
    at_anchor = np.asarray(grad_fn(anchor, draw(jax.random.key(1))))
    np.testing.assert_allclose(at_anchor, logistic_grad_numpy(np.asarray(anchor, np.float64), X, y), rtol=1e-4,
                               atol=1e-2)
    theta = anchor + jnp.asarray([0.05, -0.05, 0.03])  # about one posterior sd away
    estimates = jax.vmap(lambda k: grad_fn(theta, draw(k)))(jax.random.split(jax.random.key(2), 4000))
    exact = logistic_grad_numpy(np.asarray(theta, np.float64), X, y)
    mean, se = np.asarray(estimates.mean(0)), np.asarray(estimates.std(0)) / np.sqrt(4000)
    assert np.all(np.abs(mean - exact) < 4 * se + 1e-2), (mean, exact, se)
    # The control variate is what keeps the noise small: far below a plain N/B-scaled minibatch sum's.
    row = np.asarray(jax.vmap(jax.grad(model.log_likelihood), in_axes=(None, 0))(theta, ds.train))
    plain_sd = np.sqrt(2000 ** 2 / 50 * row.var(0))
    assert np.all(np.asarray(estimates.std(0)) < 0.1 * plain_sd), (estimates.std(0), plain_sd)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sgld", "sghmc"])
def test_draws_match_the_gaussian_location_posterior(method):
    D, N = 2, 5000
    y = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D))
    model = cj.models.gaussian_mean(D)
    mean, cov = cj.models.gaussian_mean_posterior(y)
    res = sgmcmc(model, y, jax.random.key(1), method, num_samples=3000, num_warmup=300, num_chains=2,
                 batch_size=100)
    draws = np.asarray(res.samples).reshape(-1, D)
    sd = np.sqrt(np.diag(np.asarray(cov)))
    # Mean within 0.15 posterior sd; variance within the Euler bias of a step of 0.1 / lambda (~5%) plus noise.
    assert np.all(np.abs(draws.mean(0) - np.asarray(mean)) < 0.15 * sd), (draws.mean(0), mean)
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.15)
    per_step = 2 * 100 * (1 if method == "sgld" else 10)
    assert res.gradient_evaluations == N + 2 * 3300 * per_step
