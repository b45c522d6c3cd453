"""Performance invariants (issue 5): no recompiles, compression exactness and bound (cj.compress Eq. (*)),
and the Frank–Wolfe Gram-column cache against a from-scratch computation. No timings here."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_events import recorded_compilations

import coresets_jax as cj
from coresets_jax.construct import vectors as construct
from coresets_jax.features.compress import compress
from coresets_jax.solvers import frank_wolfe, make_problem

ITERATIVE = ["frank_wolfe", "giga", "iht2"]  # a rename must fail here, not leave the list empty


def low_rank(seed, n=1500, j=48, rank=6, noise=0.0):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, j)) + 0.3
    return V + noise * rng.normal(size=(n, j))


@pytest.mark.parametrize("method", ITERATIVE)
@pytest.mark.slow
def test_repeated_calls_do_not_recompile(method):
    V = jnp.asarray(low_rank(0), jnp.float32)
    solve = construct._compiled_build(cj.registry.resolve(method), 20, ())
    before = solve._cache_size()
    for seed in range(3):  # new values, same shapes
        cj.build(V + seed, 20, method, compress=False)
    assert solve._cache_size() - before <= 1
    cj.build(V, 20, method, compress=False)
    assert solve._cache_size() - before <= 1


def test_compressed_repeated_calls_do_not_recompile():
    V = jnp.asarray(low_rank(1, n=2000, j=64), jnp.float32)
    cs = cj.build(V, 20, "frank_wolfe", compress=True)
    r = int(cs.info["rank"])
    assert r % 16 == 0 and r <= 64
    solve = construct._compiled_build(cj.registry.resolve("frank_wolfe"), 20, ())
    size = solve._cache_size()
    for seed in range(3):
        cj.build(V * (1 + seed), 20, "frank_wolfe", compress=True)
    assert solve._cache_size() == size


@pytest.mark.parametrize("method", [m if m != "iht2" else pytest.param(m, marks=pytest.mark.slow) for m in ITERATIVE])
def test_exact_low_rank_same_support_and_weights(method):
    V = low_rank(2)
    with jax.enable_x64(True):
        Vj = jnp.asarray(V)
        plain = cj.build(Vj, 25, method, compress=False)
        packed = cj.build(Vj, 25, method, compress=True, compress_tol=1e-6)
        assert int(packed.info["rank"]) == 16  # rank 6 (+1 for the offset), padded to 16
        assert float(packed.info["discarded_norm"]) < 1e-6 * np.linalg.norm(V)
        a, b = np.asarray(plain.dense(V.shape[0])), np.asarray(packed.dense(V.shape[0]))
    np.testing.assert_array_equal(np.flatnonzero(a > 0), np.flatnonzero(b > 0))
    np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6 * np.abs(a).max())


@pytest.mark.parametrize("method", ITERATIVE)
@pytest.mark.slow
def test_error_change_bounded_by_discarded_energy(method):
    V = low_rank(3, noise=1e-2)
    with jax.enable_x64(True):
        Vj = jnp.asarray(V)
        c = compress(Vj, 0.05)
        assert c is not None and c.rank < V.shape[1]
        cs = cj.build(Vj, 25, method, compress=True, compress_tol=0.05)
        assert int(cs.info["rank"]) == c.rank
        w = np.asarray(cs.dense(V.shape[0]))
        A, B = np.asarray(c.A), np.asarray(c.B)
    y = V.sum(0)
    err_v = np.linalg.norm(y - w @ V)
    err_a = np.linalg.norm(A.sum(0) - w @ A)
    E = V - A @ B.T
    # Eq. (*): the discarded part is orthogonal, so the squared errors differ by exactly ||E^T (1 - w)||^2 ...
    np.testing.assert_allclose(err_v ** 2, err_a ** 2 + np.linalg.norm(E.T @ (1 - w)) ** 2, rtol=1e-8)
    # ... which is at most sigma_{r+1}(V) ||1 - w||
    sigma_next = np.linalg.svd(V, compute_uv=False)[c.rank]
    assert err_a <= err_v <= err_a + sigma_next * np.linalg.norm(1 - w) * (1 + 1e-9)
    np.testing.assert_allclose(float(cs.info["relative_error"]), err_v / np.linalg.norm(y), rtol=1e-8)
    assert np.linalg.norm(E) <= 0.05 * np.linalg.norm(V)
    np.testing.assert_allclose(c.discarded_norm, np.linalg.norm(E), rtol=1e-4)


def test_auto_leaves_small_problems_alone():
    V = jnp.asarray(low_rank(4), jnp.float32)
    a = cj.build(V, 30, "frank_wolfe")
    b = cj.build(V, 30, "frank_wolfe", compress=False)
    assert "rank" not in a.info
    np.testing.assert_array_equal(np.asarray(a.weights), np.asarray(b.weights))
    with pytest.raises(ValueError, match="compress"):
        cj.build(V, 30, "frank_wolfe", compress="yes")


@pytest.mark.slow
def test_frank_wolfe_cache_matches_from_scratch_after_100_iterations():
    V = low_rank(5, n=400, j=16, rank=16)
    with jax.enable_x64(True):
        problem = make_problem(jnp.asarray(V))
        solver = frank_wolfe(101, cache_mb=1)  # capacity min(101, 1 MiB / (4 B * 400)) = 101
        key = jax.random.key(0)
        state = solver.init(problem, key)
        step = jax.jit(solver.step)
        for _ in range(100):
            state = step(problem, state)
        scratch = np.asarray(problem.V @ (problem.target - state.approx))
        np.testing.assert_allclose(np.asarray(state.cache.scores), scratch, rtol=1e-9,
                                   atol=1e-9 * np.abs(scratch).max())
        assert int(state.cache.hits) > 0
        cached = cj.build(jnp.asarray(V), 101, "frank_wolfe", compress=False, cache_mb=1)
        plain = cj.build(jnp.asarray(V), 101, "frank_wolfe", compress=False)
        np.testing.assert_allclose(np.asarray(cached.dense(400)), np.asarray(plain.dense(400)), rtol=1e-8,
                                   atol=1e-8)
        assert int(cached.info["cache_hits"]) > 0


def test_frank_wolfe_small_cache_evicts_and_stays_exact():
    V = low_rank(6, n=2000, j=16, rank=16)
    with jax.enable_x64(True):
        tiny = cj.build(jnp.asarray(V), 200, "frank_wolfe", compress=False, cache_mb=1)  # capacity 131
        plain = cj.build(jnp.asarray(V), 200, "frank_wolfe", compress=False)
        np.testing.assert_allclose(np.asarray(tiny.dense(2000)), np.asarray(plain.dense(2000)), rtol=1e-8,
                                   atol=1e-8)


@pytest.mark.parametrize("candidate_rows", [None, 400])
def test_coreset_prefetches_its_solver_and_its_call_uses_that_executable(monkeypatch, candidate_rows):
    """cj.coreset starts compiling its solver in a background thread while the projection runs
    (`compilation.prefetch`). The solver's call must then find that executable, not compile a second one, and
    the coreset must be the one built without the prefetch."""
    from coresets_jax import compilation

    started = []
    real = compilation.prefetch
    monkeypatch.setattr(compilation, "prefetch", lambda *a, **k: started.append(a) or real(*a, **k))
    monkeypatch.setattr(compilation.os, "cpu_count", lambda: 2)
    ds = cj.data.synthetic_logistic(jax.random.key(0), 1500)
    model, size = cj.models.logistic_regression(), 23  # a size no other test compiles
    solve = construct._compiled_build(cj.registry.resolve("omp"), size, ())
    before = solve._cache_size()
    kwargs = dict(size=size, method="omp", key=jax.random.key(4), num_features=37, candidate_rows=candidate_rows)
    cs = cj.coreset(model, ds.train, **kwargs)
    assert len(started) == 1 and started[0][0] is solve
    assert solve._cache_size() - before == 1  # compiled once, in the thread; the call hit it
    monkeypatch.setattr(compilation, "PREFETCH", False)
    again = cj.coreset(model, ds.train, **kwargs)
    np.testing.assert_array_equal(np.asarray(cs.indices), np.asarray(again.indices))
    np.testing.assert_array_equal(np.asarray(cs.weights), np.asarray(again.weights))


def test_coreset_lowers_its_laplace_fit_before_it_starts_compiling_its_solver(monkeypatch):
    """cj.coreset lowers the Laplace fit's program and compiles it in the background before it starts the
    solver's background compilation (tracing the solver beside the fit's tracing slowed the fit, which the
    projection waits for). The fit must be compiled once (its call finds that executable), the solver's
    prefetch must start once, after the fit is lowered, and the coreset must be the one without prefetching."""
    from coresets_jax import compilation
    from coresets_jax.weighting import pihat

    events = []
    real_prefetch, real_lowered = compilation.prefetch, compilation.compile_lowered
    monkeypatch.setattr(compilation, "prefetch", lambda *a, **k: events.append("solver") or real_prefetch(*a, **k))
    monkeypatch.setattr(compilation, "compile_lowered",
                        lambda lowered: events.append("fit" if "jit_fit" in lowered.as_text()[:2000] else "other")
                        or real_lowered(lowered))
    monkeypatch.setattr(compilation.os, "cpu_count", lambda: 2)
    ds = cj.data.synthetic_logistic(jax.random.key(0), 1200)
    model = cj.models.logistic_regression(prior_scale=1.25)  # a model no other test fits
    kwargs = dict(size=29, method="omp", key=jax.random.key(4), num_features=41)
    cs = cj.coreset(model, ds.train, **kwargs)
    assert events == ["fit", "solver"], events
    fit = pihat._compiled(model, "newton", 1.0, 50, 1e-6, None)
    assert fit._cache_size() == 1  # compiled once, in the background; the call found it
    monkeypatch.setattr(compilation, "PREFETCH", False)
    events.clear()
    again = cj.coreset(model, ds.train, **kwargs)
    assert events == ["solver"]  # the solver's prefetch is itself a no-op with PREFETCH off
    np.testing.assert_array_equal(np.asarray(cs.indices), np.asarray(again.indices))
    np.testing.assert_array_equal(np.asarray(cs.weights), np.asarray(again.weights))


def test_sample_compiles_its_sampler_in_the_background_once_with_the_same_draws(monkeypatch):
    """cj.sample traces its sampler in the caller's thread and compiles it on another core while the starting
    points compile and run (`compilation.compile_lowered`). The run must then find that executable: as many
    XLA compilations as without the background one (the starting points' program and the sampler), one
    trace, and the same draws."""
    import importlib

    from coresets_jax import compilation

    sample_module = importlib.import_module("coresets_jax.inference.sample")  # (the package exports the function)
    started = []
    real = compilation.compile_lowered
    monkeypatch.setattr(compilation, "compile_lowered", lambda lowered: started.append(lowered) or real(lowered))
    monkeypatch.setattr(compilation.os, "cpu_count", lambda: 2)
    ds = cj.data.synthetic_logistic(jax.random.key(0), 800)
    model = cj.models.logistic_regression()
    cs = cj.coreset(model, ds.train, 20, "omp", key=jax.random.key(1))
    kwargs = dict(weights=cs, num_samples=37, num_warmup=41, num_chains=2, warn=False)  # counts no other test uses
    cj.sample(model, ds.train, jax.random.key(2), **kwargs)  # the small eager programs around the two
    with recorded_compilations() as compiles:
        results = []
        for prefetch in (True, False):
            monkeypatch.setattr(compilation, "PREFETCH", prefetch)
            sample_module._compiled.cache_clear()
            sample_module._compiled_init.cache_clear()
            started.clear(), compiles.clear()
            traces = sample_module.trace_count()
            results.append(cj.sample(model, ds.train, jax.random.key(2), **kwargs))
            assert len(started) == int(prefetch)
            assert len(compiles) == 2, (prefetch, compiles)  # the starting points and the sampler, once each
            assert sample_module.trace_count() - traces == 1
    np.testing.assert_array_equal(np.asarray(results[0].samples), np.asarray(results[1].samples))


def test_no_prefetch_where_the_solver_may_run_on_a_compressed_v(monkeypatch):
    """GIGA may compress V ("auto"), which changes the solver's input shape: no background compilation."""
    from coresets_jax import compilation

    started = []
    monkeypatch.setattr(compilation, "prefetch", lambda *a, **k: started.append(a) or compilation.Prefetched())
    ds = cj.data.synthetic_logistic(jax.random.key(0), 600)
    cj.coreset(cj.models.logistic_regression(), ds.train, size=10, method="giga", num_features=20)
    assert started == []
    cj.coreset(cj.models.logistic_regression(), ds.train, size=10, method="giga", num_features=20, compress=False)
    assert len(started) == 1


@pytest.mark.slow
def test_the_certificate_screen_compiles_its_programs_ahead_once_with_the_same_certificate(monkeypatch):
    """cj.certify's audited screen lowers its four programs (the Taylor pass, the groups, the coreset's term,
    the float64 audit at a padded number of draws) first and compiles them at once. Each must be compiled
    once, as many XLA compilations as one after another, and the certificate must be the same."""
    from coresets_jax import compilation
    from coresets_jax.certification import passes, screen

    started = []
    real = compilation.compile_lowered
    monkeypatch.setattr(compilation, "compile_lowered", lambda lowered: started.append(lowered) or real(lowered))
    monkeypatch.setattr(compilation.os, "cpu_count", lambda: 2)
    ds = cj.data.synthetic_logistic(jax.random.key(8), screen.SCREEN_MIN_ROWS, theta=(1.0, -0.5, 0.5, 0.0))
    model, data = cj.models.logistic_regression(), (ds.X, ds.y)
    cs = cj.coreset(model, data, size=24, method="omp", key=jax.random.key(1))
    fit = cj.laplace(model, data, key=jax.random.key(9))
    chol = np.linalg.cholesky(np.asarray(fit.cov, np.float64))
    draws = np.asarray(fit.mean, np.float64) + 1.5 * np.random.default_rng(3).standard_normal((1100, 4)) @ chol.T
    programs = (screen._full_taylor, screen._groups, passes._coreset_term, passes._audit_pass)
    cj.certify(model, data, cs, draws)  # every other program, compiled once
    certs, counts = [], []
    for prefetch in (True, False):
        monkeypatch.setattr(compilation, "PREFETCH", prefetch)
        for program in programs:
            program.clear_cache()
        started.clear()
        with recorded_compilations() as names:
            certs.append(cj.certify(model, data, cs, draws))
        counts.append(len(names))
        assert [p._cache_size() for p in programs] == [1, 1, 1, 1]
        assert len(started) == (4 if prefetch else 0)
    assert certs[0].precision == certs[1].precision == "screened, audited"
    assert counts == [4, 4], counts  # the four, once each
    np.testing.assert_array_equal(certs[0].log_ratio, certs[1].log_ratio)
    assert certs[0].precision_error == certs[1].precision_error
