"""The pieces the MALA and RWMH kernels share: the preconditioned Gaussian proposal noise and the
Metropolis–Hastings accept/reject step."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def accept_reject(rng_key, log_ratio, proposal, state):
    """Keep `proposal` with probability min(1, exp(log_ratio)); a NaN ratio rejects.

    Returns (new_state, acceptance probability, accepted).
    """
    log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
    accept_prob = jnp.minimum(1.0, jnp.exp(log_ratio))
    accepted = jnp.log(jax.random.uniform(rng_key, dtype=log_ratio.dtype)) < log_ratio
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(accepted, a, b), proposal, state)
    return new, accept_prob, accepted


def gaussian_noise(rng_key, position, step_size, chol):
    """Split `rng_key` and draw the proposal noise step_size * L z, z ~ N(0, I), for the preconditioner's
    Cholesky factor L (identity when `chol` is None). Returns (accept key, L, noise)."""
    if chol is None:
        chol = jnp.eye(position.shape[0], dtype=position.dtype)
    k_prop, k_acc = jax.random.split(rng_key)
    z = jax.random.normal(k_prop, position.shape, position.dtype)
    return k_acc, chol, step_size * (chol @ z)
