"""`cj.certify`: a one-pass certificate for any coreset, by importance sampling from pi_w to pi.

For draws theta_s ~ pi_w (HC §2: log pi_w = sum_m w_m L_m + log pi_0 - log Z_w), the log importance ratio to
the full-data posterior pi is, up to one constant shared by every draw,

    r_s = sum_n L_n(theta_s) - sum_m w_m L_m(theta_s).

One pass over the data at S draws gives all of r (`passes`; `stream` for chunked sources), the work of an L2
projection with J = S. At large N a screen from a subsample, audited against that pass at a few draws, can
stand in for it (`screen`). From r (`certificate.from_log_ratio`): Pareto-smoothed importance sampling (Vehtari,
Simpson, Gelman, Yao & Gabry, JMLR 2024) gives k-hat and corrected moments (only where k-hat <= 0.7 or the
ratios are flat: `certificate.moments_given`), and log-mean-exp(r) - mean(r) estimates KL(pi_w || pi). Draws
given as 2 or more chains also get their R-hat and bulk ESS; chains that disagree (R-hat > 1.01) are not
draws from pi_w, and cap the verdict at "usable".
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Optional

import jax
import numpy as np

from .certificate import Certificate, from_log_ratio
from ..core import Coreset, Model
from ..core import checks as _checks
from ..core import validate as _validate
from ..core.chunks import is_sliceable
from ..interop.io import digest
from .passes import PRECISIONS, PassPrecision, audited_log_ratio, log_ratio
from .screen import audited_screen, screen_applies
from ..core.mesh import leading_mesh
from .stream import live_rows, streamed_log_ratio
from ..compilation import full_precision
from ..core import caller

__all__ = ["Certificate", "certify", "log_ratio", "warn_if_unreliable"]


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
    indices, weights = live_rows(coreset) if isinstance(coreset, Coreset) else (None, np.asarray(coreset))
    if indices is None and weights.shape != (n,):
        raise ValueError(f"coreset: a dense weight vector needs shape (N,) = ({n},), got {weights.shape}")
    if indices is not None and indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"coreset: indices must lie in [0, N = {n}), got [{indices.min()}, {indices.max()}]: "
                         "it was built on other data")
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or not np.any(weights > 0):
        raise ValueError("coreset: weights must be finite, non-negative, and not all zero")


def _streamed(data: Any, chunk_size: Optional[int]) -> bool:
    """An iterable of chunks, or a host array-like to be read `chunk_size` rows at a time."""
    if not is_sliceable(data):
        return True
    leaves = jax.tree_util.tree_leaves(data)
    return chunk_size is not None and not all(isinstance(x, jax.Array) for x in leaves)


@full_precision
def certify(model: Model, data: Any, coreset: Any, draws: Any = None, *, chunk_size: Optional[int] = None,
            precision: str = "auto", probs: tuple = (0.05, 0.5, 0.95)) -> Certificate:
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
      precision: "auto" (default), "float64" or "float32". "float64" evaluates every log-likelihood in float64
        for this call. "float32" evaluates the full-data term in float32 (the coreset's term stays float64),
        good to about 1e-7 |L_n| sqrt(N) nats in r: at N = 10^6 logistic and Poisson rows (D = 10) it was
        3.2-3.8x faster on the CPU, its r erred by 7e-5 nat (sd), and the KL estimates agreed to 3 digits
        (benchmarks/investigations/certify_precision.py); but rows of one value repeated many times add their
        rounding linearly, not as sqrt(N). "auto" is float64 where N x S is below `passes.AUDIT_MIN_WORK`
        (2^27) and for chunked sources; above, it takes the float32 pass and checks it against a float64
        pass at 32 of the draws, and keeps it only when its error is at most 1e-3 nat on every r_s and moves
        the KL estimate by less than its Monte Carlo error (or 1e-4 nat); otherwise it redoes the pass in
        float64 (`passes.audited_log_ratio`). Before that, with N >= 2^17 rows in memory on one device and
        12 D <= S, "auto" tries the screen (`screen.audited_screen`): r_s from 16,384 rows with a
        second-order Taylor control variate (one gradient-and-Hessian pass over the rows), audited against
        the float64 pass at 40 draws and kept only when its error is at most 1e-2 nat on every r_s and
        moves the KL estimate by less than its Monte Carlo error (or 1e-4 nat); at N = 10^6 it took 0.3 s
        where the float32 pass took 1.0 s. `cert.precision` and `cert.precision_note` say which was used.
      probs: levels of the corrected quantiles.

    Returns:
      A `Certificate`: `khat`, `kl` (with its Monte Carlo `kl_se`), `ess`, `weights` (S,), `verdict`
      ("good" / "usable" / "poor" / "unreliable", `certificate.verdict`) with its `reason`, corrected `mean`,
      `sd` and `quantiles` (None where k-hat > 0.7 and the ratios are not flat; `corrected_note` says why),
      with chains `rhat` and `ess_bulk` of the draws (a max R-hat over 1.01 caps the verdict at "usable"), and
      `to_arviz()`.
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a cj.Model, got {type(model).__name__}")
    _validate.check_choice(precision, PRECISIONS, "precision")
    if chunk_size is not None:
        chunk_size = _validate.check_positive_int(chunk_size, "chunk_size")
    start = time.perf_counter()
    draws = _as_draws(draws, coreset)
    flat = draws.reshape(-1, draws.shape[-1])
    how = PassPrecision(precision)
    if _streamed(data, chunk_size):
        if precision == "auto":  # an audit would read the source a second time
            how = PassPrecision("float64", None, "float64: a chunked source is read once, so it is not audited")
        r, zero, n = streamed_log_ratio(model, data, coreset, flat, chunk_size, how.precision)
        _check_coreset(coreset, n)
    else:
        n = _checks.check_model_data(model, data)
        _check_coreset(coreset, n)
        built_on = (getattr(coreset, "settings", None) or {}).get("data_digest")
        if built_on is not None and built_on != digest(data):
            raise ValueError("coreset: it was built on other data (the digest of the data it records differs "
                             "from this data's); a certificate compares a coreset with its own data")
        _checks.check_theta(model, data, flat, "draws")
        screened = None
        if precision == "auto" and leading_mesh(data) is None \
                and screen_applies(data, n, flat.shape[0], flat.shape[1]):
            screened = audited_screen(model, data, coreset, flat)
        if screened is not None:
            (r, how), zero = screened, 0
        elif precision == "auto":
            r, zero, how = audited_log_ratio(model, data, coreset, flat, chunk_size=chunk_size)
        else:
            r, zero = log_ratio(model, data, coreset, flat, chunk_size=chunk_size, precision=precision)
    if zero:
        warnings.warn(f"certify: the full-data log-likelihood is -inf at {zero} of {r.size} draws; they get "
                      "importance weight 0", RuntimeWarning, stacklevel=caller.stacklevel())
    cert = from_log_ratio(r, draws, model=model, probs=probs, time_s=time.perf_counter() - start)
    return dataclasses.replace(cert, precision=how.precision, precision_error=how.error,
                               precision_note=how.note or how.precision)


def warn_if_unreliable(cert: Certificate, where: str) -> None:
    """A RuntimeWarning, at the caller's line, when the certificate finds the coreset posterior unreliable or
    poor."""
    if cert.verdict == "unreliable":
        withheld = "" if cert.mean is not None else "; its corrected moments are withheld (cert.corrected_note)"
        warnings.warn(f"{where}: the coreset's certificate is unreliable (khat {cert.khat:.2f} >= 0.7, estimated "
                      f"KL(pi_w || pi) {cert.kl:.3g}): its posterior misses mass of the full-data posterior"
                      f"{withheld}; use a larger size or another method", RuntimeWarning,
                      stacklevel=caller.stacklevel())
    elif cert.verdict == "poor":
        warnings.warn(f"{where}: the coreset's posterior is far from the full-data posterior (estimated KL "
                      f"{cert.kl:.3g} >= 0.5 nat, khat {cert.khat:.2f}); the certificate's corrected moments "
                      "(cert.mean, cert.sd) can be used, or use a larger size or another method", RuntimeWarning,
                      stacklevel=caller.stacklevel())

