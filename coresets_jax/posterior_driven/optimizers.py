"""Weight optimisers and the stationarity statistic of the posterior-driven methods, each a small pure
function.

- `hot_dog(r)`: the Hot DoG step of Chen, Huggins & Campbell (`papers/hot-dog.md` §2.2, Eqs. H2-H4), an
  optax `GradientTransformation` whose `update` needs the params (distances are measured from w_0).
- `dog_cumulative(r)`: our earlier coordinate-wise DoG over the cumulative sum of g^2, kept as a named
  option for the comparison in `benchmarks/models.py`.
- `stationarity_statistic(trace, length)`: the hot-start test statistic (H1) of hot-dog.md §2.1.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

__all__ = ["DoGCumulativeState", "HotDoGState", "dog_cumulative", "hot_dog", "stationarity_statistic"]

Array = jax.Array


class HotDoGState(NamedTuple):
    """count: t, the optimiser calls so far; initial: w_0; mu, nu: the first and second moment averages
    (m_t, v_t); distance: rho_t, the smoothed running maximum of |w - w_0| per coordinate."""

    count: Array
    initial: Array
    mu: Array
    nu: Array
    distance: Array


def hot_dog(r: float = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> optax.GradientTransformation:
    """Hot DoG (hot-dog.md §2.2), element-wise over the weights, at step t = 1, 2, ...:

        m_t = b1 m_{t-1} + (1 - b1) g_t,   v_t = b2 v_{t-1} + (1 - b2) g_t^2                     (H2)
        m^_t = m_t / (1 - b1^t),           v^_t = v_t / (1 - b2^t)
        rho_1 = 0;  rho_t = b1 rho_{t-1} + (1 - b1) max(|w_{t-1} - w_0|, rho_{t-1})  (t >= 2)      (H3)
        d_1 = r;    d_t = rho_t / (1 - b1^t)                                        (t >= 2)
        w_t = w_{t-1} - d_t / (sqrt(t v^_t) + eps) m^_t                                           (H4)

    (the caller projects w_t onto w >= 0). The first step moves every weight by about r; the step then
    grows with the distance the weights have travelled. r = 0.001 is the paper's setting (Fig. 1).
    """

    def init(params):
        zeros = jnp.zeros_like(params)
        return HotDoGState(jnp.zeros((), jnp.int32), params, zeros, zeros, zeros)

    def update(grads, state, params):
        t = state.count + 1
        tf = t.astype(grads.dtype)
        mu = b1 * state.mu + (1.0 - b1) * grads
        nu = b2 * state.nu + (1.0 - b2) * jnp.square(grads)
        mu_hat = mu / (1.0 - b1 ** tf)
        nu_hat = nu / (1.0 - b2 ** tf)
        later = b1 * state.distance + (1.0 - b1) * jnp.maximum(jnp.abs(params - state.initial), state.distance)
        distance = jnp.where(t == 1, state.distance, later)
        d = jnp.where(t == 1, jnp.asarray(r, grads.dtype), distance / (1.0 - b1 ** tf))
        step = d / (jnp.sqrt(tf * nu_hat) + eps)
        return -step * mu_hat, HotDoGState(t, state.initial, mu, nu, distance)

    return optax.GradientTransformation(init, update)


class DoGCumulativeState(NamedTuple):
    """initial: w_0; distance: r_t per coordinate; sum_sq: the cumulative sum of g^2."""

    initial: Array
    distance: Array
    sum_sq: Array


def dog_cumulative(r: float = 1e-3) -> optax.GradientTransformation:
    """Coordinate-wise DoG (Ivgi, Hinder & Carmon 2023) with no momentum:

        r_t = max(r (1 + |w_0|), max_{t' <= t} |w_t' - w_0|),  w_{t+1} = w_t - r_t / sqrt(sum_{t' <= t} g_t'^2) g_t
    """

    def init(params):
        return DoGCumulativeState(params, r * (1.0 + jnp.abs(params)), jnp.zeros_like(params))

    def update(grads, state, params):
        distance = jnp.maximum(state.distance, jnp.abs(params - state.initial))
        sum_sq = state.sum_sq + jnp.square(grads)
        rate = jnp.where(sum_sq > 0, distance / jnp.sqrt(jnp.where(sum_sq > 0, sum_sq, 1.0)), 0.0)
        return -rate * grads, DoGCumulativeState(state.initial, distance, sum_sq)

    return optax.GradientTransformation(init, update)


def stationarity_statistic(trace: Array, length: Array) -> Array:
    """The hot-start statistic (H1) of hot-dog.md §2.1 on the first `length` entries of `trace`.

    With n = ceil(L / 3), A = x[L - 2n : L - n] and B = x[L - n : L] (the last two thirds), fit a line
    x = a + b j by least squares in each block; with s_A, s_B the residual standard errors sqrt(RSS / (n - 2)),

        c = |mean(A) - mean(B)| / max(s_A, s_B).

    Returns inf when n <= 2 (no residual degrees of freedom) or when both blocks are exactly linear. `trace`
    is a fixed-size buffer (its entries from `length` on are ignored), so the shapes stay static.
    """
    dtype = jnp.result_type(trace.dtype, jnp.float32)
    x = trace.astype(dtype)
    length = jnp.asarray(length)
    n = (length + 2) // 3
    idx = jnp.arange(x.shape[0])
    # Centre on the last recorded value: log potentials can be ~1e4 with O(1) fluctuations.
    x = x - x[jnp.clip(length - 1, 0, x.shape[0] - 1)]

    def block(lo, hi):
        mask = (idx >= lo) & (idx < hi)
        count = jnp.maximum(jnp.sum(mask), 1).astype(dtype)
        j = idx.astype(dtype)
        xbar = jnp.sum(jnp.where(mask, x, 0.0)) / count
        jbar = jnp.sum(jnp.where(mask, j, 0.0)) / count
        dj, dx = jnp.where(mask, j - jbar, 0.0), jnp.where(mask, x - xbar, 0.0)
        sjj = jnp.sum(dj * dj)
        rss = jnp.sum(dx * dx) - jnp.where(sjj > 0, jnp.sum(dj * dx) ** 2 / jnp.where(sjj > 0, sjj, 1.0), 0.0)
        return xbar, jnp.sqrt(jnp.maximum(rss, 0.0) / jnp.maximum(count - 2.0, 1.0))

    mean_a, sd_a = block(length - 2 * n, length - n)
    mean_b, sd_b = block(length - n, length)
    scale = jnp.maximum(sd_a, sd_b)
    stat = jnp.where(scale > 0, jnp.abs(mean_a - mean_b) / jnp.where(scale > 0, scale, 1.0), jnp.inf)
    return jnp.where(n > 2, stat, jnp.inf)
