"""Paired comparison of two coresets on the same points: is KL(pi_b || pi) below KL(pi_a || pi)? (ours)

Both refinements must never return weights worse than their start. Comparing two independent
importance-sampling estimates of KL (`common.kl_estimate`) is too noisy for that: on biketrips at M = 500
the estimate of one coreset varies by ~0.3 nats between rounds, the differences that matter are smaller,
and taking the smallest of 20 noisy estimates picks an iterate by its noise (benchmarks/README.md).

The difference is estimated instead, with the draws of the two posteriors paired through the weights.
With h(theta) = (w_b - w_a).L(theta), rho_a = T - w_a.L (T the full-data log-likelihood) and draws of pi_a,

    KL(pi_b || pi) - KL(pi_a || pi) = E_b[h - rho_a] + E_a[rho_a] - log E_a[exp(h)]           (P1)

(the normalising constant of pi cancels; E_b is a self-normalised importance-sampling average over the
draws of pi_a, with weights proportional to exp(h)). Its noise scales with |w_b - w_a|, not with the
spread of rho: to first order in h it is -Cov_a(h, rho_a) + Var_a(h)/2, the gradient and Fisher terms of
the KL (quasi-newton-coresets.md Q2, Q3) with common random numbers. The same identity on draws of pi_b
(h -> -h) estimates the opposite difference; the estimate is the mean of the two, and its standard error
comes from the delta method's influence values, averaged in batches (time blocks per chain) so that the
autocorrelation of MCMC draws is counted.

When the two posteriors are far apart (importance weights degenerate: ESS below `MIN_ESS` of the draws in
either direction), the pairing says nothing; then b is taken only if its own KL estimate is below half the
other's and lower by at least 1 nat, which independent estimates resolve.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Comparison", "one_sided", "paired_kl_difference", "better"]

Array = jax.Array
MIN_ESS = 0.05       # importance-sampling ESS, as a fraction of the draws, below which the pairing is not used
Z = 2.0              # b must beat a by Z standard errors
MARGIN = 1e-3        # and by this many nats (below it, float32 rounding of T - w.L decides)
BATCHES = 5          # time blocks per chain for the batch-means standard error


class Comparison(NamedTuple):
    """delta: estimate of KL(pi_b || pi) - KL(pi_a || pi) (nats); se: its standard error; ess: the smaller
    importance-sampling ESS fraction of the two directions; paired: both ESS fractions reach MIN_ESS."""

    delta: Array
    se: Array
    ess: Array
    paired: Array


def _batch_se(values: Array, num_chains: int, batches: int = BATCHES) -> Array:
    """Standard error of mean(values) by batch means: `values` (S,) time-major over `num_chains` chains
    (index t * K + k), cut into `batches` contiguous time blocks per chain."""
    s = values.shape[0]
    t = s // num_chains
    b = max(min(batches, t), 1)
    per = t // b
    v = values[: b * per * num_chains].reshape(b, per, num_chains)
    means = jnp.mean(v, axis=1).reshape(-1)                     # (b * K,) batch means
    n = means.shape[0]
    if n < 2:
        return jnp.std(values) / jnp.sqrt(s)
    return jnp.std(means, ddof=1) / jnp.sqrt(n)


def one_sided(h: Array, rho: Array, num_chains: int = 1) -> tuple[Array, Array, Array]:
    """(P1) on draws of pi_a: returns (KL(pi_b) - KL(pi_a), its standard error, the ESS fraction of the
    importance weights exp(h)), given h = (w_b - w_a).L and rho = T - w_a.L at those draws (S,).

    Non-finite h or rho give delta = +inf (no evidence that b is better)."""
    finite = jnp.all(jnp.isfinite(h) & jnp.isfinite(rho))
    h = jnp.where(jnp.isfinite(h), h, 0.0)
    rho = jnp.where(jnp.isfinite(rho), rho, 0.0)
    top = jnp.max(h)
    e = jnp.exp(h - top)
    e_mean = jnp.mean(e)
    f = h - rho
    f_b = jnp.mean(e * f) / e_mean                               # E_b[h - rho_a]
    delta = f_b + jnp.mean(rho) - (jnp.log(e_mean) + top)
    # Delta-method influence values of the three averages.
    psi = e * (f - f_b) / e_mean + (rho - jnp.mean(rho)) - (e - e_mean) / e_mean
    se = _batch_se(psi, num_chains)
    ess = jnp.square(jnp.sum(e)) / jnp.maximum(jnp.sum(jnp.square(e)), jnp.finfo(e.dtype).tiny) / h.shape[0]
    return jnp.where(finite, delta, jnp.inf), jnp.where(finite, se, jnp.inf), jnp.where(finite, ess, 0.0)


def paired_kl_difference(lls_a: Array, target_a: Array, w_a: Array, lls_b: Array, target_b: Array, w_b: Array,
                         num_chains: int = 1) -> Comparison:
    """KL(pi_b || pi) - KL(pi_a || pi) from draws of both posteriors on the same M points.

    Args:
      lls_a, lls_b: (S_a, M), (S_b, M) coreset log-likelihoods L_m at draws of pi_a and of pi_b.
      target_a, target_b: (S_a,), (S_b,) full-data log-likelihood estimates T at those draws (any offset
        shared within a set cancels).
      w_a, w_b: (M,) the two weight vectors (slots with weight 0 in both are ignored).
      num_chains: the draws are time-major over this many chains (for the standard error).
    """
    live = (w_a > 0) | (w_b > 0)
    wa, wb = jnp.where(w_a > 0, w_a, 0.0), jnp.where(w_b > 0, w_b, 0.0)
    la, lb = jnp.where(live, lls_a, 0.0), jnp.where(live, lls_b, 0.0)
    d_a, se_a, ess_a = one_sided(la @ (wb - wa), target_a - la @ wa, num_chains)
    d_b, se_b, ess_b = one_sided(lb @ (wa - wb), target_b - lb @ wb, num_chains)
    ess = jnp.minimum(ess_a, ess_b)
    return Comparison(0.5 * (d_a - d_b), 0.5 * jnp.sqrt(jnp.square(se_a) + jnp.square(se_b)), ess,
                      ess >= MIN_ESS)


def better(comparison: Comparison, kl_a: Array, kl_b: Array, z: float = Z) -> Array:
    """Whether b is better than a: significantly by the paired estimate (delta + z se < -MARGIN) when the pairing
    holds, else by the unpaired estimates kl_a, kl_b (each from its own draws) with a wide margin (module
    docstring)."""
    paired = comparison.paired & (comparison.delta + z * comparison.se < -MARGIN)
    unpaired = ~comparison.paired & (kl_b < 0.5 * kl_a) & (kl_b < kl_a - 1.0)
    return paired | unpaired
