"""Stochastic-gradient MCMC on the full data with control variates: the subsampling baselines of Coreset MCMC
(coreset-mcmc.md §4.2: SGLD and SGHMC, minibatch 500, control variates at a mode).

The kernels are BlackJAX's (`blackjax.sgld`, `blackjax.sghmc`). Their gradient estimator is ours:
BlackJAX's `grad_estimator` scales a minibatch mean by N (uniform weights), and its `control_variates`
re-evaluates the anchor's full gradient from a uniform estimator. For data weights u (a plain data set has
u = 1) and an anchor theta_0 (the Laplace mode), the estimate at theta from B rows n_b drawn with
probabilities u_n / sum(u), with replacement, is (Baker, Fearnhead, Fox & Nemeth 2019, Eq. 6)

    grad log pi(theta) ~ grad log p0(theta) + G_0 + (sum(u) / B) sum_b [grad L_{n_b}(theta) - grad L_{n_b}(theta_0)],

with G_0 = sum_n u_n grad L_n(theta_0) from one O(N D) pass. It is unbiased for any anchor, and its variance
is O(|theta - theta_0|^2) instead of O(N^2 / B).

Step sizes (ours, so the baseline needs no hand tuning): with lambda the largest eigenvalue of the Laplace
precision at the anchor, SGLD uses h = `step_scale` / lambda (`step_scale` = 0.1: the Euler step is stable
below 2 / lambda); SGHMC (unit mass) uses h = `step_scale` / sqrt(lambda) (0.1) with L =
`num_integration_steps` Euler steps and friction alpha = 1 / (L h), so momentum is refreshed about once per
trajectory. BlackJAX's SGHMC step is explicit Euler (the gradient at the old position), which inflates the
variance: on a Gaussian, by 5% at 0.1, 14% at 0.2 and 2.5x at 0.5 (measured for tests/test_sgmcmc.py).

Cost: each step evaluates 2 B per-row gradients (at theta and at the anchor) per integration step; the
result's `gradient_evaluations` counts them, plus N for the anchor pass.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple, Optional

import blackjax
import jax
import jax.numpy as jnp
import numpy as np

from ..core import Model, take_data, weighted_sum, log_likelihoods
from ..core.rows import unit_weights
from ..posterior_driven.common import check_count, check_positive, subsampler

__all__ = ["SGMCMCResult", "cv_grad_estimator", "sgmcmc"]

METHODS = ("sgld", "sghmc")


class SGMCMCResult(NamedTuple):
    """samples: (num_chains, num_samples, D); gradient_evaluations: per-row gradient evaluations in total
    (anchor pass included); step_size; wall_time: seconds, compilation included when it happened."""

    samples: Any
    gradient_evaluations: int
    step_size: float
    wall_time: float


def cv_grad_estimator(model: Model, data: Any, anchor: jax.Array, data_weights: Optional[jax.Array] = None):
    """`(grad_fn, draw)`: `grad_fn(theta, minibatch)` is the control-variate estimate of grad log pi(theta)
    (module docstring), `draw(key)` a minibatch `(indices, row_weights)` for it; build with the batch size
    via `draw = draw_for(batch_size)`. Returns `(grad_fn, draw_for)`."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    u = unit_weights(n, anchor.dtype) if data_weights is None else jnp.asarray(data_weights, anchor.dtype)
    total = jax.grad(lambda th: weighted_sum(u, log_likelihoods(model, th, data)))(anchor)
    row_grad = jax.vmap(jax.grad(model.log_likelihood), in_axes=(None, 0))

    def grad_fn(theta, minibatch):
        idx, row_weights = minibatch
        rows = take_data(data, idx)
        diff = row_grad(theta, rows) - row_grad(anchor, rows)                    # (B, D)
        return jax.grad(model.log_prior)(theta) + total + row_weights @ diff

    def draw_for(batch_size: int):
        return subsampler(u, batch_size, anchor.dtype)

    return grad_fn, draw_for


def sgmcmc(model: Model, data: Any, key: jax.Array, method: str = "sgld", *, num_samples: int = 1000,
           num_warmup: int = 1000, num_chains: int = 2, batch_size: int = 500, step_scale: Optional[float] = None,
           num_integration_steps: int = 10, anchor: Any = None) -> SGMCMCResult:
    """SGLD or SGHMC on the full data with control variates (module docstring).

    Args:
      model, data: the model and its data.
      key: PRNG key.
      method: "sgld" | "sghmc".
      num_samples, num_warmup: kept steps and burn-in steps per chain.
      num_chains: chains started at the anchor plus a Laplace draw.
      batch_size: B rows per gradient estimate (the authors' 500).
      step_scale: the step size in units of the posterior's smallest scale (default 0.1).
      num_integration_steps: SGHMC's L.
      anchor: a `cj.laplace` result to reuse (its mean is the control variate's anchor); default: fitted here.
    """
    from ..weighting.pihat import laplace

    if method not in METHODS:
        raise ValueError(f"method: unknown value {method!r}; expected one of {list(METHODS)}")
    for name, value in (("num_samples", num_samples), ("num_chains", num_chains), ("batch_size", batch_size),
                        ("num_integration_steps", num_integration_steps)):
        check_count(value, name)
    check_count(num_warmup, "num_warmup", 0)
    step_scale = check_positive(0.1 if step_scale is None else step_scale, "step_scale")
    start = time.perf_counter()
    fit = laplace(model, data, key=key) if anchor is None else anchor
    mean = jnp.asarray(fit.mean, jnp.float32)
    cov = jnp.asarray(fit.cov, jnp.float32)
    lam = float(np.max(np.linalg.eigvalsh(np.linalg.inv(np.asarray(cov, np.float64)))))
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    grad_fn, draw_for = cv_grad_estimator(model, data, mean)
    draw = draw_for(batch_size)
    if method == "sgld":
        h = step_scale / lam
        kernel = blackjax.sgld(grad_fn)
        step = lambda k, x, mb: kernel.step(k, x, mb, h)  # noqa: E731
        per_step = 2 * batch_size
    else:
        h = step_scale / np.sqrt(lam)
        kernel = blackjax.sghmc(grad_fn, num_integration_steps=num_integration_steps,
                                alpha=1.0 / (num_integration_steps * h))
        step = lambda k, x, mb: kernel.step(k, x, mb, h)  # noqa: E731
        per_step = 2 * batch_size * num_integration_steps

    @jax.jit
    def run(key):
        k_init, k_chains = jax.random.split(key)
        chol = jnp.linalg.cholesky(cov)
        x0 = mean + jax.random.normal(k_init, (num_chains, mean.shape[0])) @ chol.T

        def chain(x, key):
            def one(x, k):
                k_mb, k_step = jax.random.split(k)
                x = step(k_step, x, draw(k_mb))
                return x, x

            _, xs = jax.lax.scan(one, x, jax.random.split(key, num_warmup + num_samples))
            return xs[num_warmup:]

        return jax.vmap(chain)(x0, jax.random.split(k_chains, num_chains))

    samples = jax.block_until_ready(run(key))
    evaluations = n + num_chains * (num_warmup + num_samples) * per_step
    return SGMCMCResult(samples, int(evaluations), float(h), time.perf_counter() - start)
