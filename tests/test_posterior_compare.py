"""The paired KL comparison of two coresets (`posterior_driven/compare.py`): against a NumPy transcription of
(P1), against the closed-form KL of Gaussian-location coreset posteriors, and as a decision rule against the
old one (the smaller of two independent importance-sampling estimates)."""

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj
from coresets_jax.posterior_driven.common import kl_estimate
from coresets_jax.posterior_driven.compare import MIN_ESS, better, one_sided, paired_kl_difference

D, N, M, S = 3, 200, 10, 500


def problem():
    y = np.asarray(cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D)), np.float64)
    idx = np.random.default_rng(0).choice(N, M, replace=False)
    return y, idx


def exact_kl(y, idx, w):
    """KL(pi_w || pi) in closed form, float64: Gaussian location gives pi_w = N(sum w y / (1 + sum w),
    I / (1 + sum w)) and pi the same with every weight 1."""
    pw, p = 1.0 + w.sum(), 1.0 + N
    mw, m = (w @ y[idx]) / pw, y.sum(0) / p
    return 0.5 * (D * p / pw + p * np.sum((m - mw) ** 2) - D + D * np.log(pw / p))


def exact_draws(rng, y, idx, w, s=S):
    precision = 1.0 + w.sum()
    return (w @ y[idx]) / precision + rng.standard_normal((s, D)) / np.sqrt(precision)


def lls_np(thetas, rows):
    return -0.5 * ((thetas[:, None, :] - rows[None, :, :]) ** 2).sum(-1)


def round_of(rng, y, idx, w):
    """(coreset log-likelihoods, full-data log-likelihood) at S exact draws of pi_w."""
    t = exact_draws(rng, y, idx, w)
    return lls_np(t, y[idx]), lls_np(t, y).sum(1)


def p1_numpy(h, rho):
    """(P1) transcribed: E_b[h - rho] + E_a[rho] - log E_a[exp h], E_b by self-normalised weights exp(h)."""
    e = np.exp(h - h.max())
    return np.sum(e * (h - rho)) / np.sum(e) + rho.mean() - (np.log(e.mean()) + h.max())


def weights_pair(y, idx, gap):
    """w_a at KL ~ 0.5 nats (an exact coreset, perturbed), and w_b on the line through w_a and the exact
    coreset with KL(b) - KL(a) = gap (bisection)."""
    base = np.full(M, N / M)
    A = np.vstack([np.ones(M), y[idx].T])
    w_opt = base + np.linalg.lstsq(A, np.concatenate([[N], y.sum(0)]) - A @ base, rcond=None)[0]
    assert w_opt.min() > 0 and exact_kl(y, idx, w_opt) < 1e-10
    direction = np.random.default_rng(5).standard_normal(M)
    w_a = w_opt * (1 + 0.45 * direction / np.abs(direction).max())
    ka = exact_kl(y, idx, w_a)
    line = lambda t: w_a + t * (w_a - w_opt)  # noqa: E731  (t > 0: away from the exact coreset)
    lo, hi = (0.0, 1.0) if gap > 0 else (-1.0, 0.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if exact_kl(y, idx, line(mid)) - ka < gap else (lo, mid)  # KL rises with t
    w_b = line(0.5 * (lo + hi))
    return w_a, w_b, ka, exact_kl(y, idx, w_b)


def test_one_sided_matches_numpy_and_is_zero_for_equal_weights():
    y, idx = problem()
    rng = np.random.default_rng(1)
    w_a, w_b, _, _ = weights_pair(y, idx, 0.05)
    lls, t = round_of(rng, y, idx, w_a)
    h, rho = lls @ (w_b - w_a), t - lls @ w_a
    delta, se, ess = one_sided(jnp.asarray(h, jnp.float32), jnp.asarray(rho, jnp.float32))
    np.testing.assert_allclose(float(delta), p1_numpy(h, rho), rtol=1e-3, atol=1e-4)
    e = np.exp(h - h.max())
    np.testing.assert_allclose(float(ess), e.sum() ** 2 / (e ** 2).sum() / S, rtol=1e-4)
    assert 0 < float(se) < 0.05
    same = paired_kl_difference(*(jnp.asarray(a, jnp.float32) for a in (lls, t, w_a, lls, t, w_a)))
    assert float(same.delta) == 0.0 and float(same.ess) == 1.0


def test_paired_difference_against_the_closed_form_and_its_standard_error():
    y, idx = problem()
    w_a, w_b, ka, kb = weights_pair(y, idx, 0.05)
    assert 0.3 < ka < 1.0 and abs(kb - ka - 0.05) < 1e-6, (ka, kb)
    paired, se, unpaired = [], [], []
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        a = [jnp.asarray(v, jnp.float32) for v in round_of(rng, y, idx, w_a)]
        b = [jnp.asarray(v, jnp.float32) for v in round_of(rng, y, idx, w_b)]
        wa, wb = jnp.asarray(w_a, jnp.float32), jnp.asarray(w_b, jnp.float32)
        c = paired_kl_difference(a[0], a[1], wa, b[0], b[1], wb)
        assert float(c.ess) > MIN_ESS and bool(c.paired)
        paired.append(float(c.delta))
        se.append(float(c.se))
        unpaired.append(float(kl_estimate(b[0], b[1], wb) - kl_estimate(a[0], a[1], wa)))
    paired, unpaired = np.array(paired), np.array(unpaired)
    truth = kb - ka
    # Unbiased to within its own noise, and its standard error is calibrated (factor 1.5 either way).
    assert abs(paired.mean() - truth) < 3 * paired.std() / np.sqrt(len(paired)) + 2e-3, (paired.mean(), truth)
    assert 1 / 1.5 < np.median(se) / paired.std() < 1.5, (np.median(se), paired.std())
    # The pairing is what makes the comparison resolvable: 3x less error than independent estimates.
    rmse = lambda x: np.sqrt(np.mean((x - truth) ** 2))  # noqa: E731
    assert rmse(paired) < rmse(unpaired) / 3, (rmse(paired), rmse(unpaired))


def test_decision_never_takes_a_worse_coreset_where_the_old_rule_often_did():
    y, idx = problem()
    decisions = {}
    for gap in (0.03, -0.15):
        w_a, w_b, ka, kb = weights_pair(y, idx, gap)
        old, new = 0, 0
        for seed in range(30):
            rng = np.random.default_rng(1000 + seed)
            a = [jnp.asarray(v, jnp.float32) for v in round_of(rng, y, idx, w_a)]
            b = [jnp.asarray(v, jnp.float32) for v in round_of(rng, y, idx, w_b)]
            wa, wb = jnp.asarray(w_a, jnp.float32), jnp.asarray(w_b, jnp.float32)
            kl_a, kl_b = kl_estimate(a[0], a[1], wa), kl_estimate(b[0], b[1], wb)
            old += int(kl_b < kl_a)  # the old rule: the smaller independent estimate
            new += int(better(paired_kl_difference(a[0], a[1], wa, b[0], b[1], wb), kl_a, kl_b))
        decisions[gap] = (old, new)
    # b is worse by 0.03 nats: the old rule took it in a large share of rounds, the paired test never.
    assert decisions[0.03][0] >= 5 and decisions[0.03][1] == 0, decisions
    # b is better by 0.15 nats: the paired test takes it (almost) every time.
    assert decisions[-0.15][1] >= 27, decisions
