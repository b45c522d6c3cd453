"""Pieces shared by the posterior-driven constructions (Coreset MCMC, quasi-Newton): the initial uniform
coreset, the data subsample, the full-data log-likelihood estimate with its control variate, and the chains'
hot start.

Control variate (our addition to both papers' estimators). Both methods need, at each sample theta_k of
pi_w, the full-data log-likelihood T(theta_k) = sum_n u_n L_n(theta_k), and use it only through covariances
over the samples, so any theta-independent offset drops out. The plain estimate (sum(u)/S) sum_s L_{n_s}
has variance ~ N^2/S Var_n(L_n(theta) - L_n(theta')) ~ N/S: posterior spreads are ~ N^{-1/2} and L_n moves
linearly over them. With a first-order Taylor expansion around an anchor theta_0 (pi_hat's mean),

    T(theta) - T(theta_0) = (sum_n u_n grad L_n(theta_0)) . (theta - theta_0)
                            + sum_n u_n [L_n(theta) - L_n(theta_0) - grad L_n(theta_0) . (theta - theta_0)],

the first term is exact from one O(N D) gradient pass made once, and the subsample only estimates the
Taylor remainder, which is quadratic in theta - theta_0: its variance is ~ 1/S instead of N/S. This is the
control variate of stochastic-gradient MCMC (Baker, Fearnhead, Fox & Nemeth 2019), applied to the
log-likelihood rather than its gradient. It stays unbiased for any anchor; a poor anchor only makes it
less effective. Per-iteration cost is unchanged, O(S D); the one pass over the data is the only O(N) work.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from ..core import Model, log_likelihoods, take_data, top_k, weighted_log_density, weighted_sum
from ..core.rows import inverse_cdf
from ..core import validate as _validate
from ..inference import kernels as _kernels
from ..inference.driver import init_chains, step_chains
from ..inference.warmup import warmup
from ..weighting.pihat import laplace_fn
from ..registry import Start
from .optimizers import stationarity_statistic

Array = jax.Array



def initial_coreset(key: Array, data_weights: Array, size: int, dtype, replace: bool = False
                    ) -> tuple[Array, Array]:
    """The M starting rows, drawn with probabilities proportional to u.

    Without replacement (Coreset MCMC, coreset-mcmc.md §2.1 step 1; Gumbel top-k): M distinct rows, each
    weighted sum(u) / (number drawn); rows with u = 0 are never drawn, and if fewer than M rows are live the
    extra slots get weight 0. With replacement (quasi-Newton coresets, quasi-newton-coresets.md §2.1 step 1):
    M inverse-CDF draws, duplicates merged into one slot weighted sum(u) c_m / M by their count c_m (the
    authors' N c_m / sum c); the freed slots are padding (weight 0), so there can be fewer than M points."""
    u = data_weights.astype(dtype)
    if replace:
        v = jax.random.uniform(key, (size,), dtype) * jnp.sum(u)
        draws = jnp.minimum(inverse_cdf(u, v), u.shape[0] - 1).astype(jnp.int32)
        rows, counts = jnp.unique(draws, size=size, fill_value=0, return_counts=True)
        weights = jnp.sum(u) * counts.astype(dtype) / size
        return jnp.where(counts > 0, rows, 0).astype(jnp.int32), jnp.where(counts > 0, weights, 0.0)
    gumbel = jax.random.gumbel(key, u.shape, dtype)
    scores = jnp.where(u > 0, jnp.log(jnp.where(u > 0, u, 1.0)) + gumbel, -jnp.inf)
    best, indices = top_k(scores, size)
    live = jnp.isfinite(best)
    weights = jnp.where(live, jnp.sum(u) / jnp.maximum(jnp.sum(live), 1), 0.0).astype(dtype)
    return indices.astype(jnp.int32), weights


def subsampler(data_weights: Array, num: int, dtype):
    """`draw(key) -> (indices, row_weights)` such that sum_s row_weights_s L_{indices_s} estimates sum_n u_n L_n.

    With num < N: `num` rows with probabilities u_n / sum(u), with replacement, each weighted sum(u) / num
    (unbiased). Equal weights (a plain dataset, the usual case, found by one pass when this is built) draw
    uniform row numbers, O(num) whatever N; other weights search the cumulative sum of u, computed once,
    with `num` binary searches, O(num log N) random reads of an N-long array that miss the cache at large N
    (Coreset MCMC at N = 10^7, M = 100: 0.59 ms per iteration with the search, 0.45 ms by row numbers;
    benchmarks/investigations/subsample_draw.py).
    With num >= N: every row, weighted u_n (exact; the shapes are static, so this is decided when tracing).
    """
    u = jnp.where(data_weights > 0, data_weights, 0.0).astype(dtype)
    n = u.shape[0]
    if num >= n:
        every = jnp.arange(n, dtype=jnp.int32)
        return lambda key: (every, u)
    cdf = jnp.cumsum(u)
    total = cdf[-1]
    row_weights = jnp.full(num, total / num, dtype)
    equal = jnp.all(u == u[0])

    def by_row_number(key):
        return jax.random.randint(key, (num,), 0, n, dtype=jnp.int32)

    def by_search(key):
        v = jax.random.uniform(key, (num,), dtype) * total
        return jnp.minimum(inverse_cdf(cdf, v, cumulative=True), n - 1).astype(jnp.int32)

    def draw(key):
        return jax.lax.cond(equal, by_row_number, by_search, key), row_weights

    return draw


EXACT_CHUNK_ELEMENTS = 1 << 22   # log-likelihoods per step of the exact sum (16 MiB in float32)


def full_data_estimator(model: Model, data: Any, data_weights: Array, num: int, anchor: Array, dtype,
                        control_variate: bool = True):
    """`estimate(key, thetas) -> (K,)`: T(theta_k) = sum_n u_n L_n(theta_k), up to one offset shared by the K
    thetas of a call (module docstring).

    - num >= N: the exact sum over every row, in chunks of about 2^22 log-likelihoods (memory O(chunk K),
      never N x K), each row relative to its value at the anchor (the quasi-Newton authors' full-data sums).
    - num < N without `control_variate`: the plain estimate (sum(u)/num) sum_s L_{n_s}(theta) from `num`
      rows drawn with probabilities u / sum(u) (Coreset MCMC's subsample), each row again relative to its
      value at the anchor, evaluated on the drawn rows only: no O(N) pass anywhere.
    - num < N with `control_variate`: the gradient G = sum_n u_n grad L_n(anchor) is computed here once (one
      O(N D) pass) and each call returns G.(theta - anchor) plus the subsample estimate of the Taylor
      remainder.
    Rows relative to the anchor keep the sums of O(1) terms: float32 sums of 10^4 Poisson rows of ~-6000
    each (log y!) err by nats otherwise.
    """
    n = data_weights.shape[0]
    anchor = anchor.astype(dtype)
    u = jnp.where(data_weights > 0, data_weights, 0.0).astype(dtype)
    lls = jax.vmap(lambda th, d: log_likelihoods(model, th, d), in_axes=(0, None))

    def at_anchor(rows):
        base = log_likelihoods(model, anchor, rows).astype(dtype)
        return jnp.where(jnp.isfinite(base), base, 0.0)

    if num >= n:
        return exact_sum(model, data, u, anchor, dtype)
    draw = subsampler(data_weights, num, dtype)
    if not control_variate:
        def plain(key, thetas):
            idx, row_weights = draw(key)
            rows = take_data(data, idx)
            return (lls(thetas, rows).astype(dtype) - at_anchor(rows)) @ row_weights
        return plain

    total_gradient = jax.grad(lambda th: weighted_sum(u, log_likelihoods(model, th, data)))(anchor)
    rows_at_anchor = jax.vmap(jax.value_and_grad(model.log_likelihood), in_axes=(None, 0))

    def with_control_variate(key, thetas):
        idx, row_weights = draw(key)
        rows = take_data(data, idx)
        shift = (thetas - anchor).astype(dtype)                                  # (K, D)
        base, slopes = rows_at_anchor(anchor, rows)                              # (S,), (S, D): one pass
        base, slopes = base.astype(dtype), slopes.astype(dtype)
        remainder = lls(thetas, rows).astype(dtype) - base - shift @ slopes.T    # (K, S)
        return shift @ total_gradient + remainder @ row_weights

    return with_control_variate


def exact_sum(model: Model, data: Any, u: Array, anchor: Array, dtype):
    """`estimate(key, thetas) -> (K,)`: sum_n u_n (L_n(theta_k) - L_n(anchor)) over every row, in chunks
    (`full_data_estimator`); the key is unused. The anchor's values are computed once (N numbers)."""
    n = u.shape[0]
    base = log_likelihoods(model, anchor, data).astype(dtype)
    base = jnp.where(jnp.isfinite(base), base, 0.0)
    lls = jax.vmap(lambda th, d: log_likelihoods(model, th, d), in_axes=(0, None))

    def exact(key, thetas):
        del key
        k = thetas.shape[0]
        chunk = max(1, min(n, EXACT_CHUNK_ELEMENTS // max(k, 1)))
        if chunk >= n:
            return (lls(thetas, data).astype(dtype) - base) @ u
        count = -(-n // chunk)

        def one(total, c):
            idx = c * chunk + jnp.arange(chunk)
            valid = idx < n
            idx = jnp.minimum(idx, n - 1)
            values = lls(thetas, take_data(data, idx)).astype(dtype) - base[idx]
            return total + values @ jnp.where(valid, u[idx], 0.0), None

        total, _ = jax.lax.scan(one, jnp.zeros(k, dtype), jnp.arange(count))
        return total

    return exact


def relative_lls(model: Model, rows: Any, anchor: Array, dtype):
    """`lls(thetas) -> (K, M)`: L_m(theta_k) - L_m(anchor) for the coreset rows (0 subtracted where the
    anchor's value is not finite).

    Every use (KL gradients, Newton systems, KL estimates, paired comparisons) is invariant to a per-row
    offset, but float32 is not: a Poisson row with a count of 1000 has L ~ -6000 (log y!), so w.L sums
    terms of ~10^6 whose rounding is nats, larger than the KL differences being estimated. Relative to the
    anchor, the terms are O(1) and only the rows' own rounding (~1e-4 relative) remains."""
    base = log_likelihoods(model, anchor.astype(dtype), rows).astype(dtype)
    base = jnp.where(jnp.isfinite(base), base, 0.0)
    each = jax.vmap(lambda th: log_likelihoods(model, th, rows))
    return lambda thetas: each(thetas).astype(dtype) - base


def coreset_start(model: Model, rows: Any, weights: Array, start: Start, max_iter: int = 30) -> Start:
    """The Laplace approximation of pi_{w_0} itself, fitted by Newton from pi_hat's mean on the M rows (cost
    O(M D^2) per iteration); pi_hat's summary where that fit is not finite or not positive definite.

    Chains started from pi_hat begin ~ sqrt(N/M) posterior sds from the mode of a uniform coreset's pi_w0, in
    its tails, where a step size tuned in warm-up can leave a chain stuck; starting at pi_w0's own mode and
    scale avoids that, whatever pi_hat was (even the prior).
    """
    dtype = jnp.result_type(start.mean.dtype, jnp.float32)
    fit = laplace_fn(model, max_iter=max_iter)(rows, start.mean.astype(dtype), weights.astype(dtype))
    ok = fit.info["finite"] & jnp.all(jnp.linalg.eigvalsh(fit.cov) > 0)
    return Start(jnp.where(ok, fit.mean, start.mean.astype(dtype)), jnp.where(ok, fit.cov, start.cov.astype(dtype)))


def start_chains(key: Array, kernel: str, logdensity_fn, start, num_chains: int, num_warmup: int,
                 settings: dict):
    """K chains drawn from N(start.mean, start.cov) and warmed up (per-chain tuning) against `logdensity_fn`."""
    dtype = jnp.result_type(start.mean.dtype, jnp.float32)
    mean, cov = start.mean.astype(dtype), start.cov.astype(dtype)
    k_init, k_warm = jax.random.split(key)
    d = mean.shape[0]
    chol = jnp.linalg.cholesky(cov + 1e-10 * jnp.trace(cov) / d * jnp.eye(d, dtype=dtype))
    positions = mean + jax.random.normal(k_init, (num_chains, d), dtype) @ chol.T
    tuning0 = _kernels.initial_tuning(kernel, cov, settings)
    run = warmup(kernel, logdensity_fn, num_warmup, settings)
    states, tuning, _ = jax.vmap(run, in_axes=(0, 0, None))(jax.random.split(k_warm, num_chains), positions,
                                                            tuning0)
    # Re-initialise through the driver so the states have the kernel's own layout for `step_chains`.
    states = init_chains(kernel, logdensity_fn, states.position, tuning, settings)
    return states, tuning


class Setup(NamedTuple):
    """What Coreset MCMC and quasi-Newton build before their first step: the coreset (indices, w0, live),
    its rows, the full-data estimate T, the rows' relative log-likelihoods, and warmed-up chains at pi_w0."""

    indices: Array
    w0: Array
    live: Array
    rows: Any
    estimate: Any
    lls: Any
    chains: Any
    tuning: Any


CHAIN_INITS = ("standard_normal", "start", "laplace")


def set_up(keys: tuple, model: Model, data: Any, data_weights: Array, start: Start, initial, *, size: int,
           rows_per_estimate: int, control_variate: bool, chain_init: str, kernel: str, num_chains: int,
           num_warmup: int, settings: dict, dtype, replace: bool = False) -> Setup:
    """The common start of both methods: the initial coreset (M rows drawn in proportion to u, with or
    without `replace`ment, or `initial`), the estimate of sum_n u_n L_n from `rows_per_estimate` rows, and K
    chains warmed up on pi_w0. `keys` = (for the coreset draw, for the chains).

    `chain_init`: "standard_normal" draws the chains from N(start.mean, I) (the Coreset MCMC authors'
    N(0, I) when the start is the model's zero; coreset-mcmc.md §5.7); "start" from N(start.mean, start.cov)
    (pi_hat); "laplace" from the Laplace fit of pi_w0 itself on the M rows (`coreset_start`, ours), which
    also preconditions the kernel."""
    k_core, k_chains = keys
    if initial is None:
        indices, w0 = initial_coreset(k_core, data_weights, size, dtype, replace)
    else:
        indices, w0 = initial[0].astype(jnp.int32), initial[1].astype(dtype)
    rows = take_data(data, indices)
    estimate = full_data_estimator(model, data, data_weights, rows_per_estimate, start.mean, dtype,
                                   control_variate)
    if chain_init == "laplace":
        chain_start = coreset_start(model, rows, w0, start)
    elif chain_init == "standard_normal":
        d = start.mean.shape[0]
        chain_start = Start(start.mean.astype(dtype), jnp.eye(d, dtype=dtype))
    else:
        chain_start = start
    chains, tuning = start_chains(k_chains, kernel, weighted_log_density(model, rows, w0), chain_start,
                                  num_chains, num_warmup, settings)
    return Setup(indices, w0, w0 > 0, rows, estimate, relative_lls(model, rows, start.mean, dtype), chains,
                 tuning)


# The option checks the methods import from here are the package's one set (core.validate).
check_bool, check_fraction = _validate.check_bool, _validate.check_fraction
check_positive = _validate.check_positive_float


def check_count(value, name: str, low: int = 1) -> int:
    """An integer >= low (`core.validate.check_int`)."""
    return _validate.check_int(value, name, low)


def check_kernel(kernel, kernel_settings=()) -> dict:
    """The kernel's settings with defaults filled in (ValueError for an unknown kernel or setting)."""
    if kernel not in _kernels.KERNELS:
        raise ValueError(f"kernel: unknown value {kernel!r}; expected one of {sorted(_kernels.KERNELS)}")
    if isinstance(kernel_settings, dict):
        kernel_settings = tuple(sorted(kernel_settings.items()))
    if not isinstance(kernel_settings, tuple) or not all(isinstance(p, tuple) and len(p) == 2
                                                         for p in kernel_settings):
        raise ValueError(f"kernel_settings: expected a dict of the kernel's settings, got {kernel_settings!r}")
    return _kernels.check_settings(kernel, dict(kernel_settings))


def kl_estimate(coreset_lls: Array, target: Array, weights: Array, mask=None) -> Array:
    """Importance-sampling estimate of KL(pi_w || pi) from S draws of pi_w (the certificate's estimator):

        KL = log E_w[exp(r)] - E_w[r],   r_s = T(theta_s) - w.L(theta_s),

    since pi / pi_w = exp(r) Z_w / Z and Z / Z_w = E_w[exp(r)]; the prior and any offset shared by the
    T(theta_s) cancel. The plug-in log-mean-exp is biased low when the weights exp(r_s) are heavy-tailed, so
    it ranks coresets of the same support well but is not a bound. `mask` (S,) selects the draws to use;
    a non-finite r among them gives inf."""
    masked = jnp.where(weights > 0, weights, 0.0)
    r = target - jnp.where(weights > 0, coreset_lls, 0.0) @ masked
    mask = jnp.ones(r.shape, bool) if mask is None else mask
    finite = jnp.isfinite(r)
    count = jnp.maximum(jnp.sum(mask), 1)
    log_mean_exp = jax.scipy.special.logsumexp(jnp.where(mask & finite, r, -jnp.inf)) - jnp.log(count)
    mean = jnp.sum(jnp.where(mask & finite, r, 0.0)) / count
    return jnp.where(jnp.all(finite | ~mask), log_mean_exp - mean, jnp.inf)


def default_subsample(subsample, size: int, n: int, per_step: bool = False) -> int:
    """Rows S per full-data estimate. An int S >= 1 is used as given (S >= N: every row, exact). None: the
    authors' choice, S = M for Coreset MCMC (`per_step`, hot-dog.md §2.2 `proj_n`) and every row for
    quasi-Newton (quasi-newton-coresets.md §2.2). 0: ours, for a method that draws a batch of samples per
    step (quasi-Newton) every row up to N = 20,000, else max(4 M, 4096) rows; for one that estimates T at
    every chain step (Coreset MCMC), min(N, max(2 M, 2048)) rows, a small cost beside the chain steps on M
    rows, with the control variate making its noise well under the chains' own."""
    if subsample is None:
        return min(n, size) if per_step else n
    if subsample > 0:
        return subsample
    if per_step:
        return min(n, max(2 * size, 2048))
    return n if n <= 20_000 else max(4 * size, 4096)


def check_subsample(subsample) -> None:
    """None, 0, or a positive int (`default_subsample`)."""
    if subsample is not None:
        check_count(subsample, "subsample", 0)


class StationaryRun(NamedTuple):
    """chains: the K kernel states; trace: (K, cap) log potentials; step: steps taken; done: the test
    passed; key: the PRNG stream."""

    chains: Any
    trace: Array
    step: Array
    done: Array
    key: Array


def run_until_stationary(key: Array, kernel: str, logdensity_fn, chains, tuning, settings: dict, cap: int,
                         dim: int, every: int = 30, threshold: float = 0.5, on_step=None, carry=None):
    """Step K chains against a fixed density until their log-potential traces pass the hot-start test
    (hot-dog.md §2.1: the median over chains of the statistic H1 at most `threshold`, checked every
    `every` steps from step 3 D on), or for `cap` steps. Returns (chains, steps taken, passed, carry), where
    `on_step(carry, chains) -> carry` may record each step's states."""
    dtype = chains.logdensity.dtype
    k = chains.logdensity.shape[0]

    def cond(state):
        run, _ = state
        return (~run.done) & (run.step < cap)

    def body(state):
        run, carry = state
        key, k_step = jax.random.split(run.key)
        chains, _ = step_chains(k_step, kernel, logdensity_fn, run.chains, tuning, settings, refresh=False)
        trace = run.trace.at[:, run.step].set(chains.logdensity.astype(dtype))
        step = run.step + 1
        check = (step >= 3 * dim) & (step % every == 0)
        stats = jax.lax.cond(check, lambda t: jax.vmap(stationarity_statistic, in_axes=(0, None))(t, step),
                             lambda t: jnp.full(k, jnp.inf, dtype), trace)
        done = check & (jnp.median(stats) <= threshold)
        carry = on_step(carry, chains) if on_step is not None else carry
        return StationaryRun(chains, trace, step, done, key), carry

    run = StationaryRun(chains, jnp.zeros((k, max(cap, 1)), dtype), jnp.asarray(0), jnp.asarray(False), key)
    if cap == 0:
        return chains, run.step, jnp.asarray(False), carry
    run, carry = jax.lax.while_loop(cond, body, (run, carry))
    return run.chains, run.step, run.done, carry
