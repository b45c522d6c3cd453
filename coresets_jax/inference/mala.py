"""Preconditioned Metropolis-adjusted Langevin algorithm (MALA), BlackJAX-style.

LR §4 and App. E run adaptive MALA (Roberts & Tweedie 1996; Atchadé 2006), adapting the overall step size
towards acceptance 0.574 (Roberts & Rosenthal 1998). BlackJAX's `mala` has no preconditioner and no
adaptation, so this module provides the kernel with a preconditioner C = L L^T; adaptation of (h, L)
lives in `_adapt.run_warmup` and is driven by `cj.sample(method="mala")`.

Proposal: theta' = theta + (h^2 / 2) C grad log pi(theta) + h L z, z ~ N(0, I), accepted with the
Metropolis–Hastings ratio including the asymmetric proposal densities.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from blackjax.base import SamplingAlgorithm, build_sampling_algorithm

from ._metropolis import accept_reject, gaussian_noise

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
        k_acc, chol, noise = gaussian_noise(rng_key, state.position, step_size, chol)
        drift = 0.5 * step_size**2 * (chol @ (chol.T @ state.logdensity_grad))
        proposal = init(state.position + drift + noise, logdensity_fn)
        delta = (proposal.logdensity - state.logdensity
                 + _log_proposal(state.position, proposal, step_size, chol)
                 - _log_proposal(proposal.position, state, step_size, chol))
        new, accept_prob, accepted = accept_reject(k_acc, delta, proposal, state)
        return new, MALAInfo(accept_prob, accepted)

    return one_step


def mala(logdensity_fn: Callable, step_size, chol: Optional[Array] = None) -> SamplingAlgorithm:
    """A BlackJAX `SamplingAlgorithm` `(init(position), step(rng_key, state))` with its parameters bound.

    `chol` is the lower Cholesky factor of the preconditioner (identity when None).
    """
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, (), (step_size, chol))
