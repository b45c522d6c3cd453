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
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from ..core import Model
from ..core import compiled
from ..core import validate as _validate
from ..features.projection import default_chunk
from ..core.mesh import leading_mesh

__all__ = ["PRECISIONS", "combine", "coreset_term", "full_term", "log_ratio", "pass_draws", "precision_scope"]

Array = jax.Array
PRECISIONS = ("float64", "float32")


def _accumulate(hi: Array, lo: Array, part: Array):
    """(hi, lo) += part with Knuth's two-sum: lo keeps what the add rounds away."""
    total = hi + part
    back = total - hi
    return total, lo + ((hi - (total - back)) + (part - back))


def _as_dtype(tree: Any, dtype) -> Any:
    return jax.tree_util.tree_map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def _relative_sums(model: Model, rows: Any, draws: Array, reference: Array, weights: Optional[Array] = None):
    """(S,) sum_b w_b (L(row_b | theta_s) - c_b), with c_b = L(row_b | theta_ref), or 0 where that is not finite.

    No finiteness masks on the (B, S) block, so XLA fuses it into one reduction: a -inf, NaN or +inf term
    makes its column's sum -inf or non-finite, which `_flags` reads off the (S,) result."""
    rows = _as_dtype(rows, draws.dtype)
    base = jax.vmap(model.log_likelihood, in_axes=(None, 0))(reference, rows)
    base = jnp.where(jnp.isfinite(base), base, 0.0)
    lls = jax.vmap(lambda datum: jax.vmap(model.log_likelihood, in_axes=(0, None))(draws, datum))(rows)
    values = lls - base[:, None]
    if weights is not None:  # masked, so that a zero weight never meets an infinite term (0 * inf = NaN)
        values = jnp.where(weights[:, None] > 0, weights.astype(values.dtype)[:, None] * values, 0.0)
    return jnp.sum(values, axis=0)


def _flags(total: Array) -> Array:
    """(S,) int32 from sums of terms: bit 1 where one was -inf, bit 2 where one was NaN or +inf."""
    return (total == -jnp.inf).astype(jnp.int32) | 2 * (jnp.isnan(total) | (total == jnp.inf)).astype(jnp.int32)


def _pass(model: Model, data: Any, draws: Array, reference: Array, chunk: int):
    """sum_n (L_n(theta_s) - c_n) over every row: a scan over whole chunks (one (chunk, S) block in memory),
    then the remainder rows. Returns (hi, lo, flags), each (S,)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    whole = n // chunk
    head = jax.tree_util.tree_map(lambda x: x[:whole * chunk].reshape((whole, chunk) + x.shape[1:]), data)
    tail = jax.tree_util.tree_map(lambda x: x[whole * chunk:], data)

    def add(carry, rows):
        hi, lo, flags = carry
        part = _relative_sums(model, rows, draws, reference)
        flags = flags | _flags(part)
        hi, lo = _accumulate(hi, lo, jnp.where(jnp.isfinite(part), part, 0.0))
        return (hi, lo, flags), None

    zeros = jnp.zeros(draws.shape[0], draws.dtype)
    carry = (zeros, zeros, jnp.zeros(draws.shape[0], jnp.int32))
    if whole:
        carry, _ = jax.lax.scan(add, carry, head)
    if n > whole * chunk:
        carry, _ = add(carry, tail)
    return carry


@compiled.jit(static_argnames=("model", "chunk"))
def _local_pass(model, data, draws, reference, chunk):
    return tuple(x[None] for x in _pass(model, data, draws, reference, chunk))


@functools.lru_cache(maxsize=32)
def _sharded_pass(model: Model, mesh, chunk: int):
    """Each device passes over its own rows; the small (devices, S) partials are gathered to every device
    (so every host of a `jax.distributed` run can read them) and added on the host in float64."""
    axes = tuple(mesh.axis_names)

    def local(data, draws, reference):
        return tuple(jax.lax.all_gather(x, axes) for x in _pass(model, data, draws, reference, chunk))

    # all_gather makes the partials identical on every device; the VMA check cannot see that through the scan.
    return compiled.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(axes), P(), P()), out_specs=P(), check_vma=False))


def coreset_term(model, rows, weights, draws, reference):
    """(S,) sum_m w_m (L_m(theta_s) - c_m) on the coreset rows, and its flags: always in float64, whatever the
    pass's precision. The weights (~N / M) multiply each row's rounding: with precision="float32" at
    N = 10^6 logistic rows and M = 100 this term erred by 0.45 nat (sd over the draws) in float32, against
    7e-5 for the whole full-data term. It is M x S evaluations, so float64 costs nothing here."""
    with jax.enable_x64(True):
        up = lambda x: jnp.asarray(x, jnp.float64)
        return _coreset_term(model, rows, up(weights), up(draws), up(reference))


@compiled.jit(static_argnames=("model",))
def _coreset_term(model, rows, weights, draws, reference):
    total = _relative_sums(model, rows, draws, reference, weights)
    return total, _flags(total)


def precision_scope(precision: str):
    """A context in which the pass runs in float64, or a no-op for float32 (or when x64 is already on)."""
    _validate.check_choice(precision, PRECISIONS, "precision")
    if precision == "float32" or jax.config.jax_enable_x64:
        return contextlib.nullcontext()
    return jax.enable_x64(True)


def pass_draws(flat: np.ndarray, precision: str) -> tuple[Array, Array]:
    """The draws in the pass's dtype, and the reference draw: the one nearest the draws' mean (a central
    point, where the rows' log-likelihoods are finite)."""
    dtype = jnp.float64 if precision == "float64" else jnp.float32
    reference = flat[int(np.argmin(np.sum((flat - flat.mean(axis=0)) ** 2, axis=1)))]
    return jnp.asarray(flat, dtype), jnp.asarray(reference, dtype)


def full_term(model: Model, data: Any, thetas: Array, reference: Array, chunk_size: Optional[int]):
    """(S,) float64 sum_n (L_n - b_n) and (S,) flags, for data in memory (sharded along N or not)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    chunk = int(min(chunk_size or default_chunk(thetas.shape[0] + 1, thetas.shape[1]), n))
    mesh = leading_mesh(data)
    if mesh is None:
        hi, lo, flags = _local_pass(model, jax.tree_util.tree_map(jnp.asarray, data), thetas, reference, chunk)
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
    draws of weight 0. Inputs are assumed valid (`certify` checks them)."""
    with precision_scope(precision):
        thetas, reference = pass_draws(np.asarray(draws), precision)
        rows, w = _validate.weighted_rows(data, _validate.num_rows(data), coreset)
        full, full_flags = full_term(model, data, thetas, reference, chunk_size)
        core, core_flags = coreset_term(model, rows, w, thetas, reference)
        return combine(full, full_flags, np.asarray(core, np.float64), np.asarray(core_flags))


