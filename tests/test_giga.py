"""GIGA (Campbell & Broderick 2018) against a plain-NumPy implementation, and its invariants."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings, strategies as st

import coresets_jax as cj


def numpy_giga(V, M):
    """GIGA written directly from the paper: explicit tangent directions on the sphere, no fused scores."""
    sig = np.linalg.norm(V, axis=1)
    ln = V / sig[:, None]
    y = V.sum(0)
    ell = y / np.linalg.norm(y)
    w, lw = np.zeros(V.shape[0]), np.zeros(V.shape[1])
    errors = []
    for _ in range(M):
        d = ell - (ell @ lw) * lw
        d /= np.linalg.norm(d)
        dn = ln - np.outer(ln @ lw, lw)
        dn_norm = np.linalg.norm(dn, axis=1)
        ok = dn_norm > 1e-6  # l_n parallel to l(w) has no geodesic direction
        f = int(np.argmax(np.where(ok, dn @ d / np.where(ok, dn_norm, 1.0), -np.inf)))
        z0, z1, z2 = ell @ ln[f], ell @ lw, ln[f] @ lw
        gamma = (z0 - z1 * z2) / ((z0 - z1 * z2) + (z1 - z0 * z2))
        new = (1 - gamma) * lw + gamma * ln[f]
        nrm = np.linalg.norm(new)
        w = (1 - gamma) * w / nrm
        w[f] += gamma / nrm
        lw = new / nrm
        errors.append(1 - (ell @ lw) ** 2)
    return np.linalg.norm(y) * (ell @ lw) * w / sig, np.array(errors)


def test_giga_matches_numpy_reference():
    rng = np.random.default_rng(1)
    V = rng.normal(size=(50, 10)) + 0.3
    with jax.enable_x64(True):
        cs = cj.build(jnp.asarray(V), 12, "giga")
        got, errors = np.asarray(cs.dense(50)), np.asarray(cs.info["errors"])
        rel = float(cj.relative_error(jnp.asarray(V), cs, squared=True))
    expected, expected_errors = numpy_giga(V, 12)
    np.testing.assert_array_equal(np.flatnonzero(got > 0), np.flatnonzero(expected > 0))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(errors, expected_errors, rtol=1e-5, atol=1e-10)
    np.testing.assert_allclose(rel, expected_errors[-1], rtol=1e-6)


def test_giga_float32_agrees_with_float64():
    rng = np.random.default_rng(2)
    V = rng.normal(size=(50, 10)) + 0.3
    cs = cj.build(jnp.asarray(V, jnp.float32), 12, "giga")
    expected, _ = numpy_giga(V, 12)
    np.testing.assert_allclose(np.asarray(cs.dense(50)), expected, rtol=1e-3, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shift=st.floats(-1.0, 2.0), spread=st.floats(0.2, 10.0),
       zero_rows=st.integers(0, 5))
def test_giga_invariants(seed, shift, spread, zero_rows):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(40, 6)) * rng.uniform(0.1, spread, size=(40, 1)) + shift
    V[:zero_rows] = 0.0  # zero rows are never selected
    if np.linalg.norm(V.sum(0)) < 1e-3:
        V[-1] += 1.0
    V = jnp.asarray(V, jnp.float32)
    cs = cj.build(V, 10, "giga")
    w = np.asarray(cs.weights)
    errors = np.asarray(cs.info["errors"], np.float64)
    assert np.all(w >= 0)
    assert cs.num_points <= 10
    assert not np.any(np.isin(np.asarray(cs.indices)[w > 0], np.arange(zero_rows)))
    assert np.all(np.diff(errors) <= 1e-5), errors  # the error never increases
    rel = float(cj.relative_error(V, cs, squared=True))
    assert abs(rel - errors[-1]) <= 1e-4 + 1e-3 * errors[-1]
    assert rel <= 1.0 + 1e-5  # never worse than the empty coreset
