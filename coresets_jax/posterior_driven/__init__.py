"""Posterior-driven constructions: they optimise the weights against samples of the coreset posterior pi_w
itself, so they need the model and a sampler, not projected vectors. Each is one file whose `make(model,
size, **options)` returns a pure `solve(key, data, start, data_weights[, initial])` (the order of `cj.coreset_fn`), registered here.
Coreset MCMC and quasi-Newton run as published by default (a uniform start, no full-data pass beyond the
authors' own); `cj.refine` (`refine.py`) starts them from any coreset with the project's departures. The methods share their
option names (`kernel`, `kernel_settings`, `num_iters`, `num_draws`, `num_warmup`); `options.ALIASES` holds
the old names each still accepts.
"""

from ..registry import Construction, register
from . import support  # noqa: F401  (the support= start, used by cj.coreset)
from . import budget  # noqa: F401  (refine's wall-clock budget)
from .coreset_mcmc import coreset_mcmc
from .options import ALIASES
from .quasi_newton import quasi_newton
from .sparse_vi import sparse_vi

register(Construction("sparse_vi", sparse_vi, needs="posterior", random=True,
                      description="Sparse VI (Campbell & Beronov 2019): greedy selection + SGD on KL",
                      aliases=ALIASES["sparse_vi"]),
         replace=True)

register(Construction("coreset_mcmc", coreset_mcmc, needs="posterior", random=True,
                      description="Coreset MCMC with Hot DoG (Chen & Campbell 2024; Chen, Huggins & Campbell "
                                  "2024), as published: uniform points, chains on pi_w, stochastic KL weight updates",
                      aliases=ALIASES["coreset_mcmc"], takes_start=True, uses_pi_hat=False),
         replace=True)

register(Construction("quasi_newton", quasi_newton, needs="posterior", random=True,
                      description="Quasi-Newton coresets (Naik, Rousseau & Campbell 2022), as published: "
                                  "uniform points + Newton steps on the KL",
                      aliases=ALIASES["quasi_newton"], takes_start=True, uses_pi_hat=False),
         replace=True)

from .refine import refine

__all__ = ["coreset_mcmc", "quasi_newton", "refine", "sparse_vi"]
