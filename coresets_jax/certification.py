"""`cj.certify`: a one-pass certificate for any coreset, by importance sampling from pi_w to pi.

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
  opts out): in float32 its rounding, about 1e-7 |L_n| per row, added up to 4e-3 nats over N = 10^5
  Gaussian rows, and a coreset weight w_m ~ N / M multiplies it further;
- chunk sums are accumulated with Knuth's two-sum and added across devices or chunks on the host in float64.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from .certificate import Certificate, from_log_ratio
from .core import compiled
from .core import Coreset, Model
from .core import checks as _checks
from .core import validate as _validate
from .io import digest
from .projection import default_chunk
from .sharding import leading_mesh

__all__ = ["Certificate", "certify", "log_ratio", "warn_if_unreliable"]

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


@compiled.jit(static_argnames=("model",))
def _coreset_term(model, rows, weights, draws, reference):
    """(S,) sum_m w_m (L_m(theta_s) - c_m) on the coreset rows, and its flags."""
    total = _relative_sums(model, rows, draws, reference, weights)
    return total, _flags(total)


def _precision(precision: str):
    """A context in which the pass runs in float64, or a no-op for float32 (or when x64 is already on)."""
    _validate.check_choice(precision, PRECISIONS, "precision")
    if precision == "float32" or jax.config.jax_enable_x64:
        return contextlib.nullcontext()
    return jax.enable_x64(True)


def _thetas(flat: np.ndarray, precision: str) -> tuple[Array, Array]:
    """The draws in the pass's dtype, and the reference draw: the one nearest the draws' mean (a central
    point, where the rows' log-likelihoods are finite)."""
    dtype = jnp.float64 if precision == "float64" else jnp.float32
    reference = flat[int(np.argmin(np.sum((flat - flat.mean(axis=0)) ** 2, axis=1)))]
    return jnp.asarray(flat, dtype), jnp.asarray(reference, dtype)


def _full_term(model: Model, data: Any, thetas: Array, reference: Array, chunk_size: Optional[int]):
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


def _combine(full: np.ndarray, full_flags: np.ndarray, core: np.ndarray, core_flags: np.ndarray):
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
    with _precision(precision):
        thetas, reference = _thetas(np.asarray(draws), precision)
        rows, w = _validate.weighted_rows(data, _validate.num_rows(data), coreset)
        full, full_flags = _full_term(model, data, thetas, reference, chunk_size)
        core, core_flags = _coreset_term(model, rows, w, thetas, reference)
        return _combine(full, full_flags, np.asarray(core, np.float64), np.asarray(core_flags))


def _slots(coreset: Any) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights) of the positive-weight rows of a Coreset or a dense weight vector."""
    if isinstance(coreset, Coreset):
        indices, weights = np.asarray(coreset.indices), np.asarray(coreset.weights)
    else:
        weights = np.asarray(coreset)
        indices = np.arange(weights.size)
    live = weights > 0
    return indices[live], weights[live]


def _streamed_log_ratio(model: Model, source: Any, coreset: Any, draws: np.ndarray, chunk_size: Optional[int],
                        precision: str) -> tuple[np.ndarray, int, int]:
    """`log_ratio` over a source of data chunks (`streaming.iter_chunks`): one chunk on the device at a time,
    plus the coreset's rows, picked up as their chunks pass. Returns (r, zero-weight draws, N)."""
    from .streaming import iter_chunks

    indices, weights = _slots(coreset)
    picked, full, flags, offset = {}, 0.0, 0, 0
    with _precision(precision):
        thetas, reference = _thetas(draws, precision)
        for chunk in iter_chunks(source, chunk_size):
            rows = _checks.check_model_data(model, chunk, "data (a chunk)")
            if offset == 0:
                _checks.check_theta(model, chunk, draws, "draws")
            for slot in np.flatnonzero((indices >= offset) & (indices < offset + rows)):
                picked[slot] = jax.tree_util.tree_map(lambda leaf: np.asarray(leaf[indices[slot] - offset]), chunk)
            part, part_flags = _full_term(model, chunk, thetas, reference, chunk_size)
            full, flags, offset = full + part, flags | part_flags, offset + rows
        if offset == 0:
            raise ValueError("data: the source of chunks yielded no rows")
        if indices.size and int(indices.max()) >= offset:
            raise ValueError(f"coreset: its indices reach {int(indices.max())}, but the data have N = {offset} rows")
        rows = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[picked[s] for s in range(indices.size)])
        core, core_flags = _coreset_term(model, rows, jnp.asarray(weights), thetas, reference)
        r, zero = _combine(full, flags, np.asarray(core, np.float64), np.asarray(core_flags))
    return r, zero, offset


def _as_draws(draws: Any, coreset: Any) -> np.ndarray:
    """(chains, S, D) float draws from an array, a `Posterior`, or the coreset's own `info['samples']`."""
    if draws is None:
        info = getattr(coreset, "info", None) or {}
        if "samples" not in info:
            raise ValueError("draws: none given, and the coreset carries no draws of its posterior "
                             "(info['samples'], as coreset_mcmc and quasi_newton return); pass draws, e.g. "
                             "cj.sample(model, data, key, weights=cs).samples")
        draws = info["samples"]
    draws = getattr(draws, "samples", draws)  # a cj.sample Posterior
    out = np.asarray(draws) if hasattr(draws, "shape") or isinstance(draws, (list, tuple)) else None
    if out is None or out.ndim not in (2, 3) or not np.issubdtype(out.dtype, np.floating):
        got = f"shape {out.shape} and dtype {out.dtype}" if out is not None else type(draws).__name__
        raise ValueError(f"draws: expected a floating array of shape (S, D) or (chains, S, D), got {got}")
    if not np.all(np.isfinite(out)):
        raise ValueError(f"draws: contain {int(np.sum(~np.isfinite(out)))} NaN or inf value(s)")
    out = out if out.ndim == 3 else out[None]
    if out.shape[0] * out.shape[1] < 20:
        raise ValueError(f"draws: PSIS needs at least 20 draws, got shape {np.shape(draws)}")
    return out


def _check_coreset(coreset: Any, n: int) -> None:
    """A coreset of this data: unbatched, built on N rows (when it says), indices in [0, N)."""
    if isinstance(coreset, Coreset):
        if coreset.batch_shape:
            raise ValueError("coreset: a batched coreset; certify one trial at a time (batch[i])")
        built_on = (coreset.settings or {}).get("N")
        if built_on is not None and int(built_on) != n:
            raise ValueError(f"coreset: it was built on data with N = {built_on} rows, but data has N = {n}; "
                             "a certificate compares a coreset with the data it was built from")
    elif np.ndim(coreset) != 1:
        raise ValueError(f"coreset: expected a cj.Coreset or a dense (N,) weight vector, got "
                         f"{type(coreset).__name__} of shape {np.shape(coreset)}")
    indices, weights = _slots(coreset) if isinstance(coreset, Coreset) else (None, np.asarray(coreset))
    if indices is None and weights.shape != (n,):
        raise ValueError(f"coreset: a dense weight vector needs shape (N,) = ({n},), got {weights.shape}")
    if indices is not None and indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"coreset: indices must lie in [0, N = {n}), got [{indices.min()}, {indices.max()}]: "
                         "it was built on other data")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or not np.any(weights > 0):
        raise ValueError("coreset: weights must be finite, non-negative, and not all zero")


def _streamed(data: Any, chunk_size: Optional[int]) -> bool:
    """An iterable of chunks, or a host array-like to be read `chunk_size` rows at a time."""
    from .streaming import _is_sliceable

    if not _is_sliceable(data):
        return True
    leaves = jax.tree_util.tree_leaves(data)
    return chunk_size is not None and not all(isinstance(x, jax.Array) for x in leaves)


def certify(model: Model, data: Any, coreset: Any, draws: Any = None, *, chunk_size: Optional[int] = None,
            precision: str = "float64", probs: tuple = (0.05, 0.5, 0.95)) -> Certificate:
    """Certify a coreset with one pass over the data at draws from its posterior (module docstring).

    Args:
      model: the `cj.Model` (built-in, custom, or from `cj.from_numpyro`).
      data: the full data: a pytree of arrays (in memory, or sharded along N with `cj.shard`), or a source of
        chunks as `cj.stream_coreset` takes (a generator or list of data pytrees; or, with `chunk_size`, a
        host array-like such as `np.load(path, mmap_mode="r")`). Memory stays bounded by one chunk of
        (chunk, S) log-likelihoods plus the coreset's rows.
      coreset: a `cj.Coreset` built on this data, or a dense (N,) weight vector.
      draws: (S, D) or (chains, S, D) draws from the coreset posterior pi_w, or a `Posterior`
        (`cj.sample(..., weights=cs)`); None takes `coreset.info["samples"]` (Coreset MCMC's own draws).
      chunk_size: rows per step of the pass (default: about 64 MiB of log-likelihoods per step).
      precision: "float64" (default) evaluates every log-likelihood in float64 for this call; "float32" is
        faster where float64 is slow (TPUs) and good to about 1e-7 |L_n| sqrt(N) nats in r.
      probs: levels of the corrected quantiles.

    Returns:
      A `Certificate`: `khat`, `kl` (with its Monte Carlo `kl_se`), `ess`, `weights` (S,), `verdict`
      ("good" / "usable" / "poor" / "unreliable", `certificate.verdict`), corrected `mean`, `sd` and
      `quantiles`, and `to_arviz()`.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    _validate.check_choice(precision, PRECISIONS, "precision")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size: expected a positive integer, got {chunk_size!r}")
    start = time.perf_counter()
    draws = _as_draws(draws, coreset)
    flat = draws.reshape(-1, draws.shape[-1])
    if _streamed(data, chunk_size):
        r, zero, n = _streamed_log_ratio(model, data, coreset, flat, chunk_size, precision)
        _check_coreset(coreset, n)
    else:
        n = _checks.check_model_data(model, data)
        _check_coreset(coreset, n)
        built_on = (getattr(coreset, "settings", None) or {}).get("data_digest")
        if built_on is not None and built_on != digest(data):
            raise ValueError("coreset: it was built on other data (the digest of the data it records differs "
                             "from this data's); a certificate compares a coreset with its own data")
        _checks.check_theta(model, data, flat, "draws")
        r, zero = log_ratio(model, data, coreset, flat, chunk_size=chunk_size, precision=precision)
    if zero:
        warnings.warn(f"certify: the full-data log-likelihood is -inf at {zero} of {r.size} draws; they get "
                      "importance weight 0", RuntimeWarning, stacklevel=2)
    return from_log_ratio(r, draws, model=model, probs=probs, time_s=time.perf_counter() - start)


def warn_if_unreliable(cert: Certificate, where: str, stacklevel: int = 2) -> None:
    """A RuntimeWarning when the certificate finds the coreset posterior unreliable or poor."""
    if cert.verdict == "unreliable":
        warnings.warn(f"{where}: the coreset's certificate is unreliable (khat {cert.khat:.2f} >= 0.7, estimated "
                      f"KL(pi_w || pi) {cert.kl:.3g}): its posterior misses mass of the full-data posterior; "
                      "use a larger size or another method", RuntimeWarning, stacklevel=stacklevel + 1)
    elif cert.verdict == "poor":
        warnings.warn(f"{where}: the coreset's posterior is far from the full-data posterior (estimated KL "
                      f"{cert.kl:.3g} >= 0.5 nat, khat {cert.khat:.2f}); the certificate's corrected moments "
                      "(cert.mean, cert.sd) can be used, or use a larger size or another method", RuntimeWarning,
                      stacklevel=stacklevel + 1)
