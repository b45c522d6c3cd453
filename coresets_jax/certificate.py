"""The result of `cj.certify`: PSIS diagnostics, the KL estimate and corrected moments, from r on the host.

Everything here is small (S numbers and S draws), so it runs in NumPy: no compilation. PSIS itself is
ArviZ's (`arviz.psislw`; Vehtari, Simpson, Gelman, Yao & Gabry, JMLR 2024, Algorithm 1).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Optional

import numpy as np

__all__ = ["Certificate", "from_log_ratio", "verdict"]

GOOD_KHAT = 0.5       # PSIS: below, the importance-sampling estimates converge quickly
USABLE_KHAT = 0.7     # PSIS: above, they are unreliable (pi has mass where pi_w has almost none)
GOOD_KL = 0.05        # nats: a Gaussian whose mean moved 0.32 sd along one axis
POOR_KL = 0.5         # nats: a Gaussian whose mean moved 1 sd along one axis
FLAT_RATIOS = math.log(2.0)  # ratios all within a factor of 2: weighting can inflate a variance at most 4x


def verdict(khat: float, kl: float = 0.0, spread: float = math.inf) -> str:
    """The coreset posterior as a stand-in for the full one, from k-hat, the KL estimate, and the spread
    max_s r_s - min_s r_s of the log ratios:

    - "unreliable": k-hat >= 0.7 and the ratios differ by more than a factor of 2: pi has mass where pi_w has
      almost none, and no estimate here is trustworthy. (Where all ratios lie within a factor of 2 the
      self-normalised estimates cannot be more than 4x as variable as plain Monte Carlo whatever the tail
      fit says; k-hat is then noise: 0.8-1.4 was measured on MCMC draws of coresets whose KL is 1e-8.)
    - "poor": KL >= 0.5 nat: pi_w is about a posterior sd or more from pi, although the corrected moments
      hold when k-hat is small (k-hat alone passes this case: a wide, shifted pi_w covers pi well);
    - "good": k-hat < 0.5 (or flat ratios) and KL < 0.05 nat;
    - "usable": the rest.
    The KL thresholds are those of a Gaussian mean moving 0.32 and 1 sd; benchmarks/certify.py measures them
    against W1 / floor and z-scores from full-data MCMC.
    """
    flat = spread <= FLAT_RATIOS
    if not flat and (not np.isfinite(khat) or khat >= USABLE_KHAT):
        return "unreliable"
    if not kl < POOR_KL:
        return "poor"
    return "good" if (flat or khat < GOOD_KHAT) and kl < GOOD_KL else "usable"


@dataclasses.dataclass(frozen=True, repr=False)
class Certificate:
    """How well a coreset posterior pi_w stands in for the full posterior pi (see `cj.certify`).

    Attributes:
      khat: PSIS shape estimate; < 0.5 good, 0.5-0.7 usable, > 0.7 unreliable.
      kl: estimate of KL(pi_w || pi) = log-mean-exp(r) - mean(r), in nats (never negative).
      kl_se: its Monte Carlo standard error (delta method, over the draws' effective number reff * S).
      ess: effective sample size of the smoothed importance weights, 1 / sum_s w_s^2.
      weights: (S,) normalised, Pareto-smoothed importance weights of the flattened draws.
      log_ratio: (S,) r_s, shifted to mean 0 over its finite values (-inf: weight 0).
      mean, sd: (D,) posterior mean and sd of theta corrected towards pi (self-normalised weights).
      quantiles: (len(probs), D) corrected quantiles of theta at `probs`.
      probs: the quantile levels.
      verdict: "good", "usable", "poor" or "unreliable", from khat and kl (`verdict`).
      reff: relative efficiency of the draws used by PSIS (ESS / S of the raw ratios; 1 without chains).
      spread: max_s r_s - min_s r_s over the finite ratios (inf when some draw has weight 0); within log 2
        every estimate is at most 4x as variable as plain Monte Carlo (`verdict`).
      draws: (chains, S, D) the draws certified (one chain when given as (S, D)).
      time_s: seconds the certificate took, the data pass included.
      model: the model, for `to_arviz`'s site names.
    """

    khat: float
    kl: float
    kl_se: float
    ess: float
    weights: np.ndarray
    log_ratio: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    quantiles: np.ndarray
    probs: tuple
    verdict: str
    reff: float
    spread: float
    draws: np.ndarray
    time_s: float = 0.0
    model: Optional[Any] = None

    @property
    def num_draws(self) -> int:
        return int(self.weights.size)

    def summary(self) -> dict:
        """The scalar results as plain Python numbers (for JSON and reports)."""
        return {"khat": self.khat, "kl": self.kl, "kl_se": self.kl_se, "ess": self.ess, "verdict": self.verdict,
                "num_draws": self.num_draws, "reff": self.reff, "spread": self.spread, "time_s": self.time_s}

    def to_arviz(self, var_name: str = "theta"):
        """An `arviz.InferenceData` of the certified draws that carries the importance weights.

        `sample_stats` holds `importance_weight` (the normalised smoothed weights) and `log_importance_ratio`
        (r), each (chain, draw); the attributes hold khat, kl, ess and the verdict. With a NumPyro model the
        posterior group has NumPyro's site names and constrained values, as `Posterior.to_arviz`.
        """
        from .arviz_export import _arviz, constrained_draws

        az = _arviz()

        chains, draws, _ = self.draws.shape
        if self.model is not None and getattr(self.model, "constrain", None) is not None:
            posterior = constrained_draws(self.model, self.draws)
        else:
            posterior = {var_name: self.draws}
        stats = {"importance_weight": self.weights.reshape(chains, draws),
                 "log_importance_ratio": self.log_ratio.reshape(chains, draws)}
        attrs = {"khat": self.khat, "kl_estimate": self.kl, "ess": self.ess, "verdict": self.verdict,
                 "inference_library": "coresets_jax (certify)"}
        return az.from_dict(posterior=posterior, sample_stats=stats, attrs=attrs)

    def brief(self) -> str:
        """One phrase for the reprs of `Coreset` and `Posterior`: the verdict, k-hat and the KL estimate."""
        return f"{self.verdict} (khat {self.khat:.2f}, KL {self.kl:.3g})"

    def __repr__(self) -> str:
        return (f"Certificate(verdict={self.verdict!r}, khat={self.khat:.3f}, kl={self.kl:.4g} ± {self.kl_se:.2g}, "
                f"ess={self.ess:.0f} of {self.num_draws}, time={self.time_s:.2f}s)")


def _relative_efficiency(r: np.ndarray, chains: int) -> float:
    """ESS / S of the raw importance ratios exp(r - max r) across chains (ArviZ's bulk ESS), in (0, 1]."""
    if chains < 2:
        return 1.0
    from .arviz_export import _arviz

    az = _arviz()
    ratios = np.exp(r - np.max(r)).reshape(chains, -1)
    if np.ptp(ratios) == 0:
        return 1.0
    ess = float(az.ess(ratios, method="mean"))
    return float(np.clip(ess / r.size, 1.0 / r.size, 1.0)) if np.isfinite(ess) else 1.0


def _weighted_quantiles(x: np.ndarray, w: np.ndarray, probs: tuple) -> np.ndarray:
    """(len(probs), D): quantiles of each column of x (S, D) under normalised weights w, by linear
    interpolation of the weighted CDF at the midpoints of each draw's mass."""
    out = np.empty((len(probs), x.shape[1]))
    for d in range(x.shape[1]):
        order = np.argsort(x[:, d])
        cdf = np.cumsum(w[order]) - 0.5 * w[order]
        out[:, d] = np.interp(probs, cdf, x[order, d])
    return out


def from_log_ratio(r: np.ndarray, draws: np.ndarray, *, model: Any = None, probs: tuple = (0.05, 0.5, 0.95),
                   time_s: float = 0.0) -> Certificate:
    """A `Certificate` from r (S,) and the draws, (S, D) or (chains, S, D), flattened in the same order."""
    from .arviz_export import _arviz

    az = _arviz()
    draws = draws if draws.ndim == 3 else draws[None]
    chains = draws.shape[0]
    flat = draws.reshape(-1, draws.shape[-1])
    r = np.asarray(r, np.float64)
    finite = np.isfinite(r)
    r = r - np.mean(r[finite])
    r_psis = np.where(finite, r, np.min(r[finite]) - 1e3)  # weight 0, without -inf inside ArviZ
    reff = _relative_efficiency(r_psis, chains)
    with warnings.catch_warnings():  # ArviZ's own k-hat warning; the verdict says it in our words
        warnings.simplefilter("ignore")
        log_w, khat = az.psislw(r_psis.copy(), reff=reff)
    weights = np.exp(log_w - np.max(log_w))
    weights = np.where(finite, weights, 0.0)
    weights /= np.sum(weights)
    top = np.max(r[finite])
    lme = top + np.log(np.mean(np.where(finite, np.exp(r - top), 0.0)))
    kl = float(max(lme - np.mean(r[finite]), 0.0))
    spread = float(np.max(r[finite]) - np.min(r[finite])) if np.all(finite) else math.inf
    u = np.where(finite, np.exp(r - lme), 0.0)  # influence of each draw on log-mean-exp(r) - mean(r)
    kl_se = float(np.std(u - np.where(finite, r, 0.0)) / np.sqrt(max(reff * r.size, 1.0)))
    mean = weights @ flat
    sd = np.sqrt(np.maximum(weights @ (flat - mean) ** 2, 0.0))
    return Certificate(khat=float(khat), kl=kl, kl_se=kl_se, ess=float(1.0 / np.sum(weights ** 2)),
                       weights=weights, log_ratio=r, mean=mean, sd=sd,
                       quantiles=_weighted_quantiles(flat, weights, tuple(probs)), probs=tuple(probs),
                       verdict=verdict(float(khat), kl, spread), reff=reff, spread=spread, draws=draws, time_s=time_s, model=model)
