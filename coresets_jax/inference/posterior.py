"""The result of `cj.sample`: draws, diagnostics, and their checks."""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Model
from .driver import SamplerStats
from ..core import compiled

__all__ = ["Posterior", "check_diagnostics", "diagnostics"]

Array = jax.Array


@compiled.jit(static_argnames=("have_chains",))
def diagnostics(samples, have_chains: bool):
    ess = blackjax.diagnostics.ess_bulk(samples, chain_axis=0, sample_axis=1)
    if have_chains:
        rhat = blackjax.diagnostics.rhat(samples, chain_axis=0, sample_axis=1)
    else:
        rhat = jnp.full(samples.shape[-1], jnp.nan, samples.dtype)
    return rhat, ess


@dataclasses.dataclass(frozen=True)
class Posterior:
    """Result of `cj.sample`.

    Attributes:
      samples: (num_chains, num_samples, D) draws of theta.
      acceptance_rate, num_divergent, step_size: (num_chains,) per-chain diagnostics (see `SamplerStats`).
      rhat: (D,) rank-normalised split R-hat (`blackjax.diagnostics.rhat`); NaN with one chain.
      ess: (D,) bulk effective sample size over all chains (`blackjax.diagnostics.ess_bulk`).
      wall_time: seconds spent in warm-up plus sampling (compilation included when `compiled`).
      init_time: seconds spent finding the starting points (the weighted Laplace fit).
      compiled: whether this call traced and compiled a new sampler.
      method, num_warmup, thin: the settings used.
      stats: the full `SamplerStats`.
      model: the `cj.Model` sampled (ArviZ export uses its `constrain` for named, constrained values).
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
        """An `arviz.InferenceData` with the draws and sample stats (needs the optional `arviz` package).

        With a model from `cj.from_numpyro`, the variables are NumPyro's sites with constrained values;
        otherwise one variable `var_name` of shape (chain, draw, D). `az.summary(post.to_arviz())` and
        `az.plot_trace(post.to_arviz())` then work as usual.
        """
        try:
            from ..arviz_export import to_arviz
        except ImportError:  # the plain export below
            to_arviz = None
        if to_arviz is not None:
            return to_arviz(self)
        try:
            import arviz as az
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("to_arviz needs the optional dependency arviz: pip install arviz") from err
        return az.from_dict(
            posterior={var_name: np.asarray(self.samples)},
            sample_stats={"acceptance_rate": np.asarray(self.stats.draw_acceptance),
                          "diverging": np.asarray(self.stats.draw_divergent)},
            attrs={"method": self.method, "num_warmup": self.num_warmup, "thin": self.thin,
                   "sampling_time": self.wall_time, "inference_library": "coresets_jax/blackjax"})

    def __repr__(self) -> str:
        rhat = float(jnp.nanmax(self.rhat)) if self.num_chains > 1 else float("nan")
        return (f"Posterior(method={self.method!r}, samples={tuple(self.samples.shape)}, "
                f"acceptance={[round(float(a), 2) for a in np.asarray(self.acceptance_rate)]}, "
                f"divergent={np.asarray(self.num_divergent).tolist()}, max_rhat={rhat:.3f}, "
                f"min_ess={float(jnp.min(self.ess)):.0f}, wall_time={self.wall_time:.2f}s)")


def check_diagnostics(post: "Posterior") -> list[str]:
    """Warnings a careful reader of NumPyro's or ArviZ's summary would flag (Vehtari et al. 2021):
    R-hat above 1.01, divergences above 1% of transitions, bulk ESS below 100 per chain."""
    problems = []
    if post.num_chains > 1 and bool(jnp.any(post.rhat > 1.01)):
        problems.append(f"max R-hat {float(jnp.nanmax(post.rhat)):.3f} > 1.01: the chains disagree")
    transitions = post.num_chains * post.num_samples * post.thin
    divergent = int(np.sum(np.asarray(post.num_divergent)))
    if divergent > 0.01 * transitions:
        problems.append(f"{divergent} of {transitions} transitions diverged (> 1%)")
    if bool(jnp.all(jnp.isfinite(post.ess))) and float(jnp.min(post.ess)) < 100 * post.num_chains:
        problems.append(f"min bulk ESS {float(jnp.min(post.ess)):.0f} < 100 per chain ({post.num_chains} chains)")
    return problems
