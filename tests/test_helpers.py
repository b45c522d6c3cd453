"""The helpers each piece of shared logic lives in once (issue 23), against plain NumPy: the inverse-CDF
draw and top-k of core/rows.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from coresets_jax.core.rows import inverse_cdf, top_k


def test_inverse_cdf_is_searchsorted_on_the_cumsum():
    rng = np.random.default_rng(0)
    w = rng.uniform(0.0, 2.0, 500)
    w[rng.integers(0, 500, 50)] = 0.0  # rows of weight 0 are never drawn
    u = rng.uniform(0.0, w.sum(), 300)
    expected = np.searchsorted(np.cumsum(w), u, side="right")
    with jax.enable_x64(True):
        got = np.asarray(inverse_cdf(jnp.asarray(w), jnp.asarray(u)))
        got_cdf = np.asarray(inverse_cdf(jnp.asarray(np.cumsum(w)), jnp.asarray(u), cumulative=True))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_cdf, expected)
    assert np.all(w[np.minimum(got, w.size - 1)] > 0)


def test_top_k_matches_numpy_in_float32_and_float64():
    rng = np.random.default_rng(1)
    v = rng.normal(size=3000)
    vals, idx = top_k(jnp.asarray(v, jnp.float32), 25)
    order = np.argsort(-v.astype(np.float32), kind="stable")[:25]
    np.testing.assert_array_equal(np.asarray(idx), order)
    np.testing.assert_array_equal(np.asarray(vals), v.astype(np.float32)[order])
    with jax.enable_x64(True):
        vals, idx = top_k(jnp.asarray(v), 25)
        np.testing.assert_array_equal(np.asarray(idx), np.argsort(-v)[:25])
        np.testing.assert_array_equal(np.asarray(vals), np.sort(v)[::-1][:25])


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    from coresets_jax.io import atomic_write

    path = tmp_path / "out.json"
    atomic_write(path, lambda f: f.write(b"first"))
    assert path.read_bytes() == b"first"

    def half(f):
        f.write(b"sec")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, half)
    assert path.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
