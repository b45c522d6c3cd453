"""Constructions on projected vectors: `build_fn` (the pure core, jittable and vmappable), `build` (validate,
optionally compress, run, check) and `relative_error` (HC Eq. 3.2)."""

from __future__ import annotations

import functools
import time
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import solvers as _solvers  # noqa: F401 (registers the vector methods first, so they list first)
from ..features.compress import auto_compress, compress as compress_low_rank  # (`compress` is build's option)
from .. import progress as _progress
from ..core import mesh as _mesh
from ..core import Coreset, take_rows
from ..core import validate as _validate
from ..features import projection as _projection
from ..registry import Construction, resolve
from ..solvers.base import make_problem, run
from ..solvers.ops import refit_support
from ..core import compiled as _compiled_fns
from .. import compilation as _compilation
from ..compilation import full_precision, full_precision_factory
from ..features.compress import AUTO_METHODS

__all__ = ["as_key", "build", "build_checked", "build_fn", "check_finite_result", "finish", "key_data", "key_for",
           "on_full_rows", "relative_error", "rescaled"]


def as_key(key: jax.Array) -> jax.Array:
    """A typed key from a typed or raw (uint32[2]) key; a static dtype test, so it is fine under jit."""
    return key if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else jax.random.wrap_key_data(key)


def _support_error(V: jax.Array, target: jax.Array, indices: jax.Array, weights: jax.Array) -> jax.Array:
    """||target - V^T w|| / ||target|| from the support rows only (O(M J)); the absolute error if target = 0."""
    approx = weights.astype(target.dtype) @ take_rows(V, indices).astype(target.dtype)
    residual, scale = jnp.linalg.norm(target - approx), jnp.linalg.norm(target)
    return jnp.where(scale > 0, residual / jnp.where(scale > 0, scale, 1.0), residual)


def finish(indices, weights, info, method: str) -> Coreset:
    """The core's result: finiteness reported in `info` (never a host sync inside the core)."""
    info = dict(info, finite=jnp.all(jnp.isfinite(weights)))
    return Coreset(indices.astype(jnp.int32), weights, info, method)


@full_precision_factory
def build_fn(method: Any, size: int, *, refit: bool = False, **options):
    """The pure core of `build`: `(V, key) -> Coreset` for a vector method (jittable, vmappable).

    `solve(V, key, target)` fits a given target (J,) instead of sum_n v_n, for a V of candidate rows
    (`cj.coreset(..., candidate_rows=R)`); the indices are then rows of that V.
    `jax.vmap(build_fn("giga", 100), in_axes=(None, 0))(V, keys)` runs a batch of trials in one call; the
    result's arrays gain a leading batch axis. With V sharded along N (`cj.shard`), rows are gathered with the
    mesh-aware `take_rows`, so V is never all-gathered: under `jax.set_mesh`, and also from a plain
    `jax.jit(solve)(V, key)`, which traces under the mesh V lives on (`core.mesh.input_mesh`).

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
    size = _validate.check_positive_int(size, "size")
    refit = _validate.check_bool(refit, "refit")
    solver = construction.make(size, **dict(construction.check_options(options)))

    def solve(V: jax.Array, key: jax.Array, target: Optional[jax.Array] = None) -> Coreset:
        # jit without jax.set_mesh: trace under the mesh V lives on, so rows are read where they live
        with _mesh.input_mesh(V):
            return _solve(V, key, target)

    def _solve(V: jax.Array, key: jax.Array, target: Optional[jax.Array]) -> Coreset:
        if V.ndim != 2 or size > V.shape[0]:
            raise ValueError(f"size: must be at most N = {V.shape[0]} (V of shape {V.shape})")
        problem = make_problem(V, target)
        indices, weights, info = run(solver, problem, as_key(key))
        if refit:
            _, weights, result = refit_support(problem, indices, weights)
            info = dict(info, refit_iterations=result.iterations, refit_kkt=result.kkt)
        info = dict(info, relative_error=_support_error(V, problem.target, indices, weights))
        return finish(indices, weights, info, construction.name)

    return _mesh.with_auto_axes(solve, 0)  # V traced on Explicit axes


# Vector methods compiled with XLA:CPU's classic fusion emitters (compilation.LEGACY_EMITTERS): OMP compiles
# in about 1.2 s instead of 2.0 s and runs at the same speed, and its compensated arithmetic gives the same
# coreset under either emitter, so a user's own jit of `build_fn` agrees with `cj.build`
# (benchmarks/investigations/cpu_emitters.py, tests/test_cpu_emitters.py). GIGA and A-IHT II round otherwise
# under them (weights 1e-3 apart, another A-IHT II support), so they and the rest keep XLA's defaults.
LEGACY_EMITTER_METHODS = frozenset({"omp"})


@functools.lru_cache(maxsize=256)
def _compiled_build_for(construction: Construction, size: int, options: tuple, show_progress: bool):
    return _compiled_fns.jit(build_fn(construction, size, **dict(options)),
                             legacy_emitters=construction.name in LEGACY_EMITTER_METHODS)


def _compiled_build(construction: Construction, size: int, options: tuple):
    """One jitted core per (construction, size, options, progress switch): the same shapes never recompile,
    and turning progress on or off gets a program with or without its callbacks (they are traced in)."""
    return _compiled_build_for(construction, size, options, _progress.is_enabled())


def check_finite_result(cs: Coreset) -> Coreset:
    """`cs`, or FloatingPointError if its core reported non-finite weights (`finish`): on the host, after it."""
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
    scale = _power_of_two_scale(peak)
    return V if scale == 1.0 else V * jnp.asarray(scale, V.dtype)


def key_for(construction: Construction, key: Any) -> jax.Array:
    """The checked key: required by a random method; a deterministic one defaults to `jax.random.key(0)`."""
    if construction.random:
        return _validate.check_key(key)
    return jax.random.key(0) if key is None else _validate.check_key(key)


def key_data(key: jax.Array) -> list:
    """The key's raw data as a list of ints, as a coreset's `settings["key"]` records it."""
    return np.asarray(jax.random.key_data(key)).ravel().tolist()


@full_precision
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
        and pays (`features.compress.auto_compress`): GIGA and Frank-Wolfe from 2^22 entries of V (N >= 8,389
        at J = 500), A-IHT from 2^24, OMP never; at least 16 iterations, and the tolerance met with r <= J / 2.
        Measured: GIGA and FW 5x faster at N = 20000, J = 500, with errors within 0.7% of the exact run's
        (benchmarks/results/fidelity.json). Then, by Eq. (*) of `cj.compress`, the error on V is the error on
        A plus the discarded part; when that part adds more than 5% (the discarded energy is the error floor,
        as for uncentred L2 features at errors ~1e-3), "auto" discards the compressed run and runs exactly.
        A V sharded along N is compressed in place, never gathered. When compressed, `info` gains `rank`, `discarded_norm` (||E||_F), `sigma_next` (~sigma_{r+1}(V)),
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
    from .memory import check_fits

    devices = getattr(getattr(V, "sharding", None), "device_set", None)
    check_fits(construction, _validate.check_size(size, V.shape[0]), V.shape, V.dtype,
               sorted(devices, key=lambda d: d.id)[0] if devices else None,
               construction.check_options({k: v for k, v in options.items() if k != "refit"}))
    return build_checked(V, stats, size, construction, key, compress, compress_tol, options)


def prefetch_build(construction: Construction, size: int, options: dict, shape: tuple, dtype, key: jax.Array,
                   target_dtype=None) -> _compilation.Prefetched:
    """Start compiling the solver program that `build_checked` will run on a V of `shape` and `dtype` (with a
    target of `target_dtype` for candidate rows), while the caller computes V (`compilation.prefetch`). Only
    where `build_checked` cannot compress V, whose shape would then differ: with a target, or where
    `compress` is False, or a method that "auto" never compresses."""
    compress = options.get("compress", "auto")
    can_compress = target_dtype is None and not construction.random and (
        compress is True or (compress == "auto" and construction.name in AUTO_METHODS))
    if can_compress:
        return _compilation.Prefetched()
    solver_options = {k: v for k, v in options.items() if k not in ("refit", "compress", "compress_tol")}
    opts = construction.check_options(solver_options)
    if _validate.check_bool(options.get("refit", False), "refit"):
        opts = opts + (("refit", True),)
    solve = _compiled_build(construction, size, opts)
    args = (jax.ShapeDtypeStruct(shape, dtype), key_for(construction, key))
    if target_dtype is not None:
        args += (jax.ShapeDtypeStruct(shape[1:], target_dtype),)
    return _compilation.prefetch(solve, *args)


def build_checked(V, stats, size, construction, key, compress, compress_tol, options, *, target=None,
                  rows=None, n_total=None, prefetched=None) -> Coreset:
    """`build` after V's checks: `stats` is `projection.matrix_stats(V)`, from the caller's own pass;
    `prefetched`, the solver's compilation started by `prefetch_build` (waited for before the solver runs).

    With candidate rows (`cj.coreset(..., candidate_rows=R)`), V holds the R rows `rows` of a larger data
    set of `n_total` rows and `target` is that set's sum_n v_n: the solver fits `target` from V's rows, without
    compression, and the indices returned are rows of the full data."""
    if target is not None:
        scale = _power_of_two_scale(float(stats[1]))
        V, target, compress = V * jnp.asarray(scale, V.dtype), target * scale, False
    else:
        V = rescaled(V, float(stats[1]))
    n = V.shape[0]
    size = _validate.check_size(size, n)
    key = key_for(construction, key)
    if not bool(stats[2]):
        raise ValueError("V: every row is zero, so there is nothing to approximate")
    refit = _validate.check_bool(options.pop("refit", False), "refit")
    opts = construction.check_options(options)
    start = time.perf_counter()
    with _mesh.data_mesh(V):  # a sharded V is factored where it lives (compress.py): never gathered
        packed = _maybe_compress(V, construction, size, options, compress, compress_tol)
    solve = _compiled_build(construction, size, opts + ((("refit", True),) if refit else ()))
    if prefetched is not None:
        prefetched.wait()
    V_solve = V if packed is None else packed.A
    with _mesh.data_mesh(V_solve):  # V sharded along N: trace under its mesh (no-op otherwise)
        cs = solve(V_solve, key) if target is None else solve(V_solve, key, target)
    if packed is not None and compress == "auto":
        # Eq. (*) of cj.compress: error^2 on V = error^2 on A + ||E^T (1 - w)||^2. Keep the compressed run only
        # if the discarded part adds at most 5% to the error; otherwise it is the error floor, so run exactly.
        with _mesh.data_mesh(V):
            on_v, on_a = _errors_on_v_and_a(V, packed.target, packed.A, cs.indices, cs.weights)
        if not float(on_v) <= 1.05 * float(on_a):
            packed = None
            with _mesh.data_mesh(V):
                cs = solve(V, key)
    cs = check_finite_result(cs)
    if packed is not None:
        with _mesh.data_mesh(V):
            error = _full_error(V, packed.target, cs.indices, cs.weights)
        cs = Coreset(cs.indices, cs.weights, dict(
            cs.info, rank=jnp.asarray(packed.rank), discarded_norm=jnp.asarray(packed.discarded_norm),
            sigma_next=jnp.asarray(packed.sigma_next), relative_error=error), cs.method)
    settings = {"method": construction.name, "size": size, "options": dict(opts), "refit": refit,
                "key": key_data(key), "N": n, "J": int(V.shape[1]), "compressed": packed is not None,
                "time_s": time.perf_counter() - start}
    if rows is not None:
        cs = Coreset(*on_full_rows(rows, cs.indices, cs.weights), cs.info, cs.method)
        settings.update(N=int(n_total), candidate_rows=n)
    return Coreset(cs.indices, cs.weights, cs.info, cs.method, settings)


@_compiled_fns.jit
def on_full_rows(rows, indices, weights):
    """Indices into the candidates mapped to rows of the full data (padding: row 0, weight 0)."""
    live = weights > 0
    return jnp.where(live, rows[indices], 0).astype(jnp.int32), jnp.where(live, weights, 0.0)


def _power_of_two_scale(peak: float) -> float:
    """The factor `rescaled` applies for a peak |v_nj| (1 when it is in range)."""
    if peak == 0.0 or 2.0 ** -20 <= peak <= 2.0 ** 20 or not np.isfinite(peak):
        return 1.0
    return 2.0 ** -round(float(np.log2(peak)))


def _maybe_compress(V, construction: Construction, size: int, options: dict, compress: Any, tol: float):
    """The `compress` option of `build`: a `Compressed` or None (see `build`'s docstring)."""
    if compress not in ("auto", True, False):
        raise ValueError(f"compress: expected 'auto', True or False, got {compress!r}")
    if compress is False or construction.random:
        return None
    if compress == "auto":
        return auto_compress(V, construction.name, size, options, tol)
    return compress_low_rank(V, tol)


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


@full_precision
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
        approx = weights.weights.astype(acc) @ take_rows(V, weights.indices).astype(acc)
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
