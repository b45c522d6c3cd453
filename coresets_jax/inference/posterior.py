"""The result of `cj.sample`: draws, diagnostics, and their checks."""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Model
from . import diagnostics as _diagnostics
from .driver import SamplerStats

__all__ = ["Posterior", "check_diagnostics", "diagnostics"]

Array = jax.Array


def diagnostics(samples, have_chains: bool):
    """(rhat, ess), each (D,), of (chains, draws, D) samples, computed on the host in NumPy
    (`inference.diagnostics`: a jitted version cost ~2 s of compilation on a first `cj.sample`)."""
    rhat, ess = _diagnostics.summary(np.asarray(samples), have_chains)
    return jax.device_put(rhat), jax.device_put(ess)  # (jnp.asarray would compile a conversion)


@dataclasses.dataclass(frozen=True)
class Posterior:
    """Result of `cj.sample`.

    Attributes:
      samples: (num_chains, num_samples, D) draws of theta.
      acceptance_rate, num_divergent, step_size: (num_chains,) per-chain diagnostics (see `SamplerStats`).
      rhat: (D,) rank-normalised split R-hat, max of bulk and folded (`inference.diagnostics.rhat`, the
        convention of `blackjax.diagnostics.rhat`); NaN with one chain.
      ess: (D,) bulk effective sample size over all chains (`inference.diagnostics.ess_bulk`).
      wall_time: seconds spent in warm-up plus sampling (compilation included when `compiled`).
      init_time: seconds spent finding the starting points (the weighted Laplace fit).
      compiled: whether this call traced and compiled a new sampler.
      method, num_warmup, thin: the settings used.
      stats: the full `SamplerStats`.
      model: the `cj.Model` sampled (ArviZ export uses its `constrain` for named, constrained values).
      certificate: with `cj.sample(..., certify=True)`, the `cj.Certificate` of these draws against the full
        data (`cj.certify`); else None.
    """

    samples: Array
    acceptance_rate: Array
    num_divergent: Array
    step_size: Array
    rhat: Array
    ess: Array
    wall_time: float
    init_time: float
    compiled: bool
    method: str
    num_warmup: int
    thin: int
    stats: SamplerStats
    model: Optional[Model] = None
    certificate: Optional[object] = None

    @property
    def num_chains(self) -> int:
        return int(self.samples.shape[0])

    @property
    def num_samples(self) -> int:
        return int(self.samples.shape[1])

    @property
    def flat_samples(self) -> Array:
        """(num_chains * num_samples, D)."""
        return self.samples.reshape(-1, self.samples.shape[-1])

    @property
    def mean(self) -> Array:
        return jnp.mean(self.flat_samples, axis=0)

    @property
    def cov(self) -> Array:
        return jnp.cov(self.flat_samples, rowvar=False).reshape(self.samples.shape[-1], -1)

    @property
    def ess_per_second(self) -> Array:
        """(D,) ESS divided by `wall_time`."""
        return self.ess / self.wall_time

    def to_arviz(self, var_name: str = "theta"):
        """An `arviz.InferenceData` with the draws and sample stats (ArviZ is a base dependency).

        With a model from `cj.from_numpyro`, the variables are NumPyro's sites with constrained values;
        otherwise one variable `var_name` of shape (chain, draw, D). `az.summary(post.to_arviz())` and
        `az.plot_trace(post.to_arviz())` then work as usual.
        """
        from ..interop.arviz_export import to_arviz

        return to_arviz(self, var_name=var_name)

    def __repr__(self) -> str:
        # NumPy on the host: each eager jnp reduction here would be a compilation of its own.
        rhat = float(np.nanmax(np.asarray(self.rhat))) if self.num_chains > 1 else float("nan")
        return (f"Posterior(method={self.method!r}, samples={tuple(self.samples.shape)}, "
                f"acceptance={[round(float(a), 2) for a in np.asarray(self.acceptance_rate)]}, "
                f"divergent={np.asarray(self.num_divergent).tolist()}, max_rhat={rhat:.3f}, "
                f"min_ess={float(np.min(np.asarray(self.ess))):.0f}, wall_time={self.wall_time:.2f}s"
                + (f", certificate={self.certificate.brief()}" if self.certificate is not None else "") + ")")


def check_diagnostics(post: "Posterior") -> list[str]:
    """Warnings a careful reader of NumPyro's or ArviZ's summary would flag (Vehtari et al. 2021):
    R-hat above 1.01, divergences above 1% of transitions, bulk ESS below 100 per chain."""
    problems = []
    rhat, ess = np.asarray(post.rhat), np.asarray(post.ess)
    if post.num_chains > 1 and bool(np.any(rhat > 1.01)):
        problems.append(f"max R-hat {float(np.nanmax(rhat)):.3f} > 1.01: the chains disagree")
    transitions = post.num_chains * post.num_samples * post.thin
    divergent = int(np.sum(np.asarray(post.num_divergent)))
    if divergent > 0.01 * transitions:
        problems.append(f"{divergent} of {transitions} transitions diverged (> 1%)")
    if bool(np.all(np.isfinite(ess))) and float(np.min(ess)) < 100 * post.num_chains:
        problems.append(f"min bulk ESS {float(np.min(ess)):.0f} < 100 per chain ({post.num_chains} chains)")
    return problems
