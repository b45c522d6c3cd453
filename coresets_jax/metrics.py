"""Posterior-quality metrics (HC §6–7, LR §4, IHT §5).

- `gaussian_kl`, `gaussian_kls`: closed-form KL between Gaussians (HC Eq. 6.6), one or both directions.
- `laplace_kl`: forward and reverse KL between Laplace approximations of the full-data and coreset
  posteriors (IHT §5.3 and appendix D).
- `bridge_kl`, `bridge_kl_from_log_ratios`: KL(pi_w || pi) and KL(pi || pi_w) from draws of both posteriors
  and their exact log density ratio, by bridge sampling (Meng & Wong 1996).
- `wasserstein1`: exact empirical 1-Wasserstein between equal-size subsamples (optimal assignment).
- `mmd`: maximum mean discrepancy with the degree-3 polynomial kernel (LR §4).
- `test_log_likelihood`: mean over held-out rows of log (1/S) sum_s p(x | theta_s) (HC §7.3).
- `normalized_test_log_likelihood`, `median_pairwise_wasserstein1`, `normalized_wasserstein1`: the
  normalisations of HC §7.3.
"""

from __future__ import annotations

import itertools
from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .core import checks as _checks
from .core import validate as _validate
from .core.model import log_likelihoods
from .core import compiled
from .compilation import full_precision

__all__ = [
    "bridge_kl",
    "bridge_kl_from_log_ratios",
    "gaussian_kl",
    "gaussian_kls",
    "laplace_kl",
    "median_pairwise_wasserstein1",
    "mmd",
    "normalized_test_log_likelihood",
    "normalized_wasserstein1",
    "test_log_likelihood",
    "wasserstein1",
]


def _is_traced(*xs) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in xs)


def _check_gaussian(mean, cov, mean_name: str, cov_name: str):
    """A finite (D,) mean and a finite, symmetric, positive definite (D, D) covariance; else ValueError."""
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    if mean.ndim != 1 or mean.shape[0] < 1:
        raise ValueError(f"{mean_name}: expected shape (D,), got {mean.shape}")
    d = mean.shape[0]
    if cov.shape != (d, d):
        raise ValueError(f"{cov_name}: has shape {cov.shape}, but {mean_name} has shape {mean.shape}, so "
                         f"({d}, {d}) is expected")
    _validate.check_finite(mean, mean_name)
    _validate.check_finite(cov, cov_name)
    dtype = jnp.promote_types(cov.dtype, jnp.float32)
    cov = cov.astype(dtype)
    # Symmetric up to rounding: Laplace and sample covariances are, a transposed factor product is not.
    scale = float(jnp.max(jnp.abs(cov)))
    asym = float(jnp.max(jnp.abs(cov - cov.T)))
    if asym > 1e3 * float(jnp.finfo(dtype).eps) * max(scale, float(jnp.finfo(dtype).tiny)):
        raise ValueError(f"{cov_name}: is not symmetric (max |S - S^T| = {asym:.3g}, max |S| = {scale:.3g})")
    eig_min = float(jnp.min(jnp.linalg.eigvalsh(cov)))
    if not eig_min > 0 or not bool(jnp.all(jnp.isfinite(jnp.linalg.cholesky(cov)))):
        raise ValueError(f"{cov_name}: is not positive definite (smallest eigenvalue {eig_min:.3g}); a "
                         f"Gaussian's covariance must be symmetric positive definite")
    return mean, cov


@full_precision
def gaussian_kl(mean_p, cov_p, mean_q, cov_q) -> jax.Array:
    """KL(p || q) between N(mean_p, cov_p) and N(mean_q, cov_q) (HC Eq. 6.6 with p = pi, q = pi_tilde).

    KL = 1/2 [tr(S_q^{-1} S_p) + (m_q - m_p)^T S_q^{-1} (m_q - m_p) - D + log |S_q| / |S_p|].

    Concrete inputs are checked (shapes, finiteness, symmetric positive definite covariances: `ValueError`
    naming the argument), and a non-finite result (a covariance too ill-conditioned for its dtype) raises
    rather than returning NaN or inf. Under `jit`/`vmap` the checks are skipped.
    """
    if _is_traced(mean_p, cov_p, mean_q, cov_q):
        return _gaussian_kl(*map(jnp.asarray, (mean_p, cov_p, mean_q, cov_q)))
    mean_p, cov_p = _check_gaussian(mean_p, cov_p, "mean_p", "cov_p")
    mean_q, cov_q = _check_gaussian(mean_q, cov_q, "mean_q", "cov_q")
    if mean_p.shape != mean_q.shape:
        raise ValueError(f"mean_q: has shape {mean_q.shape}, but mean_p has shape {mean_p.shape}")
    kl = _gaussian_kl(mean_p, cov_p, mean_q, cov_q)
    if not bool(jnp.isfinite(kl)) or float(kl) < -1e-3 * (1.0 + mean_p.shape[0]):
        raise ValueError(f"cov_q: KL came out as {float(kl)}; cov_p or cov_q is too ill-conditioned for "
                         f"{cov_q.dtype} (use float64, jax_enable_x64)")
    return jnp.maximum(kl, 0.0)  # KL >= 0; a tiny negative value is rounding


def _gaussian_kl(mean_p, cov_p, mean_q, cov_q) -> jax.Array:
    d = mean_p.shape[-1]
    chol_q = jnp.linalg.cholesky(cov_q)
    solve = lambda b: jax.scipy.linalg.cho_solve((chol_q, True), b)
    diff = mean_q - mean_p
    trace = jnp.trace(solve(cov_p))
    maha = diff @ solve(diff)
    logdet_q = 2.0 * jnp.sum(jnp.log(jnp.diag(chol_q)))
    logdet_p = jnp.linalg.slogdet(cov_p)[1]
    return 0.5 * (trace + maha - d + logdet_q - logdet_p)


@full_precision
def gaussian_kls(mean_p, cov_p, mean_q, cov_q) -> tuple[jax.Array, jax.Array]:
    """(KL(p || q), KL(q || p)): HC Eq. 6.6 in both directions."""
    return gaussian_kl(mean_p, cov_p, mean_q, cov_q), gaussian_kl(mean_q, cov_q, mean_p, cov_p)


@full_precision
def laplace_kl(model, data: Any, weights: Any, *, full=None, key: Optional[jax.Array] = None) -> dict:
    """Forward and reverse KL between the full-data and coreset posteriors, each replaced by its Laplace
    approximation (IHT appendix D, following Campbell & Beronov 2019).

    Args:
      model, data: the model and its full data pytree.
      weights: a `Coreset` or a dense non-negative (N,) weight vector.
      full: optional precomputed Laplace fit of the full-data posterior (e.g. `cj.laplace(model, data)`),
        reused across coresets.
      key: unused by the default Newton fit; accepted for symmetry with `cj.laplace`.

    Returns:
      {"forward": KL(pi || pi_w), "reverse": KL(pi_w || pi)}, with pi the full-data posterior.
    """
    from .weighting.pihat import laplace

    n = _validate.check_data(data)
    if full is None:
        full = laplace(model, data, key=key)
    rows, w = _validate.weighted_rows(data, n, weights)
    coreset = laplace(model, rows, init=full.mean, weights=w)
    forward, reverse = gaussian_kls(full.mean, full.cov, coreset.mean, coreset.cov)
    return {"forward": forward, "reverse": reverse}


def _log_mean_exp(x: np.ndarray) -> float:
    from scipy.special import logsumexp

    return float(logsumexp(x) - np.log(x.size))


def _check_log_ratios(r, name: str) -> np.ndarray:
    r = np.asarray(r, np.float64).reshape(-1)
    if r.size < 2:
        raise ValueError(f"{name}: expected at least 2 log ratios (one per draw), got {r.size}")
    if np.any(np.isnan(r)):
        raise ValueError(f"{name}: contains NaN")
    return r


def bridge_kl_from_log_ratios(r_coreset, r_full, *, max_iter: int = 1000, tol: float = 1e-12) -> dict:
    """KL(pi_w || pi) and KL(pi || pi_w) from r = log q(theta) - log q_w(theta), the log ratio of the
    unnormalised full-data and coreset posterior densities, at draws of each (Meng & Wong 1996, Eq. 4.1).

    With c = Z / Z_w the ratio of their normalising constants, pi_w / pi = c exp(-r), so

        KL(pi_w || pi) = log c - E_{pi_w}[r],        KL(pi || pi_w) = E_pi[r] - log c.

    log c comes from the optimal bridge (Meng & Wong's Eq. 4.1, iterated to its fixed point): with
    s_1 = n_1 / (n_1 + n_2), s_2 = n_2 / (n_1 + n_2) and u = r - log c,

        c <- c mean_{pi_w}[e^u / (s_1 + s_2 e^u)] / mean_{pi}[1 / (s_1 + s_2 e^u)],

    started at the geometric bridge, log c = log mean_{pi_w} e^{r/2} - log mean_pi e^{-r/2}. Unlike a
    two-moment (Gaussian) KL between the two sets of draws, whose bias grows like D^2 / draws, its error is
    the Monte Carlo error of these means, which shrinks with the KL itself. r may carry any constant shared
    by all draws of both sets (it cancels). It needs overlap: for KL of many nats it is biased low.

    Args:
      r_coreset: (S_1,) r at draws of the coreset posterior pi_w.
      r_full: (S_2,) r at draws of the full-data posterior pi (the same constant).

    Returns:
      {"kl": KL(pi_w || pi), "kl_reverse": KL(pi || pi_w), "log_z_ratio": log c, "iterations": int}; "kl" is
      inf where r is -inf at a draw of pi_w (pi has no mass there), "kl_reverse" where r is +inf at a draw of pi.
    """
    r1, r2 = _check_log_ratios(r_coreset, "r_coreset"), _check_log_ratios(r_full, "r_full")
    max_iter = _validate.check_positive_int(max_iter, "max_iter")
    out = {"kl": np.inf if np.any(r1 == -np.inf) else None,
           "kl_reverse": np.inf if np.any(r2 == np.inf) else None}
    a, b = r1[np.isfinite(r1)], r2[np.isfinite(r2)]
    if a.size < 2 or b.size < 2:
        raise ValueError("r_coreset, r_full: fewer than 2 finite log ratios in one of them; the two posteriors "
                         "do not overlap")
    log_s1, log_s2 = np.log(a.size / (a.size + b.size)), np.log(b.size / (a.size + b.size))
    log_c = _log_mean_exp(a / 2) - _log_mean_exp(-b / 2)
    iterations = 0
    for iterations in range(1, max_iter + 1):
        den_a = np.logaddexp(log_s1, log_s2 + a - log_c)
        den_b = np.logaddexp(log_s1, log_s2 + b - log_c)
        step = _log_mean_exp(a - log_c - den_a) - _log_mean_exp(-den_b)
        log_c += step
        if abs(step) <= tol * max(1.0, abs(log_c)):
            break
    else:
        raise ValueError(f"bridge_kl: the bridge did not converge in {max_iter} iterations (last step "
                         f"{step:.3g}); the two posteriors barely overlap")
    if out["kl"] is None:
        out["kl"] = max(float(log_c - np.mean(a)), 0.0)  # >= 0; a tiny negative value is Monte Carlo noise
    if out["kl_reverse"] is None:
        out["kl_reverse"] = max(float(np.mean(b) - log_c), 0.0)
    out.update(log_z_ratio=float(log_c), iterations=iterations)
    return out


@full_precision
def bridge_kl(model, data: Any, coreset: Any, coreset_draws: Any, full_draws: Any, *,
              chunk_size: Optional[int] = None) -> dict:
    """KL(pi_w || pi) (and KL(pi || pi_w)) between a coreset posterior and the full-data posterior, from draws
    of both, by bridge sampling (`bridge_kl_from_log_ratios`, Meng & Wong 1996).

    r = sum_n L_n(theta) - sum_m w_m L_m(theta) (the priors cancel) is evaluated at every draw of both sets in
    one float64 pass over the data (the pass of `cj.certify`). This measures a coreset against full-data MCMC
    without the two-moment KL's bias of about D^2 / (2 draws), which hides small KLs at large D; it
    needs full-data draws, where `cj.certify` needs only the coreset's.

    Args:
      model, data: the model and its full data pytree.
      coreset: a `Coreset` built on this data, or a dense (N,) weight vector.
      coreset_draws: (S, D) or (chains, S, D) draws of the coreset posterior (or a `cj.sample` Posterior).
      full_draws: (S', D) or (chains, S', D) draws of the full-data posterior (or a Posterior).
      chunk_size: rows per step of the pass (default: about 64 MiB of log-likelihoods per step).

    Returns:
      The dict of `bridge_kl_from_log_ratios`.
    """
    from .certification.passes import log_ratio

    n = _checks.check_model_data(model, data)
    a = _as_points(getattr(coreset_draws, "samples", coreset_draws), "coreset_draws")
    b = _as_points(getattr(full_draws, "samples", full_draws), "full_draws")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"full_draws: have D = {b.shape[1]}, but coreset_draws have D = {a.shape[1]}")
    _validate.weighted_rows(data, n, coreset)  # a coreset of this data: ValueError otherwise
    both = np.concatenate([a, b])
    _checks.check_theta(model, data, both, "coreset_draws, full_draws")
    if chunk_size is not None:
        chunk_size = _validate.check_positive_int(chunk_size, "chunk_size")
    r, _ = log_ratio(model, data, coreset, both, chunk_size=chunk_size)  # one pass: one shared constant
    return bridge_kl_from_log_ratios(r[:a.shape[0]], r[a.shape[0]:])


def _as_points(x, name: str) -> np.ndarray:
    """(n, D) float64 array from (n,), (n, D) or (chains, n, D) samples."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    elif a.ndim == 3:
        a = a.reshape(-1, a.shape[-1])
    if a.ndim != 2 or a.shape[0] < 1:
        raise ValueError(f"{name}: expected samples of shape (n, D) or (chains, n, D), got {np.shape(x)}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or inf")
    return a


def _as_point_pair(samples_a, samples_b) -> tuple[np.ndarray, np.ndarray]:
    """Both sample sets as (n, D) float64 arrays (`_as_points`), with the same D."""
    a, b = _as_points(samples_a, "samples_a"), _as_points(samples_b, "samples_b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"samples_b: has shape {np.shape(samples_b)} (D = {b.shape[1]}), but samples_a has "
                         f"shape {np.shape(samples_a)} (D = {a.shape[1]})")
    return a, b


def _subsample(a: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    return a if a.shape[0] == m else a[rng.choice(a.shape[0], m, replace=False)]


def wasserstein1(samples_a, samples_b, *, max_points: int = 1000, seed: int = 0) -> float:
    """Empirical 1-Wasserstein distance (Euclidean ground cost) between two sample sets.

    Exact optimal transport between two uniform empirical measures of equal size n: then an optimal plan is
    a permutation, found exactly with the Hungarian-type solver `scipy.optimize.linear_sum_assignment`,
    and W1 = (1/n) sum_i ||a_i - b_pi(i)||. When the sets differ in size or exceed `max_points`, both are
    first subsampled without replacement (seeded by `seed`) to n = min(|a|, |b|, max_points); the result is
    then the exact W1 between those subsamples, a slightly upward-biased estimate of the population W1.
    Cost O(n^3): n = 1000 takes well under a second, n = 2000 a few seconds.

    Args:
      samples_a, samples_b: (n, D), (n,) or (chains, n, D) arrays.
    """
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    a, b = _as_point_pair(samples_a, samples_b)
    max_points = _validate.check_positive_int(max_points, "max_points")
    rng = np.random.default_rng(seed)
    m = min(a.shape[0], b.shape[0], int(max_points))
    a, b = _subsample(a, m, rng), _subsample(b, m, rng)
    cost = cdist(a, b)  # direct differences: exact 0 for identical points, unlike the Gram expansion
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


@compiled.jit(static_argnames=("degree", "block"))
def _mean_kernel(x, y, degree: int, offset, block: int = 1024):
    """mean_{i,j} (x_i . y_j + offset)^degree, accumulated over row blocks of x (memory O(block * |y|))."""
    n = x.shape[0]
    pad = (-n) % block
    xp = jnp.concatenate([x, jnp.zeros((pad, x.shape[1]), x.dtype)]).reshape(-1, block, x.shape[1])
    mask = (jnp.arange(n + pad) < n).reshape(-1, block)

    def one(args):
        xb, mb = args
        k = (xb @ y.T + offset) ** degree
        return jnp.sum(jnp.where(mb[:, None], k, 0.0))

    return jnp.sum(jax.lax.map(one, (xp, mask))) / (n * y.shape[0])


@full_precision
def mmd(samples_a, samples_b, *, degree: int = 3, offset: float = 1.0) -> float:
    """MMD with the polynomial kernel k(x, y) = (x^T y + offset)^degree (LR §4 uses degree 3).

    The biased (V-statistic) estimate over all pairs, MMD = sqrt(max(0, mean k_aa + mean k_bb - 2 mean k_ab)),
    computed in float64 on the host's JAX device in row blocks; it is exactly 0 for identical sets. The
    degree-3 kernel compares the first three moments of the two sample sets.
    """
    a, b = _as_point_pair(samples_a, samples_b)
    degree = _validate.check_positive_int(degree, "degree")
    with jax.enable_x64(True):
        a64, b64 = jnp.asarray(a, jnp.float64), jnp.asarray(b, jnp.float64)
        kaa = _mean_kernel(a64, a64, int(degree), float(offset))
        kbb = _mean_kernel(b64, b64, int(degree), float(offset))
        kab = _mean_kernel(a64, b64, int(degree), float(offset))
        value = float(kaa + kbb - 2.0 * kab)
    return float(np.sqrt(max(value, 0.0)))


@full_precision
def test_log_likelihood(model, test_data: Any, samples) -> jax.Array:
    """Mean over held-out rows x of log (1/S) sum_s p(x | theta_s) (log-sum-exp over the S samples).

    Args:
      model: a `cj.Model`.
      test_data: held-out data pytree (leading axis T), checked against the model (`check_model_data`).
      samples: (S, D) or (chains, S, D) posterior samples (e.g. `post.samples`); D must be the model's.

    Raises `ValueError` when the predictive log-likelihood of some held-out row is not finite (the model
    gives it probability 0 under every sample, or returns NaN), naming the first such row.
    """
    _checks.check_model_data(model, test_data, "test_data")
    thetas = jnp.asarray(samples)
    if thetas.ndim not in (2, 3):
        raise ValueError(f"samples: expected shape (S, D) or (chains, S, D), got {thetas.shape}")
    if min(thetas.shape) < 1:
        raise ValueError(f"samples: has an empty axis, shape {thetas.shape}")
    _checks.check_theta(model, test_data, thetas, "samples")
    thetas = thetas.reshape(-1, thetas.shape[-1])
    _validate.check_finite(thetas, "samples")
    pred = _test_log_likelihood(model, test_data, thetas)
    if not bool(jnp.all(jnp.isfinite(pred))):
        row = int(jnp.argmin(jnp.isfinite(pred)))
        raise ValueError(f"test_data: the predictive log-likelihood of row {row} is {float(pred[row])} (not "
                         f"finite) under the {thetas.shape[0]} samples; check that the model fits test_data")
    return jnp.mean(pred)


@compiled.jit(static_argnames=("model",))
def _test_log_likelihood(model, test_data, thetas):
    """Per held-out row: log (1/S) sum_s p(x | theta_s), shape (T,)."""
    lls = jax.vmap(lambda t: log_likelihoods(model, t, test_data))(thetas)  # (S, T)
    return jax.scipy.special.logsumexp(lls, axis=0) - jnp.log(thetas.shape[0])


def normalized_test_log_likelihood(tll, tll_full, tll_max=0.0):
    """HC §7.3: negative test log-likelihood shifted by the maximum possible value and divided by that of the
    full-data posterior, (tll_max - tll) / (tll_max - tll_full). 1 matches the full data; larger is worse.
    `tll_max` is 0 for discrete likelihoods (logistic, Poisson), where p(x | theta) <= 1.
    """
    if not _is_traced(tll, tll_full, tll_max):
        for name, value in (("tll", tll), ("tll_full", tll_full), ("tll_max", tll_max)):
            _validate.check_finite(jnp.asarray(value, jnp.float32), name)
        if bool(jnp.any(jnp.asarray(tll_max) - jnp.asarray(tll_full) <= 0)):
            raise ValueError(f"tll_full: must be below tll_max = {tll_max}, got {tll_full}")
    return (tll_max - jnp.asarray(tll)) / (tll_max - jnp.asarray(tll_full))


def median_pairwise_wasserstein1(runs: Sequence[Any], **kwargs) -> float:
    """Median W1 over all pairs of independent full-data MCMC runs (HC §7.3 uses 10 runs)."""
    if len(runs) < 2:
        raise ValueError(f"runs: need at least 2 sample sets, got {len(runs)}")
    return float(np.median([wasserstein1(a, b, **kwargs) for a, b in itertools.combinations(runs, 2)]))


def normalized_wasserstein1(w1, reference: float):
    """HC §7.3: a W1 divided by the median pairwise W1 between independent full-data runs
    (`median_pairwise_wasserstein1`), or by the W1 between two full-data chains, so 1 is the level of
    Monte Carlo noise. The one "W1 over the noise floor" of the package: the CLI's W1/floor column and the
    benchmarks use it. NumPy float64 (no XLA program for a scalar division)."""
    if not reference > 0:
        raise ValueError(f"reference: must be positive, got {reference}")
    return np.asarray(w1, np.float64) / float(reference)
