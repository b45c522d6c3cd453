"""The screening certificate (`certification.screen`): r_s from a subsample with a second-order Taylor control
variate, checked against a plain-NumPy difference estimator, against the full pass, and against theory (exact
where the log-likelihood is quadratic in theta)."""

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj
from coresets_jax.certification import passes, screen


def _draws(center, scale, s=300, seed=1):
    rng = np.random.default_rng(seed)
    return np.asarray(center, np.float64) + scale * rng.standard_normal((s, len(center)))


def _full_r(model, data, cs, draws):
    r, zero = passes.log_ratio(model, data, cs, draws, precision="float64")
    assert zero == 0
    return r - r.mean()


def test_the_screen_is_exact_where_every_log_likelihood_is_quadratic():
    # Gaussian rows with known scale: L_n is quadratic in theta, so q_n = L_n and the remainder is 0 on any
    # subsample. The screen must equal the full pass to rounding, and measure no error.
    d, n = 3, 6000
    model = cj.models.gaussian_mean(d)
    data = cj.data.synthetic_gaussian(jax.random.key(0), n, dim=d, mean=jnp.ones(d))
    cs = cj.coreset(model, data, size=20, method="omp", key=jax.random.key(1))
    draws = _draws(np.ones(d), 0.05)
    got = screen.screened_log_ratio(model, data, cs, draws, seed=0, rows=512)
    np.testing.assert_allclose(got.r - got.r.mean(), _full_r(model, data, cs, draws), atol=1e-7)
    assert got.noise < 1e-8 and got.rows == 512


def _logistic_numpy(X, y, theta):
    """(S, N) log-likelihoods at thetas (S, D), in float64 NumPy."""
    s = np.where(y > 0, 1.0, -1.0)
    eta = theta @ X.T
    ll = -np.logaddexp(0.0, -s * eta)
    return ll


def test_the_screen_matches_a_numpy_difference_estimator_and_its_error_estimate_is_honest():
    n, d = 40_000, 4
    ds = cj.data.synthetic_logistic(jax.random.key(0), n, theta=(1.0, -1.0, 0.5, 0.0))
    X, y = ds.X, ds.y
    X64, y64 = np.asarray(X, np.float64), np.asarray(y, np.float64)
    model = cj.models.logistic_regression()
    cs = cj.coreset(model, (X, y), size=30, method="omp", key=jax.random.key(1))
    mode = np.asarray(cj.laplace(model, (X, y), key=jax.random.key(2)).mean, np.float64)
    draws = _draws(mode, 0.02)
    m, seed = 4096, 7
    got = screen.screened_log_ratio(model, (X, y), cs, draws, seed=seed, rows=m)

    # the same estimator, written out in NumPy with the logistic model's closed-form derivatives
    flat = draws
    center = flat[np.argmin(np.sum((flat - flat.mean(0)) ** 2, axis=1))]
    s = np.where(y64 > 0, 1.0, -1.0)
    p = 1.0 / (1.0 + np.exp(s * (X64 @ center)))  # sigmoid(-s eta)
    grads = (s * p)[:, None] * X64
    hess_w = -p * (1.0 - p)
    delta = flat - center

    def taylor(rows):
        g = grads[rows].sum(0)
        h = (X64[rows] * hess_w[rows, None]).T @ X64[rows]
        return delta @ g + 0.5 * np.einsum("si,ij,sj->s", delta, h, delta)

    groups = screen.subsample_groups(n, m, seed)
    everything = np.arange(n)
    estimates = []
    for rows in groups:
        ll = _logistic_numpy(X64[rows], y64[rows], flat) - _logistic_numpy(X64[rows], y64[rows], center[None])
        estimates.append(taylor(everything) + n / rows.size * (ll.sum(1) - taylor(rows)))
    idx, w = np.asarray(cs.indices), np.asarray(cs.weights, np.float64)
    core = ((_logistic_numpy(X64[idx], y64[idx], flat) - _logistic_numpy(X64[idx], y64[idx], center[None]))
            * w).sum(1)
    want = np.mean(estimates, axis=0) - core
    np.testing.assert_allclose(got.r - got.r.mean(), want - want.mean(), atol=1e-6)
    # the error of the mean of K group estimates, draw by draw, from their spread (centred over the draws)
    k = len(estimates)
    spread = np.stack([e - np.mean(estimates, axis=0) for e in estimates])
    spread = spread - spread.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(got.noise, np.sqrt(np.mean(np.sum(spread ** 2, axis=0)) / (k * (k - 1))),
                               rtol=1e-6)
    assert k == screen.GROUPS and groups.shape == (k, m // k)

    # against the full pass: the error is of the size the groups say (within a factor of 3), and at draws two
    # posterior sds from the mode it stays below 0.01 nat (from 10% of the rows)
    exact = _full_r(model, (X, y), cs, draws)
    true_error = np.std((got.r - got.r.mean()) - exact)
    assert got.noise / 3 <= true_error <= 3 * got.noise, (true_error, got.noise)
    assert true_error < 0.01


def test_a_screened_certificate_agrees_with_cj_certify_and_says_it_was_screened():
    n, d = 40_000, 3
    ds = cj.data.synthetic_logistic(jax.random.key(3), n)
    X, y = ds.X, ds.y
    model = cj.models.logistic_regression()
    cs = cj.coreset(model, (X, y), size=40, method="omp", key=jax.random.key(4))
    post = cj.sample(model, (X, y), jax.random.key(5), weights=cs, num_samples=300, num_warmup=300, num_chains=2,
                     warn=False)
    cert, noise = screen.screened_certificate(model, (X, y), cs, post.samples, seed=0, rows=8192)
    full = cj.certify(model, (X, y), cs, post.samples, precision="float64")
    assert cert.precision == "screened" and cert.precision_error == noise and "8192" in cert.precision_note
    shift, _ = passes.kl_shift_bound(full.log_ratio, 4 * noise)  # to first order in the error, plus the
    shift += (4 * noise) ** 2 / 2  # second order: a KL near 0 moves by about var(e) / 2
    assert abs(cert.kl - full.kl) <= shift, (cert.kl, full.kl, shift)
    assert cert.verdict == full.verdict


def test_the_screen_declines_where_the_log_likelihood_is_not_finite_at_the_centre():
    # rows whose log-likelihood is -inf at every theta (a zero-probability observation): no Taylor expansion
    def log_likelihood(theta, datum):
        return jnp.where(datum[0] > 0, -0.5 * jnp.sum((datum - theta) ** 2), -jnp.inf)

    model = cj.Model(log_likelihood=log_likelihood, log_prior=lambda t: -0.5 * jnp.sum(t ** 2), name="masked")
    data = jnp.asarray(np.random.default_rng(0).standard_normal((3000, 2)))
    cs = cj.Coreset(jnp.arange(4), jnp.ones(4))
    assert screen.screened_log_ratio(model, data, cs, _draws(np.zeros(2), 0.1), seed=0, rows=256) is None


def _big_logistic(n, outliers=0):
    ds = cj.data.synthetic_logistic(jax.random.key(8), n, theta=(1.0, -0.5, 0.5, 0.0))
    X, y = np.asarray(ds.X), np.asarray(ds.y)
    if outliers:  # rows whose log-likelihood bends sharply across the posterior: far from quadratic there
        X = X.copy()
        X[:outliers, 0] = 400.0
    return cj.models.logistic_regression(), (jnp.asarray(X), jnp.asarray(y))


def _draws_near_mode(model, data, s=1100):
    fit = cj.laplace(model, data, key=jax.random.key(9))
    rng = np.random.default_rng(3)
    chol = np.linalg.cholesky(np.asarray(fit.cov, np.float64))
    return np.asarray(fit.mean, np.float64) + 1.5 * rng.standard_normal((s, chol.shape[0])) @ chol.T


def test_certify_takes_the_audited_screen_at_large_n_within_its_stated_bound():
    # N = 2^17, S = 1,100 (N x S above passes.AUDIT_MIN_WORK): precision "auto" takes the screen, audited
    # against float64 at 32 draws; its r must lie within the bound it states of the float64 pass's, at every
    # draw, and its KL within the shift that bound allows.
    model, data = _big_logistic(screen.SCREEN_MIN_ROWS)
    cs = cj.coreset(model, data, size=24, method="omp", key=jax.random.key(1))
    draws = _draws_near_mode(model, data)
    auto = cj.certify(model, data, cs, draws)
    full = cj.certify(model, data, cs, draws, precision="float64")
    assert auto.precision == "screened, audited", auto.precision_note
    error = np.asarray(auto.log_ratio) - np.asarray(full.log_ratio)
    error -= error.mean()
    assert np.max(np.abs(error)) <= auto.precision_error <= screen.SCREEN_MAX_ERROR
    first, _ = passes.kl_shift_bound(full.log_ratio, auto.precision_error)
    assert abs(auto.kl - full.kl) <= first + auto.precision_error ** 2 / 2
    assert auto.verdict == full.verdict


def test_certify_falls_back_to_the_full_pass_where_a_few_rows_defeat_the_screen():
    # Five rows add a kink, -1000 |theta_0 - 1|, inside the posterior's bulk: their Hessian is 0 at the
    # centre, so the Taylor terms miss the kink, and a subsample of 1/8 of the rows either misses those rows
    # (the audit against the full pass sees the error) or scales them 8x (the groups disagree). The
    # certificate must then come from the full pass.
    model, (X, y) = _big_logistic(screen.SCREEN_MIN_ROWS)
    base = model.log_likelihood
    kinked = jnp.zeros(X.shape[0]).at[:5].set(1.0)

    def log_likelihood(theta, datum):
        return base(theta, (datum["x"], datum["y"])) - 1000.0 * datum["kink"] * jnp.abs(theta[0] - 1.0)

    model = cj.Model(log_likelihood=log_likelihood, log_prior=model.log_prior, dim=4, name="kinked")
    data = {"x": X, "y": y, "kink": kinked}
    cs = cj.Coreset(jnp.arange(5, 105), jnp.full(100, X.shape[0] / 100.0))
    fit = cj.laplace(model, data, key=jax.random.key(9))
    draws = np.asarray(fit.mean, np.float64) + 0.01 * np.random.default_rng(3).standard_normal((1100, 4))
    assert screen.audited_screen(model, data, cs, draws) is None
    auto = cj.certify(model, data, cs, draws)
    full = cj.certify(model, data, cs, draws, precision="float64")
    assert auto.precision in ("float32, audited", "float64")
    assert abs(auto.kl - full.kl) <= 1e-3 * max(full.kl, 1.0)
