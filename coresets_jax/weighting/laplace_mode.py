"""Finding the mode of a (weighted) log posterior and its curvature, for the Laplace fit of `pihat.laplace_fn`
(HC §5): damped Newton with the exact Hessian (value, gradient and Hessian in one pass), or optax's L-BFGS."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from ..core import Model, log_likelihoods, weighted_sum

__all__ = ["derivatives", "lbfgs", "newton", "objective"]

Array = jax.Array


def objective(model: Model, scale: float):
    """Negative log posterior -(scale * sum_n w_n L_n + log pi_0), with w = 1 for the plain posterior and the
    likelihood scaled by N/m when fitted on a subsample of m rows. Rows of weight 0 are masked out."""

    def neg_log_post(theta, data, weights):
        lls = log_likelihoods(model, theta, data)
        return -(scale * weighted_sum(weights, lls) + model.log_prior(theta))

    return neg_log_post


class NewtonState(NamedTuple):
    """theta with the objective's value, gradient and Hessian there (computed at the top of an iteration),
    the last relative step, the number of steps taken, and whether the loop has stopped."""

    theta: Array
    value: Array
    grad: Array
    hess: Array
    step_norm: Array
    iteration: Array
    done: Array


def derivatives(f, data, weights):
    """theta -> (value, gradient, Hessian) from one forward-over-reverse pass. One instance of it in the
    compiled program serves both the Newton steps and the final covariance (two instances of
    `jax.hessian` made the first call's compilation about twice as long)."""

    def grad_with_aux(theta):
        value, grad = jax.value_and_grad(f)(theta, data, weights)
        return grad, (value, grad)

    def at(theta):
        hess, (value, grad) = jax.jacfwd(grad_with_aux, has_aux=True)(theta)
        return value, grad, hess

    return at


def newton(f, data, weights, theta0: Array, max_iter: int, tol: float):
    """Damped Newton with backtracking (step halving until the objective decreases).

    Stops when the relative step |t d| / (1 + |theta|) falls below `tol`, or when no halving decreases the
    objective (converged to rounding), or after `max_iter` iterations. Each iteration first evaluates the
    value, gradient and Hessian at theta, then decides whether to step, so the loop ends holding them at the
    mode: (mode, value, grad, hess, iterations, converged).
    """
    at = derivatives(f, data, weights)

    def newton_step(s: NewtonState, value, grad, hess):
        d = -jnp.linalg.solve(hess, grad)
        # Fall back to steepest descent where the Hessian is not positive definite along d.
        ok = jnp.all(jnp.isfinite(d)) & (jnp.dot(d, grad) < 0)
        d = jnp.where(ok, d, -grad)

        def halve(carry):
            t, _ = carry
            return t * 0.5, f(s.theta + t * 0.5 * d, data, weights)

        def not_better(carry):
            t, v = carry
            return (~(v < value)) & (t > 1e-10)

        t, v = jax.lax.while_loop(not_better, halve,
                                  (jnp.asarray(1.0, d.dtype), f(s.theta + d, data, weights)))
        accepted = v < value  # no strict decrease means converged to rounding
        theta = jnp.where(accepted, s.theta + t * d, s.theta)
        step = jnp.where(accepted, t * jnp.linalg.norm(d) / (1.0 + jnp.linalg.norm(s.theta)), 0.0)
        return theta, step.astype(s.step_norm.dtype), s.iteration + 1

    def body(s: NewtonState):
        value, grad, hess = at(s.theta)
        stop = (s.iteration >= max_iter) | (s.step_norm <= tol) | ~jnp.isfinite(value)
        theta, step, iteration = jax.lax.cond(
            stop, lambda: (s.theta, s.step_norm, s.iteration), lambda: newton_step(s, value, grad, hess))
        return NewtonState(theta, value, grad, hess, step, iteration, stop)

    # Run in the objective's dtype where it is wider than theta0's: with x64 on, float32 data and a float32
    # start, a model whose constants are float64 (NumPyro's, under x64) returns float64 values.
    theta0 = theta0.astype(jnp.promote_types(theta0.dtype, jax.eval_shape(f, theta0, data, weights).dtype))
    d = theta0.shape[0]
    nan = jnp.asarray(jnp.nan, theta0.dtype)
    init = NewtonState(theta0, nan, jnp.full((d,), nan), jnp.full((d, d), nan),
                        jnp.asarray(jnp.inf, theta0.dtype), jnp.asarray(0), jnp.asarray(False))
    final = jax.lax.while_loop(lambda s: ~s.done, body, init)
    converged = (final.step_norm <= tol) & jnp.isfinite(final.value)
    return final.theta, final.value, final.grad, final.hess, final.iteration, converged


def lbfgs(f, data, weights, theta0: Array, max_iter: int, tol: float, learning_rate):
    """L-BFGS from optax (with its zoom line search) until the gradient norm is below tol (1 + |f|)."""
    fixed = lambda theta: f(theta, data, weights)
    opt = optax.lbfgs(learning_rate=learning_rate)
    value_and_grad = optax.value_and_grad_from_state(fixed)

    def small(value, grad):
        return jnp.linalg.norm(grad) <= tol * (1.0 + jnp.abs(value))

    def cond(carry):
        theta, state, i, done = carry
        return (i < max_iter) & ~done

    def body(carry):
        theta, state, i, _ = carry
        value, grad = value_and_grad(theta, state=state)
        updates, state = opt.update(grad, state, theta, value=value, grad=grad, value_fn=fixed)
        return optax.apply_updates(theta, updates), state, i + 1, small(value, grad)

    theta, _, iterations, _ = jax.lax.while_loop(
        cond, body, (theta0, opt.init(theta0), jnp.asarray(0), jnp.asarray(False)))
    value, grad = jax.value_and_grad(fixed)(theta)
    return theta, iterations, small(value, grad) & jnp.isfinite(value)
