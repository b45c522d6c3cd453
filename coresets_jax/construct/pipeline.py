"""`cj.coreset`: the whole pipeline of HC Algorithm 3 (pi_hat, projection, solver) for vector methods, or pi_hat
then a posterior-driven core; with `certify=True`, its certificate."""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..interop import io as _io
from ..posterior_driven import support as _support  # (registers the posterior-driven methods)
from ..features import projection as _projection
from ..features import taylor as _taylor
from ..weighting.pihat import GaussianApproximation
from ..core import Coreset, Model
from ..core import checks as _checks
from ..core import mesh as _mesh
from ..core import validate as _validate
from ..registry import resolve
from .posterior import compiled_coreset_fn, default_start, resolve_pi_hat, start_from
from . import auto_size as _auto_size
from .memory import check_fits
from .vectors import build, build_checked, prefetch_build, check_finite_result, key_data, key_for, on_full_rows
from ..compilation import full_precision
from ..core import caller

__all__ = ["NORMS", "TAYLOR_BUDGET", "TAYLOR_METHODS", "coreset", "feature_plan"]

NORMS = ("fisher", "l2", "centered", "taylor")
TAYLOR_METHODS = ("omp",)  # the methods whose automatic features become second-order ones at D >= 30


@full_precision
def coreset(model: Model, data: Any, size: Optional[int] = None, method: Any = None,
            key: Optional[jax.Array] = None, *, norm: Optional[str] = None, num_features: Optional[int] = None,
            pi_hat: Any = None, dtype=None, init: Any = None, return_vectors: bool = False,
            support: Any = None, support_rows: Any = None, certify: bool = False, tol: Optional[float] = None,
            candidate_rows: Optional[int] = None, **options):
    """The whole pipeline of HC Algorithm 3: pi_hat, random projection, then the sparse solver; or, with
    `tol`, the smallest such coreset whose certificate says KL(pi_w || pi) <= tol (`auto_size.py`).

    Args:
      model, data: the model and its data pytree (leading axis N).
      size: M, the coreset capacity. With `tol`: the largest size searched (default
        `auto_size.default_limit(N)`, min(N, 4096)).
      method: a name in `cj.METHODS` (projected-vector solvers) or `cj.POSTERIOR_METHODS` ("sparse_vi",
        ...; these sample the coreset posterior themselves, and norm/num_features are unused), or a
        `cj.Construction`. Default: "frank_wolfe" with a fixed size; "omp" with `tol`.
      tol: nats. Search sizes for the smallest coreset whose certificate (`cj.certify`, from NUTS draws of
        its posterior) is "good" or "usable" with KL estimate + 2 standard errors <= tol; the result carries
        `cs.certificate` and `cs.info["path"]` (per size tried: size, points, kl, kl_se, khat, verdict,
        passed, seconds). If no size up to the limit gets there, the best one is returned with a warning.
        Vector methods only.
      key: PRNG key (split for pi_hat, projection and solver); required by the random methods ("uniform",
        "importance" and the posterior-driven ones); the others default to `jax.random.key(0)`.
      norm: "fisher" | "l2" | "centered".
      num_features: J, the projection dimension. None (default): `cj.features.projection.auto_num_features(D,
        M, R)` = min(500, max(64, 16 D, M, 2^26 // R)) for OMP, with R rows projected (N, or the candidates)
        and the parameter dimension D (with `tol`, M drops out): 500 while V has at most 2^26 entries (N <=
        134,217), then shrinking towards max(64, 16 D, M) as N grows; 500 for the other methods (A-IHT II lost
        its accuracy at the floor; benchmarks/investigations/default_features.py). At most the number of
        samples given as pi_hat.
        `settings["num_features"]` records the J used.
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
        (`posterior_driven/support.py`, measured in benchmarks/investigations/support_rows.py); an int sets the cap.
      candidate_rows: vector methods only: None (default) or "all" lets the solver choose among every row. An
        int R: only R rows (at least 4 M; R >= N means every row) are candidates, and the solver fits the full
        data's sum sum_n v_n from them, computed in one streamed pass over the N rows
        (`features.projection.candidate_features`). The solver then reads an R x J matrix instead of N x J
        (OMP makes about 2 M passes over it), and V's memory is R J. The candidates are drawn without
        replacement, half uniformly and half by leverage in the Fisher information at a few draws of pi_hat
        (`projection.leverage_scores`), so rows that alone carry a direction (a rare covariate) are rarely
        missed; a plain uniform subsample missed them (benchmarks/investigations/candidate_rows.py). Not with
        `return_vectors`, sharded data, a random method or `compress=True`. `settings["candidate_rows"]`
        records R.
      certify: certify the result against the full data (`cj.certify`) and attach it as `cs.certificate`.
        Posterior-driven methods certify their own draws (`info["samples"]`); for the others the draws are
        `cj.sample(model, data, key, weights=cs)` with NUTS, 2 chains of 500 + 500 steps on the coreset's rows.
        Warns when k-hat > 0.7.
      **options: the method's options (and `refit`, `compress`, `compress_tol` for vector methods).
    """
    certify = _validate.check_bool(certify, "certify")
    if tol is not None:
        return _auto(model, data, size, "omp" if method is None else method, key, tol, norm=norm,
                     num_features=num_features, pi_hat=pi_hat, dtype=dtype, init=init,
                     return_vectors=return_vectors, support=support, support_rows=support_rows,
                     candidate_rows=candidate_rows, options=options)
    if size is None:
        raise ValueError("size: required (a coreset size M), unless tol= is given to choose it")
    method = "frank_wolfe" if method is None else method
    if certify:
        result = coreset(model, data, size, method, key, norm=norm, num_features=num_features, pi_hat=pi_hat,
                         dtype=dtype, init=init, return_vectors=return_vectors, support=support,
                         support_rows=support_rows, candidate_rows=candidate_rows, **options)
        cs, V = result if return_vectors else (result, None)
        cs = _certified(model, data, cs, key)
        return (cs, V) if return_vectors else cs
    construction = resolve(method)
    if norm is not None:
        _validate.check_choice(norm, NORMS, "norm")
    n = _checks.check_model_data(model, data)
    size = _validate.check_size(size, n)
    num_features = _check_features(num_features)
    support_method = _support.resolve_support(support, construction)
    if support_rows is not None and support_method is None:
        raise ValueError("support_rows: only a posterior-driven method started from a vector method's coreset "
                         "(support=...) projects rows; leave support_rows unset")
    rows = _support.resolve_rows(support_rows, n, size)
    candidates = resolve_candidates(candidate_rows, n, size, construction, data, return_vectors, options)
    if construction.needs == "posterior":
        opts = construction.check_options(options)
        construction.make(model, size, **dict(opts))  # every option's value checked before any work
    # As cj.build: a random method needs a key; a deterministic one defaults to key(0), so that the
    # projection (and the whole coreset) repeats exactly.
    key = key_for(construction, key)
    key_pi, key_theta, key_proj, key_solve = _validate.split_key(key, 4)
    if construction.needs == "posterior":
        return _posterior(model, data, n, size, construction, opts, key, support_method, rows, pi_hat, init,
                          "fisher" if norm is None else norm, num_features, dtype, return_vectors)
    dim = _parameter_dim(model, data, pi_hat, init)
    approx = None
    if dim is None:  # D from pi_hat itself (a model with neither dim nor init_params)
        approx = resolve_pi_hat(pi_hat, model, data, key_pi, init, checked_n=n)
        dim = _draw_dim(approx, key_theta)
    plan = feature_plan(norm, num_features, construction, dim, size, n, candidates, pi_hat, options)
    norm, num_features, candidates = plan.norm, plan.num_features, plan.candidates
    options = dict(options, **plan.solver_options)
    v_rows = n if candidates is None else candidates
    solver_options = construction.check_options({k: v for k, v in options.items()
                                                 if k not in ("refit", "compress", "compress_tol")})
    check_fits(construction, size, (v_rows, num_features), jnp.float32 if dtype is None else dtype,
               _device_of(data), solver_options)

    def prefetch():
        """Compile the solver on one core while pi_hat and the projection pass over the data on the others
        (V's shape and dtype are known before either)."""
        return _prefetch(construction, size, options, data, v_rows, num_features, dtype, key_solve)

    if approx is None:  # the solver's compilation starts once pi_hat's program is lowered
        started = []
        approx = resolve_pi_hat(pi_hat, model, data, key_pi, init, checked_n=n,
                                then=lambda: started.append(prefetch()))
        prefetched = started[0]
    else:
        prefetched = prefetch()
    V, stats, target, picked = _vectors(model, data, approx, key_theta, key_proj, norm, num_features, dtype,
                                        candidates, n)
    compress, compress_tol = options.pop("compress", "auto"), options.pop("compress_tol", 3e-3)
    cs = build_checked(V, stats, size, construction, key_solve, compress, compress_tol, options, target=target,
                       rows=picked, n_total=n, prefetched=prefetched)
    info = dict(cs.info, features=plan.record())
    if norm == "taylor":  # the KL the residual predicts (`features.taylor`, Eq. (*))
        y2 = jnp.sum(jnp.square(jnp.sum(V.astype(jnp.float32), axis=0) if target is None else target))
        info["predicted_kl"] = _taylor.predicted_kl(y2 * jnp.square(cs.info["relative_error"]))
    cs = Coreset(cs.indices, cs.weights, info, cs.method,
                 dict(cs.settings, norm=norm, num_features=num_features, key=key_data(key),
                      data_digest=_io.digest(data)))
    return (cs, V) if return_vectors else cs


# V entries (rows x J) up to which the second-order features are computed for every row (512 MB in float32);
# beyond, for as many candidate rows as fit in it (at least 4 per point), with the full data's sum as target
TAYLOR_BUDGET = 1 << 27
TAYLOR_Q_ENTRIES = 1 << 24  # the automatic size's largest OMP factor Q (capacity x J entries, 64 MB)


class FeaturePlan(NamedTuple):
    """What `cj.coreset` projects onto, and why: the norm, J, the candidate rows (None: every row), the options
    it gives the solver, and the reason in words (recorded as `info["features"]`)."""

    norm: str
    num_features: int
    candidates: Optional[int]
    solver_options: dict
    reason: str

    def record(self) -> dict:
        return {"norm": self.norm, "num_features": self.num_features, "candidate_rows": self.candidates,
                "reason": self.reason}


def feature_plan(norm: Optional[str], num_features: Optional[int], construction, dim: int, size: Optional[int],
                 n: int, candidates: Optional[int], pi_hat: Any, options: dict) -> FeaturePlan:
    """The features for a vector method (`coreset`'s `norm`, `num_features`, `candidate_rows`).

    norm=None: "taylor" (`features.taylor`: the exact second-order moments at pi_hat's mean) for OMP when a
    posterior's D (D + 3) / 2 second-order moments outnumber the MAX_FEATURES = 500 random features of the
    default projection (D >= 30), and pi_hat is Gaussian (the Laplace default) or given as samples; else
    "fisher" (HC Eq. 5.7). With "taylor", J = D (D + 3) / 2; V holds every row while rows x J is at most
    TAYLOR_BUDGET, else that many entries' worth of candidate rows (at least 4 per point); OMP refits plainly
    (`compensated=False`: its fit stays far above float32's rounding)."""
    j_taylor = _taylor.num_features(dim)
    gaussian = pi_hat is None or (isinstance(pi_hat, str) and pi_hat == "laplace") or _given_samples(pi_hat) \
        or isinstance(pi_hat, GaussianApproximation)
    if norm is None:
        if construction.name in TAYLOR_METHODS and gaussian and j_taylor > _projection.MAX_FEATURES \
                and num_features is None:
            norm = "taylor"
            reason = (f"the {j_taylor} = D (D + 3) / 2 second-order moments of a D = {dim} posterior outnumber "
                      f"the default projection's {_projection.MAX_FEATURES} random features")
        else:
            norm = "fisher"
            reason = "the default projection (HC Eq. 5.7)"
    else:
        _validate.check_choice(norm, NORMS, "norm")
        reason = "norm given"
    if norm != "taylor":
        if num_features is None:
            num_features = _default_features(construction, dim, size, n if candidates is None else candidates,
                                             pi_hat)
        return FeaturePlan(norm, num_features, candidates, {}, reason)
    if num_features is not None and num_features != j_taylor:
        raise ValueError(f"num_features: the second-order features of a D = {dim} model are D (D + 3) / 2 = "
                         f"{j_taylor}; leave num_features unset with norm='taylor'")
    if not gaussian:
        raise ValueError("pi_hat: norm='taylor' expands the log-likelihoods at a Gaussian pi_hat's mean ('laplace', "
                         "a cj.laplace result, or samples); use norm='fisher' with this pi_hat")
    if candidates is None and n * j_taylor > TAYLOR_BUDGET:
        candidates = min(n, max(TAYLOR_BUDGET // j_taylor, _support.MIN_ROWS_PER_POINT * (size or 1)))
        candidates = None if candidates >= n else candidates
        if candidates is not None:
            reason += f"; {candidates} candidate rows (V at every row would hold {n * j_taylor:.3g} entries)"
    extra = {"compensated": False} if construction.name == "omp" and "compensated" not in options else {}
    return FeaturePlan("taylor", j_taylor, candidates, extra, reason)


def _check_features(num_features: Any) -> Optional[int]:
    """num_features: None (the rule of `auto_num_features`, resolved once D is known) or a positive int."""
    if num_features is None:
        return None
    if isinstance(num_features, bool) or not isinstance(num_features, (int, np.integer)) or num_features < 1:
        raise ValueError(f"num_features: expected None (J from D and M, `auto_num_features`) or a positive "
                         f"integer, got {num_features!r}")
    return int(num_features)


def _given_samples(pi_hat: Any) -> bool:
    """Whether pi_hat is an (S, D) array of samples."""
    return pi_hat is not None and not isinstance(pi_hat, str) and not hasattr(pi_hat, "sample") \
        and np.ndim(pi_hat) == 2


def _parameter_dim(model: Model, data: Any, pi_hat: Any, init: Any) -> Optional[int]:
    """D without any data pass where it can be read off: samples given as pi_hat, `init`, `model.dim`, or the
    model's `init_params` (None otherwise: it then comes from pi_hat, `_draw_dim`)."""
    if _given_samples(pi_hat):
        return int(np.shape(pi_hat)[1])
    if init is not None and np.ndim(init) >= 1:
        return int(np.shape(init)[-1])
    if model.dim is not None:
        return int(model.dim)
    if model.init_params is not None:
        try:  # shapes only; an init_params that needs concrete data (NumPy on it) waits for pi_hat
            return int(jax.eval_shape(model.init_params, data).shape[-1])
        except Exception:  # noqa: BLE001
            return None
    return None


def _default_features(construction, dim: int, size: Optional[int], rows: int, pi_hat: Any) -> int:
    """`auto_num_features(D, M, rows)` for the methods of FEWER_FEATURES_METHODS, else 500; at most the number
    of samples when pi_hat is given as samples."""
    if construction.name in _projection.FEWER_FEATURES_METHODS:
        j = _projection.auto_num_features(dim, size, rows)
    else:
        j = _projection.MAX_FEATURES
    if _given_samples(pi_hat):
        j = min(j, int(np.shape(pi_hat)[0]))
    return j


def _draw_dim(approx: Any, key: jax.Array) -> int:
    """D of pi_hat: its mean's length, else one draw's."""
    mean = getattr(approx, "mean", None)
    if mean is not None and not callable(mean) and np.ndim(mean) == 1:
        return int(np.shape(mean)[0])
    return int(approx.sample(key, 1).shape[-1])


def _prefetch(construction, size, options, data, rows, num_features, dtype, key_solve):
    """`prefetch_build` for V of (rows, J) (with a target when rows < N: candidate rows), or None for data
    sharded over a mesh."""
    if _mesh.leading_mesh(data) is not None:
        return None
    v_dtype = _projection.check_dtype(dtype)
    candidates = rows < _validate.num_rows(data)
    return prefetch_build(construction, size, options, (rows, num_features), v_dtype, key_solve,
                          jnp.promote_types(v_dtype, jnp.float32) if candidates else None)


def resolve_candidates(candidate_rows: Any, n: int, size: int, construction, data: Any, return_vectors: bool,
                       options: dict) -> Optional[int]:
    """R, the number of candidate rows (`coreset`'s `candidate_rows`), or None for every row."""
    if candidate_rows is None or (isinstance(candidate_rows, str) and candidate_rows == "all"):
        return None
    if isinstance(candidate_rows, bool) or not isinstance(candidate_rows, (int, np.integer)) or candidate_rows < 1:
        raise ValueError(f"candidate_rows: must be None, 'all' or a positive integer, got {candidate_rows!r}")
    if construction.needs != "vectors":
        raise ValueError("candidate_rows: only vector methods choose among candidate rows; posterior-driven "
                         "methods take support_rows")
    if construction.random:
        raise ValueError(f"candidate_rows: {construction.name!r} draws from every row by design; leave "
                         "candidate_rows unset")
    rows = min(n, max(int(candidate_rows), _support.MIN_ROWS_PER_POINT * size))
    if rows >= n:
        return None
    if return_vectors:
        raise ValueError("candidate_rows: return_vectors=True needs V for every row; leave candidate_rows unset")
    if options.get("compress") is True:
        raise ValueError("candidate_rows: the candidates' features are not compressed; leave compress unset")
    if _mesh.leading_mesh(data) is not None:
        raise ValueError("candidate_rows: not supported for data sharded over a mesh; leave it unset")
    return rows


def _vectors(model, data, approx, key_theta, key_proj, norm, num_features, dtype, candidates, n):
    """(V, matrix_stats(V), target, candidate rows): V for every row (target and rows None), or for
    `candidates` rows (`_candidate_rows`) with the full data's sum as the target."""
    if norm == "taylor":
        mean, cov = _gaussian_summary(approx)
        if candidates is None:
            V = _taylor.taylor_features(model, data, mean, cov, dtype=dtype)
            return V, _projection.matrix_stats_jit(V), None, None
        if _full_laplace(approx):  # the target's Hessian part is the fit's own: gradients alone suffice
            target, norms = _taylor.target_and_scores(model, data, mean, cov, jax.random.fold_in(key_proj, 3))
        else:
            target, norms = _taylor.taylor_sum_and_norms(model, data, mean, cov)
        picked = _taylor.candidates(jax.random.fold_in(key_proj, 7), norms, candidates)
        V = _taylor.candidate_features(model, data, mean, cov, picked, dtype=dtype)
        return V, _projection.matrix_stats_jit(V), target, picked
    if candidates is None:
        V, stats = _projection.features(model, data, approx, key_theta, key_proj, norm, num_features, dtype)
        return V, stats, None, None
    thetas = approx.sample(key_theta, num_features)
    picked = _candidate_rows(model, data, thetas, jax.random.fold_in(key_proj, 7), candidates)
    V, stats, target = _projection.candidate_features(model, data, thetas, key_proj, norm, picked, dtype)
    return V, stats, target, picked


def _full_laplace(approx) -> bool:
    """Whether pi_hat is a Laplace fit on every row (its precision is then the full data's Hessian there)."""
    info = getattr(approx, "info", None) or {}
    return isinstance(approx, GaussianApproximation) and info.get("method") in ("newton", "optax") \
        and info.get("subsample", 0) is None


def _gaussian_summary(approx) -> tuple:
    """(mean, cov) of a Gaussian pi_hat, or of samples given as pi_hat."""
    if isinstance(approx, GaussianApproximation):
        return approx.mean, approx.cov
    thetas = jnp.asarray(approx.thetas, jnp.float32)
    if thetas.shape[0] <= thetas.shape[1]:
        raise ValueError(f"pi_hat: norm='taylor' needs more samples than D = {thetas.shape[1]} for their covariance, "
                         f"got {thetas.shape[0]}")
    return jnp.mean(thetas, axis=0), jnp.cov(thetas, rowvar=False)


LEVERAGE_THETAS = 8  # draws of pi_hat at which the candidates' leverage is averaged


def _candidate_rows(model, data, thetas, key, rows: int) -> jax.Array:
    """`rows` distinct row numbers, in increasing order (a sequential gather), drawn without replacement with
    probabilities q_n = (1/N + h_n / sum h) / 2: half uniform, half by leverage h_n in the Fisher information,
    averaged over the first LEVERAGE_THETAS of pi_hat's draws (`projection.leverage_scores`), so that rows a
    uniform subsample would miss (a rare covariate) are among the candidates (Gumbel top-k: log q_n + Gumbel
    noise, the largest `rows`)."""
    h = _projection.leverage_scores(model, data, thetas[:LEVERAGE_THETAS])
    return _gumbel_top(key, h, rows)


@functools.partial(jax.jit, static_argnames=("rows",))
def _gumbel_top(key, h, rows: int):
    n = h.shape[0]
    h = jnp.where(jnp.isfinite(h) & (h > 0), h, 0.0)
    q = 0.5 / n + 0.5 * h / jnp.maximum(jnp.sum(h), jnp.finfo(h.dtype).tiny)
    scores = jnp.log(q) + jax.random.gumbel(key, (n,), h.dtype)
    return jnp.sort(jax.lax.top_k(scores, rows)[1]).astype(jnp.int32)


def _posterior(model, data, n, size, construction, opts, key, support_method, rows, pi_hat, init, norm,
               num_features, dtype, return_vectors):
    """`cj.coreset` for a posterior-driven method: its start (pi_hat's summary, or the model's zero theta for a
    method that needs no pi_hat, `default_start`), an optional vector-method support, then its pure core."""
    start_time = time.perf_counter()
    key_pi, key_theta, key_proj, key_solve = _validate.split_key(key, 4)
    initial, V, slots = None, None, size
    if support_method is None and pi_hat is None and not construction.uses_pi_hat:
        # No full-data pass: the same call as cj.coreset_fn(model, method, size)(key, data).
        start, key_solve = default_start(model, data, init), key
    else:
        approx = resolve_pi_hat(pi_hat, model, data, key_pi, init, checked_n=n)
        start = start_from(approx, key_theta)
    if support_method is not None:
        if num_features is None:
            num_features = _default_features(support_method, int(start.mean.shape[-1]), size, rows, pi_hat)
        thetas = approx.sample(key_theta, num_features)
        start_cs, V = _support.support_start(model, data, size, support_method, thetas, key_proj, rows=rows,
                                             build=build, norm=norm, dtype=dtype)
        initial, slots = _support.compact_start(start_cs, size)
    solve = compiled_coreset_fn(model, construction, slots, opts)
    cs = check_finite_result(solve(key_solve, jax.tree_util.tree_map(jnp.asarray, data), start, initial=initial))
    if support_method is not None:
        cs = _support.pad_result(cs, size, support_method.name)
        cs = Coreset(cs.indices, cs.weights, dict(cs.info, support_rows=rows), cs.method)
    _warn_stuck_chains(cs.info, construction.name)
    _warn_diverged(cs, construction.name)
    _warn_unfinished(cs.info, construction.name)
    _warn_runaway_weights(cs, construction.name)
    cs = Coreset(cs.indices, cs.weights, cs.info, cs.method, {
        "method": construction.name, "size": size, "options": dict(opts), "key": key_data(key),
        "N": n, "time_s": time.perf_counter() - start_time,
        "support": "uniform" if support_method is None else support_method.name,
        "data_digest": _io.digest(data),
        "support_rows": rows if support_method is not None else None})
    return (cs, V) if return_vectors else cs


def _device_of(data: Any):
    """The first device holding the data (None: the default device)."""
    leaf = jax.tree_util.tree_leaves(data)[0]
    devices = getattr(getattr(leaf, "sharding", None), "device_set", None)
    return sorted(devices, key=lambda d: d.id)[0] if devices else None


GROWN_FEATURES = 4  # where the automatic size's coreset stops growing, J grows this many times (memory allowing)
SWITCH_REFINE = "quasi_newton"  # ... and where no size reaches tol, the best one's weights are trained by this


def _auto(model, data, size, method, key, tol, *, norm, num_features, pi_hat, dtype, init, return_vectors,
          support, support_rows, candidate_rows, options, grown: bool = False):
    """`cj.coreset(..., tol=...)`: validation, pi_hat and the projection once, then `auto_size.auto_coreset`."""
    tol = _validate.check_positive_float(tol, "tol")
    construction = resolve(method)
    if construction.needs != "vectors":
        raise ValueError(f"method: tol= searches sizes with a vector method (e.g. 'omp', 'iht2'); "
                         f"{construction.name!r} is posterior-driven: give it a size, then cj.refine or cj.certify")
    if support is not None or support_rows is not None:
        raise ValueError("support: only posterior-driven methods take a support; leave it unset with tol=")
    if norm is not None:
        _validate.check_choice(norm, NORMS, "norm")
    n = _checks.check_model_data(model, data)
    num_features = _check_features(num_features)
    key = key_for(construction, key)
    key_pi, key_theta, key_proj, key_solve = _validate.split_key(key, 4)
    candidates = resolve_candidates(candidate_rows, n, 1, construction, data, return_vectors, options)
    approx = None
    dim = _parameter_dim(model, data, pi_hat, init)
    if dim is None:
        approx = resolve_pi_hat(pi_hat, model, data, key_pi, init, checked_n=n)
        dim = _draw_dim(approx, key_theta)
    plan = feature_plan(norm, num_features, construction, dim, None, n, candidates, pi_hat, options)  # no M yet
    norm, num_features, candidates = plan.norm, plan.num_features, plan.candidates
    options = dict(options, **plan.solver_options)
    limit = _auto_size.default_limit(n) if size is None else _validate.check_size(size, n)
    if candidates is not None:  # a size M is searched on at least 4 M candidates
        limit = min(limit, max(1, candidates // _support.MIN_ROWS_PER_POINT))
    if norm == "taylor" and size is None:  # J points fit the J moments exactly, and a step's cost grows with
        # the capacity: 3 J / 4, and Q (capacity x J) at most TAYLOR_Q_ENTRIES (tol / 4 took J / 2 at D = 100)
        limit = min(limit, (3 * num_features) // 4, max(TAYLOR_Q_ENTRIES // num_features, 1))
    shape = (n if candidates is None else candidates, num_features)
    vdtype, device = jnp.float32 if dtype is None else dtype, _device_of(data)
    plain = {k: v for k, v in options.items() if k not in ("refit", "compress", "compress_tol")}
    opts = construction.check_options(plain)
    if size is not None:
        check_fits(construction, limit, shape, vdtype, device, opts)
    else:  # the default limit shrinks to what fits
        while limit > 1:
            try:
                check_fits(construction, limit, shape, vdtype, device, opts)
                break
            except ValueError:
                limit //= 2
    if approx is None:
        approx = resolve_pi_hat(pi_hat, model, data, key_pi, init, checked_n=n)
    V, stats, target, picked = _vectors(model, data, approx, key_theta, key_proj, norm, num_features, dtype,
                                        candidates, n)
    compress, compress_tol = options.get("compress", "auto"), options.get("compress_tol", 3e-3)
    digest = _io.digest(data)

    def build_at(m: int, **more) -> Coreset:
        check_fits(construction, m, shape, vdtype, device, opts)
        extra = {k: v for k, v in options.items() if k not in ("compress", "compress_tol")}
        extra.update(more)
        cs = build_checked(V, stats, m, construction, key_solve, compress, compress_tol, extra, target=target,
                           rows=picked, n_total=n)
        return Coreset(cs.indices, cs.weights, cs.info, cs.method,
                       dict(cs.settings, norm=norm, num_features=num_features, key=key_data(key),
                            data_digest=digest, N=n))

    build_path = None
    if "path_sizes" in construction.options and "path_sizes" not in options and not options.get("refit") \
            and compress is not True:
        def build_path(capacity: int, sizes: tuple) -> dict:
            """One run at `capacity` (its coreset) and the greedy path's coresets of the smaller `sizes`."""
            run = build_at(capacity, path_sizes=sizes)
            # each coreset records the options of its own size (no path_sizes) and the run it was read from
            own = {k: v for k, v in run.settings["options"].items() if k != "path_sizes"}
            out = {capacity: Coreset(run.indices, run.weights, run.info, run.method,
                                     dict(run.settings, options=own, greedy_path_of=capacity))}
            for k, m in enumerate(sizes):
                indices, weights = run.info["path_indices"][k, :m], run.info["path_weights"][k, :m]
                if picked is not None:  # the path's rows are rows of the candidates
                    indices, weights = on_full_rows(picked, indices, weights)
                info = {"relative_error": jnp.sqrt(run.info["path_errors"][k]), "finite": run.info["finite"]}
                out[m] = Coreset(indices, weights, info, run.method,
                                 dict(run.settings, size=m, options=own, greedy_path_of=capacity))
            return out

    predicted = None
    if norm == "taylor" and build_path is not None:
        y2 = float(jnp.sum(jnp.square(jnp.sum(V.astype(jnp.float32), axis=0) if target is None else target)))

        def predicted(first: int, deeper: bool):
            """One OMP run at the limit: the grid's coresets, and their KLs predicted from its residuals
            (`features.taylor`, Eq. (*)); it stops once the prediction is below PREDICTED_STOP x tol (`deeper`:
            the smallest of PREDICTED_ASCENT x tol)."""
            grid = _auto_size.predicted_grid(first, limit)
            fraction = min(_auto_size.PREDICTED_ASCENT) if deeper else _auto_size.PREDICTED_STOP
            stop = 2.0 * fraction * tol / max(y2, 1e-30)
            options.setdefault("stop_error", stop)
            built = build_path(limit, grid[:-1])
            options.pop("stop_error")
            kl = {m: float(_taylor.predicted_kl(y2 * float(cs.info["relative_error"]) ** 2))
                  for m, cs in built.items()}
            return built, kl

    def switch(best: Coreset, saturated: Optional[int]):
        """Where no size reaches tol: a projection GROWN_FEATURES times larger where the coreset stopped
        growing (it fit all J features: more of them tell more points apart), then the best coreset's weights
        trained against the full data (`cj.refine` with SWITCH_REFINE), each judged by its certificate."""
        from ..posterior_driven.refine import refine  # (moves above the stages with the workflows)

        entries = []
        if saturated is not None and norm != "taylor" and not grown:
            bigger = GROWN_FEATURES * num_features
            try:
                check_fits(construction, limit, (shape[0], bigger), vdtype, device, opts)
                check_fits(construction, 1, (shape[0], bigger), vdtype, device, opts)
            except ValueError:
                bigger = None
            if bigger is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    wider = _auto(model, data, size, method, key, tol, norm=norm, num_features=bigger,
                                  pi_hat=approx, dtype=dtype, init=init, return_vectors=False, support=None,
                                  support_rows=None, candidate_rows=candidate_rows, options=dict(options),
                                  grown=True)
                entries += [dict(e, strategy=f"{bigger} features") for e in wider.info["path"]]
                if _auto_size.passes(wider.certificate, tol):
                    return wider, entries
                if wider.certificate.kl < best.certificate.kl:
                    best = wider
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            refined = refine(model, data, best, jax.random.fold_in(key, 2), method=SWITCH_REFINE)
        cert = refined.certificate
        entries.append({"size": best.capacity, "points": int(refined.num_points), "kl": float(cert.kl),
                        "kl_se": float(cert.kl_se), "khat": float(cert.khat), "verdict": cert.verdict,
                        "passed": _auto_size.passes(cert, tol), "screened": False,
                        "seconds": time.perf_counter() - t0, "strategy": f"refine ({SWITCH_REFINE})",
                        "kept": refined.info["kept"]})
        return refined, entries

    cs = _auto_size.auto_coreset(model, data, n, tol, limit, construction, jax.random.fold_in(key, 1), build_at,
                                 build_path=build_path, screen=_screen(model, data, n, key), predicted=predicted,
                                 switch=None if grown else switch)
    cs = Coreset(cs.indices, cs.weights, dict(cs.info, features=plan.record()), cs.method, cs.settings,
                 cs.certificate)
    return (cs, V) if return_vectors else cs


def _screen(model: Model, data: Any, n: int, key: jax.Array):
    """The automatic size's screening certificate (`certification.screen`), for data in memory on one device
    with at least SCREEN_MIN_ROWS rows (below, the full pass is cheap); None otherwise, or with the
    screen off (`screen.ENABLED`, the environment variable CORESETS_JAX_SCREEN=0)."""
    from ..certification import screen as _scr

    if not _scr.ENABLED or n < _scr.SCREEN_MIN_ROWS or _mesh.leading_mesh(data) is not None:
        return None
    seed = int(np.asarray(jax.random.key_data(key)).ravel()[-1])

    def screen(cs: Coreset, draws, size: int):
        return _scr.screened_certificate(model, data, cs, draws, seed=seed + size)

    return screen


CERTIFY_SAMPLING = dict(method="nuts", num_samples=500, num_warmup=500, num_chains=2)


def _certified(model: Model, data: Any, cs: Coreset, key: Optional[jax.Array]) -> Coreset:
    """`cs` with its `cj.certify` certificate: its own draws when it has them, else NUTS on the coreset."""
    from ..certification import certify, warn_if_unreliable
    from ..inference import sample

    draws = cs.info.get("samples") if isinstance(cs.info, dict) else None
    if draws is None:
        key = jax.random.fold_in(jax.random.key(0) if key is None else _validate.check_key(key), 1)
        draws = sample(model, data, key, weights=cs, warn=False, **CERTIFY_SAMPLING).samples
    cert = certify(model, data, cs, draws)
    warn_if_unreliable(cert, cs.method)
    return cs.with_certificate(cert)


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
                      RuntimeWarning, stacklevel=caller.stacklevel())


def _warn_diverged(cs, name: str) -> None:
    """Sparse VI's published 1/t step can overshoot until its weights are not finite: the run stopped at the
    last finite iterate (`posterior_driven.sparse_vi`), which this says, or raises when that iterate is empty."""
    at = int(np.asarray(cs.info.get("diverged_at", -1)))
    if at < 0:
        return
    what = (f"a weight step at selection step {at + 1} gave non-finite weights (the step size step_scale / t "
            "overshot), so the run stopped there")
    if cs.num_points == 0:
        raise FloatingPointError(f"{name}: {what}, before any point had a positive weight: there is no coreset "
                                 "to return; try a smaller step_scale (e.g. 0.1), or a Hilbert method such as "
                                 "method='omp'")
    warnings.warn(f"{name}: {what}, and returns its last finite coreset ({cs.num_points} points); a smaller "
                  "step_scale (e.g. 0.1) may run further. Check the result with cj.certify", RuntimeWarning,
                  stacklevel=caller.stacklevel())


RUNAWAY_WEIGHT_SUM = 10.0  # x the start's total weight (N for the published start)


def _warn_runaway_weights(cs, name: str) -> None:
    """Trained weights whose total is many times the start's (N) give a coreset posterior far tighter than the
    full one. Hot DoG's step grows with the distance the weights have travelled, so a gradient biased by chains
    that lag behind pi_w grows them geometrically (benchmarks/investigations/hot_dog_weights.py: published
    Coreset MCMC on Bradley-Terry, 50 players, with the slice sampler)."""
    start = cs.info.get("initial_weights")
    if start is None:
        return
    total, begun = float(np.sum(np.asarray(cs.weights, np.float64))), float(np.sum(np.asarray(start, np.float64)))
    if begun > 0 and total > RUNAWAY_WEIGHT_SUM * begun:
        warnings.warn(f"{name}: the trained weights sum to {total / begun:.3g}x the start's total "
                      f"({total:.4g} against {begun:.4g}): they ran away, and the coreset posterior is likely far "
                      "tighter than the full one. Check it with cj.certify; a kernel that mixes faster "
                      "(kernel='nuts', num_warmup=500) or cj.refine from an OMP coreset avoids this",
                      RuntimeWarning, stacklevel=caller.stacklevel())


def _warn_unfinished(info: dict, name: str) -> None:
    """Say when a posterior-driven run stopped at a cap rather than by its own test. (A run that keeps its
    start because training did not lower the KL estimate is not a failure: `info["fell_back"]` says so.)"""
    if "converged" in info and not bool(np.asarray(info["converged"])):
        stopped = int(np.asarray(info.get("stopped_by", 0)))
        why = "the time budget" if stopped == 3 else "the cap, num_iters"
        warnings.warn(f"{name}: the weights had not settled after {int(np.asarray(info['iterations']))} "
                      f"iterations ({why}; drift KL {float(np.asarray(info['drift_kl'])):.3g} between the last "
                      "checkpoints): raise num_iters for a settled answer", RuntimeWarning,
                      stacklevel=caller.stacklevel())
    if "hot_start_converged" in info and not bool(np.asarray(info["hot_start_converged"])):
        trained = bool(np.asarray(info.get("trained", True)))
        then = ("training started anyway (train_after_cap=True)" if trained else
                "so, as in the authors' code, the weights were not trained: this is the uniform start "
                "(train_after_cap=True trains anyway; cj.refine starts its chains at the mode)")
        warnings.warn(f"{name}: the hot start reached its cap ({int(np.asarray(info['hot_start_steps']))} steps) "
                      f"before the chains' log potentials passed the stationarity test; {then}",
                      RuntimeWarning, stacklevel=caller.stacklevel())
