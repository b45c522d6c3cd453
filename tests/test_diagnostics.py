"""The host (NumPy) R-hat and bulk ESS of `cj.sample` against `blackjax.diagnostics`."""

import blackjax
import jax
import numpy as np
import pytest

from coresets_jax.inference import diagnostics as dg


def _ar1(rng, chains, draws, dim, phi):
    x = np.zeros((chains, draws, dim))
    noise = rng.standard_normal((chains, draws, dim))
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def _cases():
    rng = np.random.default_rng(0)
    shape = (4, 101, 3)  # one shape, so blackjax's jitted reference compiles once; odd draws test the split
    return {
        "iid": rng.standard_normal(shape),
        "ar1_0.9": _ar1(rng, *shape, 0.9),
        "ar1_-0.7": _ar1(rng, *shape, -0.7),
        "shifted_chains": _ar1(rng, *shape, 0.3) + 0.5 * np.arange(4)[:, None, None],
        "ties": rng.integers(0, 4, shape).astype(np.float64),
    }


@pytest.fixture(scope="module")
def reference():
    ess = jax.jit(blackjax.diagnostics.ess_bulk)
    rhat = jax.jit(blackjax.diagnostics.rhat)
    return {name: (np.asarray(rhat(x.astype(np.float32))), np.asarray(ess(x.astype(np.float32))))
            for name, x in _cases().items()}


@pytest.mark.parametrize("name", list(_cases()))
def test_matches_blackjax(name, reference):
    x = _cases()[name]
    rhat_ref, ess_ref = reference[name]
    # blackjax runs in float32 here (x64 off); the NumPy version in float64
    np.testing.assert_allclose(dg.rhat(x), rhat_ref, rtol=2e-4)
    np.testing.assert_allclose(dg.ess_bulk(x), ess_ref, rtol=2e-3)


def test_unterminated_autocorrelation_sequence_matches_blackjax():
    # Chains so short and sticky that Geyer's positive sequence never ends (its last pair is then the
    # lone term, as in blackjax)
    x = _ar1(np.random.default_rng(1), 2, 100, 2, 0.99)
    ref = np.asarray(jax.jit(blackjax.diagnostics.ess_bulk)(x.astype(np.float32)))
    np.testing.assert_allclose(dg.ess_bulk(x), ref, rtol=2e-3)


def test_edge_cases():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 60, 3))
    x[:, :, 1] = 2.0  # constant: ESS 0, R-hat undefined
    x[0, 5, 2] = np.nan  # a NaN: both undefined for that coordinate only
    ess, rhat = dg.ess_bulk(x), dg.rhat(x)
    assert ess[1] == 0.0 and np.isnan(ess[2]) and np.isfinite(ess[0])
    assert np.isnan(rhat[1]) and np.isnan(rhat[2]) and np.isfinite(rhat[0])
    # one chain: ESS from its two halves, R-hat reported as NaN by `summary`
    r, e = dg.summary(rng.standard_normal((1, 200, 2)).astype(np.float32), have_chains=False)
    assert np.all(np.isnan(r)) and np.all(e > 50) and e.dtype == np.float32
    # independent draws: ESS near the number of draws, R-hat near 1
    r, e = dg.summary(rng.standard_normal((4, 1000, 2)), have_chains=True)
    assert np.all(np.abs(r - 1) < 0.01) and np.all(e > 2500)


def test_rank_normalisation_matches_scipy():
    """Average ranks and Blom scores in NumPy and the standard library against SciPy's rankdata and ndtri,
    with ties, runs of ties at both ends, and a NaN column."""
    from scipy.special import ndtri
    from scipy.stats import rankdata

    rng = np.random.default_rng(3)
    x = np.stack([rng.standard_normal(400), rng.integers(0, 5, 400).astype(float),
                  np.round(rng.standard_normal(400), 1), np.r_[np.zeros(100), rng.standard_normal(200), np.ones(100)],
                  rng.standard_normal(400)], axis=1).reshape(4, 100, 5)
    x[2, 7, 4] = np.nan
    flat = x.reshape(400, 5)
    z = dg._rank_normalise(x).reshape(400, 5)
    for j in range(4):
        ranks = rankdata(flat[:, j], method="average")
        np.testing.assert_array_equal(dg._average_ranks(flat[:, j:j + 1])[:, 0], ranks)
        np.testing.assert_allclose(z[:, j], ndtri((ranks - 0.375) / 400.25), rtol=1e-14, atol=1e-14)
    assert np.all(np.isnan(z[:, 4]))
