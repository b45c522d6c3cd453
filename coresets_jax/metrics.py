"""Posterior-quality metrics (HC §6–7, LR §4, IHT §5)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gaussian_kl"]


def gaussian_kl(mean_p, cov_p, mean_q, cov_q) -> jax.Array:
    """KL(p || q) between N(mean_p, cov_p) and N(mean_q, cov_q) (HC Eq. 6.6 with p = pi, q = pi_tilde).

    KL = 1/2 [tr(S_q^{-1} S_p) + (m_q - m_p)^T S_q^{-1} (m_q - m_p) - D + log |S_q| / |S_p|].
    """
    mean_p, cov_p, mean_q, cov_q = map(jnp.asarray, (mean_p, cov_p, mean_q, cov_q))
    d = mean_p.shape[-1]
    chol_q = jnp.linalg.cholesky(cov_q)
    solve = lambda b: jax.scipy.linalg.cho_solve((chol_q, True), b)
    diff = mean_q - mean_p
    trace = jnp.trace(solve(cov_p))
    maha = diff @ solve(diff)
    logdet_q = 2.0 * jnp.sum(jnp.log(jnp.diag(chol_q)))
    logdet_p = jnp.linalg.slogdet(cov_p)[1]
    return 0.5 * (trace + maha - d + logdet_q - logdet_p)
