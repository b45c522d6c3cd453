"""Draws of two coreset posteriors in one loop (ours): Coreset MCMC's draws at the trained weights and at
the start (coreset_mcmc.py steps 6 and 7) step both sets of chains in the same `scan`, a `vmap` over the
pair, so the kernel is compiled once for both rounds instead of once per round."""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from .. import progress as _progress
from ..inference.driver import init_chains, step_chains
from .common import kl_estimate

__all__ = ["kl_at_draws", "paired_draws", "stack"]

Array = jax.Array


def stack(a: Any, b: Any) -> Any:
    """Two pytrees of the same structure as one with a leading axis of 2."""
    return jax.tree_util.tree_map(lambda x, y: jnp.stack([x, y]), a, b)


def paired_draws(kernel: str, settings: dict, density: Callable[[Array], Callable], weights: Array, chains: Any,
                 tunings: Any, keys: Array, num_draws: int, desc: str) -> tuple[Array, Array]:
    """`num_draws` steps of K chains at each of two weight vectors.

    Args:
      kernel, settings: a registered kernel and its checked settings.
      density: `density(w)`, the log density of pi_w.
      weights: (2, M); chains, tunings: the two sets of K chain states and their tunings, stacked
        (`stack`); keys: (2,) one key per set.
    Returns:
      (positions (num_draws, 2, K, D), acceptance rates (num_draws, 2, K)); keys[i] drives set i alone.
    """
    chains = jax.vmap(lambda w, c, t: init_chains(kernel, density(w), c.position, t, settings))(weights, chains,
                                                                                                 tunings)

    def step(chains, step_keys):
        def one(w, c, t, k):
            c, info = step_chains(k, kernel, density(w), c, t, settings, refresh=False)
            return c, (c.position, info.acceptance_rate)

        return jax.vmap(one)(weights, chains, tunings, step_keys)

    step_keys = jnp.swapaxes(jax.vmap(lambda k: jax.random.split(k, num_draws))(keys), 0, 1)
    _, (positions, acceptance) = _progress.scan(step, chains, step_keys, desc=desc)
    return positions, acceptance


def kl_at_draws(weights: Array, positions: Array, keys: Array, lls: Callable, estimate: Callable,
                dtype) -> tuple[Array, Array, Array]:
    """For each of the two sets of `paired_draws`: the KL estimate of pi_w (`common.kl_estimate`), the coreset
    log-likelihoods `lls(thetas)` (S, M) and the full-data estimates `estimate(key, thetas)` (S,) at its
    S = num_draws * K draws, time-major; each stacked over the pair."""
    def one(w, samples, key):
        flat = samples.reshape(-1, samples.shape[-1])
        core = lls(flat)
        target = estimate(jax.random.fold_in(key, 1), flat).astype(dtype)
        return kl_estimate(core, target, w), core, target

    return jax.vmap(one, in_axes=(0, 1, 0))(weights, positions, keys)
