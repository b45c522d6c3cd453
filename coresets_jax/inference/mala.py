"""Preconditioned Metropolis-adjusted Langevin algorithm (MALA), BlackJAX-style.

LR §4 and App. E run adaptive MALA (Roberts & Tweedie 1996; Atchadé 2006), adapting the overall step size
towards acceptance 0.574 (Roberts & Rosenthal 1998). BlackJAX's `mala` has no preconditioner and no
adaptation, so this module provides the kernel with a preconditioner C = L L^T; warm-up
(`inference.warmup`) adapts (h, L).

Proposal: theta' = theta + (h^2 / 2) C grad log pi(theta) + h L z, z ~ N(0, I), accepted with the
Metropolis–Hastings ratio including the asymmetric proposal densities.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from blackjax.base import SamplingAlgorithm, build_sampling_algorithm


__all__ = ["MALAState", "MALAInfo", "init", "build_kernel", "mala"]

Array = jax.Array


class MALAState(NamedTuple):
    """Current position with its log density and gradient.

    Both are cached because every proposal needs them at the current point (drift and reverse-move
    density), so a step costs one new density-and-gradient evaluation.
    """

    position: Array
    logdensity: Array
    logdensity_grad: Array


class MALAInfo(NamedTuple):
    acceptance_rate: Array
    is_accepted: Array


def _accept_reject(rng_key, log_ratio, proposal, state):
    """Keep `proposal` with probability min(1, exp(log_ratio)); a NaN ratio rejects.
    Returns (new_state, acceptance probability, accepted)."""
    log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
    accept_prob = jnp.minimum(1.0, jnp.exp(log_ratio))
    accepted = jnp.log(jax.random.uniform(rng_key, dtype=log_ratio.dtype)) < log_ratio
    new = jax.tree_util.tree_map(lambda a, b: jnp.where(accepted, a, b), proposal, state)
    return new, accept_prob, accepted


def init(position: Array, logdensity_fn: Callable) -> MALAState:
    logdensity, grad = jax.value_and_grad(logdensity_fn)(position)
    return MALAState(position, logdensity, grad)


def _log_proposal(to, frm: MALAState, step_size, chol):
    """log q(to | frm) up to a constant that cancels: -||L^{-1}(to - mean)||^2 / (2 h^2)."""
    drift = 0.5 * step_size**2 * (chol @ (chol.T @ frm.logdensity_grad))
    r = jax.scipy.linalg.solve_triangular(chol, to - frm.position - drift, lower=True)
    return -0.5 * jnp.sum(jnp.square(r)) / step_size**2


def build_kernel() -> Callable:
    """Returns `one_step(rng_key, state, logdensity_fn, step_size, chol) -> (MALAState, MALAInfo)`."""

    def one_step(rng_key, state: MALAState, logdensity_fn: Callable, step_size, chol):
        if chol is None:
            chol = jnp.eye(state.position.shape[0], dtype=state.position.dtype)
        k_prop, k_acc = jax.random.split(rng_key)
        noise = step_size * (chol @ jax.random.normal(k_prop, state.position.shape, state.position.dtype))
        drift = 0.5 * step_size**2 * (chol @ (chol.T @ state.logdensity_grad))
        proposal = init(state.position + drift + noise, logdensity_fn)
        delta = (proposal.logdensity - state.logdensity
                 + _log_proposal(state.position, proposal, step_size, chol)
                 - _log_proposal(proposal.position, state, step_size, chol))
        new, accept_prob, accepted = _accept_reject(k_acc, delta, proposal, state)
        return new, MALAInfo(accept_prob, accepted)

    return one_step


def mala(logdensity_fn: Callable, step_size, chol: Optional[Array] = None) -> SamplingAlgorithm:
    """A BlackJAX `SamplingAlgorithm` `(init(position), step(rng_key, state))` with its parameters bound.

    `chol` is the lower Cholesky factor of the preconditioner (identity when None).
    """
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, (), (step_size, chol))
