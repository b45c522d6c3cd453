"""The published posterior-driven methods under their names (Coreset MCMC with Hot DoG; quasi-Newton
coresets), and `cj.refine`, the project's improvement as a step of its own.

- Coreset MCMC as published touches only the M coreset rows and S subsampled rows inside its loops (the
  loops' jaxpr holds no N-sized array), and every entry point runs the same algorithm for the same name.
- The authors' settings are the defaults (read off the registry), and the stopping rules read the current
  chain states whatever the optimiser.
- `cj.refine` from a poor start keeps its trained weights, and from an exact start keeps the start, judged
  by the exact KL of a Gaussian model (closed form).
- Quasi-Newton as published (with exact draws for a conjugate model, as its authors run Gaussian models)
  lowers the exact KL of its uniform start.
"""


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jcore

import coresets_jax as cj
from coresets_jax.posterior_driven.coreset_mcmc import PUBLISHED_SLICE, REFINE_OPTIONS


def gaussian_problem(d=5, n=1000, seed=0):
    y = cj.data.synthetic_gaussian(jax.random.key(seed), n, dim=d, mean=jnp.ones(d))
    model = cj.models.gaussian_mean(d)
    mean, cov = cj.models.gaussian_mean_posterior(y)

    def kl(cs):  # exact KL(pi_w || pi) of a coreset (closed-form Gaussian posteriors)
        mean_w, cov_w = cj.models.gaussian_mean_posterior(y, cs.dense(n))
        return float(cj.metrics.gaussian_kl(mean_w, cov_w, mean, cov))

    return model, y, kl


# ----------------------------------------------------------------------------------------------------
# Coreset MCMC as published.


def test_published_defaults_are_the_authors_settings():
    cmc = cj.methods()["coreset_mcmc"]
    opts = cmc.options
    # hot-dog.md §2.2 and §4.1: Hot DoG with r = 0.001, K = 2 chains, S = M, the hit-and-run slice sampler,
    # 200,000 iterations, the last iterate, uniform points and no full-data pass.
    assert (opts["optimizer"], opts["r"], opts["num_chains"], opts["subsample"]) == ("hot_dog", 1e-3, 2, None)
    assert (opts["num_iters"], opts["max_hot_start"], opts["iterate"]) == (200_000, 10_000, "last")
    assert (opts["control_variate"], opts["chain_init"], opts["hot_start"]) == (False, "standard_normal", True)
    # hot-dog.md §5.5: a hot start that never passes its test leaves the weights untrained
    assert opts["train_after_cap"] is False and REFINE_OPTIONS["train_after_cap"] is True
    assert opts["kernel"] == "slice" and PUBLISHED_SLICE == {
        "width": 10.0, "max_expansions": 20, "max_shrinkage": 1024, "passes": 3, "precondition": False}
    assert cmc.default_support is None and not cmc.uses_pi_hat and cmc.takes_start
    qn = cj.methods()["quasi_newton"].options
    # quasi-newton-coresets.md §2.2: S = 500 fresh draws (1 NUTS chain after 1,000 warm-up steps, or exact),
    # tau = 0.01 absolute, 20 steps, 10 line-search tries, early stop at 0.1, every row for T.
    assert (qn["num_chains"] * qn["num_draws"], qn["num_warmup"], qn["tau"], qn["relative_tau"]) == (500, 1000, 1e-2, False)
    assert (qn["num_iters"], qn["num_tries"], qn["early_stop"], qn["subsample"]) == (20, 10, 0.1, None)
    assert qn["fresh_chains"] and qn["separate_gradient_draws"] and not qn["keep_best"] and qn["kernel"] == "auto"


def _loop_outputs_with_axis(jaxpr, size, inside=False, found=None):
    """Primitives inside a while/scan body (at any depth) that output an array with an axis of `size`."""
    found = [] if found is None else found
    for eqn in jaxpr.eqns:
        loop = eqn.primitive.name in ("while", "scan")
        if inside:
            found += [eqn.primitive.name for v in eqn.outvars if size in getattr(v.aval, "shape", ())]
        for value in eqn.params.values():
            for sub in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(sub, jcore.ClosedJaxpr):
                    _loop_outputs_with_axis(sub.jaxpr, size, inside or loop, found)
                elif isinstance(sub, jcore.Jaxpr):
                    _loop_outputs_with_axis(sub, size, inside or loop, found)
    return found


def test_published_coreset_mcmc_loops_hold_no_array_of_the_data_size():
    n = 100_003  # a prime, so that no other axis can have this length by chance
    data = cj.data.synthetic_logistic(jax.random.key(0), n).train
    model = cj.models.logistic_regression()
    key = jax.random.key(1)
    published = cj.coreset_fn(model, "coreset_mcmc", 50, num_iters=1000, num_draws=10)
    assert _loop_outputs_with_axis(jax.make_jaxpr(lambda k, d: published(k, d))(key, data).jaxpr, n) == []
    # Not vacuous: with every row in the estimate (S = N) the loop does O(N) work, and the check sees it.
    exact = cj.coreset_fn(model, "coreset_mcmc", 50, num_iters=1000, num_draws=10, subsample=n)
    assert _loop_outputs_with_axis(jax.make_jaxpr(lambda k, d: exact(k, d))(key, data).jaxpr, n)


@pytest.mark.slow
def test_every_entry_point_runs_the_same_algorithm():
    data = cj.data.synthetic_logistic(jax.random.key(0), 300).train
    model = cj.models.logistic_regression()
    opts = dict(num_iters=100, num_draws=20)
    key = jax.random.key(3)
    solve = jax.jit(cj.coreset_fn(model, "coreset_mcmc", 10, **opts))
    direct = cj.coreset(model, data, 10, "coreset_mcmc", key=key, **opts)
    core = solve(key, data)
    np.testing.assert_array_equal(np.asarray(direct.indices), np.asarray(core.indices))
    np.testing.assert_allclose(np.asarray(direct.weights), np.asarray(core.weights), rtol=1e-5)
    assert direct.settings["support"] == "uniform"
    # its own draws: K chains' last num_draws states
    chains = cj.methods()["coreset_mcmc"].options["num_chains"]
    assert direct.info["samples"].shape == (chains, 20, data[0].shape[1])
    assert np.all(np.isfinite(np.asarray(direct.info["samples"])))
    # merged: each shard is the same core on its rows, one shard after another (the union is checked for
    # quasi-Newton in test_quasi_newton.py; both go through the same distributed._merged_posterior)
    # streamed, one chunk: the leaf is the core with the stream's start (thetas' moments) and node key
    thetas = cj.laplace(model, data).sample(jax.random.key(5), 30)
    streamed = cj.stream_coreset(model, [data], 10, thetas, key, method="coreset_mcmc", **opts)
    from coresets_jax.construct.posterior import start_from

    leaf = solve(jax.random.fold_in(jax.random.split(key)[1], 1), data, start_from(cj.samples(thetas), key))
    np.testing.assert_allclose(np.sort(np.asarray(streamed.weights)), np.sort(np.asarray(leaf.weights)), rtol=1e-5)


@pytest.mark.slow
def test_a_hot_start_that_never_passes_its_test_leaves_the_weights_untrained():
    """As the authors' code (hot-dog.md §5.5): capped at one step, before the test's first check at step 3 D,
    the hot start never passes, so the result is the uniform start w = N / M itself, with a warning that says
    so; `train_after_cap=True` trains from the cap over the rest of the budget."""
    model, y, _ = gaussian_problem(d=3, n=300)
    opts = dict(num_iters=120, num_draws=10, max_hot_start=1)
    with pytest.warns(RuntimeWarning, match="were not trained"):
        cs = cj.coreset(model, y, 10, "coreset_mcmc", key=jax.random.key(0), **opts)
    assert not bool(cs.info["hot_start_converged"]) and not bool(cs.info["trained"])
    assert int(cs.info["iterations"]) == 0
    np.testing.assert_array_equal(np.asarray(cs.weights), np.full(10, 300 / 10, np.float32))
    with pytest.warns(RuntimeWarning, match="training started anyway"):
        trained = cj.coreset(model, y, 10, "coreset_mcmc", key=jax.random.key(0), train_after_cap=True, **opts)
    assert bool(trained.info["trained"]) and int(trained.info["iterations"]) == 120 - 1
    assert np.max(np.abs(np.asarray(trained.weights) - 30.0)) > 1e-3


@pytest.mark.slow
def test_every_optimizer_stops_on_the_current_chain_states():
    # The stopping rules read a window of recorded chain states. It must be refreshed at every iteration for
    # every optimiser (it once was only for the natural-gradient step, so Hot DoG's rule read stale states).
    model, y, _ = gaussian_problem(d=3, n=300)
    for optimizer in ("hot_dog", "adam", "newton"):
        cs = cj.coreset(model, y, 10, "coreset_mcmc", key=jax.random.key(0), optimizer=optimizer, num_iters=1500,
                        stop_first=200, num_draws=10, history=64)
        steps = int(cs.info["hot_start_steps"]) + int(cs.info["iterations"])
        assert int(cs.info["window_states"]) == 2 * steps, optimizer  # K = 2 states per step, every step
        # the checkpoints' drifts are those of the recorded iterates on the window's states
        taken = int(cs.info["checkpoints"])
        assert taken == 3 and np.all(np.isfinite(np.asarray(cs.info["checkpoint_drifts"])[1:taken, 0]))


def test_drift_is_the_second_order_kl_between_two_coreset_posteriors():
    # Gaussian location: pi_w = N(sum w y / (1 + sum w), I / (1 + sum w)); for w_b = w_a (1 + eps) the exact
    # KL(pi_a || pi_b) is closed form, and (1/2) Var_{pi_a}[(w_b - w_a).L] is its second-order expansion.
    from coresets_jax.posterior_driven.stopping import drift_kl

    model, y, _ = gaussian_problem(d=2, n=50)
    rows = np.asarray(y[:5], np.float64)
    w_a = np.full(5, 10.0)
    w_b = w_a * 1.01
    mean_a, cov_a = cj.models.gaussian_mean_posterior(jnp.asarray(rows), jnp.asarray(w_a))
    mean_b, cov_b = cj.models.gaussian_mean_posterior(jnp.asarray(rows), jnp.asarray(w_b))
    exact = float(cj.metrics.gaussian_kl(mean_a, cov_a, mean_b, cov_b))
    thetas = np.asarray(mean_a) + np.random.default_rng(0).standard_normal((200_000, 2)) * np.sqrt(float(cov_a[0, 0]))
    lls = -0.5 * ((thetas[:, None, :] - rows[None]) ** 2).sum(-1)
    estimate = float(drift_kl(jnp.asarray(lls), jnp.asarray(w_a), jnp.asarray(w_b)))
    assert abs(estimate - exact) < 0.05 * exact, (estimate, exact)


# ----------------------------------------------------------------------------------------------------
# refine


@pytest.mark.slow
def test_refine_improves_a_poor_start_and_keeps_an_exact_one():
    model, y, kl = gaussian_problem()
    poor = cj.coreset(model, y, 20, "uniform", key=jax.random.key(1))
    better = cj.refine(model, y, poor, jax.random.key(2), time_budget=10.0)
    assert better.info["kept"] == "trained", better.info["trained_certificate"]
    assert kl(better) < 0.1 * kl(poor), (kl(better), kl(poor))
    assert better.certificate is better.info["trained_certificate"]
    assert better.info["start_certificate"].kl > better.info["trained_certificate"].kl
    # An exact start (OMP on M > D + 1 points matches the Gaussian posterior to float32): nothing to gain,
    # and the certificate must not trade it for a noisy trained one.
    exact = cj.coreset(model, y, 20, "omp", key=jax.random.key(1))
    assert kl(exact) < 1e-3
    kept = cj.refine(model, y, exact, jax.random.key(3))  # the default budget
    assert kept.info["kept"] == "start"
    np.testing.assert_array_equal(np.asarray(kept.weights), np.asarray(exact.weights))
    assert kept.certificate is kept.info["start_certificate"]


def test_refine_checks_its_arguments():
    model, y, _ = gaussian_problem(d=2, n=50)
    cs = cj.coreset(model, y, 5, "uniform", key=jax.random.key(0))
    with pytest.raises(ValueError, match="method"):
        cj.refine(model, y, cs, jax.random.key(0), method="sparse_vi")
    with pytest.raises(ValueError, match="method"):
        cj.refine(model, y, cs, jax.random.key(0), method="omp")
    with pytest.raises(ValueError, match="coreset"):
        cj.refine(model, y, np.ones(50), jax.random.key(0))
    with pytest.raises(ValueError, match="N = 40"):
        cj.refine(model, y[:40], cs, jax.random.key(0))
    with pytest.raises(ValueError, match="time_budget"):
        cj.refine(model, y, cs, jax.random.key(0), time_budget=-1.0)
    with pytest.raises(ValueError, match="no_such"):
        cj.refine(model, y, cs, jax.random.key(0), no_such=1)


# ----------------------------------------------------------------------------------------------------
# Quasi-Newton as published


@pytest.mark.slow
def test_published_quasi_newton_lowers_the_exact_kl_of_its_uniform_start():
    model, y, kl = gaussian_problem(n=500)
    start_kls, end_kls = [], []
    for seed in range(3):
        cs = cj.coreset(model, y, 20, "quasi_newton", key=jax.random.key(seed))
        assert cs.num_points <= 20  # drawn with replacement: duplicates merge
        start = cj.Coreset(cs.indices, cs.info["initial_weights"], {}, "start")
        np.testing.assert_allclose(float(jnp.sum(start.weights)), 500.0, rtol=1e-5)  # N c_m / M summed
        start_kls.append(kl(start))
        end_kls.append(kl(cs))
    assert np.median(end_kls) < 0.1 * np.median(start_kls), (end_kls, start_kls)
