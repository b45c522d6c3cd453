"""A screening certificate from a subsample (ours): r_s without the pass over all N rows, for the automatic
size's intermediate sizes, whose certificates only decide whether to grow M.

`cj.certify` needs, at every draw theta_s of the coreset posterior, sum_n L_n(theta_s) over all N rows: an
N x S pass, the largest cost of a certificate at large N (1.4 s at N = 10^6, S = 1000, D = 10 on 2 CPU cores).
The screen estimates that sum with the difference estimator (Quiroz, Kohn, Villani & Tran, JASA 2019, Eq. 6; the
estimator under NumPyro's HMCECS) with a second-order Taylor control variate at a central draw c:

    q_n(theta) = L_n(c) + g_n . d + d' H_n d / 2,        d = theta - c,  g_n, H_n: L_n's gradient and Hessian at c
    sum_n L_n(theta) ~= sum_n q_n(theta) + (N / m) sum_{i in A} [L_i(theta) - q_i(theta)]

with A a uniform subsample of m rows (without replacement). sum_n q_n needs only g = sum_n g_n and
H = sum_n H_n, from one gradient-and-Hessian pass at c (D forward-mode tangents of one reverse pass); the
subsample alone is evaluated at every draw. For each theta the estimate is unbiased; the remainder
L_i - q_i is third order in d, so on a posterior of width ~ N^(-1/2) the error is about D^(3/2) / sqrt(N m)
nats, and it grows when the draws are far from c (a poor coreset, whose KL is large anyway).

Its error is measured, not assumed: A is split in GROUPS = 4 equal groups, each gives an estimate, and their
spread estimates the error of their mean draw by draw,
var(e_s) ~ sum_k (est_k,s - mean_k est_k,s)^2 / (K (K - 1)),
each deviation centred over the draws first (a constant shared by every draw cancels in r). The error is a smooth
function of theta set by a few random coefficients, so one difference of two halves estimates its size with about
one degree of freedom: on tiled real rows it read 1.6-2.4x low. Four groups give three.

Two callers:
- the automatic size (`construct.auto_size`) judges each size it tries with the screen alone where that error
  cannot move its decision, and certifies the size it returns with `cj.certify`;
- `cj.certify(precision="auto")` at N >= SCREEN_MIN_ROWS (`audited_screen`) keeps the screen only after the
  float32 pass's audit: the float64 pass at 40 draws (the 16 largest r, 16 spread over the run, and the 8
  farthest from the centre, where the Taylor remainder is largest) must agree with it to SCREEN_MAX_ERROR.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..compilation import compile_ahead
from ..core import Model
from ..core import compiled
from ..core import validate as _validate
from ..features.projection import default_chunk
from .certificate import from_log_ratio
from .passes import (AUDIT_DRAWS, AUDIT_KL_FLOOR, AUDIT_MIN_WORK, LEGACY_CERTIFICATE, PassPrecision, as_dtype,
                     audit_draws, compile_full_term, coreset_term, full_term, kl_shift_bound, pass_draws,
                     precision_scope, relative_sums, scan_rows)

__all__ = ["ENABLED", "SCREEN_MAX_ERROR", "SCREEN_MIN_ROWS", "SCREEN_ROWS", "Screen", "audited_screen", "kl_shift",
           "screen_applies", "screened_certificate", "screened_log_ratio", "subsample_groups"]

# CORESETS_JAX_SCREEN=0 (or screen.ENABLED = False) turns the screen off: the automatic size certifies every size
# it tries, and `cj.certify(precision="auto")` takes its float32 or float64 pass over every row.
ENABLED = os.environ.get("CORESETS_JAX_SCREEN", "1") != "0"
SCREEN_ROWS = 16384  # m: the subsample (GROUPS groups of 4096)
GROUPS = 4  # K: groups whose spread measures the estimate's error
SCREEN_MIN_ROWS = 8 * SCREEN_ROWS  # N below which the full pass is cheap and the screen is not used
# nats: the largest error of any r_s that `cj.certify` accepts from an audited screen. An error e_s moves draw
# s's importance weight by a factor exp(e_s) (1% here) and a corrected moment by about that fraction of a
# posterior sd; the KL's shift is bounded separately (`audited_screen`). (The float32 pass is held to 1e-3,
# which its rounding meets with room; the screen's error at N = 10^6 is ~4e-4 sd, a bound of ~1.6e-3.)
SCREEN_MAX_ERROR = 1e-2


class Screen(NamedTuple):
    """A screened log ratio: `r` (S,) up to a shared constant, `noise` the sd over the draws of its
    estimated error (nats), `rows` the subsample size m, `core` (S,) the coreset's term of r (exact, relative
    to the centre), `center` (D,) the central draw c."""

    r: np.ndarray
    noise: float
    rows: int
    core: np.ndarray
    center: np.ndarray


def _sum_log_likelihood(model: Model, theta: jax.Array, rows: Any, mask: jax.Array) -> jax.Array:
    rows = as_dtype(rows, theta.dtype)
    return jnp.sum(jnp.where(mask, jax.vmap(model.log_likelihood, in_axes=(None, 0))(theta, rows), 0.0))


def _taylor(model: Model, data: Any, center: jax.Array, chunk: int):
    """(g, H): sum_n of the rows' gradients and Hessians at `center`, chunk by chunk."""

    def grad_twice(theta, rows, mask):
        g = jax.grad(_sum_log_likelihood, argnums=1)(model, theta, rows, mask)
        return g, g

    def add(carry, rows, mask):
        hess, grad = jax.jacfwd(grad_twice, has_aux=True)(center, rows, mask)
        return carry[0] + grad, carry[1] + hess

    d = center.shape[0]
    return scan_rows(add, (jnp.zeros(d, center.dtype), jnp.zeros((d, d), center.dtype)), data, chunk)


@compiled.jit(static_argnames=("model", "chunk"), legacy_emitters=LEGACY_CERTIFICATE)
def _full_taylor(model, data, center, chunk):
    return _taylor(model, data, center, chunk)


@compiled.jit(static_argnames=("model",), legacy_emitters=LEGACY_CERTIFICATE)
def _groups(model, groups, draws, center):
    """For each group (leading axis K): sum_i (L_i(theta_s) - L_i(c)) at every draw (K, S), and g, H of the
    group at c ((K, D), (K, D, D))."""

    size, (num_draws, dim) = jax.tree_util.tree_leaves(groups)[0].shape[1], draws.shape

    def one(rows):
        # chunked as the full pass: one (chunk, S) block of log-likelihoods in memory, whatever S is
        add = lambda total, part, mask: total + relative_sums(model, part, draws, center, mask=mask)  # noqa: E731
        sums = scan_rows(add, jnp.zeros(num_draws, draws.dtype), rows, min(size, default_chunk(num_draws + 1, dim)))
        g, h = _taylor(model, rows, center, min(size, default_chunk(dim, dim)))
        return sums, g, h

    return jax.lax.map(one, groups)


def subsample_groups(n: int, m: int, seed: int, groups: int = GROUPS) -> np.ndarray:
    """(groups, m // groups) sorted row numbers: a uniform draw of m rows without replacement, in groups."""
    picked = np.random.default_rng(seed).choice(n, size=groups * (m // groups), replace=False)
    return np.sort(picked.reshape(groups, -1), axis=1)


def screened_log_ratio(model: Model, data: Any, coreset: Any, draws: np.ndarray, seed: int,
                       rows: int = SCREEN_ROWS, audit: int = 0) -> Optional[Screen]:
    """r_s estimated from a subsample (module docstring), for flat draws (S, D) and data in memory on one
    device; None where the estimate cannot be formed (a log-likelihood, gradient or Hessian that is not
    finite at the centre or on the subsample), for the caller to take the full pass.

    Its three programs (the Taylor pass, the groups, the coreset's term) are lowered first and compiled at
    once (`compilation.compile_ahead`); `audit` > 0 adds the float64 full pass at that many draws around the
    centre, which `audited_screen` runs next. On 2 cores a first `cj.certify` by the audited screen took 0.81 s
    where compiling them one after another took 1.00 s (medians; logistic regression, N = 5e5)."""
    flat = np.asarray(draws, np.float64)
    n = _validate.num_rows(data)
    m = min(int(rows), n)
    with jax.enable_x64(True):
        thetas, center = pass_draws(flat, "float64")
        dim = flat.shape[1]
        chunk = int(min(n, default_chunk(dim, dim)))
        picked = subsample_groups(n, m, seed)
        groups = jax.tree_util.tree_map(lambda leaf: _validate.gather(leaf, picked), data)  # (K, m / K, ...)
        core_rows, w = _validate.weighted_rows(data, n, coreset)
        compiling = [compile_ahead(_full_taylor, model, data, center, chunk),
                     compile_ahead(_groups, model, groups, thetas, center),
                     coreset_term(model, core_rows, w, thetas, center, ahead=True)]
        if audit:
            compiling.append(compile_full_term(model, data, jax.ShapeDtypeStruct((audit, dim), thetas.dtype),
                                               center, None, audit=True))
        compiling[0].wait()
        g, h = (np.asarray(x, np.float64) for x in _full_taylor(model, data, center, chunk))
        compiling[1].wait()
        sums, g_group, h_group = (np.asarray(x, np.float64) for x in _groups(model, groups, thetas, center))
        compiling[2].wait()
        core, core_flags = coreset_term(model, core_rows, w, thetas, center)
        for program in compiling[3:]:
            program.wait()
    core = np.asarray(core, np.float64)
    if not (np.all(np.isfinite(g)) and np.all(np.isfinite(h)) and np.all(np.isfinite(sums))
            and np.all(np.isfinite(g_group)) and np.all(np.isfinite(h_group)) and np.all(np.isfinite(core))
            and not np.any(np.asarray(core_flags))):
        return None
    d = flat - np.asarray(center, np.float64)
    quad = lambda a, b: d @ a + 0.5 * np.einsum("si,ij,sj->s", d, b, d)  # noqa: E731
    scale = n / picked.shape[1]
    estimates = np.stack([quad(g, h) + scale * (sums[k] - quad(g_group[k], h_group[k]))
                          for k in range(picked.shape[0])])
    deviations = estimates - estimates.mean(axis=0)
    deviations -= deviations.mean(axis=1, keepdims=True)
    k = picked.shape[0]
    noise = float(np.sqrt(np.sum(np.mean(deviations ** 2, axis=1)) / (k * (k - 1))))
    r = estimates.mean(axis=0) - core
    return Screen(r, noise, int(picked.size), core, np.asarray(center, np.float64))


def screened_certificate(model: Model, data: Any, coreset: Any, draws: np.ndarray, seed: int,
                         rows: int = SCREEN_ROWS) -> Optional[tuple]:
    """(Certificate, noise) from `screened_log_ratio`, draws (chains, S, D) or (S, D); None where the screen
    cannot be formed. The certificate's precision reads "screened" and its note gives m and the noise."""
    start = time.perf_counter()
    draws = np.asarray(draws)
    screen = screened_log_ratio(model, data, coreset, draws.reshape(-1, draws.shape[-1]), seed, rows)
    if screen is None:
        return None
    cert = from_log_ratio(screen.r, draws, model=model, time_s=time.perf_counter() - start)
    note = (f"screened: estimated from {screen.rows} of the rows with a second-order control variate; "
            f"error sd {screen.noise:.2g} nat over the draws")
    cert = dataclasses.replace(cert, precision="screened", precision_error=screen.noise, precision_note=note)
    return cert, screen.noise


FAR_DRAWS = 8  # draws farthest from the centre added to the audit: the Taylor remainder grows as |d|^3


def _farthest(flat: np.ndarray, num: int) -> np.ndarray:
    """Indices of the `num` draws farthest from their mean in the draws' own metric (Mahalanobis)."""
    d = flat - flat.mean(axis=0)
    cov = np.atleast_2d(np.cov(flat, rowvar=False)) + 1e-12 * np.eye(flat.shape[1])
    dist = np.einsum("si,ij,sj->s", d, np.linalg.pinv(cov), d)
    return np.argsort(-dist, kind="stable")[:num]


def kl_shift(r: np.ndarray, bound: float) -> tuple[float, float]:
    """(the most the KL estimate moves when every r_s moves by at most `bound`, its Monte Carlo error):
    `passes.kl_shift_bound`'s first order plus bound^2 / 2 (a KL near 0 moves by about var(e) / 2), and never
    more than 2 x bound (log-mean-exp(r) and mean(r) each move by at most bound)."""
    first, kl_se = kl_shift_bound(np.asarray(r), bound)
    return min(first + bound ** 2 / 2, 2 * bound), kl_se


def screen_applies(data: Any, n: int, draws: int, dim: int) -> bool:
    """Whether `cj.certify(precision="auto")` tries the audited screen: ENABLED, data in memory on one device
    (the caller checks), N >= SCREEN_MIN_ROWS, N x S >= passes.AUDIT_MIN_WORK (below, the float64 pass is cheap),
    and D small next to S (the gradient-and-Hessian pass costs about 3 D evaluations per row, the full pass
    S): 12 D <= S."""
    return ENABLED and n >= SCREEN_MIN_ROWS and n * draws >= AUDIT_MIN_WORK and 12 * dim <= draws


def audited_screen(model: Model, data: Any, coreset: Any, draws: np.ndarray, seed: int = 0) -> Optional[tuple]:
    """(r, PassPrecision) from the screen, checked against the full pass in float64 at `passes.audit_draws`'
    32 draws (the 16 largest r and 16 spread over the run) and the FAR_DRAWS draws farthest from the centre
    (where the screen's Taylor remainder is largest), or None where it is not accepted (the caller
    then takes the float32 or float64 full pass). Accepted when the error bound, the largest of the audited
    error (max |e| and 4 sd(e), centred) and 4 x the screen's own error estimate, is at most SCREEN_MAX_ERROR
    and moves the KL estimate (`passes.kl_shift_bound`, plus bound^2 / 2) by at most max(its Monte Carlo
    error, passes.AUDIT_KL_FLOOR): the float32 pass's audit, applied to the screen."""
    flat = np.asarray(draws, np.float64)
    audited = min(flat.shape[0], AUDIT_DRAWS + FAR_DRAWS)  # the audit's shape, known before r: compiled ahead
    screen = screened_log_ratio(model, data, coreset, flat, seed, audit=audited)
    if screen is None:
        return None
    picked = np.union1d(audit_draws(screen.r), _farthest(flat, FAR_DRAWS))
    padded = np.concatenate([picked, np.full(audited - picked.size, picked[-1])])  # repeats: computed, unused
    with precision_scope("float64"):
        full64, flags64 = full_term(model, data, jax.device_put(flat[padded]), jax.device_put(screen.center), None,
                                    audit=True)
    full64, flags64 = full64[:picked.size], flags64[:picked.size]
    if np.any(flags64) or picked.size < 2:
        return None
    error = screen.r[picked] - (full64 - screen.core[picked])
    error -= np.mean(error)
    bound = float(max(np.max(np.abs(error)), 4.0 * np.std(error, ddof=1), 4.0 * screen.noise))
    shift, kl_se = kl_shift(screen.r, bound)
    if bound > SCREEN_MAX_ERROR or shift > max(kl_se, AUDIT_KL_FLOOR):
        return None
    return screen.r, PassPrecision("screened, audited", bound,
                                   f"screened: estimated from {screen.rows} of the rows with a second-order control "
                                   f"variate, audited at {picked.size} draws against the float64 pass: r within "
                                   f"{bound:.2g} nat, the KL within {shift:.2g}")
