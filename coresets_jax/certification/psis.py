"""Pareto-smoothed importance sampling (PSIS) and the ESS of the raw ratios, on the host in NumPy.

`cj.certify` needs both on S numbers. ArviZ has them (`arviz.psislw`, `arviz.ess(..., method="mean")`), but
importing ArviZ costs about a second of a fresh process, more than the rest of a small certificate, so they
are here. They follow ArviZ's conventions, edge cases included, which `tests/test_psis.py` checks them against
to rounding:

- PSIS: Vehtari, Simpson, Gelman, Yao & Gabry (JMLR 2024), Algorithm 1 and Appendix. The M = ceil(min(S / 5,
  3 sqrt(S / r_eff))) largest ratios above the (M+1)-th largest are the tail; a generalized Pareto
  distribution is fitted to their excess over it by Zhang & Stephens' (2009) empirical Bayes estimate, its
  shape k shrunk toward 0.5 as by 10 draws (the weakly informative prior of the paper's reference code);
  the tail is replaced by the fitted quantiles at (i - 1/2) / M and capped at the largest raw ratio.
  With 4 or fewer tail draws there is no fit: k-hat is inf and the ratios are only normalised.
- ESS of the mean: split chains (ArviZ drops the middle draw of an odd chain) and Stan's estimator with
  Geyer's initial monotone sequence, truncated as Stan and ArviZ do (`inference.diagnostics` holds the
  shared autocorrelation; its `_ess` truncates as blackjax does, which differs for short or antithetic
  chains).
"""

from __future__ import annotations

import math

import numpy as np

from ..inference import diagnostics

__all__ = ["ess_mean", "psis_log_weights"]

_MIN_TAIL = 5  # fewer tail draws than this and the Pareto fit is not attempted (k-hat inf), as in ArviZ
_PRIOR_K_DRAWS = 10  # the prior on k counts as this many draws at k = 0.5 (the paper's reference code)


def psis_log_weights(log_ratios: np.ndarray, reff: float = 1.0) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log importance weights and k-hat (Vehtari et al., JMLR 2024, Algorithm 1).

    Args:
      log_ratios: (S,) log importance ratios; -inf is a draw of weight 0.
      reff: relative efficiency of the draws (ESS / S of the ratios), which sets the tail size.

    Returns:
      (log_weights (S,), k-hat): the smoothed log weights, normalised to logsumexp 0, and the estimated
      Pareto shape of the ratios' tail (< 0.5 good, 0.5-0.7 usable, > 0.7 unreliable). k-hat is inf, and the
      weights only normalised, with 4 or fewer tail draws (few draws, or ties at the cutoff); it is NaN and
      the weights unsmoothed where the fit degenerates.
    """
    if not reff > 0:
        raise ValueError(f"reff must be positive, got {reff}")
    x = np.array(log_ratios, dtype=np.float64)  # a copy: the tail is replaced in place
    if x.ndim != 1:
        raise ValueError(f"log_ratios must be one-dimensional, got shape {x.shape}")
    size = x.size
    x -= np.max(x)  # the largest ratio becomes 1: no overflow in exp
    khat = math.inf
    tail_size = math.ceil(min(size / 5.0, 3.0 * math.sqrt(size / reff)))
    if size > tail_size:
        # The tail lies strictly above the (M+1)-th largest ratio, so ties there shorten it. The cutoff is
        # kept at or above the smallest normal double so that exp() of the tail does not underflow.
        cutoff = max(np.partition(x, size - tail_size - 1)[size - tail_size - 1], np.log(np.finfo(float).tiny))
        tail = np.flatnonzero(x > cutoff)
        if tail.size >= _MIN_TAIL:
            tail = tail[np.argsort(x[tail])]  # ascending: the i-th smallest gets the i-th quantile
            floor = np.exp(cutoff)
            with np.errstate(divide="ignore", invalid="ignore"):  # a degenerate fit is NaN, handled below
                khat, scale = _gpd_fit(np.exp(x[tail]) - floor)
            if np.isfinite(khat) and scale > 0:
                probs = (np.arange(tail.size) + 0.5) / tail.size
                x[tail] = np.log(_gpd_quantile(probs, khat, scale) + floor)
                np.minimum(x, 0.0, out=x)  # no smoothed ratio above the largest raw one
    return x - _logsumexp(x), float(khat)


def _logsumexp(x: np.ndarray) -> float:
    """log sum exp(x) of values whose maximum is finite (here 0: no overflow), without SciPy's import."""
    top = np.max(x)
    return float(top + np.log(np.sum(np.exp(x - top))))


def _gpd_fit(excess: np.ndarray) -> tuple[float, float]:
    """(k, sigma) of a generalized Pareto distribution fitted to sorted positive `excess` values: Zhang &
    Stephens' (2009) posterior mean of theta = -k / sigma over a grid of prior quantiles, the profile
    likelihood's k at it, then k shrunk toward 0.5 by a prior worth `_PRIOR_K_DRAWS` draws."""
    n = excess.size
    grid_size = 30 + int(math.sqrt(n))
    first_quartile = excess[int(n / 4 + 0.5) - 1]
    j = np.arange(1, grid_size + 1, dtype=np.float64)
    # Quantiles of Zhang & Stephens' prior on theta: all below 1 / max(excess), so that 1 - theta x > 0
    theta = (1.0 - np.sqrt(grid_size / (j - 0.5))) / (3.0 * first_quartile) + 1.0 / excess[-1]
    k_at = np.mean(np.log1p(-theta[:, None] * excess), axis=1)  # the likelihood's k given theta
    profile = n * (np.log(-theta / k_at) - k_at - 1.0)  # log-likelihood at (theta, k_at(theta))
    weights = np.exp(profile - np.max(profile))
    weights /= np.sum(weights)
    keep = weights >= 10 * np.finfo(float).eps  # grid points of negligible posterior mass drop out
    weights, theta = weights[keep] / np.sum(weights[keep]), theta[keep]
    theta_mean = np.sum(theta * weights)
    k = np.mean(np.log1p(-theta_mean * excess))
    sigma = -k / theta_mean
    return (n * k + _PRIOR_K_DRAWS * 0.5) / (n + _PRIOR_K_DRAWS), sigma


def _gpd_quantile(probs: np.ndarray, k: float, sigma: float) -> np.ndarray:
    """Quantiles at `probs` in (0, 1) of the generalized Pareto distribution with shape k and scale sigma."""
    if abs(k) < np.finfo(float).eps:  # the k -> 0 limit, the exponential distribution
        return -np.log1p(-probs) * sigma
    return np.expm1(-k * np.log1p(-probs)) / k * sigma


def ess_mean(x: np.ndarray) -> float:
    """ESS of the mean of (chains, draws) values (a 1-D array is one chain), as `arviz.ess(x, method="mean")`:
    the raw values (not rank-normalised), split chains, Stan's autocorrelation estimate and Geyer's initial
    monotone sequence. NaN with fewer than 4 draws per chain or any NaN; the draw count when all values agree
    (to 1e-15)."""
    x = np.atleast_2d(np.asarray(x, np.float64))
    if x.ndim != 2:
        raise ValueError(f"x must be (chains, draws), got shape {x.shape}")
    if x.shape[1] < 4 or np.isnan(x).any():
        return math.nan
    split = diagnostics._split(x[..., None], drop_middle=True)
    if np.ptp(split) < np.finfo(float).resolution:
        return float(split.size)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = diagnostics._autocorrelation(split)[0][:, 0]
    if np.isnan(rho).any():
        return math.nan
    return split.size / max(_geyer_tau(rho), 1.0 / math.log10(split.size))


def _geyer_tau(rho: np.ndarray) -> float:
    """The integrated autocorrelation time -1 + 2 sum_k Gamma_k + rho_2K of autocorrelations rho (S,), as
    Stan and ArviZ truncate it: Gamma_k = rho_2k + rho_2k+1 over the pairs before the first one whose sum is
    not positive (the K-th), made non-increasing; rho_2K, the lone even term, counts once where positive.
    Only lags up to S - 2 are used, and where no pair turns non-positive the last one is the lone term."""
    num_pairs = max((rho.size - 1) // 2, 1)
    even, odd = rho[0:2 * num_pairs:2], rho[1:2 * num_pairs:2]
    pair_sums = even + odd
    ends = ~(pair_sums > 0)
    stop = int(np.argmax(ends)) if ends.any() else num_pairs - 1
    monotone = np.minimum.accumulate(pair_sums[:stop])  # Geyer's initial monotone sequence
    # ArviZ keeps the K-th pair's even term when the pair's sum is non-negative (always so for the last pair
    # of an unterminated sequence), else only a positive one
    lone = even[stop] if (pair_sums[stop] >= 0 or even[stop] > 0) else 0.0
    return -1.0 + 2.0 * float(np.sum(monotone)) + float(lone)
