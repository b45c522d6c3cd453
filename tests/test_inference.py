"""cj.sample: the samplers recover exact (weighted) Gaussian posteriors, agree on logistic regression,
and reuse their compiled code for a new coreset of the same capacity."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.inference import sample_fn, trace_count

N, D = 2000, 5
METHOD_KWARGS = {"nuts": {}, "hmc": {}, "mala": {"thin": 2}, "rwmh": {"thin": 5}}


@pytest.fixture(scope="module")
def gaussian():
    key = jax.random.key(11)
    y = cj.data.synthetic_gaussian(key, N, dim=D, mean=jnp.linspace(-1.0, 1.0, D))
    model = cj.models.gaussian_mean(D)
    V = cj.models.gaussian_mean_fisher_vectors(y)
    cs = cj.build(V, 20, "frank_wolfe", jax.random.key(1))
    return {"y": y, "model": model, "V": V, "cs": cs,
            "full": cj.models.gaussian_mean_posterior(y),
            "weighted": cj.models.gaussian_mean_posterior(y, cs.dense(N))}


def _check_recovers(post, mean, cov):
    sd = np.sqrt(np.diag(np.asarray(cov)))
    flat = np.asarray(post.samples).reshape(-1, D)
    z = (flat.mean(0) - np.asarray(mean)) / sd
    ratio = flat.std(0) / sd
    assert np.all(np.abs(z) < 0.2), f"{post.method}: posterior means off by {z} posterior sds"
    assert np.all(np.abs(ratio - 1.0) < 0.2), f"{post.method}: posterior sds off by ratios {ratio}"


@pytest.mark.parametrize("method", list(METHOD_KWARGS))
@pytest.mark.slow
def test_recovers_exact_gaussian_posterior_on_the_full_data(gaussian, method):
    mean, cov = gaussian["full"]
    post = cj.sample(gaussian["model"], gaussian["y"], jax.random.key(5), method=method,
                     num_samples=1000, num_warmup=1000, num_chains=2, **METHOD_KWARGS[method])
    assert post.samples.shape == (2, 1000, D)
    assert np.all(np.isfinite(np.asarray(post.rhat))) and float(jnp.max(post.rhat)) < 1.1
    assert np.all(np.asarray(post.ess) > 50)
    assert post.acceptance_rate.shape == (2,) and post.step_size.shape == (2,)
    _check_recovers(post, mean, cov)


@pytest.fixture(scope="module")
def far_coreset():
    """A coreset with large weights whose posterior is narrow and far from theta = 0: N = 10^5 rows around
    5 linspace(-1, 1, 5), 20 Frank-Wolfe points with weights up to about 6e5, posterior sd 0.0014, so chains
    started at 0 begin about 6,000 posterior sds away. Its exact posterior (HC Eq. 6.4) in float64 NumPy."""
    n = 100_000
    y = cj.data.synthetic_gaussian(jax.random.key(11), n, dim=D, mean=5.0 * jnp.linspace(-1.0, 1.0, D))
    cs = cj.build(cj.models.gaussian_mean_fisher_vectors(y), 20, "frank_wolfe", jax.random.key(1))
    w = np.asarray(cs.weights, np.float64)
    rows = np.asarray(y, np.float64)[np.asarray(cs.indices)]
    precision = 1.0 + w.sum()
    return {"y": y, "cs": cs, "mean": w @ rows / precision, "sd": 1.0 / np.sqrt(precision)}


@pytest.mark.parametrize("method", ["nuts", "hmc", "mala", "rwmh", "slice"])
@pytest.mark.slow
def test_every_sampler_recovers_a_far_weighted_coreset_posterior(far_coreset, method):
    """From init = 0, thousands of posterior sds away, each sampler's draws match the closed form: mean within
    0.2 sd, sd ratio within 0.9-1.1 (RWMH's warm-up once stretched its proposal along the path in from the
    start and never reached the posterior: a mean 17 sd off)."""
    fc = far_coreset
    assert float(np.max(np.asarray(fc["cs"].weights))) > 1e5 and np.linalg.norm(fc["mean"]) / fc["sd"] > 5e3
    post = cj.sample(cj.models.gaussian_mean(D), fc["y"], jax.random.key(0), weights=fc["cs"], method=method,
                     num_samples=2000, num_warmup=1000, num_chains=4, init=jnp.zeros(D))
    flat = np.asarray(post.samples, np.float64).reshape(-1, D)  # float64 sums: float32 ones round at 1e-4
    z = (flat.mean(0) - fc["mean"]) / fc["sd"]
    ratio = flat.std(0) / fc["sd"]
    assert np.all(np.abs(z) < 0.2), f"{method}: posterior means off by {z} posterior sds"
    assert np.all((ratio > 0.9) & (ratio < 1.1)), f"{method}: posterior sds off by ratios {ratio}"


def test_weighted_and_full_posteriors_differ(gaussian):
    """The coreset test above can only pass if the weights are applied: the two exact posteriors differ."""
    (_, cov_full), (_, cov_w) = gaussian["full"], gaussian["weighted"]
    ratio = float(jnp.sqrt(cov_w[0, 0] / cov_full[0, 0]))
    assert abs(ratio - 1.0) > 0.25
    assert gaussian["cs"].num_points <= 20


@pytest.mark.slow
def test_new_coreset_of_same_capacity_does_not_recompile(gaussian):
    kwargs = dict(method="rwmh", num_samples=200, num_warmup=200, num_chains=2)
    first = cj.sample(gaussian["model"], gaussian["y"], jax.random.key(0), weights=gaussian["cs"], **kwargs)
    other = cj.build(gaussian["V"][::-1], 20, "frank_wolfe", jax.random.key(2))
    assert not np.array_equal(np.asarray(other.indices), np.asarray(gaussian["cs"].indices))
    before = trace_count()
    second = cj.sample(gaussian["model"], gaussian["y"], jax.random.key(1), weights=other, **kwargs)
    assert trace_count() == before and not second.compiled
    assert first.samples.shape == second.samples.shape
    # A different capacity is a different shape, so it does compile: the counter does count.
    bigger = cj.build(gaussian["V"], 30, "frank_wolfe", jax.random.key(2))
    third = cj.sample(gaussian["model"], gaussian["y"], jax.random.key(1), weights=bigger, **kwargs)
    assert third.compiled and trace_count() == before + 1


@pytest.mark.slow
def test_thinning_and_dense_weights(gaussian):
    cs = gaussian["cs"]
    post = cj.sample(gaussian["model"], gaussian["y"], jax.random.key(3), weights=cs.dense(N), method="rwmh",
                     num_samples=300, num_warmup=300, num_chains=1, thin=3)
    assert post.samples.shape == (1, 300, D)
    assert np.all(np.isnan(np.asarray(post.rhat)))  # one chain: R-hat undefined
    mean, cov = gaussian["weighted"]
    z = (np.asarray(post.mean) - np.asarray(mean)) / np.sqrt(np.diag(np.asarray(cov)))
    assert np.all(np.abs(z) < 1.0)


@pytest.mark.slow
def test_sample_fn_is_jittable_with_traced_weights(gaussian):
    y, cs = gaussian["y"], gaussian["cs"]
    run = sample_fn(gaussian["model"], "mala", num_samples=200, num_warmup=200, num_chains=1)
    rows = y[cs.indices]
    init = jnp.zeros((1, D))

    @jax.jit
    def posterior_mean(weights):
        samples, stats = run(jax.random.key(0), rows, weights, init, jnp.eye(D) * 1e-3)
        return samples.mean(axis=(0, 1))

    mean, cov = gaussian["weighted"]
    got = posterior_mean(cs.weights)
    assert np.all(np.abs(np.asarray(got - mean)) < 0.5 * np.sqrt(np.asarray(cov[0, 0])))
    doubled = posterior_mean(2.0 * cs.weights)  # same shapes: no retrace, and the weights matter
    mean2, _ = cj.models.gaussian_mean_posterior(y, 2.0 * cs.dense(N))
    assert np.all(np.abs(np.asarray(doubled - mean2)) < 0.5 * np.sqrt(np.asarray(cov[0, 0])))


@pytest.mark.slow
@pytest.mark.extended
def test_nuts_matches_long_rwmh_on_logistic_regression():
    ds = cj.data.synthetic_logistic(jax.random.key(7), 5000)
    model = cj.models.logistic_regression()
    nuts = cj.sample(model, ds.train, jax.random.key(1), method="nuts", num_samples=1000, num_warmup=500,
                     num_chains=2)
    rw = cj.sample(model, ds.train, jax.random.key(2), method="rwmh", num_samples=2000, num_warmup=2000,
                   num_chains=2, thin=8)
    assert int(jnp.sum(nuts.num_divergent)) == 0
    for post in (nuts, rw):
        assert float(jnp.max(post.rhat)) < 1.05
    var = np.asarray(jnp.var(rw.flat_samples, axis=0))
    mc_se = np.sqrt(var / np.asarray(nuts.ess) + var / np.asarray(rw.ess))
    diff = np.abs(np.asarray(nuts.mean - rw.mean))
    assert np.all(diff < 4.0 * mc_se), f"means differ by {diff / mc_se} Monte Carlo standard errors"
    sd_ratio = np.asarray(jnp.std(nuts.flat_samples, axis=0) / jnp.std(rw.flat_samples, axis=0))
    assert np.all(np.abs(sd_ratio - 1.0) < 0.15), sd_ratio
    # Sanity: the data were generated from theta = (3, 3, 0), and the posterior is concentrated near it.
    assert np.all(np.abs(np.asarray(nuts.mean) - np.array([3.0, 3.0, 0.0])) < 0.5)


@pytest.mark.slow
def test_to_arviz_summary(gaussian):
    az = pytest.importorskip("arviz")
    post = cj.sample(gaussian["model"], gaussian["y"], jax.random.key(0), weights=gaussian["cs"],
                     method="rwmh", num_samples=200, num_warmup=200, num_chains=2)
    idata = post.to_arviz()
    summary = az.summary(idata)
    assert summary.shape[0] == D
    assert list(post.to_arviz(var_name="mu").posterior.data_vars) == ["mu"]  # the name was ignored
    assert np.allclose(summary["mean"].to_numpy(), np.asarray(post.mean), atol=1e-3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="gibbs"), "method"),
    (dict(num_samples=0), "num_samples"),
    (dict(num_chains=1.5), "num_chains"),
    (dict(thin=0), "thin"),
    (dict(weights=jnp.ones(7)), "weights"),
    (dict(weights=-jnp.ones(N)), "weights"),
    (dict(weights=jnp.zeros(N)), "weights"),
    (dict(step_size=0.1), "step_size"),
    (dict(init=jnp.zeros(3)), "init"),
    (dict(init=jnp.zeros((3, D))), "init"),
])
def test_bad_input_raises(gaussian, kwargs, match):
    args = dict(method="rwmh", num_samples=10, num_warmup=10, num_chains=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        cj.sample(gaussian["model"], gaussian["y"], jax.random.key(0), **args)


def test_bad_key_and_data_raise(gaussian):
    with pytest.raises(ValueError, match="key"):
        cj.sample(gaussian["model"], gaussian["y"], 0)
    bad = gaussian["y"].at[3, 1].set(jnp.nan)
    with pytest.raises(ValueError, match="data"):
        cj.sample(gaussian["model"], bad, jax.random.key(0))


@pytest.mark.parametrize("method", ["hmc"])  # NUTS: compared with BlackJAX's own loop below
def test_window_adaptation_learns_the_variances(method):
    # Stan's windows end with the inverse mass matrix at the target's variances (Hoffman & Gelman 2014,
    # §3.2 with Stan's regularisation), whatever the start; step size positive and finite.
    from coresets_jax.inference.kernels import Tuning, check_settings
    from coresets_jax.inference.warmup import warmup
    variances = jnp.array([1.0, 100.0, 0.01])
    run = warmup(method, lambda x: -0.5 * jnp.sum(x ** 2 / variances), 1000, check_settings(method, {}))
    _, tuning, _ = jax.jit(run)(jax.random.key(0), jnp.ones(3), Tuning(jnp.asarray(1.0), jnp.ones(3)))
    np.testing.assert_allclose(np.asarray(tuning.precond), np.asarray(variances), rtol=0.35)
    assert 0.1 < float(tuning.step_size) < 3.0


def test_nuts_window_adaptation_matches_blackjax():
    # Our warm-up loop (written so that it can report progress) against BlackJAX's own
    # `window_adaptation(...).run`: the same schedule, dual averaging and Welford windows, the same keys.
    import blackjax
    from coresets_jax.inference.kernels import Tuning, check_settings
    from coresets_jax.inference.warmup import warmup
    variances = jnp.array([1.0, 100.0, 0.01])
    logdensity = lambda x: -0.5 * jnp.sum(x ** 2 / variances)
    key, start, imm = jax.random.key(4), jnp.ones(3), jnp.array([2.0, 3.0, 0.5])
    ours = warmup("nuts", logdensity, 300, check_settings("nuts", {}))
    state, tuning, _ = jax.jit(ours)(key, start, Tuning(jnp.asarray(0.7), imm))
    theirs = blackjax.window_adaptation(blackjax.nuts, logdensity, is_mass_matrix_diagonal=True,
                                        initial_inverse_mass_matrix=imm, initial_step_size=0.7,
                                        target_acceptance_rate=0.8, max_num_doublings=10)
    (ref_state, params), _ = theirs.run(key, start, 300)
    np.testing.assert_allclose(float(tuning.step_size), float(params["step_size"]), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(tuning.precond), np.asarray(params["inverse_mass_matrix"]), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(state.position), np.asarray(ref_state.position), rtol=1e-4, atol=1e-6)


@pytest.mark.filterwarnings("ignore:sample. min bulk ESS")  # 20 draws: the ESS warning is expected here
def test_a_failed_laplace_fit_is_reported_not_swallowed():
    # Issue 23: cj.sample fell back to an identity covariance in silence. log p(theta) = -(theta^2 - 4)^2 has a
    # stationary point at the default start theta = 0 that is a minimum of the density: the fit's Hessian is
    # not positive definite there.
    model = cj.Model(lambda theta, x: -0.01 * (theta[0] ** 2 - 4.0) ** 2 + 0.0 * x,
                     lambda theta: -0.005 * jnp.sum(theta ** 2), dim=1)
    with pytest.warns(RuntimeWarning, match="Laplace fit of the posterior failed"):
        post = cj.sample(model, jnp.zeros(100), jax.random.key(0), method="rwmh", num_samples=20, num_warmup=20,
                         num_chains=1)
    assert np.all(np.isfinite(np.asarray(post.samples)))


def test_importing_arviz_through_the_package_passes_on_no_future_warning():
    # ArviZ 0.2x warns on import about its coming refactor; a coresets_jax user cannot act on it (issue 22:
    # the quickstart printed five lines of it). A fresh process, so that arviz is imported for the first time.
    import subprocess
    import sys
    code = ("import warnings; warnings.simplefilter('error', FutureWarning); "
            "from coresets_jax.interop.arviz_export import load_arviz; print(load_arviz().__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "arviz"


@pytest.mark.slow
def test_float32_data_with_x64_enabled_samples_the_exact_posterior(gaussian):
    # With x64 on, BlackJAX's NUTS keeps its proposal weight in float64, so a float32 chain state broke its
    # lax.cond; cj.sample (and the NUTS inside the posterior-driven methods) run the chains in float64 then.
    y32 = jnp.asarray(gaussian["y"], jnp.float32)
    with jax.enable_x64(True):
        post = cj.sample(gaussian["model"], y32, jax.random.key(3), num_samples=400, num_warmup=300, warn=False)
        cs = cj.coreset(gaussian["model"], y32, 8, "quasi_newton", key=jax.random.key(4), num_iters=2,
                        num_draws=10, max_burn=50)
    assert post.samples.dtype == jnp.float64 and np.all(np.isfinite(np.asarray(cs.weights)))
    mean, cov = gaussian["full"]
    sd = np.sqrt(np.diag(np.asarray(cov)))
    z = (np.asarray(post.samples).reshape(-1, D).mean(0) - np.asarray(mean)) / sd
    assert np.max(np.abs(z)) < 0.5, z  # the posterior mean to within half an sd (ESS of several hundred)


def test_coreset_chains_run_in_float64_where_float32_rounding_would_stall_them():
    # Two rows x = +a and x = -a of weight W each under a unit-variance Gaussian likelihood: their terms
    # -W (x - theta)^2 / 2 are ~1e10 and cancel to a posterior N(0, 1 / (2 W + 1)). In float32 the energy's
    # rounding (~1e3 nats) would decide every NUTS acceptance; the coreset's chains run in float64 (x64 off
    # here), so they sample the exact posterior in a few leapfrog steps, and the draws come back in float32.
    a, w = 100.0, 1e6
    model = cj.Model(lambda theta, x: -0.5 * jnp.sum((x - theta) ** 2), lambda theta: -0.5 * jnp.sum(theta ** 2),
                     dim=1)
    x = jnp.asarray([[a], [-a], [0.0], [1.0]], jnp.float32)
    cs = cj.Coreset(jnp.asarray([0, 1]), jnp.asarray([w, w], jnp.float32), method="given")
    assert not jax.config.read("jax_enable_x64")
    post = cj.sample(model, x, jax.random.key(0), weights=cs, num_samples=500, num_warmup=300, warn=False)
    draws = np.asarray(post.samples, np.float64).ravel()
    sd = 1.0 / np.sqrt(2 * w + 1)
    assert post.samples.dtype == jnp.float32
    assert abs(draws.mean()) < 0.2 * sd and abs(draws.std() / sd - 1) < 0.15, (draws.mean() / sd, draws.std() / sd)
    assert float(np.mean(np.asarray(post.stats.num_integration_steps))) < 15
