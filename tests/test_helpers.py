"""The helpers each piece of shared logic lives in once (issue 23), against plain NumPy: the inverse-CDF
draw and top-k of core/rows.py, the atomic write of io.py and the option checks of core/validate.py."""

import re

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
    from coresets_jax.interop.io import atomic_write

    path = tmp_path / "out.json"
    atomic_write(path, lambda f: f.write(b"first"))
    assert path.read_bytes() == b"first"

    def half(f):
        f.write(b"sec")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, half)
    assert path.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


# --------------------------------------------------------------------------------------------------------
# The option checks of core/validate.py: each names the argument and what was given.


@pytest.mark.parametrize("check, good, bad", [
    ("check_positive_int", [1, 7, np.int64(3)], [True, False, 1.5, 0, -1, "2", None, np.float32(2.0)]),
    ("check_nonneg_int", [0, 5, np.int32(0)], [True, 0.5, -1, None]),
    ("check_bool", [True, False, np.bool_(True)], [1, 0, 1.5, None, "True"]),
    ("check_positive_float", [0.5, 2, np.float32(1e-3)], [True, 0, -1.0, float("nan"), float("inf"), "1"]),
    ("check_nonneg_float", [0, 0.0, 3.5], [True, -1e-9, float("nan"), float("inf"), None]),
    ("check_fraction", [1, 0.25, 1.0], [True, 0, 0.0, 1.5, -0.5, float("nan")]),
])
def test_option_checks_accept_and_reject(check, good, bad):
    from coresets_jax.core import validate

    fn = getattr(validate, check)
    for value in good:
        out = fn(value, "my_arg")
        assert out == value and type(out) in (int, float, bool), (check, value, out)
    for value in bad:
        with pytest.raises(ValueError, match=r"my_arg: expected .*, got " + re.escape(repr(value))):
            fn(value, "my_arg")


def test_check_int_range_and_error_type():
    from coresets_jax.core import validate

    assert validate.check_int(3, "k", 1, 3) == 3
    for value in (0, 4, 2.0):
        with pytest.raises(ValueError, match=r"k: expected an integer in \[1, 3\], got"):
            validate.check_int(value, "k", 1, 3)
    with pytest.raises(ValueError, match=r"n: expected an integer >= 2, got 1"):
        validate.check_int(1, "n", 2)

    class Custom(ValueError):
        pass

    with pytest.raises(Custom, match="flag: expected True or False, got 1"):
        validate.check_bool(1, "flag", error=Custom)
    with pytest.raises(ValueError, match=r"step_jitter: expected a number in \[0, 1\), got 1"):
        validate.check_float(1, "step_jitter", 0, 1, open_high=True)
