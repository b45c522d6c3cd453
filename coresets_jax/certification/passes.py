"""The data pass of `cj.certify`: r_s = sum_n L_n(theta_s) - sum_m w_m L_m(theta_s) for every draw, one chunked scan
over the rows (sharded along N or not), in float64 relative to a reference draw.

For draws theta_s ~ pi_w (HC §2: log pi_w = sum_m w_m L_m + log pi_0 - log Z_w), the log importance ratio to
the full-data posterior pi is, up to one constant shared by every draw,

    r_s = sum_n L_n(theta_s) - sum_m w_m L_m(theta_s).

One pass over the data at S draws gives all of r: the work of an L2 projection with J = S. From r
(`certificate.from_log_ratio`): Pareto-smoothed importance sampling (Vehtari, Simpson, Gelman, Yao & Gabry,
JMLR 2024) gives k-hat and corrected moments, and log-mean-exp(r) - mean(r) estimates KL(pi_w || pi).

Precision. sum_n L_n is large (about -3e5 at N = 10^6 logistic rows) while the differences between draws
that matter can be 1e-3 nats or less, so:
- every row is taken relative to one reference draw, b_n = L_n(theta_ref) (0 where that is not finite):
  sum_n (L_n(theta_s) - b_n) is small, and sum_n b_n is a constant that cancels;
- each log-likelihood is evaluated in float64 (`jax.enable_x64` for this call only; `precision="float32"`
  opts out for the full-data term): in float32 its rounding, about 1e-7 |L_n| per row, added up to 4e-3 nats
  over N = 10^5 Gaussian rows (7e-5 over 10^6 logistic rows);
- the coreset's term is always float64: a weight w_m ~ N / M multiplies a row's rounding;
- chunk sums are accumulated with Knuth's two-sum and added across devices or chunks on the host in float64.

`precision="auto"` (`audited_log_ratio`, ours) takes the float32 pass, 3-4x faster on a CPU, only where it is
measured to be as good as float64: the full-data term is passed again in float64 at AUDIT_DRAWS of the draws
(the largest r, which carry the most importance weight, and others spread over the run), and the float32 r is
kept when its error there, centred (a shared constant cancels in r), is small in two senses: at most
AUDIT_MAX_ERROR nats on any r_s, and moving the KL estimate by less than its own Monte Carlo error or
AUDIT_KL_FLOOR (1e-4 nat). The error bound is max(max |e|, 4 sd(e)) over the audited draws, an estimate for
all S (4 sd covers the largest of thousands of Gaussian errors); the KL moves by at most
bound * sum_s |p_s - 1/S|, p = softmax(r), because log-mean-exp(r) - mean(r) has gradient p - 1/S. Otherwise, or where float32 reads any log-likelihood as not
finite, the whole pass is redone in float64. Rows that repeat one value add their rounding linearly (N eps
|L_n|, not sqrt(N) eps |L_n|): this is the case the audit catches. Below AUDIT_MIN_WORK (N x S) the float64
pass is cheap, and "auto" is float64.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from ..compilation import Prefetched, compile_ahead
from ..core import Model
from ..core.rows import fold_row_chunks
from ..core import compiled
from ..core import validate as _validate
from ..features.projection import default_chunk
from ..core.mesh import leading_mesh

__all__ = ["AUDIT_DRAWS", "AUDIT_KL_FLOOR", "AUDIT_MAX_ERROR", "AUDIT_MIN_WORK", "PRECISIONS", "PassPrecision",
           "as_dtype", "audit_draws", "audited_log_ratio", "combine", "compile_full_term", "coreset_term",
           "full_term", "kl_shift_bound", "log_ratio", "pass_draws", "precision_scope", "relative_sums",
           "scan_rows"]

Array = jax.Array
PRECISIONS = ("auto", "float64", "float32")
AUDIT_DRAWS = 32  # draws at which "auto" checks its float32 pass against float64
AUDIT_MAX_ERROR = 1e-3  # nats: the largest error of any r_s that "auto" accepts from float32
AUDIT_MIN_WORK = 1 << 27  # N x S below which "auto" is float64 (the float64 pass then takes tenths of a second)
# nats: a bound on the KL estimate's shift below this is accepted whatever its standard error. The bound is a
# worst case (every error aligned with p - 1/S): on vs_peers' OMP coreset at N = 10^6 (KL 1.3e-5, se 7.9e-7)
# it read 1.1e-6 where the float32 KL differed by 1.1e-8. 1e-4 nat is far below any useful tol.
AUDIT_KL_FLOOR = 1e-4


class PassPrecision(NamedTuple):
    """How r was computed: `precision` "float64", "float32" or "float32, audited"; `error`, for an audited or
    rejected float32 pass, the estimated bound on |error| of r_s over the draws (nats), else None; `note`
    in words."""

    precision: str
    error: Optional[float] = None
    note: str = ""


def _accumulate(hi: Array, lo: Array, part: Array):
    """(hi, lo) += part with Knuth's two-sum: lo keeps what the add rounds away."""
    total = hi + part
    back = total - hi
    return total, lo + ((hi - (total - back)) + (part - back))


def as_dtype(tree: Any, dtype) -> Any:
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def relative_sums(model: Model, rows: Any, draws: Array, reference: Array, weights: Optional[Array] = None,
                  mask: Optional[Array] = None):
    """(S,) sum_b w_b (L(row_b | theta_s) - c_b), with c_b = L(row_b | theta_ref), or 0 where that is not finite;
    only the rows where `mask` (B,) is True, if given.

    No finiteness masks on the (B, S) block, so XLA fuses it into one reduction: a -inf, NaN or +inf term
    makes its column's sum -inf or non-finite, which `_flags` reads off the (S,) result."""
    rows = as_dtype(rows, draws.dtype)
    base = jax.vmap(model.log_likelihood, in_axes=(None, 0))(reference, rows)
    base = jnp.where(jnp.isfinite(base), base, 0.0)
    lls = jax.vmap(lambda datum: jax.vmap(model.log_likelihood, in_axes=(0, None))(draws, datum))(rows)
    values = lls - base[:, None]
    if weights is not None:  # masked, so that a zero weight never meets an infinite term (0 * inf = NaN)
        values = jnp.where(weights[:, None] > 0, weights.astype(values.dtype)[:, None] * values, 0.0)
    if mask is not None:
        values = jnp.where(mask[:, None], values, 0.0)
    return jnp.sum(values, axis=0)


def _flags(total: Array) -> Array:
    """(S,) int32 from sums of terms: bit 1 where one was -inf, bit 2 where one was NaN or +inf."""
    return (total == -jnp.inf).astype(jnp.int32) | 2 * (jnp.isnan(total) | (total == jnp.inf)).astype(jnp.int32)


def scan_rows(add, carry, data: Any, chunk: int):
    """Fold `add(carry, rows, mask) -> carry` over the rows of `data`, `chunk` rows at a time (one chunk's work
    in memory), where `mask` (chunk,) marks the rows `add` must count (`rows.fold_row_chunks`: the last chunk
    overlaps the one before, so `add` is compiled once; with a separate remainder, at N = 10^6 the
    certificate's full pass compiled in 0.21 s against 0.12 s, and its Taylor pass in 0.20 s against 0.15 s).
    Returns the final carry."""
    return fold_row_chunks(lambda c, rows, start, fresh: add(c, rows, fresh), carry, data, chunk)


def _pass(model: Model, data: Any, draws: Array, reference: Array, chunk: int):
    """sum_n (L_n(theta_s) - c_n) over every row (`scan_rows`: one (chunk, S) block in memory). Returns
    (hi, lo, flags), each (S,)."""

    def add(carry, rows, mask):
        hi, lo, flags = carry
        part = relative_sums(model, rows, draws, reference, mask=mask)
        flags = flags | _flags(part)
        hi, lo = _accumulate(hi, lo, jnp.where(jnp.isfinite(part), part, 0.0))
        return hi, lo, flags

    zeros = jnp.zeros(draws.shape[0], draws.dtype)
    return scan_rows(add, (zeros, zeros, jnp.zeros(draws.shape[0], jnp.int32)), data, chunk)


def _pass_partials(model, data, draws, reference, chunk):
    return tuple(x[None] for x in _pass(model, data, draws, reference, chunk))


# The programs of a certificate whose run is brief next to their compilation (the screen's, the coreset's term,
# and the audits' passes at 32-40 draws) are compiled with XLA:CPU's classic fusion emitters
# (`compilation.LEGACY_EMITTERS`); the full passes over N x S keep XLA's defaults (1.45x slower under the
# classic ones). First `cj.certify` calls (S = 800 draws): by the audited screen 0.63-0.67 s against 0.80-0.88 s
# on vs_peers' logistic regression (D = 10, N = 5e5), 0.76 s against 0.90-0.94 s at N = 10^6, and 0.86 s
# against 1.17 s on its Poisson regression (N = 5e5); by the audited float32 pass 1.26-1.30 s against
# 1.46-1.48 s (logistic, D = 50, N = 2e5). Second calls within 3% (7% slower at 10^6); the KL the same to
# 14 digits.
LEGACY_CERTIFICATE = True
_local_pass = compiled.jit(_pass_partials, static_argnames=("model", "chunk"))
_audit_pass = compiled.jit(_pass_partials, static_argnames=("model", "chunk"), legacy_emitters=LEGACY_CERTIFICATE)


@functools.lru_cache(maxsize=32)
def _sharded_pass(model: Model, mesh, chunk: int):
    """Each device passes over its own rows; the small (devices, S) partials are gathered to every device
    (so every host of a `jax.distributed` run can read them) and added on the host in float64."""
    axes = tuple(mesh.axis_names)

    def local(data, draws, reference):
        return tuple(jax.lax.all_gather(x, axes) for x in _pass(model, data, draws, reference, chunk))

    # all_gather makes the partials identical on every device; the VMA check cannot see that through the scan.
    return compiled.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(axes), P(), P()), out_specs=P(), check_vma=False))


def coreset_term(model, rows, weights, draws, reference, *, ahead: bool = False):
    """(S,) sum_m w_m (L_m(theta_s) - c_m) on the coreset rows, and its flags: always in float64, whatever the
    pass's precision. The weights (~N / M) multiply each row's rounding: with precision="float32" at
    N = 10^6 logistic rows and M = 100 this term erred by 0.45 nat (sd over the draws) in float32, against
    7e-5 for the whole full-data term. It is M x S evaluations, so float64 costs nothing here.
    `ahead=True`: start compiling it instead (`compilation.compile_ahead`) and return the `Prefetched`."""
    with jax.enable_x64(True):
        up = lambda x: jax.device_put(np.asarray(x, np.float64))  # on the host: no eager conversion to compile
        args = (model, rows, up(weights), up(draws), up(reference))
        return compile_ahead(_coreset_term, *args) if ahead else _coreset_term(*args)


@compiled.jit(static_argnames=("model",), legacy_emitters=LEGACY_CERTIFICATE)
def _coreset_term(model, rows, weights, draws, reference):
    total = relative_sums(model, rows, draws, reference, weights)
    return total, _flags(total)


def precision_scope(precision: str):
    """A context in which the pass runs in float64, or a no-op for float32 (or when x64 is already on)."""
    _validate.check_choice(precision, PRECISIONS[1:], "precision")
    if precision == "float32" or jax.config.jax_enable_x64:
        return contextlib.nullcontext()
    return jax.enable_x64(True)


def pass_draws(flat: np.ndarray, precision: str) -> tuple[Array, Array]:
    """The draws in the pass's dtype, and the reference draw: the one nearest the draws' mean (a central
    point, where the rows' log-likelihoods are finite)."""
    dtype = jnp.float64 if precision == "float64" else jnp.float32
    reference = flat[int(np.argmin(np.sum((flat - flat.mean(axis=0)) ** 2, axis=1)))]
    dtype = np.float64 if dtype == jnp.float64 else np.float32  # cast on the host: nothing to compile
    return jax.device_put(np.asarray(flat, dtype)), jax.device_put(np.asarray(reference, dtype))


def audit_draws(r: np.ndarray, num: int = AUDIT_DRAWS) -> np.ndarray:
    """Sorted indices of up to `num` draws: the num / 2 largest r (the most importance weight) and the rest
    spread evenly over the remaining draws, in their order (across chains and time)."""
    size = r.size
    if size <= num:
        return np.arange(size)
    top = np.argsort(-r, kind="stable")[: num // 2]
    rest = np.setdiff1d(np.arange(size), top)
    spread = rest[np.linspace(0, rest.size - 1, num - top.size).round().astype(int)]
    return np.unique(np.concatenate([top, spread]))


def kl_shift_bound(r: np.ndarray, error: float) -> tuple[float, float]:
    """(the largest change of log-mean-exp(r) - mean(r) when every r_s moves by at most `error`, the KL
    estimate's Monte Carlo standard error with independent draws): the KL's gradient in r is p - 1/S with
    p = softmax(r), so the change is at most error * sum_s |p_s - 1/S|."""
    p = np.exp(r - np.max(r))
    p /= np.sum(p)
    lme_shift = np.log(np.mean(np.exp(r - np.max(r))))
    u = np.exp(r - np.max(r) - lme_shift)
    return float(error * np.sum(np.abs(p - 1.0 / r.size))), float(np.std(u - r) / np.sqrt(r.size))


def _full_chunk(n: int, draws_shape: tuple, chunk_size: Optional[int]) -> int:
    return int(min(chunk_size or default_chunk(draws_shape[0] + 1, draws_shape[1]), n))


def compile_full_term(model: Model, data: Any, draws: Any, reference: Array, chunk_size: Optional[int],
                      audit: bool = False) -> Prefetched:
    """Start compiling `full_term`'s pass for `draws` (an array or `jax.ShapeDtypeStruct` of the draws it will
    get) over data in memory on one device (`compilation.compile_ahead`); nothing for data sharded over a
    mesh."""
    if leading_mesh(data) is not None:
        return Prefetched()
    chunk = _full_chunk(jax.tree_util.tree_leaves(data)[0].shape[0], draws.shape, chunk_size)
    return compile_ahead(_audit_pass if audit else _local_pass, model, jax.tree_util.tree_map(jnp.asarray, data),
                         draws, reference, chunk)


def full_term(model: Model, data: Any, thetas: Array, reference: Array, chunk_size: Optional[int],
              audit: bool = False):
    """(S,) float64 sum_n (L_n - b_n) and (S,) flags, for data in memory (sharded along N or not). `audit`: an
    audit's pass at a few draws (its program compiled for a short run, `_audit_pass`)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    chunk = _full_chunk(n, thetas.shape, chunk_size)
    mesh = leading_mesh(data)
    if mesh is None:
        program = _audit_pass if audit else _local_pass
        hi, lo, flags = program(model, jax.tree_util.tree_map(jnp.asarray, data), thetas, reference, chunk)
    else:
        hi, lo, flags = _sharded_pass(model, mesh, chunk)(data, thetas, reference)
    total = np.sum(np.asarray(hi, np.float64), axis=0) + np.sum(np.asarray(lo, np.float64), axis=0)
    return total, np.bitwise_or.reduce(np.asarray(flags), axis=0)


def combine(full: np.ndarray, full_flags: np.ndarray, core: np.ndarray, core_flags: np.ndarray):
    """r = full - core; -inf where the full data rule a draw out (weight 0); ValueError for what cannot be
    weighed. Returns (r, number of zero-weight draws)."""
    if np.any(core_flags):
        s = int(np.argmax(core_flags > 0))
        raise ValueError(f"draws: the coreset's own log-likelihood is not finite at draw {s} (of {core.size}), "
                         "so the draws do not come from this coreset's posterior")
    broken = (full_flags & 2) > 0
    if np.any(broken):
        raise ValueError(f"model: the full-data log-likelihood is NaN or +inf (an overflow?) at "
                         f"{int(np.sum(broken))} of {broken.size} draws (first: draw {int(np.argmax(broken))}), "
                         "so the certificate cannot weigh them; check the model at these parameters")
    r = np.where((full_flags & 1) > 0, -np.inf, full - core)
    if not np.any(np.isfinite(r)):
        raise ValueError("model: the full-data log-likelihood is -inf at every draw: the full posterior puts "
                         "no mass where the coreset posterior does")
    return r, int(np.sum(~np.isfinite(r)))


def log_ratio(model: Model, data: Any, coreset: Any, draws: np.ndarray, *, chunk_size: Optional[int] = None,
              precision: str = "float64") -> tuple[np.ndarray, int]:
    """r_s (float64, (S,)) up to a shared constant for flat draws (S, D), data in memory; and the number of
    draws of weight 0. Inputs are assumed valid (`certify` checks them). For "auto", `audited_log_ratio`."""
    if precision == "auto":
        r, zero, _ = audited_log_ratio(model, data, coreset, draws, chunk_size=chunk_size)
        return r, zero
    with precision_scope(precision):
        thetas, reference = pass_draws(np.asarray(draws), precision)
        rows, w = _validate.weighted_rows(data, _validate.num_rows(data), coreset)
        full, full_flags = full_term(model, data, thetas, reference, chunk_size)
        core, core_flags = coreset_term(model, rows, w, thetas, reference)
        return combine(full, full_flags, np.asarray(core, np.float64), np.asarray(core_flags))


def audited_log_ratio(model: Model, data: Any, coreset: Any, draws: np.ndarray, *,
                      chunk_size: Optional[int] = None) -> tuple[np.ndarray, int, PassPrecision]:
    """`log_ratio` with precision "auto" (module docstring): the float32 pass, kept where a float64 pass at
    AUDIT_DRAWS draws shows its error negligible, else the float64 pass. Returns (r, zero-weight draws, how)."""
    flat = np.asarray(draws)
    n = _validate.num_rows(data)
    if n * flat.shape[0] < AUDIT_MIN_WORK:
        r, zero = log_ratio(model, data, coreset, flat, chunk_size=chunk_size, precision="float64")
        return r, zero, PassPrecision("float64", None, f"float64: N x S = {n * flat.shape[0]:.3g} is below "
                                                       f"{AUDIT_MIN_WORK:.3g}, where float32 saves little")
    thetas32, reference32 = pass_draws(flat, "float32")
    full32, flags32 = full_term(model, data, thetas32, reference32, chunk_size)
    if np.any(flags32):  # float32 under- or overflowed somewhere (or the model is not finite): float64 decides
        r, zero = log_ratio(model, data, coreset, flat, chunk_size=chunk_size, precision="float64")
        return r, zero, PassPrecision("float64", None, "float64: the float32 pass found log-likelihoods that are "
                                                       "not finite")
    with precision_scope("float64"):
        thetas, reference = pass_draws(flat, "float64")
        rows, w = _validate.weighted_rows(data, n, coreset)
        core, core_flags = coreset_term(model, rows, w, thetas, reference)
        core, core_flags = np.asarray(core, np.float64), np.asarray(core_flags)
        r32, zero = combine(full32, flags32, core, core_flags)
        picked = audit_draws(r32)
        audited = jax.device_put(np.asarray(flat[picked], np.float64))  # on the host: no eager gather to compile
        full64, flags64 = full_term(model, data, audited, reference, chunk_size, audit=True)
    bound = math.inf  # float64 not finite where float32 was, or too few draws to estimate a spread
    if not np.any(flags64) and picked.size > 1:
        error = full32[picked] - full64
        error = error - np.mean(error)  # a constant shared by every draw cancels in r
        bound = float(max(np.max(np.abs(error)), 4.0 * np.std(error, ddof=1)))
    shift, kl_se = kl_shift_bound(r32, bound) if np.isfinite(bound) else (math.inf, 0.0)
    if bound <= AUDIT_MAX_ERROR and shift <= max(kl_se, AUDIT_KL_FLOOR):
        return r32, zero, PassPrecision("float32, audited", bound,
                                        f"float32, audited at {picked.size} draws against float64: r within "
                                        f"{bound:.2g} nat, the KL within {shift:.2g}")
    with precision_scope("float64"):
        full, full_flags = full_term(model, data, thetas, reference, chunk_size)
    r, zero = combine(full, full_flags, core, core_flags)
    return r, zero, PassPrecision("float64", bound, f"float64: the float32 pass erred by up to {bound:.2g} nat "
                                                    f"(audited at {picked.size} draws), moving the KL by up to "
                                                    f"{shift:.2g}")


