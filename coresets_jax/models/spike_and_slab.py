"""Sparse linear regression with spike-and-slab indicators, and its weighted conjugate Gibbs kernel, as in
the Coreset MCMC and Hot DoG experiments (`papers/coreset-mcmc.md` §4.1 and §5.9, `papers/hot-dog.md` §4.1).

    y_n | beta, sigma^2 ~ N(x_n^T beta, sigma^2)
    gamma_j ~ Bernoulli(q),   beta_j | gamma_j ~ N(0, slab^2) if gamma_j = 1 else N(0, spike^2)
    sigma^2 ~ InvGamma(nu / 2, nu lambda / 2)

with the authors' q = 0.1, spike = tau = 0.1, slab = c tau = 1, nu = 0.1, lambda = 1. theta is the flat
vector (beta (p), gamma (p), log sigma^2), so D = 2p + 1; gamma holds 0.0 or 1.0. L_n depends on beta and
sigma^2 only; the indicators enter through the prior.

The indicators are discrete, so gradient-based kernels cannot sample this posterior. `gibbs_kernel(model)`
is a `KernelSpec` for `cj.register_kernel`: one sweep draws each block from its exact conditional under the
weighted coreset posterior sum_m w_m L_m + log pi_0 (weights enter as multiplicities):

    gamma_j | beta_j:   P(gamma_j = 1) ∝ q N(beta_j; 0, slab^2),  P(gamma_j = 0) ∝ (1 - q) N(beta_j; 0, spike^2)
    beta | gamma, s2:   N(Lambda^{-1} X^T W y / s2, Lambda^{-1}),  Lambda = X^T W X / s2 + diag(1 / v(gamma))
    s2 | beta:          InvGamma(nu/2 + sum(w)/2, nu lambda/2 + sum_m w_m (y_m - x_m^T beta)^2 / 2)

The authors' Julia kernel draws gamma_j with odds q N(beta; mu_1, Sigma_1) : (1 - q) N(beta; mu_0, Sigma_0),
the conditional *posterior* densities of beta under each value, which divides the textbook conditional by a
marginal likelihood (coreset-mcmc.md §5.9). We draw the exact full conditional above instead, so the chain
targets the stated posterior.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm

from ..core import checks as _checks
from ..core.model import Model
from ..inference.kernels import KernelSpec

__all__ = ["GibbsInfo", "GibbsState", "SpikeAndSlab", "draw_coefficients", "draw_indicators", "draw_log_variance",
           "gibbs_kernel", "gibbs_sweep", "spike_and_slab"]

Array = jax.Array
_LOG_2PI = jnp.log(2.0 * jnp.pi)


class SpikeAndSlab(NamedTuple):
    """Hyperparameters: p features; inclusion probability q; spike and slab standard deviations; the
    inverse-gamma prior's nu and lambda."""

    num_features: int
    inclusion: float = 0.1
    spike: float = 0.1
    slab: float = 1.0
    nu: float = 0.1
    lam: float = 1.0


def _split(theta: Array, p: int):
    return theta[..., :p], theta[..., p:2 * p], theta[..., 2 * p]


def _normal_logpdf(x, scale):
    return -0.5 * jnp.square(x / scale) - jnp.log(scale) - 0.5 * _LOG_2PI


def _hyper(num_features, inclusion, spike, slab, nu, lam) -> SpikeAndSlab:
    hyper = SpikeAndSlab(int(num_features), float(inclusion), float(spike), float(slab), float(nu), float(lam))
    if hyper.num_features < 1:
        raise ValueError(f"num_features: must be at least 1, got {num_features}")
    if not 0 < hyper.inclusion < 1:
        raise ValueError(f"inclusion: must lie in (0, 1), got {inclusion}")
    for name in ("spike", "slab", "nu", "lam"):
        if not getattr(hyper, name) > 0:
            raise ValueError(f"{name}: must be positive, got {getattr(hyper, name)}")
    return hyper


def spike_and_slab(num_features: int, inclusion: float = 0.1, spike: float = 0.1, slab: float = 1.0,
                   nu: float = 0.1, lam: float = 1.0) -> Model:
    """The model above on data (X, y), X of shape (N, p); theta = (beta, gamma, log sigma^2). Sample it with
    `gibbs_kernel` called with the same hyperparameters."""
    hyper = _hyper(num_features, inclusion, spike, slab, nu, lam)
    p = hyper.num_features
    a0, b0 = hyper.nu / 2.0, hyper.nu * hyper.lam / 2.0

    def log_likelihood(theta, datum):
        x, y = datum
        beta, _, log_s2 = _split(theta, p)
        return -0.5 * (_LOG_2PI + log_s2 + jnp.square(y - jnp.dot(x, beta)) / jnp.exp(log_s2))

    def log_prior(theta):
        beta, gamma, log_s2 = _split(theta, p)
        variance = gamma * hyper.slab ** 2 + (1.0 - gamma) * hyper.spike ** 2
        log_beta = -0.5 * (_LOG_2PI + jnp.log(variance) + jnp.square(beta) / variance)
        log_gamma = gamma * jnp.log(hyper.inclusion) + (1.0 - gamma) * jnp.log1p(-hyper.inclusion)
        # InvGamma(a0, b0) on s2, plus log s2 for the change of variable to log s2.
        log_s2_prior = a0 * jnp.log(b0) - jax.scipy.special.gammaln(a0) - a0 * log_s2 - b0 * jnp.exp(-log_s2)
        return jnp.sum(log_beta) + jnp.sum(log_gamma) + log_s2_prior

    def init_params(data):
        X, y = data
        dtype = jnp.result_type(X, jnp.float32)
        return jnp.concatenate([jnp.zeros(p, dtype), jnp.ones(p, dtype), jnp.log(jnp.var(y) + 1e-6)[None]])

    model = Model(log_likelihood=log_likelihood, log_prior=log_prior, init_params=init_params,
                  name="spike_and_slab", dim=2 * p + 1)
    return _checks.register(model, _checks.DataSpec("xy", "real", dim=2 * p + 1))


class GibbsState(NamedTuple):
    """position: theta; logdensity: the weighted log posterior there (what the driver reads)."""

    position: Array
    logdensity: Array


class GibbsInfo(NamedTuple):
    acceptance_rate: Array


def draw_indicators(key: Array, beta: Array, hyper: SpikeAndSlab) -> Array:
    """gamma | beta: independent Bernoulli draws with log odds log(q / (1 - q)) + log N(beta_j; 0, slab^2)
    - log N(beta_j; 0, spike^2) (the likelihood does not involve gamma)."""
    log_odds = (jnp.log(hyper.inclusion) - jnp.log1p(-hyper.inclusion)
                + _normal_logpdf(beta, hyper.slab) - _normal_logpdf(beta, hyper.spike))
    return jax.random.bernoulli(key, jax.nn.sigmoid(log_odds)).astype(beta.dtype)


def draw_coefficients(key: Array, gamma: Array, s2: Array, X: Array, y: Array, w: Array,
                      hyper: SpikeAndSlab) -> Array:
    """beta | gamma, s2 ~ N(Lambda^{-1} X^T W y / s2, Lambda^{-1}), Lambda = X^T W X / s2 + diag(1 / v(gamma))."""
    variance = gamma * hyper.slab ** 2 + (1.0 - gamma) * hyper.spike ** 2
    precision = (X.T * w) @ X / s2 + jnp.diag(1.0 / variance)
    chol = jnp.linalg.cholesky(precision)
    mean = jax.scipy.linalg.cho_solve((chol, True), (X.T @ (w * y)) / s2)
    z = jax.random.normal(key, gamma.shape, gamma.dtype)
    return mean + jax.scipy.linalg.solve_triangular(chol.T, z, lower=False)


def draw_log_variance(key: Array, beta: Array, X: Array, y: Array, w: Array, hyper: SpikeAndSlab) -> Array:
    """log s2 with s2 | beta ~ InvGamma(nu/2 + sum(w)/2, nu lambda/2 + sum_m w_m (y_m - x_m^T beta)^2 / 2)."""
    shape = hyper.nu / 2.0 + jnp.sum(w) / 2.0
    rate = hyper.nu * hyper.lam / 2.0 + 0.5 * jnp.sum(w * jnp.square(y - X @ beta))
    return jnp.log(rate) - jnp.log(jax.random.gamma(key, shape, dtype=beta.dtype))


def gibbs_sweep(key: Array, theta: Array, X: Array, y: Array, w: Array, hyper: SpikeAndSlab) -> Array:
    """One sweep gamma | beta, then beta | gamma, s2, then s2 | beta (module docstring), under the
    weighted likelihood with weights w (M,)."""
    beta, _, log_s2 = _split(theta, hyper.num_features)
    k_gamma, k_beta, k_s2 = jax.random.split(key, 3)
    gamma = draw_indicators(k_gamma, beta, hyper)
    beta = draw_coefficients(k_beta, gamma, jnp.exp(log_s2), X, y, w, hyper)
    log_s2 = draw_log_variance(k_s2, beta, X, y, w, hyper)
    return jnp.concatenate([beta, gamma, log_s2[None]])


def gibbs_kernel(num_features: int, inclusion: float = 0.1, spike: float = 0.1, slab: float = 1.0,
                 nu: float = 0.1, lam: float = 1.0) -> KernelSpec:
    """The Gibbs sampler as a `KernelSpec`: `cj.register_kernel("spike_and_slab_gibbs", gibbs_kernel(p))`
    makes it available to `cj.sample(method=...)` and to the posterior-driven constructions (`kernel=`).

    It reads the rows and weights off the weighted density it is given (`core.WeightedLogDensity`), so it
    samples whichever coreset posterior the caller builds. It has nothing to tune (precond "none")."""
    hyper = _hyper(num_features, inclusion, spike, slab, nu, lam)

    def build(logdensity_fn, tuning, settings) -> SamplingAlgorithm:
        X, y = logdensity_fn.rows

        def init(position):
            return GibbsState(position, logdensity_fn(position))

        def step(key, state):
            w = logdensity_fn.row_weights(state.position.dtype)
            theta = gibbs_sweep(key, state.position, X.astype(state.position.dtype),
                                y.astype(state.position.dtype), w, hyper)
            return GibbsState(theta, logdensity_fn(theta)), GibbsInfo(jnp.ones((), state.position.dtype))

        return SamplingAlgorithm(init, step)

    return KernelSpec(build, {}, "none", lambda info: jnp.asarray(0, jnp.int32), adapts_step_size=False,
                      scale_setting=None,
                      density_evals=lambda info: jnp.asarray(1, jnp.int32))
