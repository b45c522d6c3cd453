"""vMF mixture (HC Eqs. 7.3-7.7): log-space Bessel normaliser against scipy, sampler moments against
theory, EM and the weighted Gibbs sampler recovering well-separated modes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

import coresets_jax as cj
from coresets_jax.models import vmf, vmf_inference


@pytest.mark.parametrize("dim", [2, 3, 4, 10, 30])
def test_log_bessel_matches_scipy(dim):
    v = dim / 2.0 - 1.0
    x = np.logspace(-3, 4.5, 200)
    with np.errstate(divide="ignore"):
        ref = np.log(special.ive(v, x)) + x  # scipy's exponentially scaled Bessel, stable in log space
    with jax.enable_x64(True):
        ours = np.asarray(vmf.log_bessel_iv(v, jnp.asarray(x, jnp.float64)))
    ok = np.isfinite(ref)
    np.testing.assert_allclose(ours[ok], ref[ok], rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_normalizer_closed_form_d3_and_huge_tau():
    # D = 3: C_3(tau) = tau / (4 pi sinh tau), so log C_3 = log tau - log(2 pi) - tau - log(1 - e^{-2 tau}).
    with jax.enable_x64(True):
        tau = jnp.asarray([1e-2, 1.0, 50.0, 700.0, 1e5], jnp.float64)
        ref = jnp.log(tau) - jnp.log(2 * jnp.pi) - tau - jnp.log1p(-jnp.exp(-2 * tau))
        np.testing.assert_allclose(vmf.log_vmf_normalizer(tau, 3), ref, rtol=1e-12)
    # float32, huge concentration (Eq. 7.6 uses tau ||xbar_k|| ~ 1e5): finite.
    assert np.all(np.isfinite(vmf.log_vmf_normalizer(jnp.asarray([1e5, 1e6], jnp.float32), 3)))


@pytest.mark.parametrize("dim,kappa", [(3, 5.0), (3, 50.0), (5, 20.0)])
@pytest.mark.slow
def test_sampler_mean_resultant_length(dim, kappa):
    # E[mu^T x] = A_D(kappa) = I_{D/2}(kappa) / I_{D/2-1}(kappa) (Mardia & Jupp 9.3.5).
    mu = jnp.asarray(np.linalg.qr(np.random.default_rng(0).normal(size=(dim, dim)))[0][:, 0], jnp.float32)
    xs = jax.vmap(vmf.sample_vmf, in_axes=(0, None, None))(jax.random.split(jax.random.key(1), 20000), mu,
                                                           kappa)
    np.testing.assert_allclose(np.linalg.norm(xs, axis=1), 1.0, atol=1e-5)
    a = special.ive(dim / 2.0, kappa) / special.ive(dim / 2.0 - 1.0, kappa)
    cos = np.asarray(xs @ mu)
    assert abs(cos.mean() - a) < 4 * cos.std() / np.sqrt(len(cos)) + 1e-4


def _match(mu_hat, poles):
    """Mean angle (radians) between each pole and its best-aligned estimated mode."""
    cos = np.asarray(poles) @ np.asarray(mu_hat).T
    return float(np.mean(np.arccos(np.clip(cos.max(1), -1, 1))))


@pytest.mark.slow
def test_em_and_weighted_gibbs_recover_poles():
    ds = cj.data.synthetic_vmf(jax.random.key(0), n=600)
    poles = np.concatenate([np.eye(3), -np.eye(3)])
    fit = vmf_inference.em(jax.random.key(1), ds.X)
    assert _match(fit.params.mu, poles) < 0.05  # tau = 50, 100 points per mode: error ~ 0.02 rad
    # Weighted data: a random half of the points with weight 2 (other half 0) and fractional weights.
    w = np.zeros(600, np.float32)
    keep = np.random.default_rng(0).permutation(600)[:300]
    w[keep] = np.random.default_rng(1).uniform(1.2, 2.8, 300)
    init = vmf.VMFParams(jnp.roll(jnp.asarray(poles, jnp.float32), 0, 0) + 0.3, jnp.full(6, 1 / 6))
    init = init._replace(mu=init.mu / jnp.linalg.norm(init.mu, axis=1, keepdims=True))
    draws = vmf_inference.gibbs(jax.random.key(2), ds.X, jnp.asarray(w), init, num_samples=200, num_warmup=100)
    assert draws.mu.shape == (200, 6, 3) and draws.omega.shape == (200, 6)
    post_mu = np.array(draws.mu.mean(0))
    post_mu /= np.linalg.norm(post_mu, axis=1, keepdims=True)
    # Each started 0.3 away from its pole and must settle on it (matched one to one).
    assert np.all(np.argmax(post_mu @ poles.T, axis=1) == np.arange(6))
    assert _match(post_mu, poles) < 0.06
    np.testing.assert_allclose(np.asarray(draws.omega.mean(0)), 1 / 6, atol=0.06)
    # Zero-weight rows are ignored: the same sampler on only the kept rows gives the same chain.
    again = vmf_inference.gibbs(jax.random.key(2), ds.X[keep], jnp.asarray(w[keep]), init, num_samples=200,
                      num_warmup=100)
    np.testing.assert_allclose(np.asarray(again.mu.mean(0)), np.asarray(draws.mu.mean(0)), atol=0.03)


@pytest.mark.slow
def test_model_loglik_matches_numpy_and_pihat_samples():
    model = cj.models.vmf_mixture()
    ds = cj.data.synthetic_vmf(jax.random.key(3), n=50)
    pihat = vmf_inference.conditional_pihat(jax.random.key(4), ds.X)
    thetas = pihat.sample(jax.random.key(5), 7)
    assert thetas.shape == (7, 6 * 3 + 6)
    p = vmf.unpack(thetas[0], 6, 3)
    np.testing.assert_allclose(np.linalg.norm(p.mu, axis=1), 1.0, atol=1e-5)
    x = np.asarray(ds.X[:5], np.float64)
    mu, om = np.asarray(p.mu, np.float64), np.asarray(p.omega, np.float64)
    logc = np.log(50.0) - np.log(2 * np.pi) - 50.0 - np.log1p(-np.exp(-100.0))
    ref = np.log(np.sum(om * np.exp(logc + 50.0 * x @ mu.T), axis=1))
    ours = cj.log_likelihoods(model, thetas[0], ds.X[:5])
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4)
