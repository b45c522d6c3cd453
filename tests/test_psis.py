"""`certification.psis`: our PSIS and ESS of the mean against ArviZ's (`psislw`, `ess(method="mean")`), the
reference they replace so that `cj.certify` need not import ArviZ (about a second of a fresh process)."""

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from coresets_jax.certification.psis import ess_mean, psis_log_weights
from coresets_jax.interop.arviz_export import load_arviz

az = load_arviz()


def _reference(log_ratios: np.ndarray, reff: float):
    with warnings.catch_warnings():  # ArviZ's k-hat warnings
        warnings.simplefilter("ignore")
        log_w, khat = az.psislw(log_ratios.copy(), reff=reff)
    return np.asarray(log_w), float(khat)


def _assert_matches_arviz(log_ratios: np.ndarray, reff: float = 1.0) -> float:
    ref_w, ref_k = _reference(log_ratios, reff)
    log_w, khat = psis_log_weights(log_ratios, reff)
    if np.isfinite(ref_k):
        assert khat == pytest.approx(ref_k, abs=1e-10)
    else:
        assert np.isinf(khat) and np.isinf(ref_k)
    finite = np.isfinite(ref_w)
    np.testing.assert_array_equal(np.isfinite(log_w), finite)
    np.testing.assert_allclose(log_w[finite], ref_w[finite], rtol=0, atol=1e-10)
    assert np.exp(log_w).sum() == pytest.approx(1.0, abs=1e-12)
    return khat


def _log_ratios(kind: str, size: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.normal(size=size)
    if kind == "student_t":  # |t_3| ratios: a tail of shape 1/3
        return np.log(np.abs(rng.standard_t(3, size=size)))
    if kind == "clumped":  # rounded: ties, also at the tail's cutoff
        return np.round(rng.normal(size=size), 1)
    if kind == "zero_weights":  # as `from_log_ratio` passes non-finite r: 1e3 below the smallest finite one
        r = rng.normal(size=size)
        r[rng.random(size) < 0.2] = r.min() - 1e3
        return r
    shape = float(kind.removeprefix("pareto_"))  # log of Pareto draws: exponential, tail shape `shape`
    return 1e3 + shape * rng.standard_exponential(size)  # an offset that the weights do not see


KINDS = ["normal", "student_t", "clumped", "zero_weights", "pareto_0.3", "pareto_0.7", "pareto_1.2"]


@pytest.mark.parametrize("size", [100, 1000, 4000])
@pytest.mark.parametrize("reff", [1.0, 0.6])
@pytest.mark.parametrize("kind", KINDS)
def test_psis_matches_arviz(kind, reff, size):
    rng = np.random.default_rng([KINDS.index(kind), size])
    khat = _assert_matches_arviz(_log_ratios(kind, size, rng), reff)
    if kind.startswith("pareto") and size == 4000:  # k-hat near the tail's shape (these seeds; SE ~0.1-0.15)
        assert khat == pytest.approx(float(kind.removeprefix("pareto_")), abs=0.25)


def test_psis_edge_cases_match_arviz():
    rng = np.random.default_rng(7)
    for size in (2, 3, 5, 10, 20, 21, 30):  # M = ceil(S / 5) <= 4 tail draws up to S = 20: k-hat inf
        khat = _assert_matches_arviz(rng.normal(size=size))
        assert np.isinf(khat) == (size <= 20)
    for size in (5, 100, 1000):  # all ratios equal: no tail above the cutoff, uniform weights
        khat = _assert_matches_arviz(np.full(size, 3.7))
        assert np.isinf(khat)
    _assert_matches_arviz(np.r_[np.zeros(900), np.ones(100)])  # the tail is exactly the ties above the cutoff
    _assert_matches_arviz(np.r_[np.zeros(997), np.ones(3)])  # too few above the tied cutoff
    _assert_matches_arviz(np.r_[rng.normal(size=500), np.full(500, -np.inf)])  # weight 0 draws
    _assert_matches_arviz(rng.normal(size=1000) * 800.0)  # most ratios underflow: the cutoff is held at tiny
    _assert_matches_arviz(rng.normal(size=1000), reff=0.01)  # small reff: the tail is S / 5


def test_psis_single_draw_and_bad_input():
    log_w, khat = psis_log_weights(np.array([2.5]))  # (ArviZ raises an IndexError here)
    assert log_w.tolist() == [0.0] and np.isinf(khat)
    with pytest.raises(ValueError, match="reff"):
        psis_log_weights(np.zeros(10), reff=0.0)
    with pytest.raises(ValueError, match="one-dimensional"):
        psis_log_weights(np.zeros((2, 10)))
    r = np.random.default_rng(0).normal(size=50)
    kept = r.copy()
    psis_log_weights(r)
    np.testing.assert_array_equal(r, kept)  # the input is not smoothed in place


def _ar1(rng, chains: int, draws: int, phi: float) -> np.ndarray:
    x = np.zeros((chains, draws))
    noise = rng.standard_normal((chains, draws))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


@pytest.mark.parametrize("chains", [1, 2, 4])
def test_ess_mean_matches_arviz(chains):
    # Long, short and odd chains; positive and negative (antithetic) autocorrelation; sticky chains whose
    # autocorrelation sequence never turns negative (ArviZ truncates those otherwise than blackjax does)
    rng = np.random.default_rng(chains)
    for draws in (4, 5, 8, 21, 100, 101, 1000):
        for phi in (0.0, 0.5, 0.9, 0.99, -0.7):
            x = _ar1(rng, chains, draws, phi)
            for values in (x, np.exp(x)):  # and skewed ones, as importance ratios are
                assert ess_mean(values) == pytest.approx(float(az.ess(values, method="mean")), rel=1e-8)


def test_ess_mean_edge_cases():
    rng = np.random.default_rng(3)
    assert ess_mean(np.full((2, 50), 0.3)) == float(az.ess(np.full((2, 50), 0.3), method="mean")) == 100.0
    x = rng.normal(size=(2, 50))
    x[0, 0] = np.nan
    assert np.isnan(ess_mean(x))
    assert np.isnan(ess_mean(rng.normal(size=(2, 3))))  # fewer than 4 draws per chain
    one = rng.normal(size=200)
    assert ess_mean(one) == pytest.approx(float(az.ess(one, method="mean")), rel=1e-8)  # 1-D: one chain


CERTIFY_WITHOUT_ARVIZ = textwrap.dedent("""
    import sys
    import jax
    import numpy as np
    import coresets_jax as cj

    rng = np.random.default_rng(0)
    y = rng.normal(size=(200, 2)) + 1.0
    w = np.zeros(200)
    w[:40] = 5.0
    draws = rng.normal(size=(2, 100, 2)) * 0.07 + y[:40].mean(axis=0)  # two chains: reff by our ESS too
    cert = cj.certify(cj.models.gaussian_mean(2), jax.numpy.asarray(y), jax.numpy.asarray(w), draws)
    assert np.isfinite(cert.khat) and 0 < cert.reff <= 1, cert
    post = cj.sample(cj.models.gaussian_mean(2), jax.numpy.asarray(y), jax.random.key(0), weights=w,
                     num_samples=50, num_warmup=50, num_chains=2)  # its R-hat and ESS too
    assert np.all(np.isfinite(post.rhat)), post.rhat
    print("scipy.stats imported:", "scipy.stats" in sys.modules)
    print("arviz imported:", "arviz" in sys.modules)
""")


def test_certify_and_sample_import_neither_arviz_nor_scipy_stats():
    """A fresh process pays neither import (ArviZ 0.5-0.9 s, SciPy's stats 0.35 s)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", CERTIFY_WITHOUT_ARVIZ], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-2:] == ["scipy.stats imported: False", "arviz imported: False"]
