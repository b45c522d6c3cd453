"""Public construction entry points: `build` on projected vectors and `coreset` for the whole pipeline.

The pipeline reads in the order the data flows: model -> pi_hat -> project -> solve (HC Algorithm 3).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Optional

import jax
import jax.numpy as jnp

from . import _validate, compress as _compress, pihat as _pihat, sharding as _sharding
from .core.model import Model
from .projection import project
from .solvers import RANDOM_METHODS, REGISTRY, Coreset, make_problem, run
from .solvers.refit import refit_arrays as _refit_arrays
from .solvers.sparse_vi import sparse_vi as _sparse_vi

__all__ = ["build", "coreset", "relative_error", "METHODS"]

METHODS = tuple(REGISTRY)


@functools.lru_cache(maxsize=256)
def _compiled(method: str, size: int, options: tuple):
    """One jitted (V, key) -> result per (method, size, options): same shapes never recompile."""
    solver = REGISTRY[method](size, **dict(options))

    @jax.jit
    def solve(V, key):
        return run(solver, make_problem(V), key)

    return solve


def _check_options(method: str, options: dict) -> tuple:
    params = inspect.signature(REGISTRY[method]).parameters
    allowed = [p for p in params if p != "size"]
    for name, value in options.items():
        if name not in allowed:
            raise ValueError(f"{name}: not an option of method {method!r}; its options are {allowed}")
        if isinstance(value, (list, dict, jax.Array)):
            raise ValueError(f"{name}: options must be plain Python scalars or strings, got "
                             f"{type(value).__name__}")
    return tuple(sorted(options.items()))


def build(V: Any, size: int, method: str = "frank_wolfe", key: Optional[jax.Array] = None, *,
          compress: Any = "auto", compress_tol: float = 3e-3, **options) -> Coreset:
    """Build a coreset from projected vectors V (N, J) with the named solver.

    Args:
      V: projected log-likelihoods, e.g. from `cj.project`.
      size: M, the capacity of the coreset. For greedy methods it is also the iteration budget: a point may
        be chosen again, so `num_points` can be below `size`.
      method: one of `cj.METHODS`.
      key: PRNG key; required by the random methods ("uniform", "importance").
      compress: "auto" (default), True or False: run the solver on A of V ~= A B^T (`cj.compress`), B
        orthonormal, which preserves every inner product in span(B). True compresses whenever
        ||V - A B^T||_F <= compress_tol ||V||_F with some r <= J. "auto" compresses only where it is safe
        and pays: an iterative method (not "uniform"/"importance"), V of at least 2^24 entries (N >= 33,555
        at J = 500), at least 16 iterations, and the tolerance met with r <= J / 2. Small problems run
        exactly: there a greedy path can shift by a few percent (FW on Fisher features at N = 10^4), while
        at N >= 10^5 the measured change was below 1% (benchmarks/results/perf.json).
        When compressed, `info` gains `rank`, `discarded_norm` (||E||_F), `sigma_next` (~sigma_{r+1}(V))
        and `relative_error`, evaluated on the uncompressed V. The error changes by at most
        sigma_{r+1} ||1 - w|| (cj.compress, Eq. (*)).
      compress_tol: the bound on the relative discarded norm ||E||_F / ||V||_F.
      **options: solver options, e.g. `step_rule="fixed"` for Frank–Wolfe; `refit=True` (any method)
        re-solves the weights on the chosen support by NNLS, as `cj.refit`.

    Returns:
      A `Coreset` with `indices`, `weights` (shape (size,)) and solver diagnostics in `info`.
    """
    _validate.check_choice(method, REGISTRY, "method")
    V = _validate.check_matrix(V, "V")
    n = V.shape[0]
    size = _validate.check_size(size, n)
    if method in RANDOM_METHODS:
        key = _validate.check_key(key)
    else:
        key = jax.random.key(0) if key is None else _validate.check_key(key)
    norms = jnp.linalg.norm(V.astype(jnp.promote_types(V.dtype, jnp.float32)), axis=1)
    if not bool(jnp.any(norms > 0)):
        raise ValueError("V: every row is zero, so there is nothing to approximate")
    refit = options.pop("refit", False)  # NNLS on the chosen support (issue 3), any method
    if refit not in (True, False):
        raise ValueError(f"refit: expected True or False, got {refit!r}")
    solve = _compiled(method, size, _check_options(method, options))
    packed = _maybe_compress(V, method, size, options, compress, compress_tol)
    if packed is not None:
        V_full, V = V, packed.A
    with _sharding.data_mesh(V):  # V sharded along N: trace under its mesh (no-op otherwise)
        indices, weights, info = solve(V, key)
        if refit:
            weights, extra = _refit_arrays(V, indices, weights)
            info = dict(info, **extra)
    if not bool(jnp.all(jnp.isfinite(weights))):
        raise FloatingPointError(f"method {method!r} produced non-finite weights; please report this")
    if packed is not None:
        info = dict(info, rank=jnp.asarray(packed.rank), discarded_norm=jnp.asarray(packed.discarded_norm),
                    sigma_next=jnp.asarray(packed.sigma_next),
                    relative_error=_support_error(V_full, packed.target, indices, weights))
    return Coreset(indices, weights, info, method)


def _maybe_compress(V, method: str, size: int, options: dict, compress: Any, tol: float):
    """The `compress` option of `build`: a `Compressed` or None (see `build`'s docstring)."""
    if compress not in ("auto", True, False):
        raise ValueError(f"compress: expected 'auto', True or False, got {compress!r}")
    if compress is False or method in RANDOM_METHODS:
        return None
    if compress == "auto" and _sharding.leading_mesh(V) is not None:
        return None  # the factorisation would gather V onto one device; sharded solvers run exactly
    n, j = V.shape
    if compress == "auto":
        iterations = options.get("max_iter", size)
        if n * j < (1 << 24) or iterations < 16:
            return None
        return _compress.compress(V, tol, max_rank=j // 2)
    return _compress.compress(V, tol)


@jax.jit
def _support_error(V, target, indices, weights):
    """||target - V^T w|| / ||target|| reading only the support rows of the uncompressed V."""
    approx = weights.astype(target.dtype) @ _sharding.take_rows(V, indices).astype(target.dtype)
    return jnp.linalg.norm(target - approx) / jnp.linalg.norm(target)


def relative_error(V: jax.Array, weights: Any, squared: bool = False) -> jax.Array:
    """||sum_n v_n - V^T w|| / ||sum_n v_n|| (squared if asked); `weights` is a Coreset or a dense (N,).

    When the rows of V sum to zero (||sum_n v_n|| at the rounding level of the sum, at most
    16 eps sum_n ||v_n||), the ratio is undefined (0/0, or x/0 = inf for any w != 0); the absolute error
    ||sum_n v_n - V^T w|| (squared if asked) is returned instead, so the value is always finite and 0 means
    exact. Centred features whose rows cancel exactly are the usual case (every w = c 1 is then exact).
    """
    V = jnp.asarray(V)
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


def _resolve_pi_hat(pi_hat: Any, model: Model, data: Any, key: jax.Array):
    if pi_hat is None:
        return _pihat.laplace(model, data, key=key)
    if isinstance(pi_hat, str):
        if pi_hat == "laplace":
            return _pihat.laplace(model, data, key=key)
        if pi_hat == "prior":
            return _pihat.prior(model, data)
        raise ValueError(f"pi_hat: unknown value {pi_hat!r}; expected 'laplace', 'prior', an (S, D) array "
                         "of samples, or an object with .sample(key, num)")
    if hasattr(pi_hat, "sample"):
        return pi_hat
    return _pihat.samples(pi_hat)


def coreset(model: Model, data: Any, size: int, method: str = "frank_wolfe",
            key: Optional[jax.Array] = None, *, norm: str = "fisher", num_features: int = 500,
            pi_hat: Any = None, dtype=None, **options) -> Coreset:
    """The whole pipeline of HC Algorithm 3: pi_hat, random projection, then the sparse solver.

    Args:
      model, data: the model and its data pytree (leading axis N).
      size: M, the coreset capacity.
      method: solver name, as in `build`, or "sparse_vi" (Sparse VI on the model; its options are those of
        `cj.solvers.sparse_vi.sparse_vi`; norm and num_features are then unused).
      key: PRNG key (split for pi_hat, projection and solver).
      norm: "fisher" | "l2" | "centered".
      num_features: J, the projection dimension.
      pi_hat: None or "laplace" (default), "prior", an (S, D) array of samples, or any object with
        `.sample(key, num)` (e.g. `cj.laplace(...)`).
      dtype: projection dtype (float32 default).
    """
    key = jax.random.key(0) if key is None else _validate.check_key(key)
    _validate.check_choice(method, (*REGISTRY, "sparse_vi"), "method")
    _validate.check_choice(norm, ("fisher", "l2", "centered"), "norm")
    n = _validate.check_data(data)
    _validate.check_size(size, n)
    if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
        raise ValueError(f"num_features: must be a positive integer, got {num_features!r}")
    key_pi, key_theta, key_proj, key_solve = jax.random.split(key, 4)
    approx = _resolve_pi_hat(pi_hat, model, data, key_pi)
    if method == "sparse_vi":  # works on the model and pi_w's samples, not on V (issue 3)
        return _sparse_vi(model, data, size, key_solve, pi_hat=approx, **options)
    thetas = approx.sample(key_theta, num_features)
    V = project(model, data, thetas, norm=norm, key=key_proj, dtype=dtype)
    return build(V, size, method, key_solve, **options)
