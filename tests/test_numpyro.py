"""NumPyro models in (`cj.from_numpyro`), ArviZ out (`cj.to_arviz`)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import coresets_jax as cj
from compile_events import recorded_compilations

numpyro = pytest.importorskip("numpyro")
dist = numpyro.distributions


def logreg(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)


def gaussian_scale(x):
    mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(2.0))
    with numpyro.plate("obs", x.shape[0]):
        numpyro.sample("x", dist.Normal(mu, sigma), obs=x)


@pytest.fixture(scope="module")
def logistic_data():
    ds = cj.data.synthetic_logistic(jax.random.key(3), 2000)
    X, y = ds.train
    return X, y, ((y + 1) / 2).astype(jnp.int32)  # NumPyro's Bernoulli takes {0, 1}


@pytest.mark.slow
def test_logistic_matches_builtin_vectors_and_coreset(logistic_data):
    X, y_pm, y01 = logistic_data
    model, data = cj.from_numpyro(logreg, X, y=y01)
    assert set(data) == {"X", "y"} and model.dim == 3 and model.name == "numpyro:logreg"
    builtin = cj.models.logistic_regression(prior_scale=1.0)
    key = jax.random.key(0)
    thetas = 0.5 * jax.random.normal(key, (64, 3)) + jnp.array([3.0, 3.0, 0.0])
    for norm in ("fisher", "centered"):
        V_np = cj.project(model, data, thetas, norm=norm, key=key)
        V_b = cj.project(builtin, (X, y_pm), thetas, norm=norm, key=key)
        np.testing.assert_allclose(V_np, V_b, atol=1e-5, rtol=1e-5)
    theta = jnp.array([0.4, -1.3, 0.2])
    np.testing.assert_allclose(model.log_prior(theta), stats.norm.logpdf(np.asarray(theta)).sum(), rtol=1e-6)
    cs_np = cj.coreset(model, data, size=30, method="giga", key=key, num_features=100)
    cs_b = cj.coreset(builtin, (X, y_pm), size=30, method="giga", key=key, num_features=100)
    np.testing.assert_array_equal(cs_np.indices, cs_b.indices)
    # float32 rounding differs between the two log-likelihoods; GIGA's weights amplify it a little.
    np.testing.assert_allclose(cs_np.weights, cs_b.weights, rtol=1e-2)


def test_constrained_site_prior_has_the_jacobian():
    x = jnp.asarray(np.random.default_rng(0).normal(1.0, 0.5, 50), jnp.float32)
    model, data = cj.from_numpyro(gaussian_scale, x)
    assert model.dim == 2 and set(data) == {"x"}
    u = jnp.array([0.7, -0.4])  # sigma = exp(-0.4) under NumPyro's biject_to(positive)
    sigma = np.exp(-0.4)
    expected = stats.norm.logpdf(0.7, 0, 10) + stats.halfnorm.logpdf(sigma, scale=2.0) + np.log(sigma)
    np.testing.assert_allclose(model.log_prior(u), expected, rtol=1e-5)
    # The likelihood carries no Jacobian: it is the plain Normal density of one datum.
    np.testing.assert_allclose(model.log_likelihood(u, {"x": x[3]}),
                               stats.norm.logpdf(float(x[3]), 0.7, sigma), rtol=1e-5)
    assert {k: float(v) for k, v in model.constrain(u).items()} == pytest.approx({"mu": 0.7, "sigma": sigma})


def test_bad_models_are_refused():
    def no_plate(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    def local_latent(x):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("obs", x.shape[0]):
            z = numpyro.sample("z", dist.Normal(mu, 1.0))
            numpyro.sample("x", dist.Normal(z, 1.0), obs=x)

    x = jnp.ones(10)
    with pytest.raises(ValueError, match="plate"):
        cj.from_numpyro(no_plate, x)
    with pytest.raises(ValueError, match="latent site"):
        cj.from_numpyro(local_latent, x)
    with pytest.raises(ValueError, match="signature"):
        cj.from_numpyro(gaussian_scale, x, 3)


def test_plate_size_passed_as_an_integer():
    def model_n(x, n):
        mu = numpyro.sample("mu", dist.Normal(0.0, 1.0))
        with numpyro.plate("obs", n):
            numpyro.sample("x", dist.Normal(mu, 1.0), obs=x)

    x = jnp.linspace(-1.0, 1.0, 20)
    model, data = cj.from_numpyro(model_n, x, 20)
    assert set(data) == {"x"}
    np.testing.assert_allclose(model.log_likelihood(jnp.array([0.3]), {"x": x[0]}),
                               stats.norm.logpdf(-1.0, 0.3, 1.0), rtol=1e-6)


def _posterior(samples):
    """A `Posterior` as `cj.sample` returns it, from given draws (to_arviz only reads the fields)."""
    from coresets_jax.inference.driver import SamplerStats
    from coresets_jax.inference.posterior import Posterior

    c, s, d = samples.shape
    acc = jnp.linspace(0.5, 0.9, c * s).reshape(c, s)
    div = jnp.zeros((c, s), bool).at[0, 3].set(True)
    stats = SamplerStats(acc.mean(1), div.sum(1), jnp.array([0.3, 0.4][:c]), jnp.full(c, jnp.nan),
                         jnp.full(c, 3.0), acc, div)
    return Posterior(samples, stats.acceptance_rate, stats.num_divergent, stats.step_size, jnp.ones(d),
                     jnp.ones(d), 1.0, 0.0, False, "nuts", 50, 1, stats)


def test_to_arviz_site_names_and_stats():
    az = pytest.importorskip("arviz")
    x = jnp.asarray(np.random.default_rng(1).normal(1.0, 0.5, 40), jnp.float32)
    model, _ = cj.from_numpyro(gaussian_scale, x)
    draws = jax.random.normal(jax.random.key(2), (2, 50, 2))
    post = _posterior(draws)
    idata = cj.to_arviz(post, model=model)
    assert isinstance(idata, az.InferenceData)
    assert set(idata.posterior.data_vars) == {"mu", "sigma"}
    assert idata.posterior["sigma"].shape == (2, 50)
    np.testing.assert_allclose(idata.posterior["mu"].values, np.asarray(draws[..., 0]), rtol=1e-6)
    np.testing.assert_allclose(idata.posterior["sigma"].values, np.exp(np.asarray(draws[..., 1])), rtol=1e-5)
    np.testing.assert_allclose(idata.sample_stats["acceptance_rate"].values, post.stats.draw_acceptance)
    assert idata.sample_stats["diverging"].values.sum() == 1 and idata.sample_stats["diverging"].values[0, 3]
    np.testing.assert_allclose(idata.sample_stats["step_size"].values[:, 0], [0.3, 0.4])
    assert idata.attrs["method"] == "nuts" and idata.attrs["num_warmup"] == 50
    plain = cj.to_arviz(post, model=cj.models.logistic_regression())  # no constrain: one flat theta
    assert set(plain.posterior.data_vars) == {"theta"} and plain.posterior["theta"].shape == (2, 50, 2)
    assert set(cj.to_arviz(post).posterior.data_vars) == {"theta"}  # no model known
    # A Posterior that carries its model (as cj.sample returns it) needs no model= argument.
    carried = dataclasses.replace(post, model=model)
    assert set(carried.to_arviz().posterior.data_vars) == {"mu", "sigma"}


@pytest.mark.slow
@pytest.mark.extended
def test_halfnormal_posterior_matches_numpyro_nuts():
    from numpyro.infer import MCMC, NUTS

    x = jnp.asarray(np.random.default_rng(2).normal(1.0, 0.5, 30), jnp.float32)
    model, data = cj.from_numpyro(gaussian_scale, x)
    post = cj.sample(model, data, jax.random.key(4), num_samples=2000, num_warmup=500, num_chains=2)
    idata = post.to_arviz()  # cj.sample keeps the model: NumPyro's site names, constrained values
    ours = {site: idata.posterior[site].values for site in ("mu", "sigma")}
    mcmc = MCMC(NUTS(gaussian_scale), num_warmup=500, num_samples=2000, num_chains=1, progress_bar=False)
    mcmc.run(jax.random.key(5), x)
    ref = mcmc.get_samples()
    for site in ("mu", "sigma"):
        a, b = np.ravel(ours[site]), np.asarray(ref[site])
        # Monte Carlo standard error of the difference of means, taking ESS ~ draws / 4 (NUTS here).
        se = np.sqrt(a.var() / a.size + b.var() / b.size) * 2
        assert abs(a.mean() - b.mean()) < 4 * se, site
        assert abs(a.std() - b.std()) < 0.1 * b.std(), site


def test_laplace_from_a_float32_start_under_x64_finds_the_mode_of_a_numpyro_model():
    # Under x64, a NumPyro model's log density of float32 data is float64 (its constants are), so Newton's
    # loop carried a float32 theta into float64 values and failed to trace (it broke cj.refine's start).
    # The fit now runs in the objective's dtype; its mode has a zero gradient, checked in NumPy.
    import numpyro
    import numpyro.distributions as dist

    def logistic(X, y=None):
        theta = numpyro.sample("theta", dist.Normal(jnp.zeros(X.shape[1]), 1.0).to_event(1))
        with numpyro.plate("N", X.shape[0]):
            numpyro.sample("obs", dist.Bernoulli(logits=X @ theta), obs=y)

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3)).astype(np.float32)
    y = (rng.random(200) < 1 / (1 + np.exp(-X @ np.array([1.0, -1.0, 0.5])))).astype(np.float32)
    model, data = cj.from_numpyro(logistic, X, y)
    with jax.enable_x64(True):
        fit = cj.laplace_fn(model)(data, jnp.zeros(3, jnp.float32))
    mode = np.asarray(fit.mean, np.float64)
    Xd = X.astype(np.float64)
    grad = Xd.T @ (y - 1 / (1 + np.exp(-Xd @ mode))) - mode  # d/dtheta of the log joint, prior N(0, I)
    assert bool(fit.info["converged"]) and np.max(np.abs(grad)) < 1e-6, grad


def test_starting_point_is_the_golden_spread_computed_without_compiling():
    # init_params: 1e-3 (2 frac(0.5 + phi' k) - 1), k = 1..D (phi' = 0.618...), distinct and off every kink at
    # 0, in the precision JAX would use; computed on the host, so a cold first call compiles nothing for it
    import numpyro
    import numpyro.distributions as dist

    def model(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    X = np.random.default_rng(0).normal(size=(50, 7)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    m, data = cj.from_numpyro(model, X, y)
    with recorded_compilations() as compiles:
        for x64 in (False, True):
            with jax.enable_x64(x64):
                theta = np.asarray(m.init_params(data))
            k = np.arange(1, 8, dtype=np.float64)
            expected = 1e-3 * (2.0 * np.mod(0.5 + 0.6180339887498949 * k, 1.0) - 1.0)
            assert theta.dtype == np.float32
            np.testing.assert_allclose(theta, expected, rtol=0, atol=2e-9)  # float32 rounding of frac(.)
            assert len(np.unique(theta)) == 7 and np.all(theta != 0)
    assert compiles == []


@pytest.mark.parametrize("committed", [False, True])
def test_from_numpyro_on_cpu_arrays_compiles_nothing_and_reads_the_rows(committed):
    """A cold `from_numpyro` took 0.1 s of eager compilations (the first row sliced by XLA, a zero template
    flattened); now it reads a CPU array's first row through its NumPy view and the shapes by eval_shape. The
    model it returns still evaluates the user's rows: checked against scipy on all of them."""
    def model(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
        scale = numpyro.sample("scale", dist.HalfNormal(1.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, scale), obs=y)

    rng = np.random.default_rng(4)
    X_np = rng.normal(size=(613, 5)).astype(np.float32)  # shapes no other test uses: no cached slice program
    y_np = (X_np @ np.arange(1.0, 6.0) + rng.normal(size=613)).astype(np.float32)
    put = (lambda a: jax.device_put(a, jax.devices("cpu")[0])) if committed else jnp.asarray
    X, y = put(X_np), put(y_np)
    with recorded_compilations() as compiles:
        m, data = cj.from_numpyro(model, X, y)
        cj.solvers.omp(10, path_sizes=(3, 5))  # the solver's construction: NumPy too
    assert compiles == [] and m.dim == 6
    theta = np.concatenate([rng.normal(size=5), [np.log(0.7)]]).astype(np.float32)  # scale = exp(log 0.7)
    beta, scale = theta[:5].astype(np.float64), 0.7
    ll = np.asarray(jax.vmap(m.log_likelihood, (None, 0))(jnp.asarray(theta), data))
    want = stats.norm.logpdf(y_np, X_np.astype(np.float64) @ beta, scale)
    np.testing.assert_allclose(ll, want, rtol=2e-5, atol=2e-4)
    # prior in unconstrained space: the HalfNormal density of scale plus log|d scale / d log scale| = log scale
    prior = stats.norm.logpdf(beta, 0.0, 2.0).sum() + stats.halfnorm.logpdf(scale) + np.log(scale)
    np.testing.assert_allclose(float(m.log_prior(jnp.asarray(theta))), prior, rtol=1e-5)
