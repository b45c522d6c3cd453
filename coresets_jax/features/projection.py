"""Random projection of the N log-likelihoods into R^J (HC Algorithm 3; IHT §2).

Given samples theta_1..theta_J ~ pi_hat:
- "l2" (HC Eq. 5.10):       v_n = sqrt(1/J) [L_n(theta_1), ..., L_n(theta_J)]
- "fisher" (HC Eq. 5.7):    v_n = sqrt(D/J) [grad L_n(theta_1)_{d_1}, ..., grad L_n(theta_J)_{d_J}],
                            d_j ~ Unif{1..D}
- "centered" (IHT §2):      v_n = sqrt(1/J) [L_n(theta_j) - mean_j' L_n(theta_j')]_j

The features are computed with `vmap`/`grad` of the user's function, streamed over N in chunks written in
place into V (`_project_with_stats`), so peak memory is V plus one chunk of intermediates.
"""

from __future__ import annotations

import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..core import mesh as _mesh
from ..compilation import emitter_jit, fast_jit
from ..core import validate as _validate
from ..core import checks as _checks
from ..core.model import Model
from ..weighting.pihat import GaussianApproximation, gaussian_draws
from ..core import compiled
from ..core import take_data
from ..core.rows import fold_row_chunks
from ..solvers.base import column_sum
from ..solvers.least_squares import two_sum
from ..compilation import full_precision, full_precision_factory

__all__ = ["FEATURE_BUDGET", "FEWER_FEATURES_METHODS", "MAX_FEATURES", "NORMS", "SUM_CHUNK", "auto_num_features", "candidate_features", "check_dtype", "feature_sum_fn", "features",
           "leverage_scores", "matrix_stats", "project", "project_fn"]

NORMS = ("fisher", "l2", "centered")
PROGRESS_MIN_WORK = 1 << 29  # N * J * D below which the projection shows no bar (about a second on a CPU)
# Rows * J * D of work between two reports. A host callback inside this loop costs ~5 ms (it stalls the
# loop's threads), so one per chunk cost 15%; one per 2^28 (a few tenths of a second) costs ~1%.
PROGRESS_WORK_PER_REPORT = 1 << 28
Array = jax.Array


# With a closed-form gradient, L_n itself costs a second transcendental per (row, sample) (2.0x the
# projection time when checked at every sample; benchmarks/results/fisher_check_overhead.json), so it is
# checked at the first few samples only: a model that does not fit its data (L_n = -inf whatever theta)
# is caught at any sample. With autodiff the value comes with the gradient and every sample is checked.
_CLOSED_FORM_CHECKED_SAMPLES = 4


# V entries (N x J) up to which the default J stays at its cap: 2^26 (256 MB in float32), N <= 134,217 at J = 500
FEATURE_BUDGET = 1 << 26
# Methods whose default J follows `auto_num_features`; the others keep J = 500. Measured at the rule's floor
# (benchmarks/investigations/default_features.py, BINARY10, N = 1e5, M = 100, J = 160 against 500): OMP kept
# its z2 (3e-4 to 6e-4 against 3e-4 to 1.1e-3); A-IHT II fell apart (z2 0.1 to 119 against 2e-3 to 1.4e-2): an
# M-sparse fit of J ~ M equations has many exact solutions, and IHT finds one that fits the projection only.
FEWER_FEATURES_METHODS = ("omp",)
MAX_FEATURES = 500  # the default J of the other methods, and the rule's cap (the earlier fixed default)


def auto_num_features(dim: int, size: Optional[int] = None, rows: Optional[int] = None, *, per_dim: int = 16,
                      minimum: int = 64, maximum: int = MAX_FEATURES, budget: Optional[int] = None) -> int:
    """The projection dimension J that `cj.coreset` uses by default (num_features=None) for the methods of
    FEWER_FEATURES_METHODS (OMP); the others keep `maximum` = 500.

    J = min(maximum, max(minimum, per_dim * D, M, budget // N)):
    - the floor max(64, 16 D, M): the log-likelihood's variation over pi_hat is that of a function of D
      parameters (to second order, D (D + 3) / 2 coefficients), so J grows with D; and a greedy solver's
      non-negative least-squares fit on J features keeps at most about J points, so J is at least the size M
      asked for;
    - up to `maximum` = 500 (the earlier fixed default) while V has at most `budget` = 2^26 entries: below that
      more features cost little, and they lower the coreset's KL. At N rows beyond it, J shrinks towards the
      floor, because the projection, V's memory and every solver pass are linear in N J (at N = 10^6, D = 10,
      OMP's 200 passes over V took 7-8 s at J = 500).
    Measured (benchmarks/investigations/default_features.py, the model suite's problems with D < 32, N up to
    10^5): at the floor (16 D or M) instead of 500, OMP's certificate KL rose 2-10x (ds1, M = 100: 0.017 to
    0.037) with the z2 of its posterior mean within seed noise, so small N keeps 500; A-IHT II lost its
    accuracy (FEWER_FEATURES_METHODS). At N = 10^6 (`--large`) the rule's J is weighed against 500 by the
    certificate on synthetic and tiled real data.
    `size=None` (the automatic size, whose M is not known yet) and `rows=None` drop their terms; `budget=None`
    reads FEATURE_BUDGET.
    """
    dim = _validate.check_positive_int(dim, "dim")
    per_dim = _validate.check_positive_int(per_dim, "per_dim")
    minimum = _validate.check_positive_int(minimum, "minimum")
    maximum = _validate.check_positive_int(maximum, "maximum")
    budget = FEATURE_BUDGET if budget is None else _validate.check_positive_int(budget, "budget")
    j = max(minimum, per_dim * dim)
    if size is not None:
        j = max(j, _validate.check_positive_int(size, "size"))
    if rows is not None:
        j = max(j, budget // _validate.check_positive_int(rows, "rows"))
    return int(min(maximum, j))


def _datum_features(model: Model, norm: str, thetas: Array, coords: Array):
    """Returns datum -> (J,) unscaled feature row."""
    if norm == "fisher":
        cols = jnp.arange(thetas.shape[0])
        if model.grad_log_likelihood is None:
            value_and_grad = jax.value_and_grad(model.log_likelihood)

            def values_and_grads(datum):
                return jax.vmap(value_and_grad, in_axes=(0, None))(thetas, datum)  # (J,), (J, D)
        else:
            checked = thetas[:_CLOSED_FORM_CHECKED_SAMPLES]

            def values_and_grads(datum):
                lls = jax.vmap(model.log_likelihood, in_axes=(0, None))(checked, datum)
                return lls, jax.vmap(model.grad_log_likelihood, in_axes=(0, None))(thetas, datum)

        def features(datum):
            lls, grads = values_and_grads(datum)
            # A gradient can be finite where L_n is -inf (Poisson with y < 0); mark the row so the one
            # finiteness check of V catches a non-finite log-likelihood for every norm.
            return jnp.where(jnp.all(jnp.isfinite(lls)), grads[cols, coords], jnp.nan)
    else:
        def features(datum):
            lls = jax.vmap(model.log_likelihood, in_axes=(0, None))(thetas, datum)
            return lls - jnp.mean(lls) if norm == "centered" else lls
    return features


@compiled.jit(static_argnames=("model", "norm", "chunk_size", "dtype", "show_progress"))
def _project(model: Model, data: Any, thetas: Array, coords: Array, norm: str, chunk_size: int, dtype,
             show_progress: bool = False):
    return _project_with_stats(model, data, thetas, coords, norm, chunk_size, dtype, show_progress)[0]


def _project_with_stats(model: Model, data: Any, thetas: Array, coords: Array, norm: str, chunk_size: int, dtype,
                        show_progress: bool = False):
    """(V, `matrix_stats(V)`): V written in place chunk by chunk, its checks accumulated on each chunk.

    One loop over ceil(N / chunk) chunks; the last one starts at N - chunk and recomputes the rows it shares
    with the one before (the same values). `lax.map(..., batch_size=chunk)` computed the N mod chunk rows left
    over in a second copy of the feature program and concatenated them, which copied V once more, and the
    checks read V again: at N = 10^6, J = 160, 0.10 s and 0.06 s of a 0.73 s projection (XLA:CPU profile).
    """
    num_features, dim = thetas.shape
    scale = jnp.sqrt((dim if norm == "fisher" else 1.0) / num_features).astype(thetas.dtype)
    features = jax.vmap(_datum_features(model, norm, thetas, coords))
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    chunk = min(chunk_size, n)
    # progress: one tick per chunk, reporting every `every` rows
    every = chunk * max(1, -(-PROGRESS_WORK_PER_REPORT // (chunk * num_features * dim)))
    acc = jnp.promote_types(dtype, jnp.float32)

    def body(carry, rows, start, fresh):
        del fresh  # the last chunk rewrites the rows it shares with the one before: the same values
        V, finite, largest, nonzero = carry
        block = (features(rows) * scale).astype(dtype)
        if show_progress:
            _progress.tick(start + chunk, n, "projection (rows)", every=every, ordered=True)
        block_finite, block_max, block_nonzero = matrix_stats(block)
        return (jax.lax.dynamic_update_slice_in_dim(V, block, start, 0), finite & block_finite,
                jnp.maximum(largest, block_max), nonzero | block_nonzero)

    # Inside shard_map (sharded data, `mesh.rowwise`) the chunks vary along the data's manual axes, and so
    # must the carry they are written into: a zero that depends on every data leaf (XLA folds it away).
    zero = sum(jnp.where(False, jnp.ravel(leaf)[0], 0).astype(acc) for leaf in jax.tree_util.tree_leaves(data))
    init = (jnp.zeros((n, num_features), dtype) + zero.astype(dtype), zero == 0, zero, zero != 0)
    V, finite, largest, nonzero = fold_row_chunks(body, init, data, chunk)
    return V, (finite, largest, nonzero)


def _cast_floats(tree: Any, dtype) -> Any:
    return jax.tree_util.tree_map(
        lambda x: jnp.asarray(x).astype(dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating)
        else jnp.asarray(x), tree)


def default_chunk(num_features: int, dim: int) -> int:
    # Keep one chunk's (chunk, J, D) gradient intermediates near 64 MiB of float32.
    return int(max(64, min(16384, (16 << 20) // max(1, num_features * max(dim, 1)))))


@full_precision
def project(model: Model, data: Any, thetas: Array, norm: str = "fisher", key: Optional[Array] = None, *,
            dtype=None, chunk_size: Optional[int] = None) -> Array:
    """Project the log-likelihoods onto J = len(thetas) random features (HC Algorithm 3).

    Args:
      model: the model whose `log_likelihood` is projected.
      data: data pytree with leading axis N.
      thetas: (J, D) samples from pi_hat.
      norm: "fisher" (Eq. 5.7), "l2" (Eq. 5.10) or "centered" (IHT §2).
      key: draws the Fisher coordinates d_j; required for norm="fisher".
      dtype: storage dtype of V, float32 by default; jnp.float64 needs `jax_enable_x64`; bfloat16/float16
        halve the bytes each solver pass reads (features are still computed in float32).
      chunk_size: rows per chunk of the streamed computation.

    Returns:
      V of shape (N, J) with <v_n, v_m> estimating <L_n, L_m> (Theorem 5.2).
    """
    n = _checks.check_model_data(model, data)
    _validate.check_choice(norm, NORMS, "norm")
    thetas = jnp.asarray(thetas)
    if thetas.ndim != 2 or thetas.shape[0] < 1:
        raise ValueError(f"thetas: expected shape (J, D) with J >= 1, got {thetas.shape}")
    _validate.check_finite(thetas, "thetas")
    _checks.check_theta(model, data, thetas, "thetas", ndim=2)
    dtype = check_dtype(dtype)
    key = _validate.check_key(key) if norm == "fisher" else None  # the other norms draw nothing
    chunk_size = _chunk(chunk_size, thetas.shape, n)
    compute = jnp.promote_types(dtype, jnp.float32)
    show = _show_progress(data, n, thetas.shape)
    coords = _fisher_coords(key, norm, *thetas.shape)
    if _mesh.leading_mesh(data) is None:
        V, stats = _project_checked(model, _cast_floats(data, compute), thetas.astype(compute), coords, norm,
                                    chunk_size, dtype, show)
        finite = bool(stats[0])
    else:
        # Data sharded along N: each device projects its own rows (core/mesh.py, rowwise).
        V = _mesh.rowwise(_project, _cast_floats(data, compute), thetas.astype(compute), coords,
                          prefix=(model,), suffix=(norm, chunk_size, dtype, show))
        finite = _validate.count_nonfinite(V) == 0
    if not finite:
        _raise_non_finite(model, data, thetas, V)
    return V


def features(model: Model, data: Any, approx: Any, key_theta: Array, key_proj: Array, norm: str,
             num_features: int, dtype=None) -> tuple[Array, tuple]:
    """`project(model, data, approx.sample(key_theta, J), norm, key_proj)` and `matrix_stats` of the result,
    as `cj.coreset` needs them. For a Gaussian pi_hat (the Laplace default) on one device: two compiled
    programs, where the draws, the coordinates, the features and their checks were eleven.
    Validated as `project` is (the caller has checked the model and data)."""
    n = _validate.num_rows(data)
    dtype = check_dtype(dtype)
    if not isinstance(approx, GaussianApproximation) or _mesh.leading_mesh(data) is not None:
        V = project(model, data, approx.sample(key_theta, num_features), norm, key_proj, dtype=dtype)
        return V, matrix_stats_jit(V)
    shape = (num_features, approx.mean.shape[0])
    _checks.check_theta(model, data, jax.ShapeDtypeStruct(shape, approx.mean.dtype), "thetas", ndim=2)
    compute = jnp.promote_types(dtype, jnp.float32)
    thetas, coords = _gaussian_draws_and_coords(key_theta, key_proj, approx.mean, approx.cov, norm,
                                                num_features)
    V, stats = _project_checked(model, _cast_floats(data, compute), thetas.astype(compute), coords, norm,
                                _chunk(None, shape, n), dtype, _show_progress(data, n, shape))
    if not bool(stats[0]):
        _raise_non_finite(model, data, thetas, V)
    return V, stats


def matrix_stats(V: Array) -> tuple[Array, Array, Array]:
    """(all entries finite, max |v_nj|, some entry non-zero) of V, in one pass: what `cj.build` checks."""
    Vf = V.astype(jnp.promote_types(V.dtype, jnp.float32))
    return jnp.all(jnp.isfinite(Vf)), jnp.max(jnp.abs(Vf)), jnp.any(Vf != 0)


matrix_stats_jit = jax.jit(matrix_stats)


def _coords(key: Optional[Array], norm: str, num_features: int, dim: int) -> Array:
    """The Fisher coordinates d_j ~ Unif{0..D-1} (HC Eq. 5.7); zeros (unused) for the other norms."""
    if norm == "fisher":
        return jax.random.randint(key, (num_features,), 0, dim)
    return jnp.zeros((num_features,), jnp.int32)


# Draws are microseconds of work: compiled fast (compilation.fast_jit); eagerly, randint alone was an
# XLA program of 0.4-0.8 s on a first call.
_fisher_coords = fast_jit(_coords, static_argnames=("norm", "num_features", "dim"))


@functools.partial(fast_jit, static_argnames=("norm", "num_features"))
def _gaussian_draws_and_coords(key_theta: Array, key_proj: Array, mean: Array, cov: Array, norm: str,
                               num_features: int):
    """J draws from N(mean, cov) and the Fisher coordinates, as one fast-compiled program."""
    thetas = gaussian_draws(key_theta, mean, cov, num_features)
    return thetas, _coords(key_proj, norm, num_features, mean.shape[0])


# XLA:CPU's classic fusion emitters: 0.2 s to compile instead of 1.1-1.4 s, the same speed compiled
# (compilation.LEGACY_EMITTERS)
@functools.partial(emitter_jit, static_argnames=("model", "norm", "chunk_size", "dtype", "show_progress"))
def _project_checked(model: Model, data: Any, thetas: Array, coords: Array, norm: str, chunk_size: int, dtype,
                     show_progress: bool = False):
    """V and `matrix_stats(V)` in one compiled program (eagerly, V's checks were four more compilations)."""
    return _project_with_stats(model, data, thetas, coords, norm, chunk_size, dtype, show_progress)


def check_dtype(dtype):
    """The projection dtype (float32 for None), or ValueError: not floating, or float64 without x64."""
    dtype = jnp.dtype(jnp.float32 if dtype is None else dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype: expected a floating dtype, got {dtype}")
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype: float64 needs jax.config.update('jax_enable_x64', True) "
                         "(or JAX_ENABLE_X64=1) before any arrays are created")
    return dtype


def _chunk(chunk_size: Optional[int], thetas_shape: tuple, n: int) -> int:
    if chunk_size is None:
        chunk_size = default_chunk(*thetas_shape)
    elif chunk_size < 1:
        raise ValueError(f"chunk_size: must be at least 1, got {chunk_size}")
    return int(min(chunk_size, n))


def _show_progress(data: Any, n: int, thetas_shape: tuple) -> bool:
    """Progress (tqdm via jax.debug.callback) on one device, for projections big enough to take a while
    (N J D >= 2^29); smaller or sharded ones trace no callback (benchmarks/investigations/progress_overhead.py)."""
    return (_progress.is_enabled() and _mesh.leading_mesh(data) is None
            and n * thetas_shape[0] * thetas_shape[1] >= PROGRESS_MIN_WORK)


def _raise_non_finite(model: Model, data: Any, thetas: Array, V: Array):
    row = int(jnp.argmin(jnp.all(jnp.isfinite(V), axis=1)))
    raise ValueError(f"model: {_first_non_finite(model, data, thetas, row)}, first at data row {row}; "
                     f"check that the model fits the data, or pi_hat")


def _first_non_finite(model: Model, data: Any, thetas: Array, row: int) -> str:
    """Which of L_n or its gradient is non-finite at data row `row`, and its value (one row: cheap)."""
    datum = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf[row]), data)
    lls = jax.vmap(model.log_likelihood, in_axes=(0, None))(thetas, datum)
    bad = ~jnp.isfinite(lls)
    if bool(jnp.any(bad)):
        j = int(jnp.argmax(bad))
        return f"log_likelihood returned a non-finite value ({float(lls[j])}) at pi_hat's sample thetas[{j}]"
    return "the gradient of log_likelihood returned non-finite values at pi_hat's samples"


SUM_CHUNK = 16_384  # rows per step of `feature_sum_fn`'s streamed pass


@functools.lru_cache(maxsize=32)
def feature_sum_fn(model: Model, norm: str, dtype, n: int, chunk: int):
    """Jitted `(key, data, thetas) -> sum_n v_n`, the target of HC Eq. 3.3, over N rows in chunks of `chunk`
    (the last one masked): memory O(chunk J), never the (N, J) matrix. `key` draws the Fisher coordinates as
    `project(..., key=key)` does, so the sum is that of the rows `project` would give."""
    core = project_fn(model, norm, dtype=dtype)
    chunks = -(-n // chunk)

    def total(key, data, thetas):
        def one(carry, c):
            idx = c * chunk + jnp.arange(chunk)
            V = core(key, take_data(data, jnp.minimum(idx, n - 1)), thetas).astype(jnp.float32)
            # compensated within the chunk (`column_sum`) and across chunks (TwoSum): the target's rounding
            # stays below what OMP resolves (~1e-7 relative), as for `make_problem`'s own sum
            hi, err = two_sum(carry[0], column_sum(jnp.where((idx < n)[:, None], V, 0.0)))
            return (hi, carry[1] + err), None

        zero = jnp.zeros(thetas.shape[0], jnp.float32)
        (hi, lo), _ = jax.lax.scan(one, (zero, zero), jnp.arange(chunks))
        return hi + lo

    return jax.jit(total)


def candidate_features(model: Model, data: Any, thetas: Array, key_proj: Array, norm: str, rows: Array,
                       dtype=None) -> tuple[Array, tuple, Array]:
    """The features of the candidate `rows` only, their `matrix_stats`, and the target over all N rows:

        sum_{n <= N} v_n  ~  V_R^T w,  w >= 0,

    so a solver reads an R x J matrix, not N x J, while it still fits the full data's sum (fitting the
    subsample's own sum scaled by N / R would be a uniform coreset of R rows in disguise). With the thetas and
    key of `features(...)`, V_R holds rows of its V. Cost: the features of R rows plus one streamed pass over
    N rows for the sum (`feature_sum_fn`)."""
    n = _validate.num_rows(data)
    dtype = check_dtype(dtype)
    key = key_proj if norm == "fisher" else None
    V = project(model, take_data(data, rows), thetas, norm, key, dtype=dtype)
    compute = jnp.dtype(jnp.promote_types(dtype, jnp.float32))
    target = feature_sum_fn(model, norm, compute, n, min(SUM_CHUNK, n))(
        jax.random.key(0) if key is None else _validate.check_key(key), _cast_floats(data, compute),
        thetas.astype(compute))
    if not bool(jnp.all(jnp.isfinite(target))):  # some row outside the candidates: find and name it
        project(model, data, thetas, norm, key, dtype=dtype)
        raise ValueError("model: the log-likelihood's features are not finite on every row")
    return V, matrix_stats_jit(V), target


def leverage_scores(model: Model, data: Any, thetas: Array, chunk: Optional[int] = None) -> Array:
    """h_n = (1/K) sum_k g_nk^T (sum_m g_mk g_mk^T)^+ g_nk with g_nk = grad L_n(theta_k), for thetas (K, D): each
    row's leverage in the empirical Fisher information, averaged over K points (e.g. draws of pi_hat), in two
    streamed passes of K gradients per row (memory O(chunk K D); by default chunks of about 64 MiB of
    gradients, `default_chunk`).

    Each term sums to rank <= D over the rows, and a row that alone carries a direction of the information (a
    rare covariate) has h_n near 1 where a typical row has ~D / N: the rows a uniform subsample misses. Several
    thetas, because a row that fits one theta very well has a vanishing gradient there."""
    n = _validate.num_rows(data)
    thetas = jnp.atleast_2d(jnp.asarray(thetas))
    compute = jnp.promote_types(thetas.dtype, jnp.float32)
    chunk = default_chunk(*thetas.shape) if chunk is None else chunk
    return _leverage(model, _cast_floats(data, compute), thetas.astype(compute), int(min(chunk, n)))


@functools.partial(jax.jit, static_argnames=("model", "chunk"))
def _leverage(model: Model, data: Any, thetas: Array, chunk: int) -> Array:
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    grad = model.grad_log_likelihood or jax.grad(model.log_likelihood)
    chunks, (num, dim) = -(-n // chunk), thetas.shape

    def grads(c):  # (K, chunk, D)
        idx = c * chunk + jnp.arange(chunk)
        rows = take_data(data, jnp.minimum(idx, n - 1))
        g = jax.vmap(lambda theta: jax.vmap(grad, in_axes=(None, 0))(theta, rows))(thetas)
        return jnp.where((idx < n)[None, :, None], g, 0.0)

    def add(F, c):
        g = grads(c)
        return F + jnp.einsum("knd,kne->kde", g, g), None

    F, _ = jax.lax.scan(add, jnp.zeros((num, dim, dim), thetas.dtype), jnp.arange(chunks))
    F_pinv = jax.vmap(lambda f: jnp.linalg.pinv(f, hermitian=True))(F)

    def scores(c):
        g = grads(c)
        return jnp.einsum("knd,kde,kne->n", g, F_pinv, g) / num

    return jax.lax.map(scores, jnp.arange(chunks)).reshape(-1)[:n]


@full_precision_factory
def project_fn(model: Model, norm: str = "fisher", *, dtype=None, chunk_size: Optional[int] = None):
    """The pure core of `project`: `(key, data, thetas) -> V` (jittable, vmappable over keys or datasets).

    The key draws the Fisher coordinates d_j (unused for "l2" and "centered"). It performs no validation and
    no host sync; `project` is the checked public form.
    """
    _validate.check_choice(norm, NORMS, "norm")
    dtype = jnp.dtype(jnp.float32 if dtype is None else dtype)

    def run(key, data, thetas):
        num_features, dim = thetas.shape
        if not jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            key = jax.random.wrap_key_data(key)
        coords = _coords(key, norm, num_features, dim)
        n = jax.tree_util.tree_leaves(data)[0].shape[0]
        chunk = int(min(chunk_size or default_chunk(num_features, dim), n))
        compute = jnp.promote_types(dtype, jnp.float32)
        return _project(model, _cast_floats(data, compute), thetas.astype(compute), coords, norm, chunk, dtype)

    return _mesh.with_auto_axes(run, 1, rows_out=True)  # data traced on Explicit axes
