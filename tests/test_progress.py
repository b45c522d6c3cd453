"""Progress reporting from jitted loops: correct counts, one report per step under vmap, no change to
results, and nothing traced when progress is off."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import coresets_jax as cj
from coresets_jax import progress
from coresets_jax.solvers import giga, make_problem, run


class FakeBar:
    """Stands in for tqdm: records what the host side shows."""

    def __init__(self, desc, total, log):
        self.desc, self.total, self.n, self.closed, self.log = desc, total, 0, False, log

    def update(self, k):
        self.n += k
        self.log.append((self.desc, self.n, self.total))

    def close(self):
        self.closed = True


@pytest.fixture
def shown(monkeypatch):
    log, bars = [], []

    def new_bar(desc, total):
        bars.append(FakeBar(desc, total, log))
        return bars[-1]

    monkeypatch.setattr(progress, "_new_bar", new_bar)
    progress._bars.clear()
    progress.enabled(True)
    yield log, bars
    progress.enabled(None)
    progress._bars.clear()


def counting_loop(x, steps=40):
    def body(carry, _):
        value, count = carry
        return (value * 0.5 + x, progress.tick(count + 1, steps, "loop", every=10)), value

    return lax.scan(body, (x, jnp.asarray(0)), None, length=steps)


def test_tick_under_jit_reports_every_k(shown):
    log, bars = shown
    (value, count), ys = jax.jit(counting_loop)(jnp.asarray(1.0))
    assert [n for _, n, _ in log] == [10, 20, 30, 40] and int(count) == 40
    assert len(bars) == 1 and bars[0].total == 40 and bars[0].closed
    progress.enabled(False)
    (value_off, _), ys_off = jax.jit(counting_loop)(jnp.asarray(1.0))
    np.testing.assert_array_equal(ys, ys_off)


def test_tick_under_vmap_reports_once_per_step(shown):
    log, _ = shown
    xs = jnp.arange(8.0)
    (_, counts), ys = jax.jit(jax.vmap(counting_loop))(xs)
    # Eight batch elements, but one report per reporting step.
    assert [n for _, n, _ in log] == [10, 20, 30, 40]
    np.testing.assert_array_equal(counts, 40)
    progress.enabled(False)
    np.testing.assert_array_equal(ys, jax.jit(jax.vmap(counting_loop))(xs)[1])


def test_while_loop_with_batched_predicate(shown):
    log, bars = shown
    limits = jnp.array([5, 37, 20])

    def loop(limit):
        return progress.while_loop(lambda i: i < limit, lambda i: i + 1, jnp.asarray(0), desc="w", every=8)

    out = jax.jit(jax.vmap(loop))(limits)
    np.testing.assert_array_equal(out, limits)
    # The batched loop runs 37 iterations (the longest element); reports at 8, 16, 24, 32, then the finish.
    assert [n for _, n, _ in log] == [8, 16, 24, 32, 37] and bars[0].closed


@pytest.mark.slow
def test_solver_driver_and_projection_unchanged(shown, monkeypatch):
    log, _ = shown
    monkeypatch.setattr(progress, "every_for", lambda elements: 4)  # small V: report often anyway
    monkeypatch.setattr(cj.features.projection, "PROGRESS_MIN_WORK", 0)
    monkeypatch.setattr(cj.features.projection, "PROGRESS_WORK_PER_REPORT", 0)  # a report per chunk
    ds = cj.data.synthetic_logistic(jax.random.key(0), 1000)
    model = cj.models.logistic_regression()
    thetas = jnp.array([[3.0, 3.0, 0.0], [2.5, 3.5, 0.2], [3.1, 2.9, -0.1]])
    V_on = cj.project(model, ds.train, thetas, key=jax.random.key(1), chunk_size=300)
    assert [(d, n) for d, n, _ in log] == [("projection (rows)", n) for n in (300, 600, 900, 1000)]
    solver = giga(30)
    solve = jax.jit(lambda V, key: run(solver, make_problem(V), key))
    keys = jax.random.split(jax.random.key(2), 4)
    on = jax.vmap(solve, in_axes=(None, 0))(V_on, keys)
    solver_counts = [n for d, n, _ in log if d == "solver (iterations)"]
    assert solver_counts[:3] == [4, 8, 12] and solver_counts[-1] <= 30
    progress.enabled(False)
    V_off = cj.project(model, ds.train, thetas, key=jax.random.key(1), chunk_size=300)
    np.testing.assert_array_equal(V_on, V_off)
    solve_off = jax.jit(lambda V, key: run(solver, make_problem(V), key))
    off = jax.vmap(solve_off, in_axes=(None, 0))(V_off, keys)
    np.testing.assert_array_equal(on[0], off[0])
    np.testing.assert_array_equal(on[1], off[1])


def test_scan_helper_matches_lax_scan(shown):
    log, _ = shown

    def step(c, k):
        c = c + jax.random.normal(k)
        return c, c

    keys = jax.random.split(jax.random.key(0), 50)
    out = jax.jit(lambda ks: progress.scan(step, 0.0, ks, desc="sampling"))(keys)
    ref = lax.scan(step, 0.0, keys)
    np.testing.assert_array_equal(out[1], ref[1])
    assert log[-1][1:] == (50, 50)


def test_off_traces_nothing():
    # A fresh function each time: jit (and make_jaxpr) cache traces, and the switch is read when tracing.
    def fresh(x):
        return counting_loop(x)

    progress.enabled(False)
    try:
        assert "callback" not in str(jax.make_jaxpr(fresh)(jnp.asarray(1.0)))
    finally:
        progress.enabled(None)

    def fresh_on(x):
        return counting_loop(x)

    progress.enabled(True)
    try:
        assert "callback" in str(jax.make_jaxpr(fresh_on)(jnp.asarray(1.0)))
    finally:
        progress.enabled(None)


def test_automatic_switch(monkeypatch):
    progress.enabled(None)
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.setattr("sys.stderr.isatty", lambda: False, raising=False)
    assert not progress.is_enabled()  # not a terminal (as under pytest)
    monkeypatch.setenv(progress.ENV, "1")
    assert progress.is_enabled()
    monkeypatch.setenv(progress.ENV, "0")
    assert not progress.is_enabled()
    assert progress.enabled(True) and not progress.enabled(False)
    progress.enabled(None)


def test_every_for_targets_work_per_report():
    assert progress.every_for(100_000 * 500) == 32  # 2^30 / 5e7 = 21.5 -> 32
    assert progress.every_for(10**7 * 500) == 1
    assert progress.every_for(1) == 2**30


@pytest.mark.slow
def test_sample_reports_warmup_and_sampling(shown, monkeypatch):
    log, bars = shown
    monkeypatch.setattr(cj.inference.driver, "PROGRESS_MIN_WORK", 0)
    ds = cj.data.synthetic_logistic(jax.random.key(0), 200)
    model = cj.models.logistic_regression()
    kwargs = dict(num_samples=40, num_warmup=60, num_chains=2, warn=False)
    on = cj.sample(model, ds.train, jax.random.key(1), **kwargs)
    # 20 reports per loop (every 5%), one per step under vmap over the two chains.
    warm = [n for d, n, t in log if d == "warm-up"]
    draws = [n for d, n, t in log if d == "sampling"]
    assert warm == list(range(3, 61, 3)) and draws == list(range(2, 41, 2))
    assert all(bar.closed for bar in bars)
    # The callbacks only observe: with progress off (nothing traced in) the same key gives the same draws.
    progress.enabled(False)
    off = cj.sample(model, ds.train, jax.random.key(1), **kwargs)
    assert len(log) == len(warm) + len(draws)
    np.testing.assert_array_equal(np.asarray(on.samples), np.asarray(off.samples))


def test_sampling_below_the_work_threshold_traces_no_callback(shown, monkeypatch):
    ds = cj.data.synthetic_logistic(jax.random.key(0), 50)  # 2 x 200 x 50 x 3 = 6e4 << PROGRESS_MIN_WORK
    args = (jax.random.key(1), ds.train, jnp.ones(50), jnp.zeros((2, 3)), jnp.eye(3))

    def traced():  # a fresh function each time: traces are cached
        run = cj.sample_fn(cj.models.logistic_regression(), "nuts", num_samples=100, num_warmup=100,
                           num_chains=2, show_progress=True)
        return str(jax.make_jaxpr(run)(*args))

    assert "callback" not in traced()
    monkeypatch.setattr(cj.inference.driver, "PROGRESS_MIN_WORK", 0)
    assert "callback" in traced()


@pytest.mark.slow
def test_coreset_mcmc_reports_its_iterations(shown):
    log, bars = shown
    ds = cj.data.synthetic_logistic(jax.random.key(0), 100)

    def run():  # no hot start: all 20 iterations of the budget are training iterations
        return cj.coreset(cj.models.logistic_regression(), ds.train, 5, "coreset_mcmc", key=jax.random.key(1),
                          num_iters=20, num_draws=4, subsample=10, hot_start=False)

    # Issue 23: the switch is part of the compile cache. Compiled first with progress off, the same call with
    # progress on must still report (it showed nothing), and off again must trace no callback.
    progress.enabled(False)
    quiet = run()
    assert log == []
    progress.enabled(True)
    loud = run()
    np.testing.assert_array_equal(np.asarray(quiet.weights), np.asarray(loud.weights))  # same result either way
    assert [n for d, n, t in log if d == "coreset MCMC (iterations)"] == list(range(1, 21))
    assert [n for d, n, t in log if d == "coreset MCMC (draws)"] == [1, 2, 3, 4]
    assert all(bar.closed for bar in bars)
    shown_so_far = len(log)
    progress.enabled(False)
    run()
    assert len(log) == shown_so_far


def test_the_finishing_report_waits_for_a_loop_with_a_known_trip_count(shown):
    """With a fixed trip count XLA folds the loop's counter to a constant; the closing callback must still
    take an operand produced by the loop, or it may run (and close the bar) while the loop still ticks."""
    steps = 30
    loop = jax.jit(lambda x: progress.while_loop(lambda s: s[1] < steps, lambda s: (s[0] * 0.5 + 1.0, s[1] + 1),
                                                 (x, 0), desc="fixed", every=1, total=steps))
    hlo = loop.lower(jnp.float32(1.0)).compile().as_text()
    entry = hlo[hlo.index("ENTRY"):]
    closing = [line for line in entry.splitlines() if "custom-call(" in line and "callback" in line]
    assert len(closing) == 1, closing
    operands = closing[0].split("custom-call(", 1)[1].split(")", 1)[0]
    assert "while" in operands, operands
    log, bars = shown
    loop(jnp.float32(1.0))
    assert [n for _, n, _ in log] == list(range(1, steps + 1)) and all(bar.closed for bar in bars)
