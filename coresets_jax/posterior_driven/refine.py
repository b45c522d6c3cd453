"""`cj.refine`: the project's improvement on any coreset, as a step of its own (ours).

Published Coreset MCMC and quasi-Newton start from a uniform subsample. Refining instead starts them from a
good coreset (typically OMP's or A-IHT II's, `cj.coreset`) and moves only its points' weights against the
full data's KL, with the project's departures from the papers (`REFINE_OPTIONS` in `coreset_mcmc.py` and
`quasi_newton.py`, listed in their docstrings): chains started at the Laplace fit of the start's own
posterior (O(M D^2), no full-data pass), a preconditioned slice sampler, the control-variate estimate of
the full-data log-likelihood, the natural-gradient step (Coreset MCMC) or the paired choice of iterates
(quasi-Newton), and a stop once the paired KL estimate stops falling.

1. The start's live points are compacted into the next power of two slots (`support.compact_start`), and its
   posterior's Laplace fit on those rows anchors the chains and the control variate.
2. The method's core runs from it under a wall-clock budget (`budget.py`): by default `BUDGET_FACTOR`
   times the start's own construction time (`coreset.settings["time_s"]`), at least `MIN_BUDGET_S`
   seconds; compilation is not counted. It returns draws of the trained weights' posterior and of the
   start's.
3. **Keep the better one, by the float64 certificate** (`cj.certify` on each set of draws; the start's own
   certificate is reused when it carries one): the trained weights are kept only if their certificate
   is trustworthy (not "unreliable") and either the start's is not, or their KL estimate is lower by `z`
   combined standard errors. `info["kept"]` is "start" or "trained", and both certificates are in `info`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Coreset, Model, take_data
from ..core import checks as _checks
from ..core import validate as _validate
from ..weighting.pihat import laplace_fn
from ..registry import Start, resolve
from . import budget as _budget
from .coreset_mcmc import REFINE_OPTIONS as _CMC
from .quasi_newton import REFINE_OPTIONS as _QN
from .support import compact_start, pad_result
from ..compilation import full_precision

__all__ = ["BUDGET_FACTOR", "MIN_BUDGET_S", "REFINE_OPTIONS", "refine"]

REFINE_OPTIONS = {"coreset_mcmc": _CMC, "quasi_newton": _QN}
BUDGET_FACTOR = 3.0      # the training's wall-clock budget in units of the start's construction time
MIN_BUDGET_S = 2.0       # ... but never below this (a fast start would leave no time to move)
Z = 2.0                  # the trained certificate's KL must be lower by Z combined standard errors


def _start_of(model: Model, data: Any, initial: tuple, init: Any) -> Start:
    """The Laplace fit of the start's own posterior pi_{w_0} on its M rows (Newton from the model's zero or
    `init`), falling back to identity covariance where it is not finite or not positive definite."""
    from ..construct.posterior import default_start

    base = default_start(model, data, init)
    rows = take_data(data, initial[0])
    fit = laplace_fn(model)(rows, base.mean, initial[1].astype(base.mean.dtype))
    ok = bool(fit.info["finite"]) and bool(np.all(np.linalg.eigvalsh(np.asarray(fit.cov, np.float64)) > 0))
    return Start(fit.mean, fit.cov) if ok else base


@full_precision
def refine(model: Model, data: Any, coreset: Coreset, key: jax.Array, method: Any = "coreset_mcmc", *,
           time_budget: Optional[float] = None, init: Any = None, z: float = Z, **options) -> Coreset:
    """Refine `coreset`'s weights against the full data's KL; return the better of start and result.

    Args:
      model, data: the model and the data the coreset was built on.
      coreset: any `cj.Coreset` of this data (e.g. `cj.coreset(..., method="omp")`).
      key: PRNG key.
      method: "coreset_mcmc" (the natural-gradient step) or "quasi_newton" (paired Newton iterates), or any
        posterior method that takes a start.
      time_budget: seconds of training (compilation not counted); None: `BUDGET_FACTOR` x the start's
        construction time (`coreset.settings["time_s"]`), at least `MIN_BUDGET_S`; without a recorded time,
        no time limit (the method's iteration cap). `math.inf` also means no limit.
      init: a starting theta for the Laplace fit of the start's posterior (default: the model's zero).
      z: how many combined standard errors the trained certificate's KL must be below the start's.
      **options: the method's options, over `REFINE_OPTIONS[method]`.

    Returns:
      The kept `Coreset` (capacity as the start's), carrying its certificate (`.certificate`) and in `info`:
      `kept` ("start" or "trained"), `start_certificate`, `trained_certificate`, `samples` (draws of the
      kept coreset's posterior), `trained_indices` and `trained_weights` (the trained coreset, whichever is
      kept), `time_s` (the training call, compilation included on a first call), `certify_s`, `budget_s`
      and the core's diagnostics (`stopped_by`, `iterations`, ...).
    """
    from ..certification import certify
    from ..construct.posterior import compiled_coreset_fn

    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    construction = resolve(method, needs="posterior")
    if not construction.takes_start:
        raise ValueError(f"method: {construction.name!r} builds its own support and cannot refine a coreset; "
                         "use 'coreset_mcmc' or 'quasi_newton'")
    n = _checks.check_model_data(model, data)
    if not isinstance(coreset, Coreset):
        raise ValueError(f"coreset: expected a cj.Coreset, got {type(coreset).__name__}")
    if coreset.batch_shape:
        raise ValueError("coreset: a batched coreset; refine one trial at a time (batch[i])")
    indices, weights = np.asarray(coreset.indices), np.asarray(coreset.weights)
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"coreset: indices must lie in [0, N = {n}): it was built on other data")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or not np.any(weights > 0):
        raise ValueError("coreset: weights must be finite, non-negative, and not all zero")
    built_on = (coreset.settings or {}).get("N")
    if built_on is not None and int(built_on) != n:
        raise ValueError(f"coreset: it was built on data with N = {built_on} rows, but data has N = {n}")
    key = _validate.check_key(key)
    z = _validate.check_positive_float(z, "z")
    defaults = dict(REFINE_OPTIONS.get(construction.name, {}))
    if "kernel" in options and "kernel_settings" not in options:
        defaults.pop("kernel_settings", None)  # the defaults' settings are the slice sampler's
    opts = construction.check_options({**defaults, **construction.rename_aliases(options)})
    construction.make(model, 1, **dict(opts))  # every option's value checked before any work
    budget = _budget_for(coreset, time_budget)

    size = coreset.capacity
    initial, slots = compact_start(coreset, size)
    data = jax.tree_util.tree_map(jnp.asarray, data)
    start = _start_of(model, data, initial, init)
    solve = compiled_coreset_fn(model, construction, slots, opts)
    t0 = time.perf_counter()  # the budget's clock starts inside the program, after compilation
    with _budget.deadline(budget):
        trained = solve(key, data, start, initial=initial)
        jax.block_until_ready(trained.weights)
    seconds = time.perf_counter() - t0
    trained = pad_result(trained, size, coreset.method or "given")
    info = dict(trained.info)
    if not bool(np.asarray(info.get("finite", True))):
        raise FloatingPointError(f"refine: {construction.name} produced non-finite weights; please report this")

    # ---- the float64 certificates of both, from each one's own draws
    t1 = time.perf_counter()
    settings = {"N": n}
    start_cs = Coreset(jnp.asarray(indices), jnp.asarray(weights), {}, coreset.method, settings)
    trained_cs = Coreset(trained.indices, trained.weights, {}, f"refine_{construction.name}", settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the verdicts are reported in info, not as warnings
        cert_trained = certify(model, data, trained_cs, info["samples"])
        cert_start = coreset.certificate
        if cert_start is None:
            draws = info.get("start_samples")
            if draws is None:
                raise ValueError(f"method: {construction.name} gave no draws of the start's posterior "
                                 "(start_samples); refine needs them, or a start that carries its certificate")
            cert_start = certify(model, data, start_cs, draws)
    certify_s = time.perf_counter() - t1
    kept = _choose(cert_start, cert_trained, z)
    info.update(kept=kept, start_certificate=cert_start, trained_certificate=cert_trained, time_s=seconds,
                certify_s=certify_s, budget_s=budget, trained_weights=np.asarray(trained.weights),
                trained_indices=np.asarray(trained.indices),
                refine_method=construction.name, start_method=coreset.method)
    if kept == "start":
        info["samples"] = info.get("start_samples", info["samples"])
        out = Coreset(jnp.asarray(indices), jnp.asarray(weights), info, coreset.method)
        cert = cert_start
    else:
        out = Coreset(trained.indices, trained.weights, info, f"refine_{construction.name}")
        cert = cert_trained
    settings = dict(coreset.settings or {}, N=n, refine={
        "method": construction.name, "options": dict(opts), "kept": kept, "time_s": seconds,
        "budget_s": budget, "start_method": coreset.method})
    return Coreset(out.indices, out.weights, out.info, out.method, settings, cert)


def _budget_for(coreset: Coreset, time_budget: Optional[float]) -> float:
    """The training's wall-clock budget in seconds (`refine`'s docstring)."""
    if time_budget is not None:
        if isinstance(time_budget, bool) or not isinstance(time_budget, (int, float)) or not time_budget > 0:
            raise ValueError(f"time_budget: must be a positive number of seconds (or math.inf), got {time_budget!r}")
        return float(time_budget)
    spent = (coreset.settings or {}).get("time_s")
    if spent is None:
        return math.inf
    return max(MIN_BUDGET_S, BUDGET_FACTOR * float(spent))


def _choose(start, trained, z: float) -> str:
    """"trained" if its certificate is trustworthy and either the start's is not, or its KL estimate is lower
    by z combined standard errors; else "start" (the start is the safe default)."""
    if trained.verdict == "unreliable" or not np.isfinite(trained.kl):
        return "start"
    if start.verdict == "unreliable" or not np.isfinite(start.kl):
        return "trained"
    se = math.sqrt(float(start.kl_se) ** 2 + float(trained.kl_se) ** 2)
    return "trained" if trained.kl + z * se < start.kl else "start"
