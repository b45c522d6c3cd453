"""The exchange step of A-IHT II's NNLS lanes (iht2's swap=True, the default; ours).

The NNLS de-bias makes A-IHT II a hard thresholding pursuit, which has fixed points: once the top k of
z_t + mu g give supp(w_t) back, the NNLS returns the same weights, so w_{t+1} = w_t, tau = 0 and every later
iteration repeats. The stop test only reports it (with tol = 0 and 300 iterations the issue 24 example below
stays at 1.1e-2 from iteration 16 on). Rows in opposite pairs (v and -v beside each other) make such fixed
points common: half of the rows the expansion of lines 3-4 offers have the wrong sign. So at a fixed point
the lane tries one exchange: the row outside the support that lowers f most on its own (argmax g_n / ||v_n||,
OMP's choice) takes the slot of the row whose removal costs least before the refit (argmin w_j ||v_j||; a
free slot first), and the NNLS refits. The exchange is kept if it lowers f by more than sqrt(eps) relative,
and the lane goes on from there with momentum; otherwise w_t is final and the lane stops. swap=False is the
previous rule (stop at the first fixed point). Measured (relative error, float64;
benchmarks/results/fidelity.json):
  - issue 24's opposite pairs (J = 300, the K = 100 rows of the target, P = 450 rows a_p beside -a_p, one
    offset row that puts sum v in the cone of the K rows; uniform(-1/2, 1/2), numpy seed 233): 1.1e-2 after
    16 iterations -> 9.6e-7 after 22 (the NNLS tolerance); the authors' NumPy A-IHT II 3.3e-6 in 52. On four
    other seeds of the same construction the authors' code ends at 0.07-0.15, the default at 0.9-1.9e-6;
  - the cone example with its weights drawn first, where every A-IHT II variant stalled: 0.10 -> 1.3e-6;
  - logistic Fisher features in float32, N = 1000 / 5000: 3.0e-3 / 7.1e-3 -> 1.2e-3 / 1.8e-3.
It costs one masked argmax over N per NNLS lane and iteration, and the iterations the exchanges buy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .base import Problem, take_rows

__all__ = ["exchange", "exchange_failed"]


def exchange(problem: Problem, indices: jax.Array, values: jax.Array, stuck: jax.Array, in_z: jax.Array,
             g: jax.Array, idx: jax.Array, val: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(indices, warm start, possible) of the exchange tried at a fixed point (`stuck`), or (idx, val)
    otherwise; (indices, values) is w_t on its k slots.

    At a fixed point z_t = w_t, so g = V (y - Phi w_t) and in_z = supp(w_t). The row outside the support
    that lowers f most on its own, argmax g_n / ||v_n|| (OMP's choice), takes the slot of the row whose
    removal costs least before the refit, argmin w_j ||v_j|| (a free slot first). The new row starts at
    its exact non-negative step, max(g_n, 0) / ||v_n||^2; the NNLS de-bias then refits the support.
    """
    sigma = jnp.where(problem.valid, problem.norms, 1.0).astype(g.dtype)
    score = jnp.where(problem.valid & ~in_z, g / sigma, -jnp.inf)
    enter = jnp.argmax(score)  # under a data mesh: a local argmax per device, then one candidate each
    gain, sig = take_rows(score, enter), take_rows(sigma, enter)
    weak = jnp.where(values > 0, values * take_rows(sigma, indices), -1.0)
    slot = jnp.argmin(weak)
    swapped = (indices.at[slot].set(enter.astype(indices.dtype)),
               values.at[slot].set(jnp.maximum(take_rows(g, enter), 0.0) / (sig * sig)))
    return (jnp.where(stuck, swapped[0], idx), jnp.where(stuck, swapped[1], val),
            jnp.isfinite(gain) & (gain > 0))


def exchange_failed(stuck: jax.Array, possible: jax.Array, f_new: jax.Array, f_old: jax.Array) -> jax.Array:
    """Whether an exchange tried from a fixed point is rejected: none was possible, or it did not lower f by
    more than rounding (sqrt(eps) relative: in float32 a round-off "gain" could otherwise cycle between two
    supports). Then w_t is final."""
    margin = 1.0 - jnp.sqrt(jnp.finfo(f_new.dtype).eps)
    return stuck & ~(possible & (f_new < margin * f_old))
