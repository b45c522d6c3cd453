"""`cj.sample`: MCMC on the coreset posterior pi_w (HC §2): validate, find starting points, run the pure
core (`driver.sample_fn`), check the diagnostics.

The target is log pi_w(theta) = sum_m w_m log p(x_m | theta) + log pi_0(theta) on the gathered coreset rows
only, so one density evaluation costs O(M), not O(N). The compiled core is cached per (model, method,
counts, settings); a new coreset of the same capacity reuses it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import progress as _progress
from .. import compilation as _compilation
from ..compilation import fast_jit, loop_jit_options
from ..core import Model, initial_theta, weighted_log_density
from ..core import checks as _checks
from ..core import validate as _validate
from ..weighting.pihat import gaussian_draws, laplace_fn
from . import kernels as _kernels
from .driver import sample_fn
from .posterior import Posterior, check_diagnostics, diagnostics
from ..core import compiled as _compiled_fns
from ..compilation import full_precision
from ..core import caller

__all__ = ["METHODS", "sample", "trace_count"]

Array = jax.Array


METHODS = tuple(_kernels.KERNELS)  # the built-in kernels; `kernels.register_kernel` adds more


# Number of times each cached sampler has been traced (compiled); a Python side effect of tracing.
_TRACES: dict = {}


def trace_count() -> int:
    """Total number of times any `sample` kernel has been traced (for no-recompile checks)."""
    return sum(_TRACES.values())


# Gathered rows x D up to which the sampler compiles with XLA:CPU's classic fusion emitters
# (compilation.LEGACY_EMITTERS). On a coreset's few rows they halve NUTS's compilation: 2 x (500 + 500) draws,
# first call 1.26 s against 2.16 s at 100 rows x D = 10, 1.39 s against 2.09 s at 1,000 x 10, 1.46 s against
# 2.37 s at 300 x 50; the compiled loop is 1.09-1.15x slower. Above, it is 1.15-1.2x slower (4,096 x 10, 2,000
# x 50) and on all rows 2.7x (N = 1e5, D = 11): benchmarks/investigations/cpu_emitters.py.
LEGACY_LOOP_WORK = 1 << 15


@functools.lru_cache(maxsize=64)
def _compiled(model: Model, method: str, num_samples: int, num_warmup: int, num_chains: int, thin: int,
              settings: tuple, show_progress: bool, out_dtype: Optional[str] = None, small: bool = False):
    # `show_progress` is part of the cache key: a sampler compiled with progress off holds no callbacks.
    run = sample_fn(model, method, num_samples=num_samples, num_warmup=num_warmup, num_chains=num_chains,
                    thin=thin, show_progress=show_progress, **dict(settings))
    cache_key = (model.name, method, num_samples, num_warmup, num_chains, thin, settings, id(run))

    def traced(key, rows, weights, init_positions, init_cov):
        _TRACES[cache_key] = _TRACES.get(cache_key, 0) + 1  # runs only while tracing
        samples, stats = run(key, rows, weights, init_positions, init_cov)
        finite = jnp.all(jnp.isfinite(samples))  # the check, in the same program
        if out_dtype is not None:  # the float64 chains' results in the data's dtype, in the same program
            samples, stats = _to_dtype((samples, stats), jnp.dtype(out_dtype))
        return samples, stats, finite

    return _compiled_fns.jit(traced, legacy_emitters=small, **loop_jit_options())  # a loop of kernel steps


# Rows x D^2 up to which the starting-point program is compiled fast (`compilation.FAST_COMPILE`): its
# Laplace fit then runs in about a millisecond either way, next to a sampler that runs for tenths of a
# second or more, and it compiles in about half the time.
FAST_INIT_WORK = 1 << 22


@functools.lru_cache(maxsize=64)
def _compiled_init(model: Model, num_chains: int, given: bool, fast: bool):
    """The starting points as one compiled program: `(key, rows, w, theta) -> (key for the run, init
    positions (C, D), init cov (D, D), whether the density is finite at every start, whether the fit held)`.

    The Laplace fit of the weighted posterior on the gathered rows gives the covariance (and, unless the
    starts are `given`, the starts: its mode with one chain, draws from it with several). A fit that is not
    finite or not positive definite falls back to `theta` and the identity, and `sample` says so. Eagerly this was a
    key split, the fit, four operations for the draws and about twenty for the log densities at the starts,
    each compiled on a first call.
    """
    fit = laplace_fn(model)

    def init(key, rows, w, theta):
        k_init, k_run = jax.random.split(key)
        start = theta[0] if given else theta
        approx = fit(rows, start, w)
        ok = approx.info["finite"] & approx.info["positive_definite"]
        d = start.shape[0]
        cov = jnp.where(ok, approx.cov, jnp.eye(d, dtype=approx.cov.dtype)).astype(start.dtype)
        if given:
            starts = theta
        else:
            draws = gaussian_draws(k_init, approx.mean, approx.cov, num_chains) if num_chains > 1 \
                else approx.mean[None]
            starts = jnp.where(ok, draws, jnp.broadcast_to(theta, (num_chains, d))).astype(start.dtype)
        start_ld = jax.vmap(weighted_log_density(model, rows, w))(starts)
        return k_run, starts, cov, jnp.all(jnp.isfinite(start_ld)), ok

    return fast_jit(init) if fast else jax.jit(init)


def _prefetch_sampler(run, key, rows, w, num_chains: int, dim: int, dtype) -> _compilation.Prefetched:
    """Lower `run` for (key, rows, w, (C, D) starts, (D, D) cov) and compile it in the background
    (`compilation.compile_ahead`); nothing with prefetching off. When it is compiled already, the lowering
    is JAX's cached one and the thread finds the executable (a warm call costs the same)."""
    spec = lambda shape: jax.ShapeDtypeStruct(shape, dtype)  # noqa: E731
    return _compilation.compile_ahead(run, jax.ShapeDtypeStruct(key.shape, key.dtype), rows, w,
                                      spec((num_chains, dim)), spec((dim, dim)))


def _initial_theta(model, rows, num_chains, init):
    """(theta, given): the validated `init` as (num_chains, D), or the model's starting theta (D,)."""
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
        _checks.check_theta(model, rows, init, "init")
        return init, True
    theta0 = initial_theta(model, rows)
    if theta0 is None:
        raise ValueError("init: the model has neither init_params nor dim, so pass a starting theta of shape "
                         "(D,) or (num_chains, D) (or build the model with cj.Model(..., dim=D))")
    return theta0, False


def _chain_precision(weights):
    """float64 for the chains on a coreset (weights given), whatever jax_enable_x64 says; else no change.

    A coreset's weights reach 1e5-1e6 (OMP gives rows far from the decision boundary, whose gradients are
    tiny, weights of ~N), so the weighted gradient sum_m w_m grad log p(x_m | theta) cancels terms far larger
    than itself, and in float32 its rounding is a rough, stiff force: NUTS then adapts a tiny step and runs
    to its tree-depth cap. Measured on the logistic regression of benchmarks/vs_peers.py (N = 5e5, D = 10,
    OMP M = 100, 98 rows, weights up to 9e5), 2 x (400 + 400) NUTS: float32 1023 leapfrog steps per draw,
    step 4e-4-1e-3, 7.3-7.5 s per call; float64 6.6-7.0 steps, step 0.39-0.44, 0.1-0.3 s, with the same
    posterior sd (benchmarks/investigations/float32_chains.py). On M rows the float64 work is negligible.
    The full data (weights=None) keeps its dtype: there w = 1 and nothing cancels at that scale. The draws
    come back in float32, as before, unless x64 is on.

    Returns (context, dtype of the results: None to keep the chains' own).
    """
    if weights is None or jax.config.read("jax_enable_x64"):
        return contextlib.nullcontext(), None
    return jax.enable_x64(True), jnp.float32


# Gathered coreset rows up to which the chains run on the host CPU when the data lives on an accelerator
# (0: where the data lives). A coreset's chains evaluate M rows per step: on a GPU that is a chain of tiny
# dependent kernels bound by launch latency, on the host a loop in cache. Measured on an H200 with 16 host
# cores (D = 10, NUTS 2 x (400 + 400), benchmarks/investigations/sample_placement.py), compiled calls: the
# host took 0.16 s against the GPU's 1.03 s at M = 100, 0.35 s against 0.78 s at M = 1,000, and 3.25 s
# against 0.82 s at M = 10,000; the host's time grows with M and the GPU's does not, so they cross near
# M = 2,500. From a fresh process, M = 100: 2.2 s on the host against 5.8 s. One model and one card only:
# the crossing for other D, models or host core counts has not been measured.
HOST_CHAIN_ROWS = 2_048


def _chain_device(rows):
    """(host CPU device, where the draws go back) when a coreset's chains should run on the host, else (None,
    None). The draws go back to the data's device, or replicated over its mesh when it spans several."""
    leaves = jax.tree_util.tree_leaves(rows)
    if not leaves:
        return None, None
    # NumPy rows would go where JAX puts them: its default device
    first = leaves[0]
    devices = first.devices() if isinstance(first, jax.Array) else {jax.devices()[0]}
    host, home = _host_for(devices, int(np.shape(first)[0]) if np.ndim(first) else 1)
    sharding = getattr(first, "sharding", None)
    if host is not None and len(devices) > 1 and isinstance(sharding, jax.sharding.NamedSharding):
        home = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
    return host, home


def _host_for(devices, num_rows: int):
    """The rule: the gathered rows live on an accelerator and number at most `HOST_CHAIN_ROWS`."""
    if not HOST_CHAIN_ROWS or num_rows > HOST_CHAIN_ROWS or all(d.platform == "cpu" for d in devices):
        return None, None
    try:
        host = jax.devices("cpu")[0]
    except RuntimeError:  # a JAX without its CPU backend
        return None, None
    return host, min(devices, key=lambda d: d.id)


def _to_dtype(tree, dtype):
    """Cast the floating leaves of `tree` to `dtype` (the chains' float64 back to the data's float32)."""
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != dtype else x, tree)


def _run_chains(model, rows, w, key, method, num_samples, num_warmup, num_chains, thin, init, warn, settings,
                out_dtype):
    """Starting points, warm-up and sampling on (rows, w); returns the draws, stats and timings."""
    theta, given = _initial_theta(model, rows, num_chains, init)
    # One float type for the chain state and the weights. With x64 on it is float64: BlackJAX's trajectory
    # starts its proposal weight at a Python 0.0 (float64 then), so a float32 state gives its lax.cond
    # branches different types. Float32 data stays float32.
    dtype = jnp.promote_types(jnp.result_type(theta), jnp.result_type(w))
    if jax.config.read("jax_enable_x64"):
        dtype = jnp.promote_types(dtype, jnp.float64)
    # On the host: an eager cast is a compiled program of its own (several, under a float64 context).
    theta, w = np.asarray(theta, dtype), np.asarray(w, dtype)
    if given:
        try:
            jax.eval_shape(weighted_log_density(model, rows, w), theta[0])
        except (TypeError, ValueError, IndexError) as err:
            raise ValueError(f"init: the model cannot evaluate a theta of shape ({theta.shape[1]},): "
                             f"{err}") from err
    run = _compiled(model, method, num_samples, num_warmup, num_chains, thin,
                    tuple(sorted(settings.items())), _progress.is_enabled(),
                    None if out_dtype is None else jnp.dtype(out_dtype).name,
                    w.shape[0] * theta.shape[-1] <= LEGACY_LOOP_WORK)
    before = trace_count()
    # The sampler is traced here (a model is traced in one thread only) and compiled on another core while
    # the starting points compile and run: their shapes are known, (C, D) and (D, D) in `dtype`.
    compiling = _prefetch_sampler(run, key, rows, w, num_chains, theta.shape[-1], dtype)
    t0 = time.perf_counter()
    fast = w.shape[0] * theta.shape[-1] ** 2 <= FAST_INIT_WORK
    k_run, init_positions, init_cov, start_ok, fit_ok = _compiled_init(model, num_chains, given, fast)(
        key, rows, w, theta)
    if not bool(start_ok):
        raise ValueError("init: the weighted log density is not finite at the starting point(s)")
    if warn and not bool(fit_ok):  # never silent: the chains then start with an uninformed mass matrix
        warnings.warn("sample: the Laplace fit of the posterior failed (not finite, or its Hessian not positive "
                      "definite at the point found: a saddle or a flat direction); the chains start at "
                      + ("init" if given else "the model's starting theta") + " with an identity covariance, "
                      "which warm-up then adapts; pass init= near the posterior mass for a better start",
                      RuntimeWarning, stacklevel=caller.stacklevel())
    init_time = time.perf_counter() - t0
    compiling.wait()
    t0 = time.perf_counter()
    samples, stats, finite = run(k_run, rows, w, init_positions, init_cov)
    samples = jax.block_until_ready(samples)
    wall_time = time.perf_counter() - t0
    compiled = trace_count() > before
    if not bool(finite):
        raise FloatingPointError(f"method {method!r} produced non-finite samples; check the model's "
                                 "log density, or try another method or init")
    return samples, stats, wall_time, init_time, compiled


@full_precision
def sample(model: Model, data: Any, key: Array, weights: Any = None, method: str = "nuts",
           num_samples: int = 1000, num_warmup: int = 1000, num_chains: int = 2, thin: int = 1,
           init: Optional[Array] = None, warn: bool = True, certify: bool = False, **settings) -> Posterior:
    """Draw MCMC samples from the (coreset) posterior pi_w (HC §2) with BlackJAX-style kernels.

    Args:
      model: a `cj.Model`.
      data: the data pytree (leading axis N).
      key: PRNG key.
      weights: None (full data, w = 1), a `Coreset` (its fixed-capacity `indices`/`weights` are gathered;
        padding has weight 0, so a new coreset of the same capacity reuses the compiled sampler), or a
        dense non-negative (N,) array (its non-zero rows are gathered, padded to a power of two). On a
        coreset the chains run in float64 even with x64 off (its large weights make float32 gradients too
        rough for NUTS) and the draws come back in the data's float32. When the data lives on an accelerator,
        a coreset of at most `HOST_CHAIN_ROWS` (2,048) rows runs its chains on the host CPU, where M-row
        steps are not bound by kernel-launch latency, and the draws come back on the data's device.
      method: "nuts" | "hmc" | "mala" | "rwmh" (or any kernel added with `kernels.register_kernel`). The
        posterior-driven constructions call the same choice `kernel=`: there it is one of a construction's
        options, here an argument of this public function, kept as the public API names it.
      num_samples: kept draws per chain (after thinning).
      num_warmup: adaptation steps per chain (discarded).
      num_chains: independent chains, run under `vmap`.
      thin: keep every `thin`-th step, so each chain takes num_warmup + thin * num_samples steps.
      init: starting theta, shape (D,) or (num_chains, D). By default the mode of the Laplace fit of the
        weighted posterior (with one chain), or independent draws from that fit (several chains), which
        also sets the initial mass matrix / proposal covariance. Falls back to `model.init_params`.
      **settings: `target_accept`, `initial_step_size`, `max_num_doublings` (NUTS),
        `num_integration_steps` and `step_jitter` (HMC); see `kernels.KERNELS`. A non-positive step size,
        a target acceptance outside (0, 1) and the like raise ValueError.
      warn: warn (RuntimeWarning) when R-hat > 1.01, divergences exceed 1% of transitions, or the bulk
        ESS falls below 100 per chain, as NumPyro's and ArviZ's summaries flag them.
      certify: with a coreset as `weights`, certify the draws against the full `data` (`cj.certify`: one
        pass over the data) and attach the result as `post.certificate`; it warns when k-hat > 0.7.

    Returns:
      A `Posterior` with `.samples` of shape (num_chains, num_samples, D) and diagnostics.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    certify = _validate.check_bool(certify, "certify")
    if certify and weights is None:
        raise ValueError("certify: needs a coreset as weights; full-data draws need no certificate")
    n = _checks.check_model_data(model, data)
    key = _validate.check_key(key)
    _validate.check_choice(method, tuple(_kernels.KERNELS), "method")
    num_samples = _validate.check_positive_int(num_samples, "num_samples")
    num_warmup = _validate.check_nonneg_int(num_warmup, "num_warmup")
    num_chains = _validate.check_positive_int(num_chains, "num_chains")
    thin = _validate.check_positive_int(thin, "thin")
    _kernels.check_settings(method, settings)  # an unknown or impossible setting raises ValueError here

    rows, w = _validate.weighted_rows(data, n, weights)
    if w is None:
        leaf = jax.tree_util.tree_leaves(data)[0]
        w = jnp.asarray(np.ones(n, jnp.promote_types(jnp.result_type(leaf), jnp.float32)))
        rows = jax.tree_util.tree_map(jnp.asarray, data)

    # A coreset's chains run in float64 (`_chain_precision`): only its M gathered rows are evaluated.
    precision, out_dtype = _chain_precision(weights)
    host, home = _chain_device(rows) if weights is not None else (None, None)
    placement = contextlib.nullcontext()
    if host is not None:  # arrays the model closes over become constants of the host's program
        rows, w, key = jax.device_put((rows, w, key), host)
        init = None if init is None else np.asarray(init)
        placement = jax.default_device(host)
    with precision, placement:
        samples, stats, wall_time, init_time, compiled = _run_chains(
            model, rows, w, key, method, num_samples, num_warmup, num_chains, thin, init, warn, settings,
            out_dtype)
    if host is not None:  # back where the data lives, so that the next step (cj.certify) finds them there
        samples, stats = jax.device_put((samples, stats), home)
    if num_samples >= 4:
        rhat, ess = diagnostics(samples, num_chains > 1)
    else:
        rhat = ess = jnp.asarray(np.full(samples.shape[-1], np.nan, samples.dtype))
    post = Posterior(samples, stats.acceptance_rate, stats.num_divergent, stats.step_size, rhat, ess,
                     wall_time, init_time, compiled, method, num_warmup, thin, stats, model)
    if warn:
        for problem in check_diagnostics(post):
            warnings.warn(f"sample: {problem}; run longer, reparameterise, or check the model",
                          RuntimeWarning, stacklevel=caller.stacklevel())
    if certify:
        from ..certification import certify as _certify, warn_if_unreliable

        post = dataclasses.replace(post, certificate=_certify(model, data, weights, samples))
        warn_if_unreliable(post.certificate, "sample")
    return post
