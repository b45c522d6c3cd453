"""OMP for large coresets (solvers/omp.py, "Large coresets"): the QR updates against NumPy, plain refits
against the compensated ones, several atoms per pass against one, the greedy path's patience."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import nnls

import coresets_jax as cj
from coresets_jax.solvers import least_squares as ls
from coresets_jax.solvers.omp import LARGE_SIZE, _MAX_ATOMS, atoms_per_pass_for


def _factor(A, y, count):
    f = ls.qr_empty(A.shape[1], A.shape[0], jnp.float32)
    for i in range(count):
        f = ls.qr_append(f, jnp.asarray(A[i]), jnp.asarray(y))[0]
    return f


@pytest.mark.parametrize("count,slot", [(12, 0), (12, 5), (12, 11), (1, 0), (16, 15)])
def test_qr_delete_factors_the_remaining_columns(count, slot):
    """After deleting slot `slot`, Q R is the remaining columns in order, Q is orthonormal, R is upper
    triangular with the identity on its padding, and Q^T y is Q's product with y (float64 checks)."""
    rng = np.random.default_rng(count * 31 + slot)
    k, j = 16, 40
    A = rng.normal(size=(k, j)).astype(np.float32)
    y = rng.normal(size=j).astype(np.float32)
    f = jax.jit(ls.qr_delete)(_factor(A, y, count), jnp.asarray(slot))
    kept = [i for i in range(count) if i != slot]
    n = len(kept)
    qt, r = np.asarray(f.qt, np.float64), np.asarray(f.r, np.float64)
    assert int(f.count) == n
    np.testing.assert_allclose(r[:n, :n].T @ qt[:n], A[kept], atol=2e-5 * np.abs(A).max() * j)
    np.testing.assert_allclose(qt[:n] @ qt[:n].T, np.eye(n), atol=1e-5)
    np.testing.assert_array_equal(np.tril(r[:n, :n], -1), 0.0)
    np.testing.assert_array_equal(r[:, n:], np.eye(k)[:, n:])
    np.testing.assert_allclose(np.asarray(f.qty[:n]), qt[:n] @ y, atol=1e-4)


def test_solve_upper_is_a_triangular_solve():
    rng = np.random.default_rng(0)
    r = np.triu(rng.normal(size=(30, 30))) + 8 * np.eye(30)
    b = rng.normal(size=30)
    got = np.asarray(ls.solve_upper(jnp.asarray(r, jnp.float32), jnp.asarray(b, jnp.float32)), np.float64)
    got_t = np.asarray(ls.solve_upper(jnp.asarray(r, jnp.float32), jnp.asarray(b, jnp.float32), transpose=True))
    np.testing.assert_allclose(got, np.linalg.solve(r, b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_t, np.linalg.solve(r.T, b), rtol=1e-4, atol=1e-5)


def _well_spread(n=600, j=60, seed=1):
    """Rows whose sum a few dozen of them fit to about 1e-2: Gaussian rows around a common direction, as the
    whitened second-order features are (no cancellation near float32's rounding)."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, j)) + 0.3).astype(np.float32)


def _error64(V, cs):
    V = np.asarray(V, np.float64)
    w = np.zeros(V.shape[0])
    np.add.at(w, np.asarray(cs.indices), np.asarray(cs.weights, np.float64))
    y = V.sum(0)
    return float(np.linalg.norm(y - w @ V) / np.linalg.norm(y))


def test_plain_refits_give_the_compensated_coreset_where_the_fit_is_far_above_rounding():
    V = jnp.asarray(_well_spread())
    exact = cj.build(V, 40, "omp", atoms_per_pass=1)
    plain = cj.build(V, 40, "omp", atoms_per_pass=1, compensated=False)
    np.testing.assert_array_equal(np.sort(np.asarray(plain.indices)), np.sort(np.asarray(exact.indices)))
    order_e, order_p = np.argsort(np.asarray(exact.indices)), np.argsort(np.asarray(plain.indices))
    np.testing.assert_allclose(np.asarray(plain.weights)[order_p], np.asarray(exact.weights)[order_e], rtol=1e-4)
    assert np.isnan(float(plain.info["nnls_kkt"])) and np.isfinite(float(exact.info["nnls_kkt"]))


def test_plain_refits_match_an_independent_float64_omp():
    """Selection by normalised correlation, SciPy's exact NNLS on the support (rows that fall to 0 leave), in
    float64 NumPy: the same rows, weights to 1e-4."""
    V = _well_spread(300, 40, seed=3)
    sig = np.linalg.norm(V.astype(np.float64), axis=1)
    y = V.astype(np.float64).sum(0)
    support, w = [], np.zeros(0)
    for _ in range(25):
        r = y - w @ V[support].astype(np.float64) if support else y
        scores = V.astype(np.float64) @ r / sig
        scores[support] = -np.inf
        support.append(int(np.argmax(scores)))
        w, _ = nnls(V[support].T.astype(np.float64), y)
        keep = w > 0
        support, w = [s for s, k in zip(support, keep) if k], w[keep]
    cs = cj.build(jnp.asarray(V), 25, "omp", atoms_per_pass=1, compensated=False, max_iter=25)
    got = dict(zip(np.asarray(cs.indices).tolist(), np.asarray(cs.weights, np.float64).tolist()))
    assert sorted(k for k, v in got.items() if v > 0) == sorted(support)
    np.testing.assert_allclose([got[s] for s in support], w, rtol=1e-4)


@pytest.mark.parametrize("atoms", [4, 8])
def test_several_atoms_per_pass_fit_as_well_with_fewer_passes(atoms):
    """Where large coresets use them, M well below J (the second-order features are fit to their KL target at
    M of a third to a half of J): the error within 10% of one atom per pass."""
    V = jnp.asarray(_well_spread(2000, 300, seed=2))
    one = cj.build(V, 100, "omp", atoms_per_pass=1, compensated=False)
    many = cj.build(V, 100, "omp", atoms_per_pass=atoms, compensated=False)
    assert int(one.info["passes"]) == int(one.info["iterations"])
    assert int(many.info["passes"]) <= int(many.info["iterations"]) / 2
    assert _error64(V, many) <= 1.1 * _error64(V, one)
    assert many.num_points == one.num_points == 100


def test_default_atoms_per_pass_is_one_below_the_large_size():
    assert atoms_per_pass_for(LARGE_SIZE - 1) == 1
    assert atoms_per_pass_for(LARGE_SIZE) == LARGE_SIZE // 64
    assert atoms_per_pass_for(10 ** 6) == _MAX_ATOMS


def test_atoms_per_pass_is_validated():
    V = jnp.asarray(_well_spread(50, 10))
    with pytest.raises(ValueError, match="atoms_per_pass"):
        cj.build(V, 5, "omp", atoms_per_pass=0)
    with pytest.raises(ValueError, match="atoms_per_pass"):
        cj.build(V, 5, "omp", atoms_per_pass=2, exact_nnls=False)
    with pytest.raises(ValueError, match="compensated"):
        cj.build(V, 5, "omp", compensated="no")


def test_many_features_are_not_stopped_by_the_patience_of_few():
    """A row lowers the squared error by about 1 / J of itself early on: with J = 1,000 well-spread features the
    error falls by under 1% in 25 steps, which once stopped OMP near its start (patience is J / 20 here)."""
    V = jnp.asarray(_well_spread(3000, 1000, seed=4) - 0.3)
    cs = cj.build(V, 120, "omp", atoms_per_pass=1, compensated=False)
    assert int(cs.info["iterations"]) >= 120 and cs.num_points == 120
