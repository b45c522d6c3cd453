"""Fidelity against independent twins (issue 11): a target in the cone of K rows recovered by A-IHT II and
OMP; the active-set NNLS against SciPy's; OMP with re-selection against a NumPy/SciPy twin; the two small
defects (integer V, relative_error when the rows of V sum to zero)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import nnls

import coresets_jax as cj
from coresets_jax.solvers import make_problem, run
from coresets_jax.solvers.iht import iht2
from coresets_jax.solvers.least_squares import (active_set_nnls, qr_append, qr_delete_many, qr_empty,
                                                 solve_on_support)
from coresets_jax.solvers.omp import omp


def cone_example(seed, n=300, j=100, k=20):
    """The IHT authors' example, smaller: uniform(-1/2, 1/2) rows, a target in the cone of k of them."""
    rng = np.random.RandomState(seed)
    V = rng.rand(n, j) - 0.5
    w = np.zeros(n)
    w[rng.permutation(n)[:k]] = rng.rand(k)
    return V, w @ V


def solve_on_target(solver, V, y):
    """Run a solver on target y instead of sum_n v_n (the Problem carries the target explicitly)."""
    problem = make_problem(jnp.asarray(V))._replace(target=jnp.asarray(y))
    idx, w, info = jax.jit(lambda p: run(solver, p, jax.random.key(0)))(problem)
    return np.asarray(idx), np.asarray(w, np.float64), info


def rel(V, y, idx, w):
    return np.linalg.norm(y - w @ V[idx]) / np.linalg.norm(y)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow
def test_cone_target_recovered_by_iht2_and_omp(seed):
    V, y = cone_example(seed)
    with jax.enable_x64(True):
        for solver in (iht2(20), omp(20), omp(20, exact_nnls=True)):
            idx, w, _ = solve_on_target(solver, V, y)
            assert rel(V, y, idx, w) <= 1e-5, (solver, rel(V, y, idx, w))
    # float32: limited by rounding, not by the stopping rules
    idx, w, _ = solve_on_target(iht2(20), V.astype(np.float32), y.astype(np.float32))
    assert rel(V, y, idx, w) <= 1e-4


def test_qr_updates_factor_the_support_and_solve_least_squares():
    """qr_append / qr_delete_many keep A_S = Q R with Q orthonormal, in slot order, and solve_on_support equals
    NumPy's least squares on the kept columns."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 12))
    y = rng.normal(size=30)
    with jax.enable_x64(True):
        f = qr_empty(30, 12, jnp.float64)
        for i in range(10):
            f, pivot = qr_append(f, jnp.asarray(A[:, i]), jnp.asarray(y))
            assert float(pivot) > 0.1
        drop = np.zeros(12, bool)
        drop[[0, 4, 5, 9]] = True
        f = qr_delete_many(f, jnp.asarray(drop))
        kept = [i for i in range(10) if not drop[i]]
        n = int(f.count)
        Q, R = np.asarray(f.qt)[:n].T, np.asarray(f.r)[:n, :n]
        np.testing.assert_allclose(Q @ R, A[:, kept], atol=1e-12)
        np.testing.assert_allclose(Q.T @ Q, np.eye(n), atol=1e-12)
        assert np.allclose(np.tril(R, -1), 0)
        z = np.asarray(solve_on_support(f))
        np.testing.assert_allclose(z[:n], np.linalg.lstsq(A[:, kept], y, rcond=None)[0], atol=1e-10)
        assert np.all(z[n:] == 0)


def lawson_hanson(A, y):
    """Lawson & Hanson's NNLS with our pieces: the outer loop (add the coordinate of largest gradient) here in
    Python, the inner loop `active_set_nnls`; slots hold column indices in support order."""
    k = A.shape[1]
    f = qr_empty(A.shape[0], k, jnp.float64)
    slots, x = [], np.zeros(k)
    for _ in range(3 * k):
        w = np.zeros(k)
        w[slots] = x[:len(slots)]
        grad = A.T @ (y - A @ w)
        grad[slots] = -np.inf
        j = int(np.argmax(grad))
        if grad[j] <= 1e-12 * np.abs(A.T @ y).max():
            break
        f, _ = qr_append(f, jnp.asarray(A[:, j]), jnp.asarray(y))
        slots.append(j)
        cols = np.zeros((A.shape[0], k))
        cols[:, :len(slots)] = A[:, slots]
        x0 = np.zeros(k)
        x0[:len(slots) - 1] = x[:len(slots) - 1]
        xs, keep, f = active_set_nnls(jnp.asarray(cols), jnp.asarray(y), jnp.asarray(x0), f)
        xs, keep = np.asarray(xs), np.asarray(keep)
        slots = [s for s, kp in zip(slots, keep) if kp]
        x = np.zeros(k)
        x[:len(slots)] = xs[:len(keep)][keep[:len(keep)]]
    w = np.zeros(k)
    w[slots] = x[:len(slots)]
    return w


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_active_set_nnls_gives_scipy_nnls_in_lawson_hanson(seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(40, 25))
    y = rng.normal(size=40) + A[:, :5] @ rng.uniform(size=5)
    with jax.enable_x64(True):
        w = lawson_hanson(A, y)
    expected, _ = nnls(A, y)
    np.testing.assert_allclose(w, expected, atol=1e-9)


def numpy_ortho_pursuit(V, y, M, steps):
    """Orthogonal pursuit: the most correlated row outside the support joins it, SciPy's exact NNLS re-solves
    the weights, rows with weight 0 leave (and may come back)."""
    sig = np.linalg.norm(V, axis=1)
    support, w = [], np.zeros(0)
    for _ in range(steps):
        r = y - (w @ V[support] if support else 0.0)
        scores = V @ r / sig
        scores[support] = -np.inf
        f = int(np.argmax(scores))
        if scores[f] <= 1e-12 * np.linalg.norm(r) or len(support) >= M:
            break
        support.append(f)
        w, _ = nnls(V[support].T, y, maxiter=10_000)
        keep = w > 0
        support, w = [s for s, kp in zip(support, keep) if kp], w[keep]
    return support, w


@pytest.mark.slow
def test_omp_reselection_matches_numpy_twin():
    """Low-rank V (rank 4, shifted so the rows correlate): rows drop out of the NNLS, and OMP with the exact
    NNLS follows the NumPy twin to the same error; the default (gradient NNLS) gets within 1e-6 relative."""
    rng = np.random.default_rng(7)
    V = (np.abs(rng.normal(size=(150, 4))) + 0.3) @ rng.normal(size=(4, 25))
    y = V.sum(0)
    support, w_ref = numpy_ortho_pursuit(V, y, 10, 20)
    ref = rel(V, y, np.asarray(support), w_ref)
    with jax.enable_x64(True):
        idx, w, _ = solve_on_target(omp(10, exact_nnls=True), V, y)
        assert rel(V, y, idx, w) <= max(2 * ref, 1e-12), (rel(V, y, idx, w), ref)
        idx, w, _ = solve_on_target(omp(10), V, y)
        assert rel(V, y, idx, w) <= max(2 * ref, 1e-6), (rel(V, y, idx, w), ref)


def test_integer_V_is_cast():
    V = np.array([[1, 2, 0], [3, -1, 1], [0, 5, 2], [2, 2, 2]])
    cs = cj.build(V, 3, "giga")
    assert jnp.issubdtype(cs.weights.dtype, jnp.floating)
    expected = cj.build(V.astype(np.float32), 3, "giga")
    np.testing.assert_allclose(np.asarray(cs.weights), np.asarray(expected.weights), rtol=1e-6)
    assert np.isfinite(float(cj.relative_error(V, cs)))


def test_relative_error_when_rows_sum_to_zero():
    V = jnp.asarray([[1.0, 2.0], [-1.0, -2.0], [0.5, 0.0], [-0.5, 0.0]])
    # the target is 0: the absolute error is returned, never NaN or inf
    assert float(cj.relative_error(V, jnp.ones(4))) == 0.0
    np.testing.assert_allclose(float(cj.relative_error(V, jnp.asarray([1.0, 0, 0, 0]))), np.sqrt(5.0), rtol=1e-6)
    np.testing.assert_allclose(float(cj.relative_error(V, jnp.asarray([1.0, 0, 0, 0]), squared=True)), 5.0,
                               rtol=1e-6)
    cs = cj.build(V, 2, "uniform", key=jax.random.key(0))
    assert np.isfinite(float(cj.relative_error(V, cs)))
    # an ordinary V keeps the relative definition
    W = jnp.asarray([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(float(cj.relative_error(W, jnp.asarray([1.0, 0.0]))), np.sqrt(0.5), rtol=1e-6)


@pytest.mark.slow
def test_auto_compress_policy_keeps_the_greedy_path_on_exact_low_rank_V():
    """V of exact rank 8: the factor A preserves every inner product (compress.py, Eq. (*) with E = 0), so GIGA
    on A selects the same rows with the same weights; the policy declines small V, few iterations and the
    sampling methods."""
    from coresets_jax.features.compress import auto_compress
    from coresets_jax.solvers.giga import giga

    rng = np.random.default_rng(0)
    V = jnp.asarray(rng.normal(size=(9000, 8)) @ rng.normal(size=(8, 500)) + 0.1, jnp.float32)
    packed = auto_compress(V, "giga", 40)
    assert packed is not None and packed.rank <= 250
    exact = jax.jit(lambda V: run(giga(40), make_problem(V), jax.random.key(0)))
    i1, w1, _ = exact(V)
    i2, w2, _ = exact(packed.A)
    # same path until the error reaches float32 rounding (later picks are ties at the rounding level)
    np.testing.assert_array_equal(np.asarray(i1)[:8], np.asarray(i2)[:8])
    e1 = float(cj.relative_error(V, cj.Coreset(i1, w1)))
    e2 = float(cj.relative_error(V, cj.Coreset(i2, w2)))
    assert e2 <= 1.05 * e1 + 1e-5, (e1, e2)
    assert auto_compress(V, "uniform", 40) is None
    assert auto_compress(V[:100], "giga", 40) is None
    assert auto_compress(V, "giga", 8) is None
