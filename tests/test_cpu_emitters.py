"""XLA:CPU's classic fusion emitters (`compilation.emitter_jit`, `LEGACY_EMITTERS`): which programs get them,
that a call inside another trace still works, and that the results are those of XLA's defaults. No timings
here (benchmarks/investigations/cpu_emitters.py measures them)."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import compilation
from coresets_jax.construct import vectors as construct
from coresets_jax.construct.vectors import build_fn
sample_mod = importlib.import_module("coresets_jax.inference.sample")  # the package exports the function

pytestmark = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the emitters are XLA:CPU's")


def softplus_sum_fn():
    """A new function each time: JAX keys its compiled programs by the function, so tests do not share them."""
    return lambda x: jnp.sum(jnp.logaddexp(0.0, x) * jnp.cos(x))


def softplus_sum_numpy(x):
    x = np.asarray(x, np.float64)
    return float(np.sum(np.logaddexp(0.0, x) * np.cos(x)))


def test_cpu_calls_compile_with_the_classic_emitters():
    if not compilation.legacy_emitters():
        pytest.skip("this jaxlib's XLA:CPU has no classic emitters (JAX 0.11 and later)")
    f = compilation.emitter_jit(softplus_sum_fn())
    x = jnp.linspace(-4.0, 4.0, 1001, dtype=jnp.float32)
    np.testing.assert_allclose(float(f(x)), softplus_sum_numpy(x), rtol=1e-5)
    assert f._legacy._cache_size() == 1 and f._plain._cache_size() == 0
    # the option reaches the lowering that XLA compiles
    assert ("xla_cpu_use_fusion_emitters", False) in tuple(f.lower(x)._lowering._compiler_options_kvs)
    f.clear_cache()
    assert f._cache_size() == 0


def test_inside_another_trace_the_program_is_inlined():
    f = compilation.emitter_jit(softplus_sum_fn())
    x = jnp.linspace(-3.0, 3.0, 64, dtype=jnp.float32)
    want = softplus_sum_numpy(x)
    np.testing.assert_allclose(float(jax.jit(lambda y: f(y) + 1.0)(x)), want + 1.0, rtol=1e-5)
    batched = jax.vmap(f)(jnp.stack([x, -x]))
    np.testing.assert_allclose(np.asarray(batched), [want, softplus_sum_numpy(-x)], rtol=1e-5)
    # concrete arguments inside an outer trace
    np.testing.assert_allclose(float(jax.jit(lambda: f(x))()), want, rtol=1e-5)


def test_switched_off_gives_xla_defaults(monkeypatch):
    monkeypatch.setattr(compilation, "LEGACY_EMITTERS", {})
    f = compilation.emitter_jit(softplus_sum_fn())
    x = jnp.ones(8)
    f(x)
    assert f._legacy is f._plain and f._plain._cache_size() == 1
    assert tuple(f.lower(x)._lowering._compiler_options_kvs or ()) == ()


def _raise(_):
    raise RuntimeError("boom")


def test_an_option_that_this_xla_does_not_know_leaves_xla_defaults(monkeypatch):
    # JAX 0.11's XLA:CPU dropped xla_cpu_use_fusion_emitters and refuses every program that names it; a name
    # that no XLA knows plays that part here
    unknown = {"xla_cpu_option_that_no_xla_has": False}
    monkeypatch.setattr(compilation, "LEGACY_EMITTERS", unknown)
    monkeypatch.setattr(compilation, "_REFUSED", set())
    with pytest.raises(jax.errors.JaxRuntimeError, match="compile option"):
        jax.jit(lambda y: y + 1.0, compiler_options=unknown)(jnp.ones(2))
    # nothing is compiled only to ask: the first program compiled with the options is the test
    assert compilation.legacy_emitters() == unknown
    f = compilation.emitter_jit(softplus_sum_fn())
    x = jnp.linspace(-2.0, 2.0, 33, dtype=jnp.float32)
    np.testing.assert_allclose(float(f(x)), softplus_sum_numpy(x), rtol=1e-5)
    assert compilation.legacy_emitters() == {}
    assert f._plain._cache_size() == 1  # the refused program was compiled again with XLA's defaults
    assert tuple(f.lower(x)._lowering._compiler_options_kvs or ()) == ()
    # another program's error is not taken for a refusal
    bad = jax.jit(lambda y: jax.pure_callback(_raise, jax.ShapeDtypeStruct((), jnp.float32), y))
    monkeypatch.setattr(compilation, "_REFUSED", set())
    with pytest.raises(Exception, match="boom") as caught:
        bad(jnp.ones(()))
    assert not compilation._refused(caught.value) and compilation.legacy_emitters() == unknown
    monkeypatch.setattr(compilation, "_REFUSED", {tuple(sorted(unknown.items()))})
    # a solver compiled earlier with the real option switches too, and gives the same coreset
    V = jnp.asarray(np.random.default_rng(5).normal(size=(400, 12)) + 0.3, jnp.float32)
    plain = jax.jit(build_fn("omp", 10))(V, jax.random.key(1))
    ours = cj.build(V, 10, "omp", key=jax.random.key(1))
    np.testing.assert_array_equal(np.asarray(ours.dense(400)), np.asarray(plain.dense(400)))
    monkeypatch.setattr(compilation, "LEGACY_EMITTERS", {"xla_cpu_use_fusion_emitters": False})
    assert compilation.legacy_emitters() in ({}, {"xla_cpu_use_fusion_emitters": False})


def test_what_counts_as_a_cpu_compilation():
    assert compilation._compiles_for_cpu((jnp.ones(3), {"a": np.ones(2)}))
    assert compilation._compiles_for_cpu((np.ones(3),))  # NumPy only: the default backend, a CPU here
    assert compilation._compiles_for_cpu((jax.ShapeDtypeStruct((3,), jnp.float32),))
    seen = []
    jax.jit(lambda y: seen.append(compilation._compiles_for_cpu((y,))) or y)(jnp.ones(2))
    assert seen == [False]  # a tracer: inlined into the outer program


def test_omp_with_the_classic_emitters_matches_xla_defaults():
    rng = np.random.default_rng(3)
    V = jnp.asarray(rng.normal(size=(3000, 40)) + 0.2, jnp.float32)
    key = jax.random.key(0)
    ours = cj.build(V, 30, "omp", key=key)  # the package's compiled solver: classic emitters on a CPU
    solve = construct._compiled_build(cj.registry.resolve("omp"), 30, ())
    # with the classic emitters where this jaxlib has them (JAX 0.10), with XLA's defaults where not (0.11)
    assert (solve._jitted._legacy if compilation.legacy_emitters() else solve._jitted._plain)._cache_size() >= 1
    plain = jax.jit(build_fn("omp", 30))(V, key)  # XLA's defaults
    np.testing.assert_allclose(np.asarray(ours.dense(3000)), np.asarray(plain.dense(3000)), rtol=1e-5,
                               atol=1e-6 * float(jnp.max(plain.weights)))
    np.testing.assert_allclose(float(ours.info["relative_error"]), float(plain.info["relative_error"]), rtol=1e-4)


def test_sampler_uses_the_classic_emitters_on_few_rows_only(monkeypatch):
    calls = []
    real = sample_mod._compiled

    def recording(*args):
        calls.append(args[-1])  # small: rows x D <= LEGACY_LOOP_WORK
        return real(*args)

    monkeypatch.setattr(sample_mod, "_compiled", recording)
    model = cj.models.logistic_regression()
    rng = np.random.default_rng(0)
    n, d = 12_000, 3
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.array([1.0, -0.5, 0.2]))), 1.0, -1.0).astype(np.float32)
    data = (jnp.asarray(X), jnp.asarray(y))
    key = jax.random.key(1)
    cs = cj.coreset(model, data, size=20, method="uniform", key=key)
    cj.sample(model, data, key, weights=cs, num_samples=50, num_warmup=50, warn=False)
    assert n * d > sample_mod.LEGACY_LOOP_WORK >= 20 * d
    cj.sample(model, data, key, num_samples=20, num_warmup=20, num_chains=1, warn=False)
    assert calls == [True, False]


@pytest.mark.slow
def test_the_whole_route_runs_where_xla_refuses_the_classic_emitters(monkeypatch):
    # JAX 0.11 refused every program that cj.coreset compiled for a CPU. With an option that no XLA knows, the
    # route (coreset, sample, certify) must give what it gives with the emitters switched off, bit for bit.
    ds = cj.data.synthetic_logistic(jax.random.key(3), 700)
    model = cj.models.logistic_regression()

    def route():
        cs = cj.coreset(model, ds.train, 25, "omp", key=jax.random.key(4))
        post = cj.sample(model, ds.train, jax.random.key(5), weights=cs, num_samples=60, num_warmup=60,
                         num_chains=2, warn=False)
        return cs, post, cj.certify(model, ds.train, cs, post.samples)

    monkeypatch.setattr(compilation, "LEGACY_EMITTERS", {})
    want = route()
    unknown = {"xla_cpu_option_that_no_xla_has": True}
    monkeypatch.setattr(compilation, "LEGACY_EMITTERS", unknown)
    monkeypatch.setattr(compilation, "_REFUSED", set())
    got = route()
    assert compilation.legacy_emitters() == {}  # refused, and recorded
    np.testing.assert_array_equal(np.asarray(got[0].dense(700)), np.asarray(want[0].dense(700)))
    np.testing.assert_array_equal(np.asarray(got[1].samples), np.asarray(want[1].samples))
    assert float(got[2].kl) == float(want[2].kl) and np.isfinite(float(got[2].kl))
