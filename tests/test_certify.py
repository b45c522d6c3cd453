"""cj.certify: the one-pass importance-sampling certificate of a coreset (issue 22).

Theory: for the Gaussian mean model (HC §6) pi and pi_w are Gaussian in closed form (Eqs. 6.2 and 6.4), so
KL(pi_w || pi) is exact and draws from pi_w are i.i.d.; the log ratio r is checked against a plain-NumPy
float64 computation written here.
"""

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj

GAUSS = cj.models.gaussian_mean(2)


def _posterior(y: np.ndarray, w: np.ndarray):
    """HC Eqs. 6.2 / 6.4 in float64: mean and covariance of the (weighted) posterior, prior N(0, I)."""
    precision = 1.0 + w.sum()
    return (w @ y) / precision, np.eye(y.shape[1]) / precision


def _gaussian_kl(m0, s0, m1, s1) -> float:
    """KL(N(m0, s0) || N(m1, s1)) in float64."""
    inv = np.linalg.inv(s1)
    d = m0.size
    return 0.5 * float(np.trace(inv @ s0) + (m1 - m0) @ inv @ (m1 - m0) - d
                       + np.log(np.linalg.det(s1) / np.linalg.det(s0)))


def _gaussian_case(seed: int, n: int, size: int):
    """Data, a uniform coreset of `size` rows (weights n / size) as dense weights, and i.i.d. draws from its
    exact posterior."""
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(n, 2)) + 1.0
    w = np.zeros(n)
    w[rng.choice(n, size, replace=False)] = n / size
    mean_w, cov_w = _posterior(y, w)
    draws = rng.multivariate_normal(mean_w, cov_w, size=4000)
    return y, w, draws


def test_kl_estimate_matches_the_exact_gaussian_kl_within_its_monte_carlo_error():
    for seed, size in ((0, 300), (1, 600), (2, 900), (3, 600)):  # exact KL from 0.003 to 1.3 nats
        y, w, draws = _gaussian_case(seed, 1000, size)
        cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32), draws)
        exact = _gaussian_kl(*_posterior(np.asarray(jnp.asarray(y, jnp.float32), np.float64), w),
                             *_posterior(np.asarray(jnp.asarray(y, jnp.float32), np.float64), np.ones(1000)))
        assert abs(cert.kl - exact) <= 4 * cert.kl_se, (seed, size, cert.kl, exact, cert.kl_se)
        assert 0.1 * exact < cert.kl_se * np.sqrt(4000) < 10 * max(exact, 1e-3)  # the error is a real one


def test_near_exact_coreset_certifies_good_and_its_kl_is_tiny():
    # A coreset whose weights reproduce the sufficient statistics (sum w = N, sum w y = sum y) has pi_w = pi.
    rng = np.random.default_rng(4)
    y = rng.normal(size=(2000, 2)) + 1.0
    w_small = -np.ones(3)
    while not np.all(w_small > 0):  # three rows whose triangle holds the mean: 3 equations, 3 weights > 0
        idx = rng.choice(2000, 3, replace=False)
        w_small = np.linalg.solve(np.vstack([np.ones(3), y[idx].T]), np.concatenate([[2000.0], y.sum(0)]))
    cs = cj.Coreset(jnp.asarray(idx), jnp.asarray(w_small, jnp.float32))
    dense = np.zeros(2000)
    dense[idx] = np.asarray(cs.weights, np.float64)
    mean_w, cov_w = _posterior(y.astype(np.float32).astype(np.float64), dense)
    draws = rng.multivariate_normal(mean_w, cov_w, size=2000)
    cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), cs, draws)
    exact = _gaussian_kl(mean_w, cov_w, *_posterior(y.astype(np.float32).astype(np.float64), np.ones(2000)))
    assert cert.khat < 0.5 and cert.verdict == "good", cert
    assert cert.kl <= exact + 4 * cert.kl_se + 1e-9, (cert.kl, exact)
    assert cert.ess > 0.99 * 2000


@pytest.mark.slow
def test_khat_flags_uniform_m10_at_n_1e5_and_passes_a_greedy_coreset():
    rng = np.random.default_rng(5)
    n = 100_000
    y = jnp.asarray(rng.normal(size=(n, 2)) + 1.0, jnp.float32)
    y64 = np.asarray(y, np.float64)
    uniform = cj.build(jnp.ones((n, 1)), 10, "uniform", jax.random.key(0))
    omp = cj.coreset(GAUSS, y, 20, "omp", key=jax.random.key(1))
    for cs, bad in ((uniform, True), (omp, False)):
        mean_w, cov_w = _posterior(y64, np.asarray(cs.dense(n), np.float64))
        draws = rng.multivariate_normal(mean_w, cov_w, size=2000)
        cert = cj.certify(GAUSS, y, cs, draws)
        if bad:
            assert cert.khat > 0.7 and cert.verdict == "unreliable", cert
        else:
            assert cert.khat < 0.5 and cert.verdict == "good", cert


def test_corrected_mean_is_closer_to_the_exact_mean_in_9_of_10_seeds():
    # Uniform 400 of 1000 rows. The corrected moments exist only where k-hat <= 0.7 (issue 34): at 300 rows,
    # as this test had, 6 of these 10 seeds have k-hat > 0.7 and get none; at 400 rows one seed (k-hat 0.78)
    # has none, and the corrected mean must beat the plain one in each of the other nine.
    closer = 0
    for seed in range(10):
        y, w, draws = _gaussian_case(100 + seed, 1000, 400)
        y32 = np.asarray(jnp.asarray(y, jnp.float32), np.float64)
        mean, cov = _posterior(y32, np.ones(1000))
        cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32), draws)
        if cert.mean is None:
            assert cert.khat > 0.7 and cert.spread > np.log(2) and cert.sd is None and cert.quantiles is None
            assert cert.corrected_note.startswith("withheld"), cert.corrected_note
            continue
        corrected = np.linalg.norm(cert.mean - mean)
        plain = np.linalg.norm(draws.mean(0) - mean)
        closer += corrected < plain
        # k-hat <= 0.7: the corrected sd and median are pi's too, within MC error
        assert np.allclose(cert.sd, np.sqrt(np.diag(cov)), rtol=0.2), (seed, cert)
        assert np.allclose(cert.quantiles[1], mean, atol=0.5 * np.sqrt(cov[0, 0])), (seed, cert)
    assert closer >= 9, closer


def test_verdict_reads_khat_and_the_kl_estimate():
    from coresets_jax.certification.certificate import verdict

    assert verdict(0.2, 0.01) == "good"
    assert verdict(0.6, 0.01) == verdict(0.2, 0.2) == "usable"
    assert verdict(0.2, 5.0) == verdict(0.69, 0.5) == "poor"  # a wide, shifted pi_w: k-hat alone passes it
    assert verdict(0.7, 0.0) == verdict(float("inf"), 0.0) == verdict(float("nan"), 0.0) == "unreliable"
    # Ratios within a factor of 2 of each other cannot make weighting unreliable: k-hat is noise there.
    assert verdict(1.2, 1e-8, spread=1e-3) == "good" and verdict(1.2, 1e-8, spread=1.0) == "unreliable"
    # Chains that disagree (R-hat > 1.01, or NaN: stuck) are not draws from pi_w: at best "usable".
    assert verdict(0.2, 0.01, rhat=1.005) == verdict(0.2, 0.01, rhat=None) == "good"
    assert verdict(0.2, 0.01, rhat=1.02) == verdict(0.2, 0.01, rhat=float("nan")) == "usable"
    assert verdict(1.2, 1e-8, spread=1e-3, rhat=1.5) == "usable"
    assert verdict(0.2, 5.0, rhat=1.5) == "poor" and verdict(0.9, 0.0, rhat=1.5) == "unreliable"


def _numpy_log_ratio(X, y, dense, draws):
    """r_s = sum_n L_n - sum_n w_n L_n for logistic regression, L_n = -log(1 + exp(-y_n x_n^T theta))."""
    z = (y[:, None] * X) @ draws.T                            # (N, S)
    lls = -np.logaddexp(0.0, -z)
    return lls.sum(0) - dense @ lls


@pytest.mark.parametrize("precision,tol", [("float64", 1e-9), ("float32", 2e-3)])
def test_log_ratio_matches_numpy_on_logistic_regression(precision, tol):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(500, 3))
    y = np.where(rng.random(500) < 1 / (1 + np.exp(-X @ [1.0, -2.0, 0.5])), 1.0, -1.0)
    cs = cj.Coreset(jnp.asarray([3, 17, 17, 250, 0]), jnp.asarray([90.0, 80.0, 60.0, 120.0, 0.0]))
    draws = rng.normal(size=(2, 40, 3)) * 0.3 + [1.0, -2.0, 0.5]
    X32, y32 = np.asarray(X, np.float32), np.asarray(y, np.float32)
    r_numpy = _numpy_log_ratio(X32.astype(np.float64), y32.astype(np.float64),
                               np.asarray(cs.dense(500), np.float64), draws.reshape(80, 3))
    cert = cj.certify(cj.models.logistic_regression(), (jnp.asarray(X32), jnp.asarray(y32)), cs, draws,
                      precision=precision)
    r_numpy -= r_numpy.mean()
    assert np.max(np.abs(cert.log_ratio - r_numpy)) < tol * max(1.0, np.abs(r_numpy).max())
    # Self-normalised weights are exp(r) smoothed: the largest r gets the largest weight.
    assert int(np.argmax(cert.weights)) == int(np.argmax(r_numpy))


def test_float32_pass_keeps_the_heavily_weighted_coreset_term_exact():
    """precision="float32" evaluates the full-data term in float32 but the coreset's in float64: a weight
    w_m ~ N / M multiplies each row's float32 rounding (about 1e-7 |L_m|), which here would be ~1e-2 nat,
    a hundred times the whole variation that matters between nearby draws."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2000, 3))
    y = np.where(rng.random(2000) < 1 / (1 + np.exp(-X @ [1.0, -2.0, 0.5])), 1.0, -1.0)
    cs = cj.Coreset(jnp.asarray(np.arange(0, 200, 20)), jnp.full(10, 1e5, jnp.float32))
    draws = np.asarray(rng.normal(size=(2, 40, 3)) * 1e-3 + [1.0, -2.0, 0.5], np.float32)  # a tight posterior
    X32, y32 = np.asarray(X, np.float32), np.asarray(y, np.float32)
    r_numpy = _numpy_log_ratio(X32.astype(np.float64), y32.astype(np.float64),
                               np.asarray(cs.dense(2000), np.float64), draws.reshape(80, 3).astype(np.float64))
    r_numpy -= r_numpy.mean()
    cert = cj.certify(cj.models.logistic_regression(), (jnp.asarray(X32), jnp.asarray(y32)), cs, draws,
                      precision="float32")
    assert np.max(np.abs(cert.log_ratio - r_numpy)) < 1e-4


def test_chunked_streamed_and_memory_mapped_passes_equal_the_single_pass(tmp_path):
    ds = cj.data.synthetic_logistic(jax.random.key(0), 1000)
    model, data = cj.models.logistic_regression(), ds.train
    cs = cj.build(jnp.asarray(np.random.default_rng(0).normal(size=(1000, 4)), jnp.float32), 20, "uniform",
                  jax.random.key(1))
    draws = np.random.default_rng(1).normal(size=(60, 3)) * 0.1 + [3.0, 3.0, 0.0]
    one = cj.certify(model, data, cs, draws)
    chunks = [jax.tree_util.tree_map(lambda a: a[i:i + 300], data) for i in range(0, 1000, 300)]
    np.save(tmp_path / "X.npy", np.asarray(data[0]))
    np.save(tmp_path / "y.npy", np.asarray(data[1]))
    mapped = (np.load(tmp_path / "X.npy", mmap_mode="r"), np.load(tmp_path / "y.npy", mmap_mode="r"))
    for other in (cj.certify(model, data, cs, draws, chunk_size=7),      # in memory, 7-row steps
                  cj.certify(model, chunks, cs, draws),                   # a list of chunks
                  cj.certify(model, iter(chunks), cs.dense(1000), draws),  # a generator, dense weights
                  cj.certify(model, mapped, cs, draws, chunk_size=128)):  # a memory-mapped file
        assert np.allclose(other.log_ratio, one.log_ratio, atol=1e-9, rtol=0)
        assert other.khat == pytest.approx(one.khat, abs=1e-6)


SHARDED = textwrap.dedent("""
    import json, jax, jax.numpy as jnp, numpy as np, coresets_jax as cj
    assert len(jax.devices()) == 4
    ds = cj.data.synthetic_logistic(jax.random.key(0), 4000)
    model = cj.models.logistic_regression()
    cs = cj.coreset(model, ds.train, 30, "giga", key=jax.random.key(1))
    draws = np.random.default_rng(2).normal(size=(2, 50, 3)) * 0.05 + [3.0, 3.0, 0.0]
    one = cj.certify(model, ds.train, cs, draws)
    sharded = cj.shard(ds.train)
    four = cj.certify(model, sharded, cs, draws)
    print("JSON" + json.dumps({"maxdiff": float(np.max(np.abs(one.log_ratio - four.log_ratio))),
                               "sharded": len(sharded[0].sharding.device_set) == 4,
                               "khat": [one.khat, four.khat]}))
""")


@pytest.mark.slow
def test_sharded_over_four_devices_equals_the_single_pass():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SHARDED], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads([l for l in proc.stdout.splitlines() if l.startswith("JSON")][-1][4:])
    assert out["sharded"]
    assert out["maxdiff"] < 1e-9, out
    assert out["khat"][0] == pytest.approx(out["khat"][1], abs=1e-6)


def test_bad_input_raises_clear_value_errors():
    ds = cj.data.synthetic_logistic(jax.random.key(0), 200)
    model, data = cj.models.logistic_regression(), ds.train
    cs = cj.build(jnp.ones((200, 2)), 10, "uniform", jax.random.key(0))
    draws = np.random.default_rng(0).normal(size=(50, 3))
    other = cj.build(jnp.ones((500, 2)), 10, "uniform", jax.random.key(0))
    other_settings = cj.Coreset(cs.indices, cs.weights, settings={"N": 500})
    nan_draws = draws.copy()
    nan_draws[3, 1] = np.nan
    cases = [((model, data, cs, draws[:, :2]), "draws"),           # wrong D
             ((model, data, other, draws), "coreset"),              # indices from a larger data set
             ((model, data, other_settings, draws), "coreset"),     # built on N = 500 rows
             ((model, data, cs, nan_draws), "draws"),
             ((model, data, cs, draws[:5]), "draws"),               # too few for PSIS
             ((model, data, cs, None), "draws"),                    # no draws, and none in cs.info
             ((model, data, jnp.ones(7), draws), "coreset"),
             ((model, data, cs.dense(200) * -1.0, draws), "coreset"),
             (("model", data, cs, draws), "model")]
    # Same N, other rows: the digest that cj.coreset records tells them apart.
    built = cj.coreset(model, data, 10, "giga", key=jax.random.key(1), num_features=20)
    shuffled = jax.tree_util.tree_map(lambda a: a[::-1], data)
    cases.append(((model, shuffled, built, draws), "other data"))
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            cj.certify(*args)
    with pytest.raises(ValueError, match="precision"):
        cj.certify(model, data, cs, draws, precision="float16")


def test_a_full_data_overflow_is_reported_not_returned_as_nan():
    # Poisson with an exp link, with a term rate * (y - 1) that is 0 for these y = 1 rows: at theta x > 709
    # the rate overflows even in float64, and 0 * inf = NaN. The coreset's rows (x <= 1) stay finite.
    def log_likelihood(theta, datum):
        x, y = datum
        rate = jnp.exp(theta[0] * x)
        return y * theta[0] * x - rate + rate * (y - 1.0) - jax.scipy.special.gammaln(y + 1.0)

    model = cj.Model(log_likelihood, lambda t: -0.5 * jnp.sum(t ** 2), dim=1)
    x = jnp.concatenate([jnp.linspace(0.0, 1.0, 99), jnp.asarray([400.0])])
    y = jnp.ones(100)
    cs = cj.Coreset(jnp.arange(5), jnp.full(5, 20.0))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="overflow"):
        cj.certify(model, (x, y), cs, rng.uniform(2.0, 3.0, size=(40, 1)))
    # Where the full data give L_n = -inf (the other form, y theta x - rate), a draw gets weight 0, with a
    # warning; the certificate stays finite.
    def finite_form(theta, datum):
        x, y = datum
        return y * theta[0] * x - jnp.exp(theta[0] * x) - jax.scipy.special.gammaln(y + 1.0)

    draws = np.concatenate([rng.uniform(-0.1, 0.1, size=(36, 1)), rng.uniform(2.0, 3.0, size=(4, 1))])
    with pytest.warns(RuntimeWarning, match="4 of 40 draws"):
        cert = cj.certify(cj.Model(finite_form, model.log_prior, dim=1), (x, y), cs, draws)
    assert np.all(cert.weights[36:] == 0) and np.isfinite(cert.kl) and np.isfinite(cert.khat)


def test_to_arviz_carries_the_weights_and_the_reprs_mention_the_certificate():
    y, w, draws = _gaussian_case(7, 500, 200)
    cs = cj.Coreset(jnp.asarray(np.flatnonzero(w)), jnp.asarray(w[w > 0], jnp.float32))
    cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), cs, draws[None, :1000])
    idata = cert.to_arviz()
    weights = np.asarray(idata.sample_stats["importance_weight"])
    assert weights.shape == (1, 1000) and np.isclose(weights.sum(), 1.0)
    assert np.allclose(weights.ravel(), cert.weights)
    assert idata.attrs["verdict"] == cert.verdict
    assert "certificate=" in repr(cs.with_certificate(cert)) and "certificate=" not in repr(cs)
    assert cert.verdict in repr(cert)


@pytest.mark.slow
def test_numpyro_model_with_coreset_mcmc_draws_and_cj_sample_certify():
    import numpyro
    import numpyro.distributions as dist

    def logreg(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    ds = cj.data.synthetic_logistic(jax.random.key(0), 2000)
    X, labels = ds.train
    model, data = cj.from_numpyro(logreg, X, y=(labels > 0).astype(jnp.float32))
    cs = cj.coreset(model, data, 50, "coreset_mcmc", key=jax.random.key(1), num_iters=300, certify=True)
    assert cs.certificate is not None and cs.certificate.num_draws == cs.info["samples"].size // 3
    again = cj.certify(model, data, cs)                       # draws=None: Coreset MCMC's own draws
    assert again.khat == pytest.approx(cs.certificate.khat, abs=1e-9)
    post = cj.sample(model, data, jax.random.key(2), weights=cs, method="rwmh", num_samples=200, num_warmup=200,
                     certify=True, warn=False)
    assert post.certificate is not None and "certificate=" in repr(post)
    assert set(post.certificate.to_arviz().posterior.data_vars) == {"beta"}
    # The corrected mean moves towards full-data NUTS's, never further than the plain one by much.
    full = cj.sample(model, data, jax.random.key(3), num_samples=500, num_warmup=500, warn=False)
    sd = np.asarray(full.samples.reshape(-1, 3).std(0))
    plain = np.abs(np.asarray(post.samples.reshape(-1, 3).mean(0) - full.mean)) / sd
    if post.certificate.mean is None:  # k-hat > 0.7 over spread ratios: no corrected moments (issue 34)
        assert post.certificate.khat > 0.7 and post.certificate.corrected_note.startswith("withheld")
    else:
        corrected = np.abs(post.certificate.mean - np.asarray(full.mean)) / sd
        assert np.max(corrected) < max(0.5, 1.5 * np.max(plain)), (plain, corrected)
    with pytest.raises(ValueError, match="certify"):
        cj.sample(model, data, jax.random.key(2), certify=True)
