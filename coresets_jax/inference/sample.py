"""MCMC on weighted data: `sample` (the public entry point) and `sample_weighted_fn` (its jittable core).

The target is the coreset posterior (HC §2)

    log pi_w(theta) = sum_m w_m log p(x_m | theta) + log pi_0(theta),

evaluated on the gathered coreset rows only, so one density evaluation costs O(M), not O(N).

Warm-up and sampling for all chains run in ONE jitted function of `(key, rows, weights, init_positions,
init_cov)`; chains run under `vmap`, steps under `lax.scan`. The rows and weights are traced arguments, so
a new coreset of the same capacity reuses the compiled code. The jitted function is cached per
(model, method, num_samples, num_warmup, num_chains, thin, settings).

Methods:
- "nuts", "hmc": BlackJAX kernels with `blackjax.window_adaptation` (step size and diagonal mass matrix),
  started from the diagonal of the Laplace covariance;
- "mala": preconditioned MALA with windowed adaptation of step size (target 0.574, LR §4) and covariance;
- "rwmh": Gaussian random walk with adaptation of the proposal covariance and scale (target 0.234,
  HC §7.3).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from typing import Any, Callable, NamedTuple, Optional

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from blackjax.adaptation.base import get_filter_adapt_info_fn

from ..core import validate as _validate
from ..core.model import Model
from ..pihat import laplace
from ..core import Coreset
from . import mala as _mala
from . import rwmh as _rwmh
from ._adapt import run_warmup

__all__ = ["METHODS", "Posterior", "SamplerStats", "sample", "sample_weighted_fn", "weighted_logdensity",
           "trace_count"]

Array = jax.Array

METHODS = ("nuts", "hmc", "mala", "rwmh")

# Settings each method accepts, with defaults. `initial_step_size=None` means a dimension-based default.
DEFAULT_SETTINGS = {
    "nuts": {"target_accept": 0.8, "max_num_doublings": 10, "initial_step_size": 1.0},
    "hmc": {"target_accept": 0.8, "num_integration_steps": 10, "initial_step_size": 1.0, "step_jitter": 0.2},
    "mala": {"target_accept": 0.574, "initial_step_size": None},
    "rwmh": {"target_accept": 0.234, "initial_step_size": None},
}

# Number of times each cached sampler has been traced (compiled); a Python side effect of tracing.
_TRACES: dict = {}


def trace_count() -> int:
    """Total number of times any `sample` kernel has been traced (for no-recompile checks)."""
    return sum(_TRACES.values())


class SamplerStats(NamedTuple):
    """Per-chain and per-draw diagnostics from `sample_weighted_fn`.

    acceptance_rate: (C,) mean acceptance probability over the kept draws' steps.
    num_divergent: (C,) divergent transitions during sampling (NUTS/HMC; 0 for MALA and RWMH).
    step_size: (C,) adapted step size (MALA and RWMH: the global proposal scale).
    warmup_acceptance_rate: (C,) mean acceptance during warm-up (NaN for NUTS/HMC: not recorded).
    num_integration_steps: (C,) mean leapfrog steps per transition (NUTS/HMC; 1 for MALA, 0 for RWMH).
    draw_acceptance: (C, S) acceptance probability of each kept draw's last step.
    draw_divergent: (C, S) whether any step since the previous kept draw diverged.
    """

    acceptance_rate: Array
    num_divergent: Array
    step_size: Array
    warmup_acceptance_rate: Array
    num_integration_steps: Array
    draw_acceptance: Array
    draw_divergent: Array


def weighted_logdensity(model: Model, rows: Any, weights: Array) -> Callable[[Array], Array]:
    """theta -> sum_m w_m log p(rows_m | theta) + log pi_0(theta); rows with w_m = 0 contribute exactly 0."""

    def logdensity(theta):
        lls = jax.vmap(model.log_likelihood, in_axes=(None, 0))(theta, rows)
        w = weights.astype(lls.dtype)
        return jnp.sum(jnp.where(w > 0, w * lls, 0.0)) + model.log_prior(theta)

    return logdensity


def _hmc_chain(alg, extra, logdensity, num_samples, num_warmup, thin, target, init_step, jitter=0.0):
    def chain(key, position, imm0):
        k_warm, k_sample = jax.random.split(key)
        if num_warmup > 0:
            warmup = blackjax.window_adaptation(
                alg, logdensity, is_mass_matrix_diagonal=True, initial_inverse_mass_matrix=imm0,
                initial_step_size=init_step, target_acceptance_rate=target,
                adaptation_info_fn=get_filter_adapt_info_fn(), **extra)
            (state, params), _ = warmup.run(k_warm, position, num_warmup)
        else:
            params = {"step_size": jnp.asarray(init_step, position.dtype), "inverse_mass_matrix": imm0}
            state = None
        kernel = alg(logdensity, **{**extra, **params})
        if state is None:
            state = kernel.init(position)
        if jitter > 0:
            # HMC with a fixed path length can resonate with the target (e.g. a Gaussian's period);
            # a random step size h * U(1 - jitter, 1 + jitter) per transition breaks it (Neal 2011, §5.4).
            hmc_kernel = blackjax.mcmc.hmc.build_kernel()

            def step(k, state):
                k_jit, k_step = jax.random.split(k)
                u = jax.random.uniform(k_jit, (), minval=1.0 - jitter, maxval=1.0 + jitter)
                return hmc_kernel(k_step, state, logdensity, params["step_size"] * u,
                                  params["inverse_mass_matrix"], extra["num_integration_steps"])
        else:
            step = kernel.step

        def inner(carry, k):
            state, div, nsteps = carry
            state, info = step(k, state)
            nsteps = nsteps + jnp.asarray(info.num_integration_steps, jnp.int32)
            return (state, div | info.is_divergent, nsteps), info.acceptance_rate

        def outer(state, k):
            keys = jax.random.split(k, thin)
            carry = (state, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
            (state, div, nsteps), acc = jax.lax.scan(inner, carry, keys)
            return state, (state.position, acc[-1], jnp.mean(acc), div, nsteps)

        _, (draws, acc_last, acc_mean, div, nsteps) = jax.lax.scan(
            outer, state, jax.random.split(k_sample, num_samples))
        dtype = draws.dtype
        return draws, SamplerStats(
            jnp.mean(acc_mean), jnp.sum(div), jnp.asarray(params["step_size"], dtype),
            jnp.asarray(jnp.nan, dtype), jnp.sum(nsteps) / (num_samples * thin), acc_last, div)

    return chain


def _metropolis_chain(module, logdensity, num_samples, num_warmup, thin, target, init_step, reference):
    kernel = module.build_kernel()
    step = lambda k, s, h, chol: kernel(k, s, logdensity, h, chol)

    def chain(key, position, chol0):
        k_warm, k_sample = jax.random.split(key)
        state = module.init(position, logdensity)
        h0 = reference if init_step is None else init_step
        state, h, chol, warm_acc = run_warmup(step, state, lambda s: s.position, k_warm, num_warmup,
                                              target, h0, chol0, reference)

        def inner(state, k):
            state, info = step(k, state, h, chol)
            return state, info.acceptance_rate

        def outer(state, k):
            state, acc = jax.lax.scan(inner, state, jax.random.split(k, thin))
            return state, (state.position, acc[-1], jnp.mean(acc))

        _, (draws, acc_last, acc_mean) = jax.lax.scan(outer, state, jax.random.split(k_sample, num_samples))
        dtype = draws.dtype
        nsteps = 1.0 if module is _mala else 0.0
        return draws, SamplerStats(
            jnp.mean(acc_mean), jnp.asarray(0), jnp.asarray(h, dtype), warm_acc,
            jnp.asarray(nsteps, dtype), acc_last, jnp.zeros(num_samples, bool))

    return chain


def sample_weighted_fn(model: Model, method: str = "nuts", *, num_samples: int, num_warmup: int,
                       num_chains: int = 1, thin: int = 1, **settings) -> Callable:
    """The jittable sampler of pi_w for fixed static settings.

    Returns `run(key, rows, weights, init_positions, init_cov) -> (samples, stats)` where

      key: a PRNG key (typed or raw);
      rows: the data pytree of the M rows to weight (leading axis M), e.g. `tree_map(lambda a: a[idx], data)`;
      weights: (M,) non-negative weights w_m (traced; rows with w_m = 0 contribute nothing);
      init_positions: (num_chains, D) starting points;
      init_cov: (D, D) a rough posterior covariance (e.g. a Laplace covariance, or the identity); NUTS/HMC
        start their diagonal inverse mass matrix at its diagonal, MALA/RWMH their preconditioner at it;
      samples: (num_chains, num_samples, D), after `num_warmup` adaptation steps and thinning by `thin`;
      stats: a `SamplerStats` of per-chain diagnostics.

    `run` performs no validation and has no Python side effects, so it can be called under `jax.jit`,
    `vmap` or `grad`-free transformations with traced `rows`, `weights` and `init_*` (Sparse VI uses it to
    draw from pi_w inside its own jitted loop). Static arguments (method, counts, settings) fix the trace.

    Settings: `target_accept`, `initial_step_size` (all methods), `max_num_doublings` (NUTS),
    `num_integration_steps` and `step_jitter` (HMC: each transition uses step size h * U(1 - j, 1 + j)
    after warm-up); see `DEFAULT_SETTINGS`.
    """
    _validate.check_choice(method, METHODS, "method")
    opts = dict(DEFAULT_SETTINGS[method])
    for name, value in settings.items():
        if name not in opts:
            raise ValueError(f"{name}: not a setting of method {method!r}; its settings are {list(opts)}")
        opts[name] = value
    target = float(opts["target_accept"])
    if not 0.0 < target < 1.0:
        raise ValueError(f"target_accept: must lie in (0, 1), got {target}")

    def run(key, rows, weights, init_positions, init_cov):
        if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            key = jax.random.wrap_key_data(key)
        logdensity = weighted_logdensity(model, rows, weights)
        d = init_positions.shape[-1]
        if method in ("nuts", "hmc"):
            alg = blackjax.nuts if method == "nuts" else blackjax.hmc
            extra = ({"max_num_doublings": int(opts["max_num_doublings"])} if method == "nuts"
                     else {"num_integration_steps": int(opts["num_integration_steps"])})
            jitter = float(opts.get("step_jitter", 0.0))
            if not 0.0 <= jitter < 1.0:
                raise ValueError(f"step_jitter: must lie in [0, 1), got {jitter}")
            chain = _hmc_chain(alg, extra, logdensity, num_samples, num_warmup, thin, target,
                               float(opts["initial_step_size"]), jitter)
            precond = jnp.diag(init_cov)
        else:
            module = _mala if method == "mala" else _rwmh
            reference = 1.65 * d ** (-1.0 / 6.0) if method == "mala" else 2.38 / math.sqrt(d)
            init_step = opts["initial_step_size"]
            chain = _metropolis_chain(module, logdensity, num_samples, num_warmup, thin, target,
                                      None if init_step is None else float(init_step), reference)
            precond = jnp.linalg.cholesky(init_cov)
        keys = jax.random.split(key, init_positions.shape[0])
        return jax.vmap(chain, in_axes=(0, 0, None))(keys, init_positions, precond)

    return run


@functools.lru_cache(maxsize=64)
def _compiled(model: Model, method: str, num_samples: int, num_warmup: int, num_chains: int, thin: int,
              settings: tuple):
    run = sample_weighted_fn(model, method, num_samples=num_samples, num_warmup=num_warmup,
                             num_chains=num_chains, thin=thin, **dict(settings))
    cache_key = (model.name, method, num_samples, num_warmup, num_chains, thin, settings, id(run))

    def traced(key, rows, weights, init_positions, init_cov):
        _TRACES[cache_key] = _TRACES.get(cache_key, 0) + 1  # runs only while tracing
        return run(key, rows, weights, init_positions, init_cov)

    return jax.jit(traced)


@functools.lru_cache(maxsize=64)
def _weighted_model(model: Model) -> Model:
    """The model on data (rows, w) with datum log-likelihood w log p(x | theta), for a weighted Laplace fit.

    Cached per model so `laplace`'s jitted Newton solve is reused across calls.
    """

    def log_likelihood(theta, datum):
        x, w = datum
        ll = model.log_likelihood(theta, x)
        return jnp.where(w > 0, w * ll, 0.0)

    init_params = None if model.init_params is None else (lambda data: model.init_params(data[0]))
    return Model(log_likelihood=log_likelihood, log_prior=model.log_prior, init_params=init_params,
                 name=f"weighted_{model.name}")


@functools.partial(jax.jit, static_argnames=("have_chains",))
def _diagnostics(samples, have_chains: bool):
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

        `az.summary(post.to_arviz())` and `az.plot_trace(post.to_arviz())` then work as usual.
        """
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
        return (f"Posterior(method={self.method!r}, samples={tuple(self.samples.shape)}, "
                f"acceptance={np.round(np.asarray(self.acceptance_rate), 3).tolist()}, "
                f"divergent={np.asarray(self.num_divergent).tolist()}, "
                f"max_rhat={float(jnp.nanmax(self.rhat)) if self.num_chains > 1 else float('nan'):.3f}, "
                f"min_ess={float(jnp.min(self.ess)):.0f}, wall_time={self.wall_time:.2f}s)")


def _check_count(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: must be at least {minimum}, got {value}")
    return int(value)


def _gather(data: Any, n: int, weights: Any):
    """(rows, w) for the weighted density: the coreset's fixed-capacity slots, or all rows."""
    if weights is None:
        return data, None
    if isinstance(weights, Coreset):
        idx = jnp.asarray(weights.indices)
        w = jnp.asarray(weights.weights)
        if idx.ndim != 1 or w.shape != idx.shape:
            raise ValueError(f"weights: the coreset's indices and weights must be 1-D of equal length, got "
                             f"{idx.shape} and {w.shape}")
        if idx.shape[0] > 0 and (int(jnp.min(idx)) < 0 or int(jnp.max(idx)) >= n):
            raise ValueError(f"weights: coreset indices must lie in [0, N = {n})")
    else:
        try:
            w = jnp.asarray(weights)
        except TypeError as err:
            raise ValueError(f"weights: expected None, a Coreset or an array of shape (N,), got "
                             f"{type(weights).__name__}") from err
        if w.shape != (n,):
            raise ValueError(f"weights: expected shape (N,) = ({n},), got {w.shape}")
        if not jnp.issubdtype(w.dtype, jnp.number) or jnp.issubdtype(w.dtype, jnp.complexfloating):
            raise ValueError(f"weights: expected real numbers, got dtype {w.dtype}")
        nonzero = np.flatnonzero(np.asarray(w) != 0)
        # Gather the non-zero rows, padded to a power of two so that similar sizes share one compilation.
        capacity = min(n, 1 << max(int(nonzero.size) - 1, 0).bit_length())
        if capacity >= n:
            idx = jnp.arange(n)
        else:
            idx = jnp.asarray(np.concatenate([nonzero, np.zeros(capacity - nonzero.size, np.int64)]))
            w = jnp.where(jnp.arange(capacity) < nonzero.size, w[idx], 0.0)
    if not jnp.issubdtype(w.dtype, jnp.floating):
        w = w.astype(jnp.float32)
    if not bool(jnp.all(jnp.isfinite(w))):
        raise ValueError("weights: contain NaN or inf")
    if bool(jnp.any(w < 0)):
        raise ValueError("weights: must be non-negative")
    if not bool(jnp.any(w > 0)):
        raise ValueError("weights: all weights are zero, so the target is the prior; pass weights=None "
                         "for the full data, or a coreset with positive weights")
    rows = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf)[idx], data)
    return rows, w


def _initial_points(model, rows, w, key, num_chains, init):
    """(init_positions (C, D), init_cov (D, D)): Laplace mode and draws from the Laplace fit by default."""
    if init is not None:
        init = jnp.asarray(init)
        if not jnp.issubdtype(init.dtype, jnp.floating):
            init = init.astype(jnp.float32)
        if init.ndim == 1:
            init = jnp.broadcast_to(init, (num_chains, init.shape[0]))
        if init.ndim != 2 or init.shape[0] != num_chains:
            raise ValueError(f"init: expected shape (D,) or (num_chains, D) = ({num_chains}, D), got "
                             f"{init.shape}")
        _validate.check_finite(init, "init")
        d = init.shape[1]
        try:
            jax.eval_shape(weighted_logdensity(model, rows, w), init[0])
        except (TypeError, ValueError, IndexError) as err:
            raise ValueError(f"init: the model cannot evaluate a theta of shape ({d},): {err}") from err
        cov = None
        try:
            approx = laplace(_weighted_model(model), (rows, w), init=init[0])
            cov = approx.cov
        except ValueError:
            pass
        return init, (jnp.eye(d, dtype=init.dtype) if cov is None else cov.astype(init.dtype))
    if model.init_params is None:
        raise ValueError("init: the model has no init_params, so pass a starting theta of shape (D,) "
                         "or (num_chains, D)")
    try:
        approx = laplace(_weighted_model(model), (rows, w))
    except ValueError:
        theta0 = jnp.asarray(model.init_params(rows))
        theta0 = theta0.astype(jnp.promote_types(theta0.dtype, jnp.float32))
        return jnp.broadcast_to(theta0, (num_chains, theta0.shape[0])), jnp.eye(theta0.shape[0],
                                                                                dtype=theta0.dtype)
    starts = approx.sample(key, num_chains) if num_chains > 1 else approx.mean[None]
    return starts, approx.cov


def sample(model: Model, data: Any, key: Array, weights: Any = None, method: str = "nuts",
           num_samples: int = 1000, num_warmup: int = 1000, num_chains: int = 2, thin: int = 1,
           init: Optional[Array] = None, **settings) -> Posterior:
    """Draw MCMC samples from the (coreset) posterior pi_w (HC §2) with BlackJAX-style kernels.

    Args:
      model: a `cj.Model`.
      data: the data pytree (leading axis N).
      key: PRNG key.
      weights: None (full data, w = 1), a `Coreset` (its fixed-capacity `indices`/`weights` are gathered;
        padding has weight 0, so a new coreset of the same capacity reuses the compiled sampler), or a
        dense non-negative (N,) array (its non-zero rows are gathered, padded to a power of two).
      method: "nuts" | "hmc" | "mala" | "rwmh".
      num_samples: kept draws per chain (after thinning).
      num_warmup: adaptation steps per chain (discarded).
      num_chains: independent chains, run under `vmap`.
      thin: keep every `thin`-th step, so each chain takes num_warmup + thin * num_samples steps.
      init: starting theta, shape (D,) or (num_chains, D). By default the mode of the Laplace fit of the
        weighted posterior (with one chain), or independent draws from that fit (several chains), which
        also sets the initial mass matrix / proposal covariance. Falls back to `model.init_params`.
      **settings: `target_accept`, `initial_step_size`, `max_num_doublings` (NUTS),
        `num_integration_steps` and `step_jitter` (HMC); see `sample_weighted_fn`.

    Returns:
      A `Posterior` with `.samples` of shape (num_chains, num_samples, D) and diagnostics.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    n = _validate.check_data(data)
    key = _validate.check_key(key)
    _validate.check_choice(method, METHODS, "method")
    num_samples = _check_count(num_samples, "num_samples", 1)
    num_warmup = _check_count(num_warmup, "num_warmup", 0)
    num_chains = _check_count(num_chains, "num_chains", 1)
    thin = _check_count(thin, "thin", 1)
    for name, value in settings.items():
        if name not in DEFAULT_SETTINGS[method]:
            raise ValueError(f"{name}: not a setting of method {method!r}; its settings are "
                             f"{list(DEFAULT_SETTINGS[method])}")
        if isinstance(value, (list, dict, np.ndarray, jax.Array)):
            raise ValueError(f"{name}: settings must be plain Python scalars, got {type(value).__name__}")

    rows, w = _gather(data, n, weights)
    if w is None:
        leaf = jax.tree_util.tree_leaves(data)[0]
        w = jnp.ones(n, jnp.promote_types(jnp.result_type(leaf), jnp.float32))
        rows = jax.tree_util.tree_map(jnp.asarray, data)

    k_init, k_run = jax.random.split(key)
    t0 = time.perf_counter()
    init_positions, init_cov = _initial_points(model, rows, w, k_init, num_chains, init)
    start_ld = jax.vmap(weighted_logdensity(model, rows, w))(init_positions)
    if not bool(jnp.all(jnp.isfinite(start_ld))):
        raise ValueError("init: the weighted log density is not finite at the starting point(s)")
    init_time = time.perf_counter() - t0

    run = _compiled(model, method, num_samples, num_warmup, num_chains, thin,
                    tuple(sorted(settings.items())))
    before = trace_count()
    t0 = time.perf_counter()
    samples, stats = run(k_run, rows, w, init_positions, init_cov)
    samples = jax.block_until_ready(samples)
    wall_time = time.perf_counter() - t0
    compiled = trace_count() > before
    if not bool(jnp.all(jnp.isfinite(samples))):
        raise FloatingPointError(f"method {method!r} produced non-finite samples; check the model's "
                                 "log density, or try another method or init")
    if num_samples >= 4:
        rhat, ess = _diagnostics(samples, num_chains > 1)
    else:
        rhat = ess = jnp.full(samples.shape[-1], jnp.nan, samples.dtype)
    return Posterior(samples, stats.acceptance_rate, stats.num_divergent, stats.step_size, rhat, ess,
                     wall_time, init_time, compiled, method, num_warmup, thin, stats)
