"""Directional clustering: the von Mises–Fisher mixture of HC §7.1 (Eqs. 7.3–7.7).

x_n on the unit sphere S^{D-1}; K components with modes mu_k (unit vectors), weights omega on the simplex,
and a fixed concentration tau (HC: K = 6, tau = 50):

    f_vMF(x; mu, tau) = C_D(tau) exp(tau x^T mu),  C_D(tau) = tau^{D/2-1} / ((2 pi)^{D/2} I_{D/2-1}(tau))  (7.3)
    mu_k ~ Unif(S^{D-1}),  omega ~ Dir(1, ..., 1)                                                      (7.4)
    x_n ~ sum_k omega_k vMF(mu_k, tau)                                                                 (7.5)

The flat parameter vector is theta = [mu_1, ..., mu_K, omega] of length K D + K (`pack`/`unpack`).

Pieces:
- `log_bessel_iv` and `log_vmf_normalizer`: log I_v(x) and log C_D(tau) in log space, finite for any
  tau > 0 (a log-space power series below a switch point, the large-argument expansion above it).
- `sample_vmf`: Wood's (1994) rejection sampler (exact inverse CDF for D = 3).
- `vmf_mixture`: the `cj.Model` (log-likelihood of Eq. 7.5; the uniform priors of Eq. 7.4 are constant).

Inference for this model (EM, the pi_hat of Eq. 7.6, the weighted Gibbs sampler of Eq. 7.7) is in
`models/vmf_inference.py`.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, logsumexp

from ..core.model import Model

__all__ = ["VMFParams", "log_bessel_iv", "log_vmf_density", "log_vmf_normalizer", "pack", "sample_vmf", "unpack",
           "vmf_mixture"]

Array = jax.Array


# --------------------------------------------------------------------------------------------------------
# The normaliser of Eq. 7.3 in log space.


def _switch_point(v: float) -> float:
    # The large-argument expansion has relative error below float64 eps for x >= max(60, 2 v^2) with
    # 10 terms; the power series needs about x/2 + a few dozen terms below that point.
    return max(60.0, 2.0 * v * v)


def log_bessel_iv(v: float, x: Array) -> Array:
    """log I_v(x) for a static order v >= 0 and x > 0, without overflow (HC Eq. 7.3 needs I_{D/2-1}(tau)).

    Below the switch point: log sum_k (x/2)^{2k+v} / (k! Gamma(k+v+1)) by logsumexp over enough terms.
    Above it: I_v(x) = e^x / sqrt(2 pi x) sum_k (-1)^k a_k(v) / x^k, a_k = prod_{j<=k} (4v^2 - (2j-1)^2) /
    (k! 8^k) (Abramowitz & Stegun 9.7.1), whose terms are tiny there.
    """
    if v < 0:
        raise ValueError(f"v: order must be non-negative, got {v}")
    x = jnp.asarray(x)
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    switch = _switch_point(float(v))
    terms = int(math.ceil(switch / 2.0 + 8.0 * math.sqrt(switch) + 40))
    k = jnp.arange(terms, dtype=x.dtype)
    small = jnp.minimum(x, switch)  # keeps the unused branch finite
    log_series = logsumexp((2.0 * k + v) * jnp.log(small[..., None] / 2.0)
                           - gammaln(k + 1.0) - gammaln(k + v + 1.0), axis=-1)
    large = jnp.maximum(x, switch)
    mu = 4.0 * v * v
    total, term = jnp.ones_like(large), jnp.ones_like(large)
    for j in range(1, 11):
        term = -term * (mu - (2.0 * j - 1.0) ** 2) / (j * 8.0 * large)
        total = total + term
    log_asym = large - 0.5 * jnp.log(2.0 * jnp.pi * large) + jnp.log(total)
    return jnp.where(x < switch, log_series, log_asym)


def log_vmf_normalizer(tau: Array, dim: int) -> Array:
    """log C_D(tau) of HC Eq. 7.3, finite for every tau > 0 and dim >= 2."""
    if dim < 2:
        raise ValueError(f"dim: the sphere S^(D-1) needs D >= 2, got {dim}")
    v = dim / 2.0 - 1.0
    tau = jnp.asarray(tau)
    return v * jnp.log(tau) - (dim / 2.0) * jnp.log(2.0 * jnp.pi) - log_bessel_iv(v, tau)


def log_vmf_density(x: Array, mu: Array, tau: Array) -> Array:
    """log f_vMF(x; mu, tau), HC Eq. 7.3 (x and mu unit vectors of length D on the last axis)."""
    return log_vmf_normalizer(tau, x.shape[-1]) + tau * jnp.sum(x * mu, -1)


# --------------------------------------------------------------------------------------------------------
# Sampling vMF(mu, kappa) (Wood 1994), used by pi_hat (Eq. 7.6) and by the Gibbs sampler.


def _householder_from_e1(v: Array, mu: Array) -> Array:
    """Map v (expressed relative to e_1) to the frame where e_1 goes to mu (a reflection)."""
    e1 = jnp.zeros_like(mu).at[0].set(1.0)
    u = e1 - mu
    nu = jnp.sum(u * u)
    safe = nu > 1e-20
    u = u / jnp.sqrt(jnp.where(safe, nu, 1.0))
    reflected = v - 2.0 * jnp.dot(u, v) * u
    return jnp.where(safe, reflected, v)


def _sample_w(key: Array, kappa: Array, dim: int) -> Array:
    """The cosine w = x^T mu of one vMF draw: exact inverse CDF for D = 3, Wood's rejection otherwise."""
    kappa = jnp.maximum(kappa, 1e-8)
    if dim == 3:
        u = jax.random.uniform(key, (), kappa.dtype, minval=1e-12, maxval=1.0)
        # w = 1 + log(u + (1 - u) e^{-2 kappa}) / kappa, written with logaddexp for large kappa.
        return 1.0 + jnp.logaddexp(jnp.log(u), jnp.log1p(-u) - 2.0 * kappa) / kappa
    m = dim - 1.0
    b = m / (2.0 * kappa + jnp.sqrt(4.0 * kappa**2 + m**2))  # = (-2k + sqrt(4k^2 + m^2)) / m, stably
    x0 = (1.0 - b) / (1.0 + b)
    c = kappa * x0 + m * jnp.log1p(-x0 * x0)

    def propose(state):
        key, _, _ = state
        key, kz, ku = jax.random.split(key, 3)
        z = jax.random.beta(kz, m / 2.0, m / 2.0, dtype=kappa.dtype)
        w = (1.0 - (1.0 + b) * z) / (1.0 - (1.0 - b) * z)
        u = jax.random.uniform(ku, (), kappa.dtype, minval=1e-12, maxval=1.0)
        accept = kappa * w + m * jnp.log1p(-x0 * w) - c >= jnp.log(u)
        return key, w, accept

    _, w, _ = jax.lax.while_loop(lambda s: jnp.logical_not(s[2]), propose,
                                 (key, jnp.zeros((), kappa.dtype), jnp.asarray(False)))
    return w


def sample_vmf(key: Array, mu: Array, kappa: Array) -> Array:
    """One draw from vMF(mu, kappa) on S^{D-1} (Wood 1994); vmap it for many."""
    dim = mu.shape[-1]
    kw, kv = jax.random.split(key)
    w = jnp.clip(_sample_w(kw, jnp.asarray(kappa, mu.dtype), dim), -1.0, 1.0)
    tangent = jax.random.normal(kv, (dim - 1,), mu.dtype)
    tangent = tangent / jnp.linalg.norm(tangent)
    v = jnp.concatenate([w[None], jnp.sqrt(jnp.maximum(1.0 - w * w, 0.0)) * tangent])
    return _householder_from_e1(v, mu)


# --------------------------------------------------------------------------------------------------------
# The model.


class VMFParams(NamedTuple):
    """Modes (K, D), unit rows, and mixture weights (K,)."""

    mu: Array
    omega: Array


def pack(params: VMFParams) -> Array:
    """theta = [mu_1, ..., mu_K, omega], shape (K D + K,)."""
    return jnp.concatenate([params.mu.reshape(params.mu.shape[:-2] + (-1,)), params.omega], axis=-1)


def unpack(theta: Array, num_components: int, dim: int) -> VMFParams:
    kd = num_components * dim
    return VMFParams(theta[..., :kd].reshape(theta.shape[:-1] + (num_components, dim)), theta[..., kd:])


@functools.lru_cache(maxsize=64)
def _log_normalizer_constant(tau: float, dim: int) -> float:
    """log C_D(tau) for a fixed Python tau, evaluated once outside any trace (the series would otherwise be
    traced into, and constant-folded by, every compiled likelihood)."""
    with jax.ensure_compile_time_eval():
        return float(log_vmf_normalizer(jnp.asarray(tau), dim))


def component_logits(x: Array, params: VMFParams, tau) -> Array:
    """log omega_k + log f_vMF(x_n; mu_k, tau), shape (..., K)."""
    log_c = (_log_normalizer_constant(float(tau), x.shape[-1]) if isinstance(tau, (int, float))
             else log_vmf_normalizer(tau, x.shape[-1]))
    return jnp.log(jnp.maximum(params.omega, 1e-30)) + log_c + tau * x @ jnp.swapaxes(params.mu, -1, -2)


def vmf_mixture(num_components: int = 6, dim: int = 3, tau: float = 50.0) -> Model:
    """The vMF mixture of HC Eqs. 7.3–7.5 as a `Model` on data (N, D) of unit vectors.

    L_n(theta) = log sum_k omega_k f_vMF(x_n; mu_k, tau). The priors of Eq. 7.4 are uniform (constant log
    density on the sphere and the simplex). Gradients (Fisher projection) are taken in the ambient
    coordinates of theta.
    """
    if num_components < 1:
        raise ValueError(f"num_components: must be at least 1, got {num_components}")
    if dim < 2:
        raise ValueError(f"dim: must be at least 2, got {dim}")
    if not tau > 0:
        raise ValueError(f"tau: must be positive, got {tau}")

    def log_likelihood(theta, x):
        return logsumexp(component_logits(x, unpack(theta, num_components, dim), tau))

    def log_prior(theta):
        # Unif(S^{D-1})^K x Dir(1): log density -K log|S^{D-1}| + log Gamma(K).
        log_area = math.log(2.0) + (dim / 2.0) * math.log(math.pi) - math.lgamma(dim / 2.0)
        return jnp.asarray(-num_components * log_area + math.lgamma(num_components), theta.dtype)

    def sample_prior(key, num, data=None):
        km, kw = jax.random.split(key)
        mu = jax.random.normal(km, (num, num_components, dim))
        mu = mu / jnp.linalg.norm(mu, axis=-1, keepdims=True)
        omega = jax.random.dirichlet(kw, jnp.ones(num_components), (num,))
        return pack(VMFParams(mu, omega))

    return Model(log_likelihood=log_likelihood, log_prior=log_prior, sample_prior=sample_prior,
                 name=f"vmf_mixture_K{num_components}_D{dim}", dim=num_components * dim + num_components)
