"""cj.certify as a certificate to lean on (issue 34, part 2).

1. Corrected moments only where PSIS can deliver them: k-hat <= 0.7, or all importance ratios within a factor
   of 2 ("flat", where k-hat is noise). Theory for the heavy-weight case: draws from q = N(m, s_q^2 I) weighted
   towards p = N(m, s_p^2 I) with s_q < s_p have ratios exp(a |x - m|^2), a = (1/s_q^2 - 1/s_p^2) / 2, and
   |x - m|^2 / s_q^2 is chi-square, whose tail is exp(-u / 2); so P(ratio > t) ~ t^(-1 / (2 a s_q^2)), a Pareto
   tail of shape k = 2 a s_q^2 = 1 - s_q^2 / s_p^2. For the Gaussian mean model (HC §6) with every weight c,
   s_q^2 / s_p^2 = (1 + N) / (1 + c N), so k = 1 - 1/c nearly: c = 20 gives k = 0.95, c = 0.5 gives k < 0.
2. R-hat of chains, checked against a plain-NumPy rank-normalised split R-hat written here (Vehtari, Gelman,
   Simpson, Carpenter & Bürkner 2021, §4) and against the classic split R-hat's large-S value for chains whose
   means are shifted by a known amount.
"""

import numpy as np
import jax.numpy as jnp
import pytest
from scipy.special import ndtri
from scipy.stats import rankdata

import coresets_jax as cj
from coresets_jax.certification.certificate import FLAT_RATIOS, from_log_ratio

GAUSS = cj.models.gaussian_mean(2)


# ---------------------------------------------------------------------------------------------------------
# Plain-NumPy references.


def _posterior(y: np.ndarray, w: np.ndarray):
    """HC Eqs. 6.2 / 6.4 in float64, prior N(0, I): mean and covariance."""
    precision = 1.0 + w.sum()
    return (w @ y) / precision, np.eye(y.shape[1]) / precision


def _split_rhat(x: np.ndarray) -> np.ndarray:
    """Classic split R-hat (BDA3 §11.4) of (C, S, D) draws, per coordinate."""
    half = x.shape[1] // 2
    x = np.concatenate([x[:, :half], x[:, half:2 * half]])
    n = x.shape[1]
    w = x.var(axis=1, ddof=1).mean(axis=0)
    b = n * x.mean(axis=1).var(axis=0, ddof=1)
    return np.sqrt(((n - 1) / n * w + b / n) / w)


def _rank_rhat(x: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat, max of bulk and folded (Vehtari et al. 2021, Eq. 12 and §4.2)."""
    def z(v):
        c, s, d = v.shape
        ranks = np.stack([rankdata(v[..., j].ravel()) for j in range(d)], axis=-1)
        return ndtri((ranks - 0.375) / (c * s + 0.25)).reshape(v.shape)

    folded = np.abs(x - np.median(x.reshape(-1, x.shape[-1]), axis=0))
    return np.maximum(_split_rhat(z(x)), _split_rhat(z(folded)))


def _near_exact_case():
    """2000 rows and a 3-row coreset whose weights reproduce sum w = N and sum w y = sum y: pi_w = pi up to
    float32 rounding, so every importance ratio is 1 and, without chains, the verdict is "good"."""
    rng = np.random.default_rng(4)
    y = rng.normal(size=(2000, 2)) + 1.0
    w_small = -np.ones(3)
    while not np.all(w_small > 0):
        idx = rng.choice(2000, 3, replace=False)
        w_small = np.linalg.solve(np.vstack([np.ones(3), y[idx].T]), np.concatenate([[2000.0], y.sum(0)]))
    cs = cj.Coreset(jnp.asarray(idx), jnp.asarray(w_small, jnp.float32))
    dense = np.zeros(2000)
    dense[idx] = np.asarray(cs.weights, np.float64)
    return y, cs, _posterior(y.astype(np.float32).astype(np.float64), dense)


def _constant_weight_case(c: float, seed: int, n: int = 1000, draws: int = 4000):
    """Every row weighted c; i.i.d. draws of pi_w; the exact full posterior pi."""
    rng = np.random.default_rng(0)
    y = rng.normal(size=(n, 2)) + 1.0
    y64 = np.asarray(jnp.asarray(y, jnp.float32), np.float64)
    w = np.full(n, c)
    mean_w, cov_w = _posterior(y64, w)
    sample = np.random.default_rng(seed).multivariate_normal(mean_w, cov_w, size=draws)
    return y, w, sample, _posterior(y64, np.ones(n))


# ---------------------------------------------------------------------------------------------------------
# 1. Corrected moments only where k-hat <= 0.7 (or flat ratios).


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_heavy_importance_weights_withhold_the_corrected_moments(seed):
    # c = 20: pi_w is sqrt(20) times narrower than pi; the ratios' tail has shape k = 1 - 1/20 = 0.95.
    y, w, draws, _ = _constant_weight_case(20.0, seed)
    cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32), draws)
    k = 1.0 - 1.0 / 20.0
    assert cert.khat > 0.7 and abs(cert.khat - k) < 0.2, (cert.khat, k)
    assert cert.spread > FLAT_RATIOS
    assert cert.mean is None and cert.sd is None and cert.quantiles is None and not cert.has_moments
    assert cert.corrected_note.startswith("withheld: k-hat") and "0.7" in cert.corrected_note
    assert cert.verdict == "unreliable" and "k-hat" in cert.reason
    assert "withheld" in repr(cert) and "withheld" in cert.brief()
    summary = cert.summary()
    assert summary["moments"] is False and summary["corrected_note"] == cert.corrected_note
    assert summary["reason"] == cert.reason and summary["rhat"] is None  # (S, D) draws: no chains
    # The rest of the certificate is still there: weights, KL estimate, ESS.
    assert cert.weights.shape == (4000,) and np.isclose(cert.weights.sum(), 1.0) and np.isfinite(cert.kl)
    with pytest.warns(RuntimeWarning, match="withheld"):
        from coresets_jax.certification import warn_if_unreliable
        warn_if_unreliable(cert, "test")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_light_importance_weights_give_moments_of_the_exact_posterior(seed):
    # c = 0.5: pi_w is sqrt(2) times wider than pi, k = 1 - 2 < 0: bounded ratios, k-hat small.
    y, w, draws, (mean, cov) = _constant_weight_case(0.5, seed)
    cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32), draws)
    assert cert.khat < 0.5 and cert.has_moments, cert
    assert cert.corrected_note.startswith("PSIS-corrected (k-hat")
    sd = np.sqrt(np.diag(cov))
    # Self-normalised importance sampling: error about sd / sqrt(ESS) in the mean.
    assert np.all(np.abs(cert.mean - mean) < 4 * sd / np.sqrt(cert.ess)), (cert.mean, mean, cert.ess)
    assert np.allclose(cert.sd, sd, rtol=0.06), (cert.sd, sd)
    assert np.allclose(cert.quantiles[1], mean, atol=0.1 * sd[0])
    assert np.allclose(cert.quantiles[[0, 2]], mean + np.outer([-1.645, 1.645], sd), atol=0.15 * sd[0])
    assert "withheld" not in repr(cert) and "withheld" not in cert.brief()


def test_flat_ratios_keep_the_moments_whatever_khat_says():
    # The same Pareto-tailed log ratios (tail shape 1 / 0.7 = 1.4: k-hat > 0.7; k-hat of exp(eps x) is that of
    # x for small eps) scaled twice: ratios within a factor of sqrt(2) (the near-exact case, where k-hat is
    # noise) give the moments; within a factor of 4 they are withheld.
    rng = np.random.default_rng(3)
    tail = rng.pareto(0.7, size=4000)
    draws = rng.normal(size=(4000, 2))
    flat = from_log_ratio(tail * (0.5 * FLAT_RATIOS / tail.max()), draws)
    spread = from_log_ratio(tail * (2 * FLAT_RATIOS / tail.max()), draws)
    assert flat.khat > 0.7 and spread.khat > 0.7 and abs(flat.khat - spread.khat) < 0.05, (flat.khat, spread.khat)
    assert flat.spread <= FLAT_RATIOS < spread.spread
    assert flat.has_moments and flat.verdict != "unreliable"
    assert "although k-hat" in flat.corrected_note and "factor of 2" in flat.corrected_note
    # Weights within a factor of 2: the corrected moments are those of the draws up to that reweighting.
    assert np.all(np.abs(flat.mean - draws.mean(0)) < 0.5 * draws.std(0))
    assert np.all((flat.sd > 0.5 * draws.std(0)) & (flat.sd < 2 * draws.std(0)))
    assert not spread.has_moments and spread.verdict == "unreliable"
    assert spread.corrected_note.startswith("withheld")


def test_near_exact_coreset_keeps_its_moments():
    y, cs, (mean_w, cov_w) = _near_exact_case()
    draws = np.random.default_rng(0).multivariate_normal(mean_w, cov_w, size=2000)
    cert = cj.certify(GAUSS, jnp.asarray(y, jnp.float32), cs, draws)
    assert cert.verdict == "good" and cert.has_moments and cert.spread <= FLAT_RATIOS
    assert np.allclose(cert.mean, draws.mean(0), atol=1e-4 * np.sqrt(cov_w[0, 0]))


# ---------------------------------------------------------------------------------------------------------
# 2. R-hat of chains.


def _chains(mean_w, cov_w, seed: int, shift_sd: float):
    """4 chains of 1000 i.i.d. draws of pi_w; chains 0-1 moved by +shift/2 sd and 2-3 by -shift/2 sd along
    the first coordinate."""
    x = np.random.default_rng(seed).multivariate_normal(mean_w, cov_w, size=(4, 1000))
    step = 0.5 * shift_sd * np.sqrt(cov_w[0, 0])
    x[:2, :, 0] += step
    x[2:, :, 0] -= step
    return x


@pytest.mark.parametrize("seed", [10, 11])
def test_chains_that_disagree_cap_the_verdict_at_usable(seed):
    y, cs, (mean_w, cov_w) = _near_exact_case()
    data = jnp.asarray(y, jnp.float32)
    shift = 0.5
    x = _chains(mean_w, cov_w, seed, shift)
    cert = cj.certify(GAUSS, data, cs, x)
    # Against the plain-NumPy rank-normalised split R-hat, and against ArviZ's (an independent implementation).
    assert np.allclose(cert.rhat_by_coord, _rank_rhat(x), rtol=0, atol=1e-10)
    import arviz as az

    ds = az.convert_to_dataset({"theta": x})
    assert np.allclose(cert.rhat_by_coord, az.rhat(ds)["theta"].values, rtol=0, atol=1e-10)
    assert np.allclose(cert.ess_bulk_by_coord, az.ess(ds, method="bulk")["theta"].values, rtol=0.02)
    # Theory: 8 split halves whose means sit at +-shift/2 sd: B / (n W) -> 8 (shift/2)^2 / 7, so the classic
    # split R-hat tends to sqrt(1 - 1/n + 2 shift^2 / 7) = 1.034 with n = 500 draws per half.
    theory = np.sqrt(1 - 1 / 500 + 2 * shift ** 2 / 7)
    assert abs(_split_rhat(x)[0] - theory) < 0.01, (_split_rhat(x)[0], theory)
    assert cert.rhat == pytest.approx(float(np.max(cert.rhat_by_coord))) and cert.rhat > 1.02
    assert cert.rhat_by_coord[1] < 1.01  # the unshifted coordinate mixes
    # The importance ratios are all 1 (pi_w = pi), so only the chains stop the verdict from being good.
    assert cert.spread <= FLAT_RATIOS and cert.kl < 1e-6
    assert cert.verdict == "usable" and cert.chains_disagree
    assert "R-hat" in cert.reason and "at best usable" in cert.reason
    assert "R-hat" in repr(cert) and "R-hat" in cert.brief() and cert.summary()["rhat"] == cert.rhat
    assert cert.to_arviz().attrs["rhat"] == cert.rhat
    # The same draws, well mixed (no shift): R-hat about 1 and the verdict good.
    mixed = cj.certify(GAUSS, data, cs, _chains(mean_w, cov_w, seed, 0.0))
    assert np.allclose(mixed.rhat_by_coord, _rank_rhat(_chains(mean_w, cov_w, seed, 0.0)), atol=1e-10)
    assert mixed.rhat < 1.01 and mixed.verdict == "good" and not mixed.chains_disagree, mixed
    # i.i.d. draws: the bulk ESS is about the number of draws.
    assert 0.85 * 4000 < mixed.ess_bulk <= float(np.max(mixed.ess_bulk_by_coord)) < 1.15 * 4000
    assert "R-hat" not in repr(mixed) and "R-hat" not in mixed.brief()


def test_one_chain_or_flat_draws_have_no_rhat():
    y, cs, (mean_w, cov_w) = _near_exact_case()
    data = jnp.asarray(y, jnp.float32)
    x = _chains(mean_w, cov_w, 12, 0.5)
    for draws in (x.reshape(-1, 2), x[:1]):  # (S, D), and one chain (1, S, D)
        cert = cj.certify(GAUSS, data, cs, draws)
        assert cert.rhat is None and cert.rhat_by_coord is None and not cert.chains_disagree
        assert cert.verdict == "good"  # flat, near-exact ratios: the draws' order is not checked
        assert cert.ess_bulk is not None and cert.ess_bulk_by_coord.shape == (2,)
        assert "rhat" not in cert.to_arviz().attrs


def test_stuck_chains_have_undefined_rhat_and_are_not_good():
    # 4 chains that never moved from one point: every ratio equal (flat), but R-hat is 0/0 and the draws
    # certainly are not from pi_w.
    draws = np.broadcast_to(np.asarray([1.0, 2.0]), (4, 50, 2)).copy()
    cert = from_log_ratio(np.zeros(200), draws)
    assert np.isnan(cert.rhat) and cert.chains_disagree
    assert cert.verdict == "usable" and "undefined" in cert.reason
