"""The pieces the posterior-driven methods are built from, each against a NumPy twin written here or a
closed form: the Hot DoG update (hot-dog.md §2.2, H2-H4) and our cumulative DoG, the hot-start
stationarity statistic (H1), the slice kernel on a weighted Gaussian, and the spike-and-slab Gibbs
conditionals, and Coreset MCMC's plateau test on a Gaussian family with closed-form KL."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.models import spike_and_slab as ss
from coresets_jax.posterior_driven.optimizers import dog_cumulative, hot_dog, stationarity_statistic


def hot_dog_numpy(w0, grads, r, b1=0.9, b2=0.999, eps=1e-8):
    """hot-dog.md §2.2 transcribed: the iterates w_1..w_T (projected on w >= 0 as Coreset MCMC does)."""
    w, m, v, rho = w0.copy(), np.zeros_like(w0), np.zeros_like(w0), np.zeros_like(w0)
    out = []
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        if t == 1:
            d = np.full_like(w0, r)
        else:
            rho = b1 * rho + (1 - b1) * np.maximum(np.abs(w - w0), rho)
            d = rho / (1 - b1 ** t)
        w = np.maximum(w - d / (np.sqrt(t * v_hat) + eps) * m_hat, 0.0)
        out.append(w.copy())
    return np.array(out)


def run_optimizer(opt, w0, grads):
    def body(carry, g):
        w, state = carry
        updates, state = opt.update(g, state, w)
        w = jnp.maximum(w + updates, 0.0)
        return (w, state), w

    _, ws = jax.lax.scan(body, (w0, opt.init(w0)), grads)
    return np.asarray(ws, np.float64)


def test_hot_dog_matches_a_numpy_transcription_step_by_step():
    rng = np.random.default_rng(0)
    w0 = rng.uniform(1.0, 20.0, 6)
    # Noisy gradients with a drift, so the distance term and the moment estimates all move.
    grads = rng.standard_normal((200, 6)) * 3.0 + np.linspace(-2, 2, 6)
    expected = hot_dog_numpy(w0, grads, r=0.5)
    got = run_optimizer(hot_dog(0.5), jnp.asarray(w0), jnp.asarray(grads))
    # float32 against float64 over 200 steps: the differences are rounding (6e-4 relative at most).
    np.testing.assert_allclose(got, expected, rtol=2e-3, atol=1e-4)
    assert np.max(np.abs(expected[-1] - w0)) > 1.0  # not vacuous: the weights travelled


def test_hot_dog_first_step_moves_each_weight_by_r():
    w0 = jnp.asarray([5.0, 5.0, 5.0])
    updates, _ = hot_dog(1e-3).update(jnp.asarray([2.0, -0.1, 40.0]), hot_dog(1e-3).init(w0), w0)
    # m^_1 = g, v^_1 = g^2, t = 1: the step is r sign(g) up to eps.
    np.testing.assert_allclose(np.asarray(updates), [-1e-3, 1e-3, -1e-3], rtol=1e-5)


def test_dog_cumulative_matches_numpy():
    rng = np.random.default_rng(1)
    w0, r = rng.uniform(1.0, 5.0, 4), 1e-2
    grads = rng.standard_normal((50, 4))
    w, dist, ssq, expected = w0.copy(), r * (1 + np.abs(w0)), np.zeros(4), []
    for g in grads:
        dist = np.maximum(dist, np.abs(w - w0))
        ssq = ssq + g * g
        w = np.maximum(w - dist / np.sqrt(ssq) * g, 0.0)
        expected.append(w.copy())
    got = run_optimizer(dog_cumulative(r), jnp.asarray(w0), jnp.asarray(grads))
    np.testing.assert_allclose(got, np.array(expected), rtol=1e-4, atol=1e-6)


def stationarity_numpy(x):
    """H1: the last two thirds of x, each fitted by a line; |mean A - mean B| / max residual s.e."""
    n = int(np.ceil(len(x) / 3))
    if n <= 2:
        return np.inf
    blocks = (x[len(x) - 2 * n:len(x) - n], x[len(x) - n:])
    ses = []
    for b in blocks:
        j = np.arange(len(b))
        resid = b - np.polyval(np.polyfit(j, b, 1), j)
        ses.append(np.sqrt(resid @ resid / (len(b) - 2)))
    return abs(blocks[0].mean() - blocks[1].mean()) / max(ses)


@pytest.mark.parametrize("length", [9, 10, 31, 200, 301])
def test_stationarity_statistic_matches_numpy_on_a_padded_buffer(length):
    rng = np.random.default_rng(length)
    x = 1e4 + np.cumsum(rng.standard_normal(length)) * 0.3 + rng.standard_normal(length)
    buffer = np.concatenate([x, rng.standard_normal(400 - length) * 1e6])  # junk past `length`
    got = float(stationarity_statistic(jnp.asarray(buffer, jnp.float32), length))
    np.testing.assert_allclose(got, stationarity_numpy(x), rtol=2e-3)


def test_stationarity_statistic_separates_a_trend_from_noise():
    rng = np.random.default_rng(0)
    noise = rng.standard_normal(300)
    trend = noise + np.linspace(0, 60, 300)
    assert float(stationarity_statistic(jnp.asarray(noise), 300)) < 0.5
    assert float(stationarity_statistic(jnp.asarray(trend), 300)) > 5.0
    assert np.isinf(float(stationarity_statistic(jnp.asarray(noise), 6)))  # n = 2: no residual d.o.f.


def test_slice_kernel_samples_a_weighted_gaussian_posterior():
    D, N, M = 2, 400, 12
    y = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.asarray([1.0, -2.0]))
    rng = np.random.default_rng(0)
    idx = jnp.asarray(rng.choice(N, M, replace=False), jnp.int32)
    w = jnp.asarray(rng.uniform(5.0, 60.0, M), jnp.float32)
    cs = cj.Coreset(idx, w, {}, "test")
    model = cj.models.gaussian_mean(D)
    post = cj.sample(model, y, jax.random.key(1), weights=cs, method="slice", num_samples=3000,
                     num_warmup=300, num_chains=2, warn=False)
    mean, cov = cj.models.gaussian_mean_posterior(y, cs.dense(N))
    draws = np.asarray(post.samples, np.float64).reshape(-1, D)
    sd = np.sqrt(np.diag(np.asarray(cov)))
    # Slice draws are nearly independent (3 passes a step); 6000 draws give s.e. sd / ~60 on the mean.
    np.testing.assert_array_less(np.abs(draws.mean(0) - np.asarray(mean)) / sd, 0.1)
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.06)


def test_gibbs_indicator_conditional_matches_the_closed_form():
    hyper = ss.SpikeAndSlab(4)
    beta = jnp.asarray([0.0, 0.15, 0.3, 1.5], jnp.float32)
    draws = jax.vmap(lambda k: ss.draw_indicators(k, beta, hyper))(jax.random.split(jax.random.key(0), 40000))
    b = np.asarray(beta, np.float64)
    slab = 0.1 * np.exp(-0.5 * b ** 2) / 1.0
    spike = 0.9 * np.exp(-0.5 * (b / 0.1) ** 2) / 0.1
    p = slab / (slab + spike)
    se = np.sqrt(p * (1 - p) / 40000) + 1e-4
    np.testing.assert_array_less(np.abs(np.asarray(draws).mean(0) - p), 5 * se)


def test_gibbs_coefficient_and_variance_conditionals_match_the_closed_form():
    hyper = ss.SpikeAndSlab(3)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = X @ np.array([1.0, 0.0, -0.5]) + 0.5 * rng.standard_normal(40)
    w = rng.uniform(0.5, 3.0, 40)
    gamma, s2 = np.array([1.0, 0.0, 1.0]), 0.3
    v = np.where(gamma > 0, 1.0, 0.01)
    precision = X.T @ (w[:, None] * X) / s2 + np.diag(1 / v)
    cov = np.linalg.inv(precision)
    mean = cov @ (X.T @ (w * y)) / s2
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    keys = jax.random.split(jax.random.key(1), 20000)
    betas = np.asarray(jax.vmap(lambda k: ss.draw_coefficients(k, f32(gamma), f32(s2), f32(X), f32(y), f32(w),
                                                                hyper))(keys), np.float64)
    np.testing.assert_array_less(np.abs(betas.mean(0) - mean), 5 * np.sqrt(np.diag(cov) / 20000))
    np.testing.assert_allclose(np.cov(betas, rowvar=False), cov, rtol=0.05, atol=0.05 * np.max(np.diag(cov)))

    beta = np.array([0.9, 0.1, -0.4])
    shape = 0.05 + w.sum() / 2
    rate = 0.05 + 0.5 * np.sum(w * (y - X @ beta) ** 2)
    log_s2 = np.asarray(jax.vmap(lambda k: ss.draw_log_variance(k, f32(beta), f32(X), f32(y), f32(w), hyper))(keys),
                        np.float64)
    precisions = np.exp(-log_s2)  # 1 / s2 ~ Gamma(shape, rate): mean shape / rate, var shape / rate^2
    np.testing.assert_allclose(precisions.mean(), shape / rate, rtol=5 * np.sqrt(1 / shape / 20000))
    np.testing.assert_allclose(precisions.var(), shape / rate ** 2, rtol=0.05)


def newton_step_numpy(history, targets, weights, live, tau, step_fraction, trust):
    """Coreset MCMC's "newton" step written from its docstring: F = Cov(L) over the window (rows of
    `history`), the window gradient Phi^T (Phi w - t), two-metric projection (a zero weight with an outward
    gradient is held), delta = step_fraction (F_free + ridge I)^{-1} g, shortened to (1/2)|Phi delta|^2 <= trust."""
    n = history.shape[0]
    phi = (history - history.mean(0)) / np.sqrt(n - 1)
    phi[:, ~live] = 0.0
    t = (targets - targets.mean()) / np.sqrt(n - 1)
    w = np.where(weights > 0, weights, 0.0)
    grad = phi.T @ (phi @ w - t)
    free = live & ((weights > 0) | (grad < 0))
    basis = np.where(free[None, :], phi, 0.0)
    ridge = tau * np.trace(basis @ basis.T) / max(free.sum(), 1)
    g = basis.T @ (basis @ w - t)
    direction = step_fraction * np.linalg.solve(basis.T @ basis + ridge * np.eye(len(w)), g)
    direction[~live] = 0.0
    moved = 0.5 * np.sum((basis @ direction) ** 2)
    return direction * min(1.0, np.sqrt(trust / moved)), moved


@pytest.mark.parametrize("trust", [1e-3, 1e3])
def test_newton_step_matches_numpy_and_keeps_its_trust_region(trust):
    from coresets_jax.posterior_driven.natural import Preconditioner, newton_step

    rng = np.random.default_rng(3)
    rows, m, k = 32, 6, 2
    history = rng.standard_normal((rows, m)) @ rng.standard_normal((m, m))
    targets = history @ rng.uniform(0.5, 2.0, m) + 0.1 * rng.standard_normal(rows)
    weights = np.array([1.0, 0.0, 2.0, 0.5, 0.0, 1.5])
    live = np.array([True, True, True, True, True, False])
    # the window is full after the step's own push of k states: fill rows - k, push the last k
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    pre = Preconditioner(f32(np.vstack([history[:rows - k], np.zeros((k, m))])),
                         f32(np.concatenate([targets[:rows - k], np.zeros(k)])), jnp.asarray(rows - k),
                         jnp.zeros((rows, m)), jnp.zeros(rows), jnp.eye(rows), jnp.asarray(1.0))
    delta, pre, capped = newton_step(pre, f32(history[rows - k:]), f32(targets[rows - k:]), f32(weights),
                                     jnp.asarray(live), jnp.asarray(0), jnp.asarray(0.0), refresh=4, tau=1e-2,
                                     step_fraction=0.5, trust=trust)
    expected, moved = newton_step_numpy(history, targets, weights, live, 1e-2, 0.5, trust)
    np.testing.assert_allclose(np.asarray(delta), expected, rtol=2e-3, atol=1e-6 * np.abs(expected).max())
    predicted = 0.5 * np.sum((np.asarray(pre.basis) @ np.asarray(delta)) ** 2)
    assert predicted <= trust * (1 + 1e-4)
    # capped: a moving average with gain 0.02 of "the trust region shortened this step"
    assert float(capped) == pytest.approx(0.02 * float(moved > trust))


def test_exchange_is_rejected_unless_it_lowers_f_beyond_rounding():
    from coresets_jax.solvers.exchange import exchange_failed

    eps = np.finfo(np.float32).eps
    stuck, possible = jnp.asarray(True), jnp.asarray(True)
    f_old = jnp.asarray(100.0, jnp.float32)
    assert bool(exchange_failed(stuck, possible, jnp.asarray(100.0 * (1 - 0.5 * np.sqrt(eps)), jnp.float32), f_old))
    assert not bool(exchange_failed(stuck, possible, jnp.asarray(99.0, jnp.float32), f_old))
    assert bool(exchange_failed(stuck, jnp.asarray(False), jnp.asarray(99.0, jnp.float32), f_old))
    assert not bool(exchange_failed(jnp.asarray(False), possible, jnp.asarray(101.0, jnp.float32), f_old))


# ----------------------------------------------------------------------------------------------------
# The plateau test (coreset_mcmc.py step 5): one coreset point with L(theta) = -theta^2 / 2 under a N(0, 1)
# prior, so pi_w = N(0, 1 / (1 + w)); the full data is 10 such points, pi = N(0, 1 / 11). Exact draws.


def gaussian_window(key, w, rows):
    theta = jax.random.normal(key, (rows,)) / jnp.sqrt(1.0 + w)
    return (-0.5 * theta ** 2)[:, None], -5.0 * theta ** 2          # (R, 1) coreset L, (R,) full-data T


def gaussian_kl(w, n=10.0):
    """KL(N(0, 1/(1+w)) || N(0, 1/(1+n))) in closed form."""
    ratio = (1.0 + n) / (1.0 + w)
    return 0.5 * (ratio - 1.0 - np.log(ratio))


def plateau_after(w_then, w_now, rows=256, seed=0, z=1.0, checks=1):
    from coresets_jax.posterior_driven.natural import Preconditioner
    from coresets_jax.posterior_driven.stopping import init_plateau, plateau_check

    k1, k2 = jax.random.split(jax.random.key(seed))
    lls0, t0 = gaussian_window(k1, w_then, rows)
    lls1, t1 = gaussian_window(k2, w_now, rows)

    def window(lls, t):  # a full ring, rotated as the preconditioner leaves it after `rows + 3` pushes
        shift = 3
        return Preconditioner(jnp.roll(lls, shift, axis=0), jnp.roll(t, shift), jnp.asarray(rows + shift),
                              lls, t, jnp.eye(rows), jnp.asarray(1.0))

    state = init_plateau(window(lls0, t0), jnp.ones(1), 500)
    first = plateau_check(state, window(lls0, t0), jnp.array([w_then]), 2, z, checks)
    second = plateau_check(first, window(lls1, t1), jnp.array([w_now]), 2, z, checks)
    return first, second, (lls0, t0)


def test_plateau_window_is_put_back_in_time_order_and_checkpoints_double():
    first, second, (lls0, t0) = plateau_after(3.0, 9.0)
    np.testing.assert_array_equal(np.asarray(first.lls), np.asarray(lls0))   # the ring unrolled
    np.testing.assert_array_equal(np.asarray(first.targets), np.asarray(t0))
    assert bool(first.saved) and not bool(first.flat)                          # nothing to compare with yet
    assert (int(first.check_at), int(second.check_at)) == (1000, 2000)


@pytest.mark.parametrize("seed", range(3))
def test_plateau_test_continues_while_the_kl_falls_and_stops_when_it_does_not(seed):
    # w from 6 to 9: KL 0.0433 -> 0.0045 nats, a fall of ~0.04 nats, resolved by 256 exact draws.
    assert gaussian_kl(6.0) - gaussian_kl(9.0) > 0.035
    assert not bool(plateau_after(6.0, 9.0, seed=seed)[1].flat)
    # w from 9.995 to 10.0: the KL falls by ~1e-7 nats, far below MARGIN; the pairing holds: flat.
    assert bool(plateau_after(9.995, 10.0, seed=seed)[1].flat)
    # Rising (w from 9 back to 6): the KL did not fall, so the test passes (the fallback to the start, step 7,
    # guards the result).
    assert bool(plateau_after(9.0, 6.0, seed=seed)[1].flat)
    # From the prior (w = 0) to the exact posterior (w = 10): a fall of 3.8 nats, whether or not the
    # importance weights between the two are usable: still travelling.
    assert gaussian_kl(0.0) - gaussian_kl(10.0) > 3.5
    assert not bool(plateau_after(0.0, 10.0, seed=seed)[1].flat)
    # With checks=2 one flat checkpoint is not enough; a second flat one in a row is.
    from coresets_jax.posterior_driven.natural import Preconditioner
    from coresets_jax.posterior_driven.stopping import plateau_check

    _, flat_once, _ = plateau_after(9.995, 10.0, seed=seed, checks=2)
    assert int(flat_once.passes) == 1 and not bool(flat_once.flat)
    lls, t = gaussian_window(jax.random.key(seed + 10), 10.0, 256)
    again = Preconditioner(lls, t, jnp.asarray(256), lls, t, jnp.eye(256), jnp.asarray(1.0))
    flat_twice = plateau_check(flat_once, again, jnp.array([10.0]), 2, 1.0, 2)
    assert int(flat_twice.passes) == 2 and bool(flat_twice.flat)
