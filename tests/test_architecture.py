"""The construction protocol, the pure cores and the stepwise sampling layer (issue 10).

A toy method of each kind is defined here, in the test file, and runs through every composition without any
edit to the package. Batched trials (jax.vmap over keys or datasets) must equal a Python loop of trials.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import cli
from coresets_jax.core import take_data, top_k
from coresets_jax.solvers.base import Support, one_shot

# ---------------------------------------------------------------------------------------------------------
# Two toy constructions, one of each kind, defined outside the package.


def top_norm(size: int, scale: float = 1.0):
    """Vectors: the `size` rows of largest norm sigma_n, weighted so that sum_m w_m sigma_m = scale sum_n sigma_n."""

    def construct(problem, key):
        norms = problem.norms
        _, idx = top_k(norms, size)
        w = jnp.full(size, scale * jnp.sum(norms) / jnp.sum(norms[idx]), problem.target.dtype)
        return Support(idx.astype(jnp.int32), w, jnp.asarray(size, jnp.int32))

    return one_shot(construct)


def top_norm_numpy(V, size, scale=1.0):
    norms = np.linalg.norm(np.asarray(V, np.float64), axis=1)
    idx = np.argsort(-norms, kind="stable")[:size]
    w = np.zeros(len(norms))
    w[idx] = scale * norms.sum() / norms[idx].sum()
    return w


def top_loglik(model, size: int):
    """Posterior-driven: the `size` rows with the largest u_n L_n(mean of pi_hat), each weighted sum(u) / size."""

    def solve(key, data, start, data_weights):
        lls = cj.log_likelihoods(model, start.mean, data)
        score = jnp.where(data_weights > 0, lls, -jnp.inf)
        _, idx = jax.lax.top_k(score, size)
        w = jnp.full(size, jnp.sum(data_weights) / size, start.mean.dtype)
        return idx.astype(jnp.int32), w, {}

    return solve


def logistic_lls_numpy(theta, X, y):
    z = y * (X @ theta)
    return -np.logaddexp(0.0, -z)


TOY_VECTORS = cj.Construction("test_top_norm", top_norm, description="toy")
TOY_POSTERIOR = cj.Construction("test_top_loglik", top_loglik, needs="posterior", description="toy")


@pytest.fixture(scope="module", autouse=True)
def toy_methods():
    """The toy methods are registered for this module's tests only (a scoped registry), so no other test file
    sees them in cj.METHODS."""
    with cj.registry.scoped():
        cj.register(TOY_VECTORS)
        cj.register(TOY_POSTERIOR)
        yield
    assert "test_top_norm" not in cj.METHODS


@pytest.fixture(scope="module")
def problem():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 400)
    model = cj.models.logistic_regression()
    approx = cj.laplace(model, ds.train)
    thetas = approx.sample(jax.random.key(1), 30)
    V = cj.project(model, ds.train, thetas, norm="l2")
    return dict(model=model, data=ds.train, approx=approx, thetas=thetas, V=V)


def test_registry_lists_both_kinds():
    assert "test_top_norm" in cj.METHODS and "test_top_norm" not in cj.POSTERIOR_METHODS
    assert "test_top_loglik" in cj.POSTERIOR_METHODS and "sparse_vi" in cj.POSTERIOR_METHODS
    assert cj.methods()["giga"].needs == "vectors" and cj.methods()["uniform"].random
    assert TOY_VECTORS.options == {"scale": 1.0}
    with pytest.raises(ValueError, match="already registered"):
        cj.register(cj.Construction("giga", top_norm))
    with pytest.raises(ValueError, match="needs"):
        cj.register(cj.Construction("bad", top_norm, needs="both"))


@pytest.mark.slow
def test_toy_vector_method_through_build_coreset_merged_stream(problem):
    V, n = problem["V"], problem["V"].shape[0]
    expected = top_norm_numpy(V, 12)
    for method in ("test_top_norm", TOY_VECTORS):
        cs = cj.build(V, 12, method)
        np.testing.assert_allclose(np.asarray(cs.dense(n)), expected, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(cj.build(V, 12, "test_top_norm", scale=2.0).dense(n)),
                               top_norm_numpy(V, 12, 2.0), rtol=1e-5)
    with pytest.raises(ValueError, match="not an option"):
        cj.build(V, 12, "test_top_norm", sclae=2.0)
    # The pipeline on the same pi_hat samples gives the same V, so the same coreset.
    cs, V2 = cj.coreset(problem["model"], problem["data"], 12, "test_top_norm", norm="l2", num_features=30,
                        pi_hat=problem["thetas"], return_vectors=True)
    np.testing.assert_allclose(np.asarray(cs.dense(n)), top_norm_numpy(V2, 12), rtol=1e-5)
    # Merged: each shard's own top rows.
    merged = cj.merged_coreset(V, 5, 2, "test_top_norm")
    expected = np.concatenate([top_norm_numpy(V[:200], 5), top_norm_numpy(V[200:], 5)])
    np.testing.assert_allclose(np.asarray(merged.dense(n)), expected, rtol=1e-5)
    # Streamed in one chunk, the result is the leaf coreset on that chunk's projection.
    key = jax.random.key(3)
    streamed = cj.stream_coreset(problem["model"], [problem["data"]], 12, problem["thetas"], key, norm="l2",
                                 method="test_top_norm")
    np.testing.assert_allclose(np.asarray(streamed.dense(n)), top_norm_numpy(V, 12), rtol=1e-5)
    chunks = [jax.tree_util.tree_map(lambda a: a[i:i + 100], problem["data"]) for i in range(0, 400, 100)]
    streamed = cj.stream_coreset(problem["model"], chunks, 12, problem["thetas"], key, norm="l2",
                                 method=TOY_VECTORS)
    assert streamed.num_points == 12 and int(jnp.max(streamed.indices)) < n
    assert streamed.method == "stream_test_top_norm"


@pytest.mark.slow
def test_toy_posterior_method_through_coreset_merged_stream(problem):
    model, data, approx = problem["model"], problem["data"], problem["approx"]
    X, y = (np.asarray(a, np.float64) for a in data)
    lls = logistic_lls_numpy(np.asarray(approx.mean, np.float64), X, y)
    n = len(y)
    cs = cj.coreset(model, data, 10, "test_top_loglik", pi_hat=approx)
    expected = np.zeros(n)
    expected[np.argsort(-lls, kind="stable")[:10]] = n / 10
    np.testing.assert_allclose(np.asarray(cs.dense(n)), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="cj.coreset"):
        cj.build(problem["V"], 10, "test_top_loglik")
    # Merged over 3 shards of 134, 134, 132 rows (padding rows carry data weight 0: never selected).
    merged = cj.merged_coreset(None, 4, 3, "test_top_loglik", model=model, data=data, pi_hat=approx)
    expected = np.zeros(n)
    for c, (lo, hi) in enumerate([(0, 134), (134, 268), (268, 400)]):
        expected[lo + np.argsort(-lls[lo:hi], kind="stable")[:4]] = (hi - lo) / 4  # the shard's live rows
    np.testing.assert_allclose(np.asarray(merged.dense(n)), expected, rtol=1e-5)
    # Streamed: posterior methods target sum_n u_n L_n of the weighted node, so the total weight is N.
    chunks = [jax.tree_util.tree_map(lambda a: a[i:i + 100], data) for i in range(0, 400, 100)]
    streamed = cj.stream_coreset(model, chunks, 8, problem["thetas"], jax.random.key(2),
                                 method="test_top_loglik")
    assert streamed.num_points == 8
    assert float(jnp.sum(streamed.weights)) == pytest.approx(n, rel=1e-5)


def test_merged_posterior_reads_pi_hat_as_cj_coreset_does(problem):
    # Issue 23: "laplace", "prior" and an array of samples all start the chains, as in cj.coreset; an array's
    # start is its sample mean, so the toy method's picks are the top rows of L_n at that mean.
    model, data = problem["model"], problem["data"]
    X, y = (np.asarray(a, np.float64) for a in data)
    thetas = np.asarray(problem["thetas"], np.float64)
    merged = cj.merged_coreset(None, 4, 2, "test_top_loglik", model=model, data=data, pi_hat=problem["thetas"])
    lls = logistic_lls_numpy(thetas.mean(0), X, y)
    expected = np.zeros(400)
    for lo, hi in ((0, 200), (200, 400)):
        expected[lo + np.argsort(-lls[lo:hi], kind="stable")[:4]] = 50.0
    np.testing.assert_allclose(np.asarray(merged.dense(400)), expected, rtol=1e-5)
    by_name = cj.merged_coreset(None, 4, 2, "test_top_loglik", model=model, data=data, pi_hat="laplace")
    by_object = cj.merged_coreset(None, 4, 2, "test_top_loglik", model=model, data=data, pi_hat=problem["approx"])
    np.testing.assert_array_equal(np.asarray(by_name.dense(400)), np.asarray(by_object.dense(400)))
    prior = cj.merged_coreset(None, 4, 2, "test_top_loglik", model=model, data=data, pi_hat="prior")
    assert prior.num_points == 8
    with pytest.raises(ValueError, match="pi_hat"):
        cj.merged_coreset(None, 4, 2, "test_top_loglik", model=model, data=data, pi_hat="laplce")


def test_random_methods_need_a_key_everywhere_and_num_shards_is_explicit(problem):
    # Issue 23: cj.coreset and merged_coreset raised nothing for key=None with a random method (cj.build did).
    model, data, V = problem["model"], problem["data"], problem["V"]
    for call in (lambda: cj.build(V, 5, "uniform"),
                 lambda: cj.coreset(model, data, 5, "uniform", pi_hat=problem["thetas"]),
                 lambda: cj.merged_coreset(V, 5, 2, "uniform"),
                 lambda: cj.merged_coreset(None, 5, 2, "coreset_mcmc", model=model, data=data)):
        with pytest.raises(ValueError, match="key"):
            call()
    # A deterministic method keeps its default key, so the pipeline repeats exactly.
    a = cj.coreset(model, data, 5, "test_top_norm", norm="l2", num_features=30)
    b = cj.coreset(model, data, 5, "test_top_norm", norm="l2", num_features=30)
    np.testing.assert_array_equal(np.asarray(a.dense(400)), np.asarray(b.dense(400)))
    # The number of shards sets the coreset, so it is never taken from the machine's device count.
    with pytest.raises(ValueError, match="num_shards"):
        cj.merged_coreset(V, 5, method="test_top_norm")
    with pytest.raises(ValueError, match="num_shards"):
        cj.merged_coreset(None, 4, method="test_top_loglik", model=model, data=data)


@pytest.mark.slow
def test_toy_methods_through_the_cli_config(tmp_path, capsys):
    cfg = tmp_path / "toy.yaml"
    cfg.write_text("data: {synthetic: logistic, n: 300, seed: 1}\nnum_features: 20\nsizes: [5]\n"
                   "repeats: 1\nmethod: test_top_norm\nbaseline: test_top_loglik\n")
    assert cli.main(["run", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "test_top_norm" in out and "test_top_loglik" in out


# ---------------------------------------------------------------------------------------------------------
# Pure cores: batched calls equal loops.


@pytest.mark.parametrize("method", ["uniform", "giga", pytest.param("iht2", marks=pytest.mark.extended)])
@pytest.mark.slow
def test_build_fn_vmaps_over_keys_and_over_V(problem, method):
    V = problem["V"]
    solve = cj.build_fn(method, 15)
    keys = jax.random.split(jax.random.key(5), 4)
    batch = jax.jit(jax.vmap(solve, in_axes=(None, 0)))(V, keys)
    assert batch.weights.shape == (4, 15) and batch.batch_shape == (4,)
    assert np.asarray(batch.num_points).shape == (4,)
    for i, k in enumerate(keys):
        single = cj.build(V, 15, method, key=k)
        np.testing.assert_allclose(np.asarray(batch.dense(400)[i]), np.asarray(single.dense(400)),
                                   rtol=2e-4, atol=1e-4)
        assert bool(batch.info["finite"][i])
    # A batch of V: batched products round differently, and greedy/thresholding paths can turn on the last
    # float32 bit, so compare in float64 on well-conditioned V.
    with jax.enable_x64(True):
        Vs = (jax.random.normal(jax.random.key(6), (3, 400, 30), jnp.float64)
              + jnp.array([0.5, 1.0, 2.0], jnp.float64)[:, None, None])
        over_v = jax.jit(jax.vmap(solve, in_axes=(0, None)))(Vs, keys[0])
        for i in range(3):
            single = jax.jit(solve)(Vs[i], keys[0])
            np.testing.assert_array_equal(np.asarray(over_v.indices[i]), np.asarray(single.indices))
            np.testing.assert_allclose(np.asarray(over_v.weights[i]), np.asarray(single.weights), rtol=1e-6,
                                       atol=1e-10)


def test_build_fn_reports_finiteness_without_host_sync(problem):
    cs = jax.jit(cj.build_fn("giga", 10))(problem["V"], jax.random.key(0))
    assert bool(cs.info["finite"]) and float(cs.info["relative_error"]) == pytest.approx(
        float(cj.relative_error(problem["V"], cs)), rel=1e-4)
    with pytest.raises(ValueError, match="size"):
        cj.build_fn("giga", 0)
    with pytest.raises(ValueError, match="method"):
        cj.build_fn("sparse_vi", 10)


@pytest.mark.slow
def test_laplace_fn_vmaps_over_datasets(problem):
    X, y = problem["data"]
    stacked = (X.reshape(2, 200, -1), y.reshape(2, 200))
    fit = jax.jit(jax.vmap(cj.laplace_fn(problem["model"]), in_axes=(0, None)))
    batch = fit(stacked, jnp.zeros(3))
    for i in range(2):
        single = cj.laplace(problem["model"], (stacked[0][i], stacked[1][i]))
        np.testing.assert_allclose(np.asarray(batch.mean[i]), np.asarray(single.mean), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(batch.cov[i]), np.asarray(single.cov), rtol=1e-3, atol=1e-6)
        assert bool(batch.info["converged"][i])


@pytest.mark.slow
def test_whole_trial_vmaps_over_keys(problem):
    """pi_hat -> project -> solve -> sample -> metric as one pure function of the key."""
    model, data = problem["model"], problem["data"]
    fit = cj.laplace_fn(model)
    project = cj.project_fn(model, "fisher")
    solve = cj.build_fn("uniform", 20)
    draw = cj.sample_fn(model, "mala", num_samples=50, num_warmup=60, num_chains=1)

    def trial(key):
        k_theta, k_proj, k_solve, k_sample = jax.random.split(key, 4)
        approx = fit(data, jnp.zeros(3))
        chol = jnp.linalg.cholesky(approx.cov)
        thetas = approx.mean + jax.random.normal(k_theta, (25, 3)) @ chol.T
        cs = solve(project(k_proj, data, thetas), k_solve)
        samples, _ = draw(k_sample, take_data(data, cs.indices), cs.weights, approx.mean[None], approx.cov)
        return jnp.linalg.norm(jnp.mean(samples[0], axis=0) - approx.mean), cs.info["relative_error"]

    keys = jax.random.split(jax.random.key(11), 3)
    batched = jax.jit(jax.vmap(trial))(keys)
    looped = [jax.jit(trial)(k) for k in keys]
    for i in range(3):
        for b, l in zip(batched, looped[i]):
            np.testing.assert_allclose(float(b[i]), float(l), rtol=1e-3, atol=1e-4)


# ---------------------------------------------------------------------------------------------------------
# Stepwise chains against a density that changes between steps (what Coreset MCMC needs).


@pytest.mark.slow
def test_step_chains_follow_a_changing_target_to_the_closed_form_posterior():
    D, N, K = 2, 50, 400
    y = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D))
    model = cj.models.gaussian_mean(D)
    mean, cov = cj.models.gaussian_mean_posterior(y)
    settings = cj.inference.kernels.check_settings("mala", {})
    tuning = cj.inference.Tuning(jnp.asarray(1.0), jnp.linalg.cholesky(cov))
    positions = jax.random.normal(jax.random.key(1), (K, D)) * 3.0
    half = cj.weighted_log_density(model, y, jnp.full(N, 0.5))
    states = cj.inference.init_chains("mala", half, positions, tuning, settings)

    def body(states, xs):
        key, t = xs
        w = jnp.where(t < 100, 0.5, 1.0) * jnp.ones(N)  # the target changes at step 100
        states, info = cj.inference.step_chains(key, "mala", cj.weighted_log_density(model, y, w), states,
                                                tuning, settings)
        return states, info.acceptance_rate

    steps = 300
    states, acc = jax.jit(lambda s: jax.lax.scan(body, s, (jax.random.split(jax.random.key(2), steps),
                                                          jnp.arange(steps))))(states)
    final = np.asarray(states.position, np.float64)
    se = np.sqrt(np.diag(np.asarray(cov)) / K)
    assert np.all(np.abs(final.mean(0) - np.asarray(mean)) < 5 * se), (final.mean(0), mean)
    var_ratio = final.var(0) / np.diag(np.asarray(cov))
    assert np.all((var_ratio > 0.7) & (var_ratio < 1.4)), var_ratio
    # The cached log density was refreshed under the final target.
    full = cj.weighted_log_density(model, y, jnp.ones(N))
    np.testing.assert_allclose(np.asarray(states.logdensity), np.asarray(jax.vmap(full)(states.position)),
                               rtol=1e-4)
    assert 0.3 < float(jnp.mean(acc[-50:])) < 1.0


@pytest.mark.slow
def test_weighted_density_is_defined_once_and_masks_zero_weight_rows():
    """A row of weight 0 contributes exactly 0, even where its log-likelihood is -inf (padding slots)."""
    model = cj.Model(log_likelihood=lambda theta, x: jnp.where(x > 5, -jnp.inf, -0.5 * (x - theta[0]) ** 2),
                     log_prior=lambda theta: -0.5 * jnp.sum(theta ** 2), dim=1)
    x = jnp.array([0.5, 1.0, 9.0, 1.5])  # row 2 has log-likelihood -inf everywhere
    w = jnp.array([2.0, 1.0, 0.0, 3.0])
    theta = jnp.array([0.7])
    expected = -0.5 * (2 * 0.2 ** 2 + 0.3 ** 2 + 3 * 0.8 ** 2) - 0.5 * 0.49
    assert float(cj.weighted_log_density(model, x, w)(theta)) == pytest.approx(expected, rel=1e-6)
    assert float(cj.log_joint(model, theta, x, w)) == pytest.approx(expected, rel=1e-6)
    # Laplace on the weighted data (no init: the model states dim) equals the closed form of the
    # conjugate Gaussian: precision 1 + sum w, mean sum w x / (1 + sum w).
    approx = cj.laplace(model, x, weights=w)
    assert float(approx.mean[0]) == pytest.approx((2 * 0.5 + 1.0 + 3 * 1.5) / 7.0, rel=1e-5)
    assert float(approx.cov[0, 0]) == pytest.approx(1 / 7.0, rel=1e-4)
    assert approx.info["converged"]
    # Sampling a coreset whose slot 2 (weight 0) holds the -inf row.
    cs = cj.Coreset(jnp.arange(4), w)
    post = cj.sample(model, x, jax.random.key(0), weights=cs, method="mala", num_samples=400, num_warmup=300,
                     num_chains=2, warn=False)
    assert float(post.mean[0]) == pytest.approx((2 * 0.5 + 1.0 + 3 * 1.5) / 7.0, abs=5 * np.sqrt(1 / 7 / 100))
