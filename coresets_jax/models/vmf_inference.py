"""Inference for the von Mises–Fisher mixture of HC §7.1 (`models/vmf.py`):

- `em`: maximum-likelihood modes and weights with smoothed assignments z_nk (weighted data allowed);
- `conditional_pihat`: pi_hat as the independent conditionals of Eq. 7.6 around the EM fit;
- `gibbs`: the jitted Gibbs sampler on weighted data, Eq. 7.7 then Eq. 7.6.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from ..core import compiled
from .vmf import VMFParams, component_logits, pack, sample_vmf

__all__ = ["ConditionalPiHat", "EMResult", "GibbsSamples", "conditional_pihat", "em", "gibbs", "gibbs_core"]

Array = jax.Array


# --------------------------------------------------------------------------------------------------------
# EM and the pi_hat of Eq. 7.6.


class EMResult(NamedTuple):
    """EM fit: parameters, smoothed assignments z (N, K) and the final weighted log-likelihood."""

    params: VMFParams
    assignments: Array
    log_likelihood: Array


@compiled.jit(static_argnames=("num_components", "tau", "iterations"))
def _em(key, x, w, num_components, tau, iterations):
    n = x.shape[0]
    # Start from K distinct data points drawn with probability proportional to weight.
    start = jax.random.choice(key, n, (num_components,), replace=False, p=w / jnp.sum(w))
    params = VMFParams(x[start], jnp.full(num_components, 1.0 / num_components, x.dtype))

    def body(_, params):
        z = jax.nn.softmax(component_logits(x, params, tau), axis=-1) * w[:, None]
        xbar = z.T @ x
        norm = jnp.linalg.norm(xbar, axis=-1, keepdims=True)
        mu = jnp.where(norm > 0, xbar / jnp.maximum(norm, 1e-30), params.mu)
        return VMFParams(mu, jnp.sum(z, 0) / jnp.sum(w))

    params = jax.lax.fori_loop(0, iterations, body, params)
    logits = component_logits(x, params, tau)
    z = jax.nn.softmax(logits, axis=-1) * w[:, None]
    return EMResult(params, z, jnp.sum(w * logsumexp(logits, axis=-1)))


def em(key: Array, x: Array, weights: Array = None, num_components: int = 6, tau: float = 50.0,
       iterations: int = 100, restarts: int = 4) -> EMResult:
    """Maximum-likelihood modes and weights of the vMF mixture by EM (Banerjee et al. 2005; HC §7.3).

    E-step: z_nk = w_n omega_k f(x_n; mu_k) / sum_j omega_j f(x_n; mu_j); M-step: mu_k = xbar_k / ||xbar_k||,
    omega_k = zbar_k / sum_n w_n (tau fixed). `restarts` random starts; the best log-likelihood wins.
    """
    x = jnp.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x: expected (N, D) unit vectors, got shape {x.shape}")
    w = jnp.ones(x.shape[0], x.dtype) if weights is None else jnp.asarray(weights, x.dtype)
    fits = jax.vmap(lambda k: _em(k, x, w, num_components, float(tau), int(iterations)))(
        jax.random.split(key, restarts))
    best = jnp.argmax(fits.log_likelihood)
    return jax.tree_util.tree_map(lambda a: a[best], fits)


class ConditionalPiHat(NamedTuple):
    """pi_hat of HC Eq. 7.6: mu_k ~ vMF(xbar_k / ||xbar_k||, tau ||xbar_k||), omega ~ Dir(1 + zbar).

    `sample(key, num)` returns flat thetas (num, K D + K), usable by `cj.project`.
    """

    xbar: Array
    zbar: Array
    tau: float

    @property
    def mean_direction(self) -> Array:
        return self.xbar / jnp.linalg.norm(self.xbar, axis=-1, keepdims=True)

    def sample(self, key: Array, num: int) -> Array:
        return jax.vmap(lambda k: pack(_conditional_draw(k, self.xbar, self.zbar, self.tau)))(
            jax.random.split(key, num))


def _conditional_draw(key, xbar, zbar, tau) -> VMFParams:
    """One draw of Eq. 7.6 given sufficient statistics xbar (K, D) and zbar (K,)."""
    km, kw = jax.random.split(key)
    norm = jnp.linalg.norm(xbar, axis=-1)
    k = xbar.shape[0]
    # An empty component (xbar = 0) has the uniform prior as its conditional: kappa -> 0.
    direction = jnp.where(norm[:, None] > 0, xbar / jnp.maximum(norm, 1e-30)[:, None],
                          jnp.zeros_like(xbar).at[:, 0].set(1.0))
    mu = jax.vmap(sample_vmf)(jax.random.split(km, k), direction, tau * norm)
    omega = jax.random.dirichlet(kw, 1.0 + zbar)
    return VMFParams(mu, omega.astype(xbar.dtype))


def conditional_pihat(key: Array, x: Array, num_components: int = 6, tau: float = 50.0,
                      **em_options) -> ConditionalPiHat:
    """HC §7.3: EM for the modes and weights, then the independent conditionals of Eq. 7.6."""
    fit = em(key, x, None, num_components, tau, **em_options)
    z = fit.assignments
    return ConditionalPiHat(z.T @ jnp.asarray(x), jnp.sum(z, 0), float(tau))


# --------------------------------------------------------------------------------------------------------
# Gibbs sampling on weighted data (Eq. 7.7 then Eq. 7.6).


class GibbsSamples(NamedTuple):
    """Draws after warm-up and thinning: modes (S, K, D) and weights (S, K)."""

    mu: Array
    omega: Array


@compiled.jit(static_argnames=("tau", "num_samples", "num_warmup", "thin", "unit_counts"))
def gibbs_core(key, x, w, init_mu, init_omega, tau, num_samples, num_warmup, thin, unit_counts=False):
    """The pure core of `gibbs`: its sweep loop, no checks (vmap it over keys and weighted datasets). `unit_counts` (static):
    every w_n <= 1, so ceil(w_n) is 0 or 1 and Eq. 7.7's multinomial is one categorical draw (much faster;
    exact in that case)."""
    counts = jnp.ceil(w)
    scale = jnp.where(counts > 0, w / jnp.maximum(counts, 1.0), 0.0)

    def step(params, key):
        kz, kp = jax.random.split(key)
        logits = component_logits(x, params, tau)
        # Eq. 7.7: z_n ~ Multi(ceil(w_n), gamma_n), then z_n <- (w_n / ceil(w_n)) z_n.
        if unit_counts:
            labels = jax.random.categorical(kz, logits, axis=-1)
            z = jax.nn.one_hot(labels, logits.shape[-1], dtype=x.dtype) * (counts > 0)[:, None]
        else:
            z = jax.vmap(lambda k, n, lg: jax.random.multinomial(k, n, jax.nn.softmax(lg)))(
                jax.random.split(kz, x.shape[0]), counts, logits)
        z = z * scale[:, None]
        return _conditional_draw(kp, z.T @ x, jnp.sum(z, 0), tau)

    def warm(params, key):
        return step(params, key), None

    def keep(params, key):
        for k in jax.random.split(key, thin):
            params = step(params, k)
        return params, params

    kw, ks = jax.random.split(key)
    params = VMFParams(init_mu, init_omega)
    params, _ = jax.lax.scan(warm, params, jax.random.split(kw, num_warmup))
    _, draws = jax.lax.scan(keep, params, jax.random.split(ks, num_samples))
    return GibbsSamples(draws.mu, draws.omega)


def gibbs(key: Array, x: Array, weights: Array, init: VMFParams, tau: float = 50.0, *,
          num_samples: int = 1000, num_warmup: int = 1000, thin: int = 1) -> GibbsSamples:
    """Gibbs sampler for the vMF mixture on weighted data (HC Eq. 7.7 for the labels, Eq. 7.6 for the
    modes and weights), jitted; a row of weight 0 contributes nothing.

    Args:
      key: PRNG key.
      x: (M, D) unit vectors (the coreset rows, or the full data with weights of 1).
      weights: (M,) non-negative weights w_n.
      init: starting `VMFParams` (e.g. an EM fit, which also fixes the labelling of the components).
      tau: the fixed concentration.
      num_samples, num_warmup, thin: kept draws, discarded sweeps, and sweeps per kept draw.
    """
    x = jnp.asarray(x)
    weights = jnp.asarray(weights, x.dtype)
    if x.ndim != 2 or weights.shape != (x.shape[0],):
        raise ValueError(f"weights: expected shape ({x.shape[0]},) for x of shape {x.shape}, got "
                         f"{weights.shape}")
    if bool(jnp.any(weights < 0)):
        raise ValueError("weights: must be non-negative")
    return gibbs_core(key, x, weights, jnp.asarray(init.mu, x.dtype), jnp.asarray(init.omega, x.dtype),
                  float(tau), int(num_samples), int(num_warmup), int(thin),
                  bool(jnp.all(weights <= 1.0)))
