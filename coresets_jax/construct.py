"""Public construction entry points, each = validate, then a pure core, then check.

- `build_fn(method, size, **options)`: the pure core on projected vectors, `(V, key) -> Coreset`; it jits and
  vmaps (over keys and over a batch of V).
- `build(V, size, method, key, ...)`: validates, optionally compresses V (a host decision), runs the core,
  and raises if the core reported non-finite weights.
- `coreset_fn(model, method, size, **options)`: the pure core of a posterior-driven method,
  `(key, data, start, data_weights=None) -> Coreset`.
- `coreset(model, data, size, method, key, ...)`: the whole pipeline of HC Algorithm 3 (pi_hat, projection,
  solver) for vector methods, or pi_hat then the posterior-driven core.

Methods are looked up in `coresets_jax.registry` by name, or passed as a `cj.Construction`.
"""

from __future__ import annotations

import functools
import inspect
import time
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import solvers as _solvers  # noqa: F401 (registers the vector methods first, so they list first)
from . import compress as _compress, pihat as _pihat, posterior_driven as _posterior_driven  # noqa: F401
from . import io as _io
from . import sharding as _sharding
from .core import Coreset, Model, take_rows
from .core import checks as _checks
from .core import validate as _validate
from . import projection as _projection
from .registry import METHODS, POSTERIOR_METHODS, Construction, Start, resolve
from .solvers.base import make_problem, run
from .solvers.ops import refit_support
from .core import compiled as _compiled_fns

__all__ = ["METHODS", "POSTERIOR_METHODS", "build", "build_fn", "coreset", "coreset_fn", "relative_error"]


def _as_key(key: jax.Array) -> jax.Array:
    """A typed key from a typed or raw (uint32[2]) key; a static dtype test, so it is fine under jit."""
    return key if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else jax.random.wrap_key_data(key)


def _support_error(V: jax.Array, target: jax.Array, indices: jax.Array, weights: jax.Array) -> jax.Array:
    """||target - V^T w|| / ||target|| from the support rows only (O(M J)); the absolute error if target = 0."""
    approx = weights.astype(target.dtype) @ take_rows(V, indices).astype(target.dtype)
    residual, scale = jnp.linalg.norm(target - approx), jnp.linalg.norm(target)
    return jnp.where(scale > 0, residual / jnp.where(scale > 0, scale, 1.0), residual)


def _finish(indices, weights, info, method: str) -> Coreset:
    """The core's result: finiteness reported in `info` (never a host sync inside the core)."""
    info = dict(info, finite=jnp.all(jnp.isfinite(weights)))
    return Coreset(indices.astype(jnp.int32), weights, info, method)


def _check_static_size(size: Any) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"size: must be a positive integer, got {size!r}")
    return int(size)


def build_fn(method: Any, size: int, *, refit: bool = False, **options):
    """The pure core of `build`: `(V, key) -> Coreset` for a vector method (jittable, vmappable).

    `jax.vmap(build_fn("giga", 100), in_axes=(None, 0))(V, keys)` runs a batch of trials in one call; the
    result's arrays gain a leading batch axis. With V sharded along N (`cj.shard`), rows are gathered with the
    mesh-aware `take_rows`, so V is never all-gathered: under `jax.set_mesh`, and also from a plain
    `jax.jit(solve)(V, key)`, which traces under the mesh V lives on (`sharding.input_mesh`).

    Args:
      method: a name in `cj.METHODS` or a vector `cj.Construction`.
      size: M, the capacity (and iteration budget of the greedy methods).
      refit: re-solve the weights on the chosen support by NNLS (`cj.refit`).
      **options: the method's options.

    The returned Coreset's `info` holds the solver's diagnostics plus `relative_error` (HC Eq. 3.2's
    ||sum v - V^T w|| / ||sum v||, computed from the support rows) and `finite` (all weights finite).
    Validation happens here, once (method, size, options); the function itself checks nothing at run time
    except that size <= N, a static fact of V's shape.
    """
    construction = resolve(method, needs="vectors")
    size = _check_static_size(size)
    if refit not in (True, False):
        raise ValueError(f"refit: expected True or False, got {refit!r}")
    solver = construction.make(size, **dict(construction.check_options(options)))

    def solve(V: jax.Array, key: jax.Array) -> Coreset:
        # jit without jax.set_mesh: trace under the mesh V lives on, so rows are read where they live
        with _sharding.input_mesh(V):
            return _solve(V, key)

    def _solve(V: jax.Array, key: jax.Array) -> Coreset:
        if V.ndim != 2 or size > V.shape[0]:
            raise ValueError(f"size: must be at most N = {V.shape[0]} (V of shape {V.shape})")
        problem = make_problem(V)
        indices, weights, info = run(solver, problem, _as_key(key))
        if refit:
            _, weights, result = refit_support(problem, indices, weights)
            info = dict(info, refit_iterations=result.iterations, refit_kkt=result.kkt)
        info = dict(info, relative_error=_support_error(V, problem.target, indices, weights))
        return _finish(indices, weights, info, construction.name)

    return solve


@functools.lru_cache(maxsize=256)
def _compiled_build(construction: Construction, size: int, options: tuple):
    """One jitted core per (construction, size, options): the same shapes never recompile."""
    return _compiled_fns.jit(build_fn(construction, size, **dict(options)))


def _check_finite_result(cs: Coreset) -> Coreset:
    if not bool(cs.info["finite"]):
        raise FloatingPointError(f"method {cs.method!r} produced non-finite weights; please report this "
                                 "with the input that caused it")
    return cs


@_compiled_fns.jit
def _peak(V: jax.Array) -> jax.Array:
    """max |v_nj|: one executable per shape (core/compiled.py), serving `rescaled` and `build`'s zero check."""
    return jnp.max(jnp.abs(V))


def rescaled(V: jax.Array, peak: Optional[float] = None) -> jax.Array:
    """V times an exact power of two that brings max |v_nj| into [2^-20, 2^20], or V itself when it is
    there already (one pass over V; no copy in the usual case). `peak` is max |v_nj| if already known.

    Every vector-sum problem is invariant to scaling V (w solves sum v ~ V^T w for V and for cV), but the
    solvers square and multiply entries of V: at 1e+-30 float32 overflows (inf/inf = NaN) or underflows
    (norms of 0, "every row is zero"). A power of two changes no mantissa, so the coreset is the one of V.
    """
    peak = float(_peak(V)) if peak is None else peak  # the caller's pass may have it already
    if peak == 0.0 or 2.0 ** -20 <= peak <= 2.0 ** 20 or not np.isfinite(peak):
        return V
    return V * jnp.asarray(2.0 ** -round(float(np.log2(peak))), V.dtype)


def _key_for(construction: Construction, key: Any) -> jax.Array:
    if construction.random:
        return _validate.check_key(key)
    return jax.random.key(0) if key is None else _validate.check_key(key)


def _key_data(key: jax.Array) -> list:
    return np.asarray(jax.random.key_data(key)).ravel().tolist()


def build(V: Any, size: int, method: Any = "frank_wolfe", key: Optional[jax.Array] = None, *,
          compress: Any = "auto", compress_tol: float = 3e-3, **options) -> Coreset:
    """Build a coreset from projected vectors V (N, J) with the named solver: validate, core, check.

    Args:
      V: projected log-likelihoods, e.g. from `cj.project`.
      size: M, the capacity of the coreset. For greedy methods it is also the iteration budget: a point may
        be chosen again, so `num_points` can be below `size`.
      method: one of `cj.METHODS`, or a vector `cj.Construction`.
      key: PRNG key; required by the random methods ("uniform", "importance").
      compress: "auto" (default), True or False: run the solver on A of V ~= A B^T (`cj.compress`), B
        orthonormal, which preserves every inner product in span(B). True compresses whenever
        ||V - A B^T||_F <= compress_tol ||V||_F with some r <= J. "auto" compresses only where it is safe
        and pays (`cj.compress.auto_compress`): GIGA and Frank-Wolfe from 2^22 entries of V (N >= 8,389 at
        J = 500), A-IHT from 2^24, OMP never; at least 16 iterations, and the tolerance met with r <= J / 2.
        Measured: GIGA and FW 5x faster at N = 20000, J = 500, with errors within 0.7% of the exact run's
        (benchmarks/results/fidelity.json). Then, by Eq. (*) of `cj.compress`, the error on V is the error on
        A plus the discarded part; when that part adds more than 5% (the discarded energy is the error floor,
        as for uncentred L2 features at errors ~1e-3), "auto" discards the compressed run and runs exactly.
        When compressed, `info` gains `rank`, `discarded_norm` (||E||_F), `sigma_next` (~sigma_{r+1}(V)),
        and `relative_error` is evaluated on the uncompressed V. The error changes by at most
        sigma_{r+1} ||1 - w|| (cj.compress, Eq. (*)).
      compress_tol: the bound on the relative discarded norm ||E||_F / ||V||_F.
      **options: solver options, e.g. `step_rule="fixed"` for Frank–Wolfe; `refit=True` (any method)
        re-solves the weights on the chosen support by NNLS, as `cj.refit`.

    Returns:
      A `Coreset` with `indices`, `weights` (shape (size,)) and diagnostics in `info` (`relative_error`,
      `finite`, the solver's own).
    """
    construction = resolve(method, needs="vectors")
    V = _validate.check_matrix(V, "V", finite=False)
    stats = _projection.matrix_stats_jit(V)  # finiteness, peak and a non-zero entry in one pass
    if not bool(stats[0]):
        _validate.check_finite(V, "V")
    return _build(V, stats, size, construction, key, compress, compress_tol, options)


def _build(V, stats, size, construction, key, compress, compress_tol, options) -> Coreset:
    """`build` after V's checks: `stats` is `projection.matrix_stats(V)`, from the caller's own pass."""
    V = rescaled(V, float(stats[1]))
    n = V.shape[0]
    size = _validate.check_size(size, n)
    key = _key_for(construction, key)
    if not bool(stats[2]):
        raise ValueError("V: every row is zero, so there is nothing to approximate")
    refit = options.pop("refit", False)
    if refit not in (True, False):
        raise ValueError(f"refit: expected True or False, got {refit!r}")
    opts = construction.check_options(options)
    start = time.perf_counter()
    packed = _maybe_compress(V, construction, size, options, compress, compress_tol)
    solve = _compiled_build(construction, size, opts + ((("refit", True),) if refit else ()))
    V_solve = V if packed is None else packed.A
    with _sharding.data_mesh(V_solve):  # V sharded along N: trace under its mesh (no-op otherwise)
        cs = solve(V_solve, key)
    if packed is not None and compress == "auto":
        # Eq. (*) of cj.compress: error^2 on V = error^2 on A + ||E^T (1 - w)||^2. Keep the compressed run only
        # if the discarded part adds at most 5% to the error; otherwise it is the error floor, so run exactly.
        on_v, on_a = _errors_on_v_and_a(V, packed.target, packed.A, cs.indices, cs.weights)
        if not float(on_v) <= 1.05 * float(on_a):
            packed = None
            with _sharding.data_mesh(V):
                cs = solve(V, key)
    cs = _check_finite_result(cs)
    if packed is not None:
        cs = Coreset(cs.indices, cs.weights, dict(
            cs.info, rank=jnp.asarray(packed.rank), discarded_norm=jnp.asarray(packed.discarded_norm),
            sigma_next=jnp.asarray(packed.sigma_next),
            relative_error=_full_error(V, packed.target, cs.indices, cs.weights)), cs.method)
    settings = {"method": construction.name, "size": size, "options": dict(opts), "refit": refit,
                "key": _key_data(key), "N": n, "J": int(V.shape[1]), "compressed": packed is not None,
                "time_s": time.perf_counter() - start}
    return Coreset(cs.indices, cs.weights, cs.info, cs.method, settings)


def _maybe_compress(V, construction: Construction, size: int, options: dict, compress: Any, tol: float):
    """The `compress` option of `build`: a `Compressed` or None (see `build`'s docstring)."""
    if compress not in ("auto", True, False):
        raise ValueError(f"compress: expected 'auto', True or False, got {compress!r}")
    if compress is False or construction.random:
        return None
    if compress == "auto" and _sharding.leading_mesh(V) is not None:
        return None  # the factorisation would gather V onto one device; sharded solvers run exactly
    if compress == "auto":
        return _compress.auto_compress(V, construction.name, size, options, tol)
    return _compress.compress(V, tol)


@_compiled_fns.jit
def _errors_on_v_and_a(V, target, A, indices, weights):
    """Absolute errors ||sum v_n - V^T w|| and ||sum a_n - A^T w|| of the same weights (support rows only)."""
    def error(X, y):
        return jnp.linalg.norm(y - weights.astype(y.dtype) @ take_rows(X, indices).astype(y.dtype))
    return error(V, target), error(A, jnp.sum(A.astype(target.dtype), axis=0))


@_compiled_fns.jit
def _full_error(V, target, indices, weights):
    """Relative error on the uncompressed V, reading only its support rows."""
    return _support_error(V, target, indices, weights)


def _check_error_inputs(V: Any, weights: Any) -> None:
    """`relative_error`'s checks, skipped for traced values (JAX would clamp an index >= N silently)."""
    leaves = [V, *(jax.tree_util.tree_leaves((weights.indices, weights.weights))
                   if isinstance(weights, Coreset) else [weights])]
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return
    if np.ndim(V) != 2:
        raise ValueError(f"V: expected a 2-D array of shape (N, J), got shape {np.shape(V)}")
    n = np.shape(V)[0]
    if isinstance(weights, Coreset):
        idx, w = np.asarray(weights.indices), np.asarray(weights.weights)
        if idx.shape != w.shape or idx.ndim != 1:
            raise ValueError(f"weights: the coreset's indices and weights must be 1-D of equal length, got "
                             f"{idx.shape} and {w.shape}")
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"weights: coreset indices must lie in [0, N = {n}), got [{idx.min()}, {idx.max()}]")
    else:
        w = np.asarray(weights)
        if w.shape != (n,):
            raise ValueError(f"weights: expected a Coreset or shape (N,) = ({n},), got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("weights: contain NaN or inf")
    if np.any(w < 0):
        raise ValueError("weights: must be non-negative")


def relative_error(V: jax.Array, weights: Any, squared: bool = False) -> jax.Array:
    """||sum_n v_n - V^T w|| / ||sum_n v_n|| (squared if asked); `weights` is a Coreset or a dense (N,).

    When the rows of V sum to zero (||sum_n v_n|| at the rounding level of the sum, at most
    16 eps sum_n ||v_n||), the ratio is undefined (0/0, or x/0 = inf for any w != 0); the absolute error
    ||sum_n v_n - V^T w|| (squared if asked) is returned instead, so the value is always finite and 0 means
    exact. Centred features whose rows cancel exactly are the usual case (every w = c 1 is then exact).

    Called on concrete arrays it validates its inputs (ValueError): V 2-D, coreset indices in [0, N), dense
    weights of shape (N,), weights finite and non-negative. Under `jit` it assumes them valid.
    """
    _check_error_inputs(V, weights)
    V = jnp.asarray(V)
    if not isinstance(V, jax.core.Tracer) and jnp.issubdtype(V.dtype, jnp.floating):
        V = rescaled(V)  # the ratio is scale-free; its squares are not (V x 1e30 in float32)
    acc = jnp.promote_types(V.dtype, jnp.float32)  # an integer V counts as float32 (float64 under x64)
    acc = acc if jnp.issubdtype(acc, jnp.floating) else jnp.result_type(float)
    if isinstance(weights, Coreset):
        approx = weights.weights.astype(acc) @ _sharding.take_rows(V, weights.indices).astype(acc)
    else:
        approx = jnp.asarray(weights, acc) @ V.astype(acc)
    Vf = V.astype(acc)
    target = jnp.sum(Vf, axis=0)
    err2 = jnp.sum(jnp.square(target - approx))
    norm2 = jnp.sum(jnp.square(target))
    floor = 16 * jnp.finfo(acc).eps * jnp.sum(jnp.linalg.norm(Vf, axis=1))
    degenerate = norm2 <= jnp.square(floor)
    err = jnp.where(degenerate, err2, err2 / jnp.where(degenerate, 1.0, norm2))
    return err if squared else jnp.sqrt(err)


# --------------------------------------------------------------------------------------------------------
# Posterior-driven methods and the whole pipeline.


def coreset_fn(model: Model, method: Any, size: int, **options):
    """The pure core of a posterior-driven method:
    `(key, data, start, data_weights=None, initial=None) -> Coreset`.

    `start` is a `cj.Start(mean, cov)` (pi_hat's Gaussian summary; e.g. from `cj.laplace`), used to start
    and precondition chains. `data_weights` (N,) weights the full-data target (default: ones). `initial`
    `(indices, weights)`, each (size,), is the starting coreset (default: M rows drawn uniformly, as in the
    papers); only its rows with weight > 0 are optimised. Jittable and vmappable over keys; validation
    happens here, once.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    construction = resolve(method, needs="posterior")
    size = _check_static_size(size)
    core = construction.make(model, size, **dict(construction.check_options(options)))

    takes_initial = "initial" in inspect.signature(core).parameters

    def solve(key, data, start, data_weights=None, initial=None) -> Coreset:
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        if size > n:
            raise ValueError(f"size: must be at most N = {n}")
        if data_weights is None:
            data_weights = jnp.ones(n, jnp.result_type(start.mean.dtype, jnp.float32))
        if initial is None:
            indices, weights, info = core(_as_key(key), data, data_weights, start)
        elif not takes_initial:
            raise ValueError(f"initial: {construction.name} does not take a starting coreset")
        else:
            indices, weights, info = core(_as_key(key), data, data_weights, start, initial)
        return _finish(indices, weights, info, construction.name)

    return solve


@functools.lru_cache(maxsize=64)
def compiled_coreset_fn(model: Model, construction: Construction, size: int, options: tuple):
    """`jax.jit(coreset_fn(...))`, cached per (model, construction, size, options) so that repeated calls
    (streaming reductions, the CLI's repeats) never recompile; `options` is `construction.check_options`'s
    sorted tuple."""
    return _compiled_fns.jit(coreset_fn(model, construction, size, **dict(options)))


def start_from(approx: Any, key: jax.Array, num: int = 256) -> Start:
    """pi_hat's Gaussian summary: its mean and cov; for supplied samples, their moments; otherwise the moments
    of `num` of its draws. A 1e-6 ridge keeps a sample covariance positive definite."""
    if hasattr(approx, "mean") and hasattr(approx, "cov") and not callable(approx.cov):
        return Start(jnp.asarray(approx.mean), jnp.asarray(approx.cov))
    thetas = approx.thetas if isinstance(approx, _pihat.Samples) else approx.sample(key, num)
    d = thetas.shape[1]
    cov = jnp.cov(thetas, rowvar=False).reshape(d, d) if thetas.shape[0] > 1 else jnp.eye(d, dtype=thetas.dtype)
    return Start(jnp.mean(thetas, axis=0), cov + 1e-6 * jnp.eye(d, dtype=thetas.dtype))


def resolve_pi_hat(pi_hat: Any, model: Model, data: Any, key: jax.Array, init: Any = None):
    """pi_hat as an object with `.sample(key, num)`: None or "laplace" (a Laplace fit on `data`), "prior", an
    (S, D) array of samples, or such an object itself. The one place a pi_hat argument is read (`coreset`,
    `merged_coreset`, `stream_coreset`)."""
    if pi_hat is None or (isinstance(pi_hat, str) and pi_hat == "laplace"):
        return _pihat.laplace(model, data, key=key, init=init)
    if isinstance(pi_hat, str):
        if pi_hat == "prior":
            return _pihat.prior(model, data)
        raise ValueError(f"pi_hat: unknown value {pi_hat!r}; expected 'laplace', 'prior', an (S, D) array "
                         "of samples, or an object with .sample(key, num)")
    if hasattr(pi_hat, "sample"):
        return pi_hat
    _checks.check_theta(model, data, pi_hat, "pi_hat", ndim=2)
    return _pihat.samples(pi_hat)


def _compact_start(start: Coreset, size: int) -> tuple[tuple[jax.Array, jax.Array], int]:
    """The start's live points first, in `slots` = the next power of two >= their number (at most `size`):
    the refinement only moves live weights, and its chains then evaluate `slots` rows, not `size` (a greedy
    support of 21 points at M = 1000 costs 1/48 as much per step). Powers of two bound the compilations."""
    weights = np.asarray(start.weights)
    live = np.flatnonzero(weights > 0)
    if live.size == 0:
        raise ValueError("support: the starting coreset has no point with positive weight")
    slots = min(size, 1 << int(np.ceil(np.log2(max(live.size, 2)))))
    order = np.concatenate([live, np.flatnonzero(weights <= 0)])[:slots]
    return (jnp.asarray(np.asarray(start.indices)[order], jnp.int32), jnp.asarray(weights[order])), slots


def _pad_result(cs: Coreset, size: int, support: str) -> Coreset:
    """A refinement run on compacted slots, padded back to `size` (padding: row 0, weight 0)."""
    pad = size - cs.weights.shape[0]
    info = dict(cs.info, support=support)
    for name in ("initial_weights", "final_iterate"):
        if name in info:
            info[name] = jnp.pad(info[name], (0, pad))
    return Coreset(jnp.pad(cs.indices, (0, pad)), jnp.pad(cs.weights, (0, pad)), info, cs.method)


def _resolve_support(support: Any, construction: Construction) -> Optional[Construction]:
    """None for the papers' uniform start, else the vector method whose coreset starts the optimisation."""
    if support is None:
        if construction.default_support is None:
            return None
        support = construction.default_support
    if isinstance(support, str) and support == "uniform":
        return None
    if construction.needs != "posterior":
        raise ValueError(f"support: only posterior-driven methods take a support; {construction.name} is a "
                         "vector method (leave support unset)")
    method = resolve(support, needs="vectors", argument="support")
    if method.name == "uniform":
        return None
    if construction.default_support is None:
        raise ValueError(f"support: {construction.name} builds its own support and takes no starting coreset; "
                         "leave support unset")
    return method


STUCK_ACCEPTANCE = 0.01


def _warn_stuck_chains(info: dict, name: str) -> None:
    """A chain that accepts (almost) nothing feeds the weight updates a point mass: its draws and the
    weights they shaped are not to be trusted, and nothing else would say so."""
    acc = info.get("acceptance_rate")
    if acc is None:
        return
    acc = np.asarray(acc)
    stuck = int(np.sum(acc < STUCK_ACCEPTANCE))
    if stuck:
        warnings.warn(f"{name}: {stuck} of {acc.size} chains accepted under {STUCK_ACCEPTANCE:.0%} of their final "
                      f"draws (acceptance {np.round(acc, 3).tolist()}): they are stuck, so the weights and "
                      "info['samples'] are unreliable; try kernel='nuts', more num_warmup, or a larger size",
                      RuntimeWarning, stacklevel=3)


def _warn_unfinished(info: dict, name: str) -> None:
    """Say when a posterior-driven run stopped at a cap rather than by its own test. (A run that keeps its
    start because training did not lower the KL estimate is not a failure: `info["fell_back"]` says so.)"""
    if "converged" in info and not bool(np.asarray(info["converged"])):
        warnings.warn(f"{name}: the weights had not settled after {int(np.asarray(info['iterations']))} "
                      f"iterations (the cap, num_iters; drift KL {float(np.asarray(info['drift_kl'])):.3g}); the "
                      "result is the average of the last third: raise num_iters for a settled answer",
                      RuntimeWarning, stacklevel=3)
    if "hot_start_converged" in info and not bool(np.asarray(info["hot_start_converged"])):
        warnings.warn(f"{name}: the hot start reached its cap ({int(np.asarray(info['hot_start_steps']))} steps) "
                      "before the chains' log potentials passed the stationarity test; training started anyway",
                      RuntimeWarning, stacklevel=3)


def coreset(model: Model, data: Any, size: int, method: Any = "frank_wolfe",
            key: Optional[jax.Array] = None, *, norm: str = "fisher", num_features: int = 500,
            pi_hat: Any = None, dtype=None, init: Any = None, return_vectors: bool = False,
            support: Any = None, support_rows: Any = None, certify: bool = False, **options):
    """The whole pipeline of HC Algorithm 3: pi_hat, random projection, then the sparse solver.

    Args:
      model, data: the model and its data pytree (leading axis N).
      size: M, the coreset capacity.
      method: a name in `cj.METHODS` (projected-vector solvers) or `cj.POSTERIOR_METHODS` ("sparse_vi",
        ...; these sample the coreset posterior themselves, and norm/num_features are unused), or a
        `cj.Construction`.
      key: PRNG key (split for pi_hat, projection and solver); required by the random methods ("uniform",
        "importance" and the posterior-driven ones); the others default to `jax.random.key(0)`.
      norm: "fisher" | "l2" | "centered".
      num_features: J, the projection dimension.
      pi_hat: None or "laplace" (default), "prior", an (S, D) array of samples, or any object with
        `.sample(key, num)` (e.g. `cj.laplace(...)`).
      dtype: projection dtype (float32 default).
      init: a starting theta (D,) for the Laplace fit, for models without `init_params` or `dim`.
      return_vectors: also return V (vector methods; None for posterior-driven ones unless `support` projects),
        as `(coreset, V)`. The coreset's `info["relative_error"]` is always the error on V.
      support: posterior-driven methods only: where the points come from. "uniform" (the papers): M rows
        drawn uniformly, each weighted N / M. A vector method's name (e.g. "giga", "iht2", "omp"): that
        method's coreset on the projected features (norm, num_features) is the start, and only its points'
        weights are then optimised against the coreset posterior; `info["support"]` names it. None (default):
        the method's `default_support` ("omp" for coreset_mcmc and quasi_newton, chosen in
        benchmarks/models.py; "uniform" for sparse_vi).
      support_rows: rows projected for the `support` start: None (default) every row up to 50,000, else a
        uniform subsample of 50,000 (at least 4 M), the start's weights scaled by N / rows
        (`posterior_driven/support.py`, measured in benchmarks/support_rows.py); an int sets the cap.
      certify: certify the result against the full data (`cj.certify`) and attach it as `cs.certificate`.
        Posterior-driven methods certify their own draws (`info["samples"]`); for the others the draws are
        `cj.sample(model, data, key, weights=cs)` with NUTS, 2 chains of 500 + 500 steps on the coreset's rows.
        Warns when k-hat > 0.7.
      **options: the method's options (and `refit`, `compress`, `compress_tol` for vector methods).
    """
    if certify not in (True, False):
        raise ValueError(f"certify: expected True or False, got {certify!r}")
    if certify:
        result = coreset(model, data, size, method, key, norm=norm, num_features=num_features, pi_hat=pi_hat,
                         dtype=dtype, init=init, return_vectors=return_vectors, support=support,
                         support_rows=support_rows, **options)
        cs, V = result if return_vectors else (result, None)
        cs = _certified(model, data, cs, key)
        return (cs, V) if return_vectors else cs
    construction = resolve(method)
    _validate.check_choice(norm, ("fisher", "l2", "centered"), "norm")
    n = _checks.check_model_data(model, data)
    size = _validate.check_size(size, n)
    if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
        raise ValueError(f"num_features: must be a positive integer, got {num_features!r}")
    support_method = _resolve_support(support, construction)
    if support_rows is not None and support_method is None:
        raise ValueError("support_rows: only a posterior-driven method started from a vector method's coreset "
                         "(support=...) projects rows; leave support_rows unset")
    rows = _posterior_driven.support.resolve_rows(support_rows, n, size)
    if construction.needs == "posterior":
        opts = construction.check_options(options)
        construction.make(model, size, **dict(opts))  # every option's value checked before any work
    # As cj.build: a random method needs a key; a deterministic one defaults to key(0), so that the
    # projection (and the whole coreset) repeats exactly.
    key = _key_for(construction, key)
    key_pi, key_theta, key_proj, key_solve = _validate.split_key(key, 4)
    approx = resolve_pi_hat(pi_hat, model, data, key_pi, init)
    if construction.needs == "posterior":
        start_time = time.perf_counter()
        initial, V, slots = None, None, size
        if support_method is not None:
            thetas = approx.sample(key_theta, num_features)
            start_cs, V = _posterior_driven.support.support_start(model, data, size, support_method, thetas,
                                                                  key_proj, rows=rows, build=build, norm=norm,
                                                                  dtype=dtype)
            initial, slots = _compact_start(start_cs, size)
        solve = compiled_coreset_fn(model, construction, slots, opts)
        cs = _check_finite_result(solve(key_solve, jax.tree_util.tree_map(jnp.asarray, data),
                                        start_from(approx, key_theta), initial=initial))
        if support_method is not None:
            cs = _pad_result(cs, size, support_method.name)
            cs = Coreset(cs.indices, cs.weights, dict(cs.info, support_rows=rows), cs.method)
        _warn_stuck_chains(cs.info, construction.name)
        _warn_unfinished(cs.info, construction.name)
        cs = Coreset(cs.indices, cs.weights, cs.info, cs.method, {
            "method": construction.name, "size": size, "options": dict(opts), "key": _key_data(key),
            "N": n, "time_s": time.perf_counter() - start_time,
            "support": "uniform" if support_method is None else support_method.name,
            "data_digest": _io.digest(data),
            "support_rows": rows if support_method is not None else None})
        return (cs, V) if return_vectors else cs
    V, stats = _projection.features(model, data, approx, key_theta, key_proj, norm, num_features, dtype)
    compress, compress_tol = options.pop("compress", "auto"), options.pop("compress_tol", 3e-3)
    cs = _build(V, stats, size, construction, key_solve, compress, compress_tol, options)
    cs = Coreset(cs.indices, cs.weights, cs.info, cs.method,
                 dict(cs.settings, norm=norm, num_features=num_features, key=_key_data(key),
                      data_digest=_io.digest(data)))
    return (cs, V) if return_vectors else cs


CERTIFY_SAMPLING = dict(method="nuts", num_samples=500, num_warmup=500, num_chains=2)


def _certified(model: Model, data: Any, cs: Coreset, key: Optional[jax.Array]) -> Coreset:
    """`cs` with its `cj.certify` certificate: its own draws when it has them, else NUTS on the coreset."""
    from .certification import certify, warn_if_unreliable
    from .inference import sample

    draws = cs.info.get("samples") if isinstance(cs.info, dict) else None
    if draws is None:
        key = jax.random.fold_in(jax.random.key(0) if key is None else _validate.check_key(key), 1)
        draws = sample(model, data, key, weights=cs, warn=False, **CERTIFY_SAMPLING).samples
    cert = certify(model, data, cs, draws)
    warn_if_unreliable(cert, cs.method, stacklevel=3)
    return cs.with_certificate(cert)
