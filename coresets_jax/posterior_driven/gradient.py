"""The Coreset MCMC estimate of the KL gradient (coreset-mcmc.md Eq. C3): a covariance over the K chains."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["kl_gradient", "kl_gradient_from_target"]

Array = jax.Array


def kl_gradient(coreset_lls: Array, subsample_lls: Array, weights: Array, subsample_weights: Array) -> Array:
    """The Coreset MCMC estimate of grad_w KL(pi_w || pi) (coreset-mcmc.md Eq. C3).

    Args:
      coreset_lls: (K, M) L_m(theta_k) at the K chain states.
      subsample_lls: (K, S) L_{n_s}(theta_k) on a data subsample drawn with probabilities u_n / sum(u).
      weights: (M,) the current weights w.
      subsample_weights: (S,) sum(u) / S each, so that sum_s (sum(u)/S) L_{n_s} is unbiased for
        sum_n u_n L_n (or u itself when the "subsample" is the whole data set).

    Returns:
      (M,) g_m = -(1/(K-1)) sum_k (L_km - mean_k L_km)(r_k - mean_k r_k), with the residual
      r_k = sum_s subsample_weights_s L_ks - w.L_k. With independent exact draws theta_k ~ pi_w and the
      subsample independent of them, its expectation is -Cov_{pi_w}(L_m, sum_n u_n L_n - w.L).
    """
    return kl_gradient_from_target(coreset_lls, subsample_lls @ subsample_weights, weights)


def kl_gradient_from_target(coreset_lls: Array, target: Array, weights: Array) -> Array:
    """`kl_gradient` given the (K,) full-data log-likelihood estimates T(theta_k) directly (any estimate
    unbiased up to an offset shared by the K chains, e.g. `common.full_data_estimator`'s)."""
    masked = jnp.where(weights > 0, weights, 0.0)
    core = jnp.where(weights > 0, coreset_lls, 0.0) @ masked
    residual = target - core
    centred = coreset_lls - jnp.mean(coreset_lls, axis=0)
    k = coreset_lls.shape[0]
    return -(centred.T @ (residual - jnp.mean(residual))) / (k - 1)
