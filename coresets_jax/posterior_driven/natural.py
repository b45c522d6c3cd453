"""The natural-gradient preconditioner of Coreset MCMC's "newton" step (ours): (F + tau I)^{-1} with
F = Cov_{pi_w}(L), the Fisher information of the exponential family {pi_w}, estimated on a window of recent
chain states. Near an exact coreset F is the Hessian of KL(pi_w || pi) (quasi-newton-coresets.md, Q3),
so F^{-1} g is the quasi-Newton direction of Naik et al. with the covariance over recent chain states
instead of fresh samples."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Preconditioner", "effective_dimension", "empty_preconditioner", "natural_direction", "natural_step", "newton_step",
           "push_history", "refresh_preconditioner", "window_gradient"]

Array = jax.Array
CAPPED_GAIN = 0.02        # the moving average of trust-region caps spans ~50 iterations


class Preconditioner(NamedTuple):
    """The natural-gradient preconditioner (F + tau I)^{-1}, F = Cov_{pi_w}(L), from recent chain states.

    history: (R, M) coreset log-likelihoods of the last R chain states (a ring; `filled` of them valid);
    targets: (R,) their full-data log-likelihood estimates T; basis: (R, M) Phi, the centred rows over
    sqrt(R - 1), so F ~ Phi^T Phi; centred_targets: (R,) T centred the same way; chol: Cholesky factor of
    Phi Phi^T + ridge I (R x R); ridge: tau times the mean of F's diagonal."""

    history: Array
    targets: Array
    filled: Array
    basis: Array
    centred_targets: Array
    chol: Array
    ridge: Array


def empty_preconditioner(rows: int, size: int, dtype) -> Preconditioner:
    """No recorded states yet: a window of `rows` states of `size` coreset log-likelihoods."""
    return Preconditioner(jnp.zeros((rows, size), dtype), jnp.zeros(rows, dtype), jnp.asarray(0),
                          jnp.zeros((rows, size), dtype), jnp.zeros(rows, dtype), jnp.eye(rows, dtype=dtype),
                          jnp.asarray(1.0, dtype))


def push_history(pre: Preconditioner, coreset_lls: Array, targets: Array) -> Preconditioner:
    """Record the (K, M) coreset log-likelihoods and (K,) full-data estimates of the chain states."""
    rows = pre.history.shape[0]
    slots = (pre.filled + jnp.arange(coreset_lls.shape[0])) % rows
    return pre._replace(history=pre.history.at[slots].set(coreset_lls.astype(pre.history.dtype)),
                        targets=pre.targets.at[slots].set(targets.astype(pre.targets.dtype)),
                        filled=pre.filled + coreset_lls.shape[0])


def refresh_preconditioner(pre: Preconditioner, live: Array, weights: Array, tau: float) -> Preconditioner:
    """Factor Phi Phi^T + ridge I from the recorded states, ridge = tau * mean_m F_mm (relative, as
    quasi-Newton coresets' tau: one default for every likelihood scale).

    Two-metric projection (Bertsekas 1982): a weight at 0 whose window gradient points outwards (g_m > 0)
    is held at 0 and left out of the Newton system until the next refresh; clipping a full Newton step
    instead can stall at a point that is not the constrained optimum."""
    rows = pre.history.shape[0]
    n = jnp.minimum(pre.filled, rows)
    in_window = jnp.arange(rows) < n
    nf = jnp.maximum(n, 2).astype(pre.history.dtype)
    mean = jnp.sum(jnp.where(in_window[:, None], pre.history, 0.0), axis=0) / nf
    centred = jnp.where(in_window[:, None] & live[None, :], pre.history - mean, 0.0) / jnp.sqrt(nf - 1.0)
    target_mean = jnp.sum(jnp.where(in_window, pre.targets, 0.0)) / nf
    centred_targets = jnp.where(in_window, pre.targets - target_mean, 0.0) / jnp.sqrt(nf - 1.0)
    grad = centred.T @ (centred @ jnp.where(weights > 0, weights, 0.0) - centred_targets)
    free = live & ((weights > 0) | (grad < 0))
    basis = jnp.where(free[None, :], centred, 0.0)
    gram = basis @ basis.T
    ridge = tau * jnp.trace(gram) / jnp.maximum(jnp.sum(free), 1) + jnp.finfo(gram.dtype).tiny
    chol = jnp.linalg.cholesky(gram + ridge * jnp.eye(rows, dtype=gram.dtype))
    return pre._replace(basis=basis, centred_targets=centred_targets, chol=chol, ridge=ridge)


def effective_dimension(pre: Preconditioner) -> Array:
    """sum_i lambda_i / (lambda_i + ridge) over the eigenvalues of F's window estimate: the number of
    directions in which the window's samples pin the weights down (for `info`; R^3 work, so once)."""
    eig = jnp.maximum(jnp.linalg.eigvalsh(pre.basis @ pre.basis.T), 0.0)
    return jnp.sum(eig / (eig + pre.ridge))


def window_gradient(pre: Preconditioner, weights: Array) -> Array:
    """The KL gradient -Cov(L, T - w.L) over the recorded window, at the current w: Phi^T (Phi w - t).

    It averages R chain states instead of K, and it has no component along directions in which the
    window's L do not vary (there F has no information, and a single-iteration gradient would be pure
    noise that F^{-1} amplifies)."""
    return pre.basis.T @ (pre.basis @ jnp.where(weights > 0, weights, 0.0) - pre.centred_targets)


def natural_direction(pre: Preconditioner, grad: Array) -> Array:
    """(Phi^T Phi + ridge I)^{-1} g by Woodbury: (g - Phi^T (Phi Phi^T + ridge I)^{-1} Phi g) / ridge.

    F = Cov_{pi_w}(L) is the Fisher information of the exponential family {pi_w} and, near an exact
    coreset, the Hessian of KL(pi_w || pi) (quasi-newton-coresets.md, Q3), so F^{-1} g is the quasi-Newton
    direction of Naik et al. with the covariance taken over recent chain states instead of fresh samples."""
    inner = jax.scipy.linalg.cho_solve((pre.chol, True), pre.basis @ grad)
    return (grad - pre.basis.T @ inner) / pre.ridge


def newton_step(pre: Preconditioner, coreset_lls: Array, targets: Array, weights: Array, live: Array,
                step: Array, capped: Array, *, refresh: int, tau: float, step_fraction: float,
                trust: float) -> tuple[Array, Preconditioner, Array]:
    """Record the chain states (`push_history`), then `natural_step`."""
    pre = push_history(pre, coreset_lls, targets)
    return natural_step(pre, weights, live, step, capped, refresh=refresh, tau=tau, step_fraction=step_fraction,
                        trust=trust)


def natural_step(pre: Preconditioner, weights: Array, live: Array, step: Array, capped: Array, *, refresh: int,
                 tau: float, step_fraction: float, trust: float) -> tuple[Array, Preconditioner, Array]:
    """One "newton" update of Coreset MCMC (ours; `cj.refine`) on the recorded window: refresh the
    preconditioner every `refresh` steps, and return (delta, preconditioner, capped) with

        delta = step_fraction * (F + ridge I)^{-1} g_window,  shortened so that (1/2)|Phi delta|^2 <= trust,

    the move's predicted KL change in the Fisher metric. `capped` is a moving average of whether the trust
    region shortened the step."""
    pre = jax.lax.cond(step % refresh == 0, lambda p: refresh_preconditioner(p, live, weights, tau),
                       lambda p: p, pre)
    direction = natural_direction(pre, window_gradient(pre, weights))
    direction = jnp.where(live & jnp.isfinite(direction), step_fraction * direction, 0.0)
    moved = 0.5 * jnp.sum(jnp.square(pre.basis @ direction))
    delta = direction * jnp.minimum(1.0, jnp.sqrt(trust / jnp.maximum(moved, 1e-30)))
    capped = (1.0 - CAPPED_GAIN) * capped + CAPPED_GAIN * (moved > trust).astype(capped.dtype)
    return delta, pre, capped
