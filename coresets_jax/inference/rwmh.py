"""Gaussian random-walk Metropolis–Hastings with an adaptable proposal covariance, BlackJAX-style.

HC §7.3 runs random-walk MH with a Gaussian proposal whose covariance is adapted during warm-up towards
acceptance 0.234 (Roberts, Gelman & Gilks 1997). The proposal is theta' = theta + s L z, z ~ N(0, I), with
L the Cholesky factor of the proposal shape C and s a global scale; it is symmetric, so the acceptance
ratio is pi(theta') / pi(theta). Adaptation of (s, L) (Haario et al. 2001, in Stan's windows) lives in
`_adapt.run_warmup` and is driven by `cj.sample(method="rwmh")`.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax

from blackjax.base import SamplingAlgorithm, build_sampling_algorithm

from ._metropolis import accept_reject, gaussian_noise

__all__ = ["RWMHState", "RWMHInfo", "init", "build_kernel", "rwmh"]

Array = jax.Array


class RWMHState(NamedTuple):
    """Current position and its log density (cached: the acceptance ratio needs it every step)."""

    position: Array
    logdensity: Array


class RWMHInfo(NamedTuple):
    acceptance_rate: Array
    is_accepted: Array


def init(position: Array, logdensity_fn: Callable) -> RWMHState:
    return RWMHState(position, logdensity_fn(position))


def build_kernel() -> Callable:
    """Returns `one_step(rng_key, state, logdensity_fn, step_size, chol) -> (RWMHState, RWMHInfo)`."""

    def one_step(rng_key, state: RWMHState, logdensity_fn: Callable, step_size, chol):
        k_acc, _, noise = gaussian_noise(rng_key, state.position, step_size, chol)
        proposal = init(state.position + noise, logdensity_fn)
        delta = proposal.logdensity - state.logdensity
        new, accept_prob, accepted = accept_reject(k_acc, delta, proposal, state)
        return new, RWMHInfo(accept_prob, accepted)

    return one_step


def rwmh(logdensity_fn: Callable, step_size, chol: Optional[Array] = None) -> SamplingAlgorithm:
    """A BlackJAX `SamplingAlgorithm` `(init(position), step(rng_key, state))` with its parameters bound.

    `chol` is the lower Cholesky factor of the proposal shape (identity when None).
    """
    return build_sampling_algorithm(build_kernel(), init, logdensity_fn, (), (step_size, chol))
