"""Orthogonal pursuit with NNLS refit against NumPy + SciPy, its invariants, and the refit option."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import nnls

import coresets_jax as cj
from coresets_jax.solvers import ops


def numpy_omp(V, M):
    """Greedy selection by normalised correlation with the residual; exact NNLS (SciPy) on the support."""
    sig = np.linalg.norm(V, axis=1)
    y = V.sum(0)
    support, w = [], np.zeros(0)
    for _ in range(M):
        r = y - w @ V[support] if support else y
        scores = V @ r / sig
        scores[support] = -np.inf
        f = int(np.argmax(scores))
        if scores[f] <= 0:
            break
        support.append(f)
        w, _ = nnls(V[support].T, y)
    return support, w


def test_omp_matches_numpy_reference():
    rng = np.random.default_rng(3)
    V = rng.normal(size=(40, 12)) + 0.2
    with jax.enable_x64(True):
        cs = cj.build(jnp.asarray(V), 8, "omp", nnls_tol=1e-12, nnls_max_iter=5000)
        idx, w = np.asarray(cs.indices), np.asarray(cs.weights)
    support, expected = numpy_omp(V, 8)
    np.testing.assert_array_equal(idx[: len(support)], support)  # same selections, same order
    np.testing.assert_allclose(w[: len(support)], expected, rtol=1e-5, atol=1e-6)


def test_nnls_matches_scipy():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(10, 25))
    b = rng.normal(size=25) + A.mean(0)
    mask = np.ones(10, bool)
    mask[[2, 7]] = False
    with jax.enable_x64(True):
        res = ops.nnls_gram(jnp.asarray(A @ A.T), jnp.asarray(A @ b), jnp.zeros(10), jnp.asarray(mask),
                            max_iter=20000, tol=1e-12)
        x = np.asarray(res.x)
    expected = np.zeros(10)
    expected[mask], _ = nnls(A[mask].T, b)
    np.testing.assert_allclose(x, expected, atol=1e-7)
    assert float(res.kkt) <= 1e-12


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shift=st.floats(0.0, 2.0))
@pytest.mark.slow
def test_omp_exact_on_rank_5(seed, shift):
    """Once the support spans V's row space (and its cone holds the target), the error is at rounding level."""
    rng = np.random.default_rng(seed)
    A = np.abs(rng.normal(size=(80, 5))) + shift * rng.uniform(size=(80, 1))
    V = A @ rng.normal(size=(5, 16))
    with jax.enable_x64(True):
        cs = cj.build(jnp.asarray(V), 20, "omp", nnls_tol=1e-13, nnls_max_iter=5000)
        err = float(cj.relative_error(jnp.asarray(V), cs, squared=True))
        errors = np.asarray(cs.info["errors"])
        assert cs.num_points <= 20
    assert err <= 1e-20, (err, errors)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shift=st.floats(-1.0, 2.0))
def test_omp_invariants(seed, shift):
    rng = np.random.default_rng(seed)
    V = jnp.asarray(rng.normal(size=(60, 10)) * rng.uniform(0.2, 3.0, size=(60, 1)) + shift, jnp.float32)
    cs = cj.build(V, 12, "omp")
    w = np.asarray(cs.weights)
    errors = np.asarray(cs.info["errors"])
    assert np.all(w >= 0) and cs.num_points <= 12
    assert len(set(np.asarray(cs.indices)[w > 0].tolist())) == cs.num_points
    assert np.all(np.diff(errors) <= 1e-4), errors  # refit over a growing support never loses ground
    assert abs(float(cj.relative_error(V, cs, squared=True)) - errors[-1]) <= 1e-4


@pytest.mark.slow
def test_refit_improves_every_solver():
    rng = np.random.default_rng(5)
    V = jnp.asarray(rng.normal(size=(200, 20)) + 0.3, jnp.float32)
    key = jax.random.key(0)
    for method in ("uniform", "frank_wolfe", "giga", "iht2"):
        cs = cj.build(V, 15, method, key=key)
        ref = cj.refit(V, cs)
        before = float(cj.relative_error(V, cs, squared=True))
        after = float(cj.relative_error(V, ref, squared=True))
        assert after <= before * (1 + 1e-4) + 1e-7, (method, before, after)
        assert np.all(np.asarray(ref.weights) >= 0) and ref.num_points <= cs.num_points
        # the support is kept: no new rows
        assert set(np.asarray(ref.indices)[np.asarray(ref.weights) > 0]) <= set(
            np.asarray(cs.indices)[np.asarray(cs.weights) > 0])
    cs = cj.build(V, 15, "frank_wolfe", refit=True)
    np.testing.assert_allclose(np.asarray(cs.weights), np.asarray(cj.refit(V, cj.build(V, 15, "frank_wolfe")).weights),
                               rtol=1e-5, atol=1e-5)


def test_refit_matches_scipy_on_support():
    rng = np.random.default_rng(6)
    V = rng.normal(size=(50, 15)) + 0.5
    with jax.enable_x64(True):
        cs = cj.build(jnp.asarray(V), 6, "giga")
        ref = cj.refit(jnp.asarray(V), cs, tol=1e-12, max_iter=20000)
        sel = np.asarray(cs.indices)[np.asarray(cs.weights) > 0]
        got = np.asarray(ref.dense(50))[sel]
    expected, _ = nnls(V[sel].T, V.sum(0))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


def test_refit_validates():
    V = jnp.ones((10, 3))
    cs = cj.build(V, 2, "giga")
    with pytest.raises(ValueError, match="coreset"):
        cj.refit(V, "not a coreset")
    with pytest.raises(ValueError, match="V"):
        cj.refit(jnp.ones((5, 3)), cs.__class__(jnp.asarray([7, 0]), jnp.asarray([1.0, 0.0])))
