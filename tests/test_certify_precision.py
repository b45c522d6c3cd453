"""cj.certify's precision="auto" (the default): the float32 data pass, kept only where a float64 pass at some of
the draws shows its error negligible (`certification.passes.audited_log_ratio`).

References: r in float64 from plain NumPy written here (logistic regression), and a coreset that is exact by
construction (every row the same value, one row weighted N: r = 0 at every draw), where float32 rounding adds
up linearly over the rows and the audit must reject it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.certification import passes


def _numpy_logistic_log_ratio(X, y, dense_w, draws):
    """float64 r_s = sum_n L_n - sum_n w_n L_n for the logistic model L_n = -log(1 + exp(-y_n x_n . theta))."""
    lls = -np.logaddexp(0.0, -(y[:, None] * (X @ draws.T)))
    return lls.sum(0) - dense_w @ lls


def _logistic_case(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.asarray(rng.normal(size=(n, 3)), np.float32)
    y = np.asarray(np.where(rng.random(n) < 1 / (1 + np.exp(-X @ [1.0, -2.0, 0.5])), 1.0, -1.0), np.float32)
    cs = cj.Coreset(jnp.asarray(rng.choice(n, 50, replace=False)), jnp.full(50, n / 50, jnp.float32))
    draws = np.asarray(rng.normal(size=(2, 200, 3)) * 0.02 + [1.0, -2.0, 0.5], np.float32)
    r = _numpy_logistic_log_ratio(X.astype(np.float64), y.astype(np.float64), np.asarray(cs.dense(n), np.float64),
                                  draws.reshape(-1, 3).astype(np.float64))
    return (jnp.asarray(X), jnp.asarray(y)), cs, draws, r - r.mean()


def test_auto_below_the_work_threshold_is_the_float64_pass():
    data, cs, draws, r_numpy = _logistic_case(n=2_000)
    model = cj.models.logistic_regression()
    assert 2_000 * 400 < passes.AUDIT_MIN_WORK
    auto = cj.certify(model, data, cs, draws)  # the default
    exact = cj.certify(model, data, cs, draws, precision="float64")
    assert auto.precision == "float64" and "below" in auto.precision_note
    np.testing.assert_array_equal(auto.log_ratio, exact.log_ratio)
    assert np.max(np.abs(auto.log_ratio - r_numpy)) < 1e-8


def test_auto_keeps_an_audited_float32_pass_within_its_stated_error(monkeypatch):
    monkeypatch.setattr(passes, "AUDIT_MIN_WORK", 0)
    data, cs, draws, r_numpy = _logistic_case()
    model = cj.models.logistic_regression()
    cert = cj.certify(model, data, cs, draws)
    exact = cj.certify(model, data, cs, draws, precision="float64")
    assert cert.precision == "float32, audited", cert.precision_note
    assert 0 < cert.precision_error <= passes.AUDIT_MAX_ERROR
    err = cert.log_ratio - r_numpy
    err -= err.mean()
    # the bound is estimated from 32 of the 400 draws: it must hold at all of them
    assert np.max(np.abs(err)) <= cert.precision_error
    assert np.max(np.abs(exact.log_ratio - r_numpy)) < 1e-8
    shift, kl_se = passes.kl_shift_bound(exact.log_ratio, cert.precision_error)
    assert abs(cert.kl - exact.kl) <= max(shift, 1e-12)
    # and it is the float32 pass: the same r as precision="float32"
    np.testing.assert_array_equal(cert.log_ratio, cj.certify(model, data, cs, draws, precision="float32").log_ratio)


def test_auto_rejects_float32_when_repeated_rows_add_their_rounding_linearly(monkeypatch):
    """N copies of one value, one copy weighted N: the coreset is exact, r = 0 at every draw. In float32 every
    row rounds the same way at a draw, so the full-data term errs by about N eps |L_n|, far above 1e-3 nat."""
    monkeypatch.setattr(passes, "AUDIT_MIN_WORK", 0)
    n = 100_000
    model = cj.models.gaussian_mean(2)
    data = jnp.full((n, 2), 3.3, jnp.float32)
    cs = cj.Coreset(jnp.asarray([7]), jnp.asarray([float(n)], jnp.float32))
    draws = np.asarray(np.random.default_rng(0).normal(size=(2, 100, 2)) * 0.003 + 3.3, np.float32)
    f32 = cj.certify(model, data, cs, draws, precision="float32")
    assert np.ptp(f32.log_ratio) > 10 * passes.AUDIT_MAX_ERROR  # float32 alone is badly off here
    auto = cj.certify(model, data, cs, draws)
    assert auto.precision == "float64" and "erred" in auto.precision_note, auto.precision_note
    assert auto.precision_error > passes.AUDIT_MAX_ERROR
    assert np.max(np.abs(auto.log_ratio)) < 1e-6  # exact: r = 0 up to float64 rounding
    assert auto.kl < 1e-10


def test_auto_reads_a_chunked_source_once_in_float64(monkeypatch):
    monkeypatch.setattr(passes, "AUDIT_MIN_WORK", 0)
    data, cs, draws, r_numpy = _logistic_case(n=4_000)
    chunks = [jax.tree_util.tree_map(lambda x: np.asarray(x[i:i + 1_000]), data) for i in range(0, 4_000, 1_000)]
    cert = cj.certify(cj.models.logistic_regression(), chunks, cs, draws)
    assert cert.precision == "float64" and "chunked" in cert.precision_note
    assert np.max(np.abs(cert.log_ratio - r_numpy)) < 1e-8


def test_audit_draws_take_the_heaviest_and_spread_the_rest():
    r = np.random.default_rng(0).normal(size=1000)
    picked = passes.audit_draws(r, 32)
    assert picked.size == 32 and np.all(np.diff(picked) > 0)
    assert set(np.argsort(-r)[:16]) <= set(picked)
    rest = np.setdiff1d(picked, np.argsort(-r)[:16])
    assert rest.min() < 100 and rest.max() > 900  # spread over the run, not bunched
    np.testing.assert_array_equal(passes.audit_draws(r[:20], 32), np.arange(20))


def test_kl_shift_bound_bounds_the_change_of_the_kl_estimate():
    rng = np.random.default_rng(1)
    r = rng.normal(size=500) * 0.3

    def kl(x):
        top = x.max()
        return top + np.log(np.mean(np.exp(x - top))) - x.mean()

    for _ in range(20):
        e = rng.uniform(-1, 1, size=500) * 1e-3
        shift, se = passes.kl_shift_bound(r, 1e-3)
        assert abs(kl(r + e) - kl(r)) <= shift * (1 + 1e-6)
    assert se > 0


def test_precision_is_validated():
    data, cs, draws, _ = _logistic_case(n=500)
    with pytest.raises(ValueError, match="precision"):
        cj.certify(cj.models.logistic_regression(), data, cs, draws, precision="float16")
