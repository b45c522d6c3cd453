"""The Metropolis–Hastings accept/reject step shared by the MALA and RWMH kernels."""

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
