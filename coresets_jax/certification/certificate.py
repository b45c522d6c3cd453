"""The result of `cj.certify`: PSIS diagnostics, the KL estimate and corrected moments, from r on the host.

Everything here is small (S numbers and S draws), so it runs in NumPy: no compilation. PSIS is `psis`'s
(Vehtari, Simpson, Gelman, Yao & Gabry, JMLR 2024, Algorithm 1): ArviZ's `psislw` to rounding, without the
second that importing ArviZ takes (only `to_arviz` needs it). R-hat and bulk ESS of the draws, when they come
as chains, are those `cj.sample` reports (`inference.diagnostics`: rank-normalised split R-hat, max of bulk
and folded, and bulk ESS; Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021).

Two rules make the certificate one to lean on:

- Corrected moments only where PSIS can deliver them. `mean`, `sd` and `quantiles` are given where k-hat <= 0.7,
  or where all log ratios lie within log 2 of each other ("flat ratios", whatever k-hat says: the weights then
  move no moment far, and k-hat is noise, e.g. 0.98 at KL 2e-7 with ESS 1000 of 1000 on a near-exact OMP
  coreset). Elsewhere they are None and `corrected_note` says why: a self-normalised estimate with k-hat above
  0.7 can be further from pi than the plain draws (a coreset at k-hat 2.6 had its mean moved from z 2.15 to
  3.74 by the weights).
- Draws that are not from pi_w cannot certify it. With two or more chains whose max R-hat exceeds 1.01 the
  verdict is at best "usable" (`reason` says so): the importance weights assume draws from pi_w.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from ..inference import diagnostics
from ..interop.arviz_export import constrained_draws, load_arviz
from .psis import ess_mean, psis_log_weights

__all__ = ["Certificate", "corrected_note", "explain", "from_log_ratio", "moments_given", "verdict"]

GOOD_KHAT = 0.5       # PSIS: below, the importance-sampling estimates converge quickly
USABLE_KHAT = 0.7     # PSIS: above, they are unreliable (pi has mass where pi_w has almost none)
GOOD_KL = 0.05        # nats: a Gaussian whose mean moved 0.32 sd along one axis
POOR_KL = 0.5         # nats: a Gaussian whose mean moved 1 sd along one axis
FLAT_RATIOS = math.log(2.0)  # ratios all within a factor of 2: weighting can inflate a variance at most 4x
MAX_RHAT = 1.01       # chains whose R-hat exceeds this disagree: they are not (yet) draws from pi_w


def _flat(spread: float) -> bool:
    return bool(spread <= FLAT_RATIOS)


def _chains_disagree(rhat: Optional[float]) -> bool:
    """Max R-hat over 1.01, or NaN (a coordinate constant in every chain: stuck chains); False without chains."""
    return rhat is not None and not rhat <= MAX_RHAT


def moments_given(khat: float, spread: float = math.inf) -> bool:
    """Whether the corrected mean, sd and quantiles are given: k-hat <= 0.7, or flat ratios (all log ratios
    within log 2 of each other, where k-hat is noise and the weights cannot move a moment far)."""
    return _flat(spread) or bool(np.isfinite(khat) and khat <= USABLE_KHAT)


def corrected_note(khat: float, spread: float = math.inf) -> str:
    """Why the corrected moments are given, or why they are withheld (`Certificate.corrected_note`)."""
    if np.isfinite(khat) and khat <= USABLE_KHAT:
        return f"PSIS-corrected (k-hat {khat:.2f} <= {USABLE_KHAT})"
    if _flat(spread):
        return (f"PSIS-corrected although k-hat {khat:.2f} > {USABLE_KHAT}: all importance ratios lie within a "
                f"factor of 2 (log-ratio spread {spread:.2g} <= log 2), so k-hat is noise and the weights move "
                "no moment far")
    return (f"withheld: k-hat {khat:.2f} > {USABLE_KHAT} with importance ratios spread over "
            f"{'more than a factor of 2' if not np.isfinite(spread) else f'a factor of e^{spread:.3g}'}; "
            "self-normalised estimates are then unreliable and can be further from the full posterior than "
            "the plain draws' moments. Use a larger coreset or another method")


def explain(khat: float, kl: float = 0.0, spread: float = math.inf,
            rhat: Optional[float] = None) -> tuple[str, str]:
    """(`verdict`, the reason for it in words)."""
    flat = _flat(spread)
    if not flat and (not np.isfinite(khat) or khat >= USABLE_KHAT):
        out, why = "unreliable", (f"k-hat {khat:.2f} >= {USABLE_KHAT} with importance ratios spread over more "
                                  "than a factor of 2: the full posterior has mass where the coreset posterior "
                                  "has almost none")
    elif not kl < POOR_KL:
        out, why = "poor", (f"estimated KL(pi_w || pi) {kl:.3g} >= {POOR_KL} nat: the coreset posterior is about "
                            "a posterior sd or more from the full one")
    elif (flat or khat < GOOD_KHAT) and kl < GOOD_KL:
        out = "good"
        why = (f"{'flat importance ratios' if flat and not khat < GOOD_KHAT else f'k-hat {khat:.2f} < {GOOD_KHAT}'}"
               f" and estimated KL {kl:.3g} < {GOOD_KL} nat")
    else:
        out, why = "usable", "; ".join(
            ([f"k-hat {khat:.2f} in [{GOOD_KHAT}, {USABLE_KHAT})"] if not (flat or khat < GOOD_KHAT) else [])
            + ([f"estimated KL {kl:.3g} in [{GOOD_KL}, {POOR_KL}) nat"] if not kl < GOOD_KL else []))
    if _chains_disagree(rhat):
        chains = (f"the chains disagree (max R-hat {rhat:.3f} > {MAX_RHAT})" if np.isfinite(rhat) else
                  "R-hat is undefined (some coordinate is constant in every chain: stuck chains)")
        if out == "good":
            out, why = "usable", (f"{chains}, and the importance weights assume draws from the coreset posterior, "
                                  f"so the verdict is at best usable (else good: {why})")
        else:
            why += f"; also {chains}"
    return out, why


def verdict(khat: float, kl: float = 0.0, spread: float = math.inf, rhat: Optional[float] = None) -> str:
    """The coreset posterior as a stand-in for the full one, from k-hat, the KL estimate, the spread
    max_s r_s - min_s r_s of the log ratios, and the max R-hat of the draws' chains (None: one chain):

    - "unreliable": k-hat >= 0.7 and the ratios differ by more than a factor of 2: pi has mass where pi_w has
      almost none, and no estimate here is trustworthy. (Where all ratios lie within a factor of 2 the
      self-normalised estimates cannot be more than 4x as variable as plain Monte Carlo whatever the tail
      fit says; k-hat is then noise: 0.8-1.4 was measured on MCMC draws of coresets whose KL is 1e-8.)
    - "poor": KL >= 0.5 nat: pi_w is about a posterior sd or more from pi, although the corrected moments
      hold when k-hat is small (k-hat alone passes this case: a wide, shifted pi_w covers pi well);
    - "good": k-hat < 0.5 (or flat ratios) and KL < 0.05 nat, and the chains agree (max R-hat <= 1.01, or a
      single chain): where they disagree, the draws are not yet from pi_w, which the importance weights
      assume, and "good" becomes "usable";
    - "usable": the rest.
    The KL thresholds are those of a Gaussian mean moving 0.32 and 1 sd; benchmarks/certify.py measures them
    against W1 / floor and z-scores from full-data MCMC. `explain` gives the reason in words.
    """
    return explain(khat, kl, spread, rhat)[0]


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
      mean, sd: (D,) posterior mean and sd of theta corrected towards pi (self-normalised weights); None
        where k-hat > 0.7 and the ratios are not flat (`moments_given`; `corrected_note` says why).
      quantiles: (len(probs), D) corrected quantiles of theta at `probs`; None with mean and sd.
      probs: the quantile levels.
      verdict: "good", "usable", "poor" or "unreliable", from khat, kl, spread and rhat (`verdict`).
      reff: relative efficiency of the draws used by PSIS (ESS / S of the raw ratios; 1 without chains).
      spread: max_s r_s - min_s r_s over the finite ratios (inf when some draw has weight 0); within log 2
        every estimate is at most 4x as variable as plain Monte Carlo (`verdict`).
      draws: (chains, S, D) the draws certified (one chain when given as (S, D)).
      time_s: seconds the certificate took, the data pass included.
      model: the model, for `to_arviz`'s site names.
      corrected_note: why mean, sd and quantiles are given ("PSIS-corrected ...") or None ("withheld: ...").
      reason: the verdict's reason in words (`explain`).
      rhat: max over coordinates of the draws' rank-normalised split R-hat (max of bulk and folded; Vehtari et
        al. 2021, as `cj.sample` reports it) when the draws come as 2 or more chains; None otherwise. NaN when
        some coordinate is constant in every chain. Over 1.01 the verdict is at best "usable".
      rhat_by_coord: (D,) the R-hat of each coordinate, or None.
      ess_bulk: min over coordinates of the draws' bulk ESS (their MCMC effective sample size over all chains;
        not `ess`, which is the importance weights'), or None with fewer than 4 draws per chain.
      ess_bulk_by_coord: (D,) the bulk ESS of each coordinate, or None.
      precision: how the data pass computed r: "float64", "float32", "float32, audited" (`cj.certify`'s
        precision="auto" kept its float32 pass after checking it against float64 at some draws), or
        "screened, audited" (it kept r estimated from a subsample, `certification.screen`, after the same
        check).
      precision_error: for an audited pass, or one the audit rejected, the estimated bound on the error of any
        r_s in nats; None otherwise.
      precision_note: the choice in words.
    """

    khat: float
    kl: float
    kl_se: float
    ess: float
    weights: np.ndarray
    log_ratio: np.ndarray
    mean: Optional[np.ndarray]
    sd: Optional[np.ndarray]
    quantiles: Optional[np.ndarray]
    probs: tuple
    verdict: str
    reff: float
    spread: float
    draws: np.ndarray
    time_s: float = 0.0
    model: Optional[Any] = None
    corrected_note: str = ""
    reason: str = ""
    rhat: Optional[float] = None
    rhat_by_coord: Optional[np.ndarray] = None
    ess_bulk: Optional[float] = None
    ess_bulk_by_coord: Optional[np.ndarray] = None
    precision: str = "float64"
    precision_error: Optional[float] = None
    precision_note: str = ""

    @property
    def num_draws(self) -> int:
        return int(self.weights.size)

    @property
    def has_moments(self) -> bool:
        """Whether the corrected mean, sd and quantiles are given (`moments_given`)."""
        return self.mean is not None

    @property
    def chains_disagree(self) -> bool:
        """Max R-hat over 1.01 (or NaN) across 2 or more chains: the draws are not (yet) from pi_w."""
        return _chains_disagree(self.rhat)

    def summary(self) -> dict:
        """The scalar results as plain Python numbers and strings (for JSON and reports)."""
        return {"khat": self.khat, "kl": self.kl, "kl_se": self.kl_se, "ess": self.ess, "verdict": self.verdict,
                "reason": self.reason, "num_draws": self.num_draws, "reff": self.reff, "spread": self.spread,
                "rhat": self.rhat, "ess_bulk": self.ess_bulk, "moments": self.has_moments,
                "corrected_note": self.corrected_note, "time_s": self.time_s}

    def to_arviz(self, var_name: str = "theta"):
        """An `arviz.InferenceData` of the certified draws that carries the importance weights.

        `sample_stats` holds `importance_weight` (the normalised smoothed weights) and `log_importance_ratio`
        (r), each (chain, draw); the attributes hold khat, kl, ess and the verdict. With a NumPyro model the
        posterior group has NumPyro's site names and constrained values, as `Posterior.to_arviz`.
        """
        az = load_arviz()

        chains, draws, _ = self.draws.shape
        if self.model is not None and getattr(self.model, "constrain", None) is not None:
            posterior = constrained_draws(self.model, self.draws)
        else:
            posterior = {var_name: self.draws}
        stats = {"importance_weight": self.weights.reshape(chains, draws),
                 "log_importance_ratio": self.log_ratio.reshape(chains, draws)}
        attrs = {"khat": self.khat, "kl_estimate": self.kl, "ess": self.ess, "verdict": self.verdict,
                 "reason": self.reason, "corrected_note": self.corrected_note,
                 "inference_library": "coresets_jax (certify)"}
        if self.rhat is not None:
            attrs["rhat"] = self.rhat
        return az.from_dict(posterior=posterior, sample_stats=stats, attrs=attrs)

    def _flags(self) -> list:
        """What the short forms add to verdict, k-hat and KL: disagreeing chains, withheld moments."""
        out = []
        if self.chains_disagree:
            out.append(f"chains disagree, R-hat {self.rhat:.3f}" if np.isfinite(self.rhat) else "R-hat undefined")
        if not self.has_moments:
            out.append(f"corrected moments withheld, k-hat > {USABLE_KHAT}")
        return out

    def brief(self) -> str:
        """One phrase for the reprs of `Coreset` and `Posterior`: the verdict, k-hat and the KL estimate (and
        whether the chains disagree or the corrected moments are withheld)."""
        return f"{self.verdict} (khat {self.khat:.2f}, KL {self.kl:.3g}{''.join('; ' + f for f in self._flags())})"

    def __repr__(self) -> str:
        flags = "".join(", " + f for f in self._flags())
        return (f"Certificate(verdict={self.verdict!r}, khat={self.khat:.3f}, kl={self.kl:.4g} ± {self.kl_se:.2g}, "
                f"ess={self.ess:.0f} of {self.num_draws}{flags}, time={self.time_s:.2f}s)")


def _relative_efficiency(r: np.ndarray, chains: int) -> float:
    """ESS / S of the raw importance ratios exp(r - max r) across chains (ArviZ's ESS of the mean), in (0, 1]."""
    if chains < 2:
        return 1.0
    ratios = np.exp(r - np.max(r)).reshape(chains, -1)
    if np.ptp(ratios) == 0:
        return 1.0
    ess = ess_mean(ratios)
    return float(np.clip(ess / r.size, 1.0 / r.size, 1.0)) if np.isfinite(ess) else 1.0


def _chain_diagnostics(draws: np.ndarray) -> tuple:
    """(max R-hat, (D,) R-hat, min bulk ESS, (D,) bulk ESS) of (chains, S, D) draws, as `cj.sample` reports
    them (`inference.diagnostics`). R-hat needs 2 or more chains, and both need 4 or more draws per chain
    (two halves of 2); None where they cannot be computed."""
    chains, per_chain = draws.shape[:2]
    if per_chain < 4:
        return None, None, None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = diagnostics.ess_bulk(draws)
        rhat = diagnostics.rhat(draws) if chains >= 2 else None
    ess_min = float(np.min(ess))
    return (None if rhat is None else float(np.max(rhat))), rhat, ess_min, ess


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
    draws = draws if draws.ndim == 3 else draws[None]
    chains = draws.shape[0]
    flat = draws.reshape(-1, draws.shape[-1])
    r = np.asarray(r, np.float64)
    finite = np.isfinite(r)
    r = r - np.mean(r[finite])
    r_psis = np.where(finite, r, np.min(r[finite]) - 1e3)  # weight 0, and finite ratios for the ESS
    reff = _relative_efficiency(r_psis, chains)
    log_w, khat = psis_log_weights(r_psis, reff=reff)
    weights = np.exp(log_w - np.max(log_w))
    weights = np.where(finite, weights, 0.0)
    weights /= np.sum(weights)
    top = np.max(r[finite])
    lme = top + np.log(np.mean(np.where(finite, np.exp(r - top), 0.0)))
    kl = float(max(lme - np.mean(r[finite]), 0.0))
    spread = float(np.max(r[finite]) - np.min(r[finite])) if np.all(finite) else math.inf
    u = np.where(finite, np.exp(r - lme), 0.0)  # influence of each draw on log-mean-exp(r) - mean(r)
    kl_se = float(np.std(u - np.where(finite, r, 0.0)) / np.sqrt(max(reff * r.size, 1.0)))
    khat = float(khat)
    mean = sd = quantiles = None
    if moments_given(khat, spread):
        mean = weights @ flat
        sd = np.sqrt(np.maximum(weights @ (flat - mean) ** 2, 0.0))
        quantiles = _weighted_quantiles(flat, weights, tuple(probs))
    rhat, rhat_by_coord, ess_bulk, ess_by_coord = _chain_diagnostics(draws)
    label, reason = explain(khat, kl, spread, rhat)
    return Certificate(khat=khat, kl=kl, kl_se=kl_se, ess=float(1.0 / np.sum(weights ** 2)),
                       weights=weights, log_ratio=r, mean=mean, sd=sd, quantiles=quantiles, probs=tuple(probs),
                       verdict=label, reff=reff, spread=spread, draws=draws, time_s=time_s, model=model,
                       corrected_note=corrected_note(khat, spread), reason=reason, rhat=rhat,
                       rhat_by_coord=rhat_by_coord, ess_bulk=ess_bulk, ess_bulk_by_coord=ess_by_coord)
