"""R-hat and bulk ESS on the host, in NumPy (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021).

`cj.sample` computes these once per call on a small (chains, draws, D) array. As a jitted program they cost
about 2 s of XLA compilation on a first call (sorting, FFTs, scans), and microseconds to milliseconds in
NumPy, so they run here. The conventions are those of `blackjax.diagnostics` (and ArviZ's defaults), which
`tests/test_diagnostics.py` checks them against:

- split chains: each chain is cut into two halves (an odd last draw is dropped), so 2C chains of S // 2;
- rank normalisation: average ranks r over all pooled draws of a coordinate, z = Phi^-1((r - 3/8) / (n + 1/4))
  (Blom's plotting position, Eq. 12 of the paper);
- R-hat: the larger of the split R-hat of the rank-normalised draws (bulk) and of the rank-normalised draws
  folded about their pooled median (tail), paper §4.2;
- bulk ESS: the split, rank-normalised draws' ESS, with autocorrelations from FFTs and Geyer's initial
  monotone sequence (paper §3.2, Stan's estimator, with blackjax's handling of the lone last term).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["ess_bulk", "rhat", "summary"]


def _split(x: np.ndarray, drop_middle: bool = False) -> np.ndarray:
    """(C, S, D) -> (2C, S // 2, D): the first and second half of every chain. With S odd one draw goes: the
    last (blackjax, `cj.sample`) or, with `drop_middle`, the middle one (ArviZ)."""
    half = x.shape[1] // 2
    second = x[:, x.shape[1] - half:] if drop_middle else x[:, half:2 * half]
    return np.concatenate([x[:, :half], second], axis=0)


def _average_ranks(flat: np.ndarray) -> np.ndarray:
    """(n, D) ranks 1..n of each column's values, ties sharing the mean of their ranks (SciPy's
    `rankdata(method="average")`; NaN columns are overwritten by the caller)."""
    n = flat.shape[0]
    order = np.argsort(flat, axis=0, kind="stable")
    ranks = np.empty(flat.shape, np.float64)
    for j in range(flat.shape[1]):
        values = flat[order[:, j], j]
        starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))  # first of each tie run
        ends = np.append(starts[1:], n)
        run = np.repeat(np.arange(starts.size), ends - starts)
        ranks[order[:, j], j] = ((starts + 1 + ends) / 2.0)[run]  # the mean of ranks starts+1 .. ends
    return ranks


def _blom_scores(ranks: np.ndarray, n: int) -> np.ndarray:
    """Phi^-1((r - 3/8) / (n + 1/4)) elementwise. The standard library's inverse normal CDF (Wichura's
    AS241, ~1e-16) runs once per distinct rank, a multiple of 1/2: SciPy's ndtri would cost SciPy's import
    (~0.35 s) on every fresh process."""
    distinct, where = np.unique(ranks, return_inverse=True)
    inv_cdf = NormalDist().inv_cdf
    z = np.array([inv_cdf(float(p)) for p in (distinct - 0.375) / (n + 0.25)], np.float64)
    return z[where].reshape(ranks.shape)


def _rank_normalise(x: np.ndarray) -> np.ndarray:
    """Blom z-scores of the average ranks over all chains and draws, per coordinate; NaN where a
    coordinate holds a NaN (it has no ranking)."""
    c, s = x.shape[:2]
    flat = x.reshape(c * s, -1)
    nan = np.isnan(flat).any(axis=0)
    z = _blom_scores(_average_ranks(np.where(nan, 0.0, flat)), c * s)
    z[:, nan] = np.nan
    return z.reshape(x.shape)


def _psrf(x: np.ndarray) -> np.ndarray:
    """Gelman–Rubin potential scale reduction of (C, S, D) draws: sqrt(((S - 1) / S W + B / S) / W)."""
    s = x.shape[1]
    within = np.mean(np.var(x, axis=1, ddof=1), axis=0)
    between = s * np.var(np.mean(x, axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + s - 1) / s)


def rhat(samples) -> np.ndarray:
    """(D,) rank-normalised split R-hat, max(bulk, folded), of (chains, draws, D) samples (chains >= 1)."""
    x = _split(np.asarray(samples, np.float64))
    bulk = _psrf(_rank_normalise(x))
    folded = np.abs(x - np.median(x.reshape(-1, x.shape[-1]), axis=0))
    return np.maximum(bulk, _psrf(_rank_normalise(folded)))


def _autocorrelation(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rho (S, D), W (D,)) of (C, S, D) draws: the autocorrelations at lags 0 .. S-1 combined over chains,
    rho_t = 1 - (W - mean_c acov_t) / var+, var+ = (S - 1) / S W + B / S (Stan's estimator), and W, the mean
    within-chain variance (ddof 1). rho_0 is set to 1 exactly; NaN or inf where var+ is 0 (constant draws)."""
    c, s = x.shape[:2]
    centred = x - x.mean(axis=1, keepdims=True)
    size = 1 << int(np.ceil(np.log2(2 * s)))  # zero padding: no circular wrap-around
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :s] / s  # biased, per chain
    mean_acov = acov.mean(axis=0)  # (S, D)
    within = mean_acov[0] * s / (s - 1.0)  # mean within-chain variance (ddof 1)
    var_plus = within * (s - 1.0) / s
    if c > 1:
        var_plus = var_plus + np.var(x.mean(axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within - mean_acov) / var_plus  # rho[0] = 1 up to rounding; set exactly below
    rho[0] = 1.0
    return rho, within


def _ess(x: np.ndarray) -> np.ndarray:
    """(D,) effective sample size of (C, S, D) draws: C S / tau, tau = -1 + 2 sum_k Gamma_k - rho_2K, with
    Gamma_k = rho_2k + rho_2k+1 summed while positive and made non-increasing (Geyer 1992)."""
    c, s = x.shape[:2]
    rho, within = _autocorrelation(x)
    constant = ~np.any(x != x[:, :1], axis=(0, 1)) | ~(within > 0)
    rho = np.where(constant, 0.0, rho)  # their ESS is 0 (set below); 0 keeps NaN out of the sums
    even = s - s % 2
    rho_even, rho_odd = rho[0:even:2], rho[1:even:2]  # (P, D) each, P = S // 2
    positive = np.cumprod(rho_even + rho_odd > 0, axis=0).astype(bool)  # initial positive sequence
    stop = positive.sum(axis=0)  # K: the first pair that is not positive (P if none)
    pair = np.arange(rho_even.shape[0])[:, None]
    # Stan's refinement: the lone rho_2K joins the sum when it is positive.
    rho_even = np.where(positive | ((pair == stop) & (rho_even > 0)), rho_even, 0.0)
    gamma = rho_even + np.where(positive, rho_odd, 0.0)
    monotone = np.minimum.accumulate(gamma, axis=0)  # initial monotone sequence
    lowered = np.concatenate([np.zeros_like(gamma[:1], bool), gamma[1:] > monotone[:-1]])
    rho_even = np.where(lowered, monotone / 2, rho_even)
    # tau = -1 + 2 sum_k Gamma_k - rho_2K: the lone last term counts once (the last pair when K = P,
    # as blackjax's clamped index does)
    last = rho_even[np.minimum(stop, rho_even.shape[0] - 1), np.arange(rho_even.shape[1])]
    tau = -1.0 + 2.0 * monotone.sum(axis=0) - last
    n = c * s
    tau = np.maximum(tau, 1.0 / np.log10(n))
    ess = n / tau
    ess = np.where(constant, 0.0, ess)
    return np.where(np.isnan(x).any(axis=(0, 1)), np.nan, ess)


def ess_bulk(samples) -> np.ndarray:
    """(D,) bulk effective sample size of (chains, draws, D) samples: the ESS of the split,
    rank-normalised draws."""
    return _ess(_rank_normalise(_split(np.asarray(samples, np.float64))))


def summary(samples, have_chains: bool) -> tuple[np.ndarray, np.ndarray]:
    """(rhat, ess) of (chains, draws, D) samples as `cj.sample` reports them: R-hat is NaN with one chain."""
    x = np.asarray(samples)
    ess = ess_bulk(x)
    r = rhat(x) if have_chains else np.full(x.shape[-1], np.nan)
    dtype = x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64
    return r.astype(dtype), ess.astype(dtype)
