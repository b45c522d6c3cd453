"""The helpers each piece of shared logic lives in once (issue 23), against plain NumPy: the inverse-CDF
draw and top-k of core/rows.py, the atomic write of io.py and the option checks of core/validate.py."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_events import recorded_compilations

from coresets_jax.core.rows import block_top_k, fold_row_chunks, inverse_cdf, top_k


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


@pytest.mark.parametrize("kind", ["normal", "ties", "special", "all_minus_inf", "signed_zeros"])
def test_block_top_k_is_lax_top_k_bit_for_bit(kind):
    """The blocked top-k that OMP's selection uses on long vectors: the same indices and values as
    lax.top_k (ties to the lower index, -0 below +0, NaN above all), for lengths that are not a multiple of
    the block, under jit and vmap; on ordinary floats also NumPy's stable descending order."""
    rng = np.random.default_rng(["normal", "ties", "special", "all_minus_inf", "signed_zeros"].index(kind))
    for n, k, block in [(1000, 8, 64), (997, 5, 7), (4099, 30, 100), (65, 3, 2), (70000, 8, 64)]:
        x = {"normal": lambda: rng.normal(size=n),
             "ties": lambda: rng.integers(-3, 3, size=n).astype(float),
             "special": lambda: rng.choice([-np.inf, np.inf, np.nan, 0.0, -0.0, 1.0, -1.0], size=n),
             "all_minus_inf": lambda: np.full(n, -np.inf),
             "signed_zeros": lambda: rng.choice([0.0, -0.0], size=n)}[kind]()
        x = np.asarray(x, np.float32)
        if kind == "special":
            x[::3] = -np.abs(np.float32(np.nan))  # a NaN with the sign bit set
        ref_vals, ref_idx = jax.lax.top_k(jnp.asarray(x), k)
        vals, idx = jax.jit(block_top_k, static_argnums=(1, 2))(jnp.asarray(x), k, block)
        np.testing.assert_array_equal(np.asarray(idx), np.asarray(ref_idx))
        np.testing.assert_array_equal(np.asarray(vals).view(np.int32), np.asarray(ref_vals).view(np.int32))
        if kind in ("normal", "ties"):
            np.testing.assert_array_equal(np.asarray(idx), np.argsort(-x, kind="stable")[:k])
    batch = jnp.asarray(rng.integers(-5, 5, size=(4, 70000)), jnp.float32)  # top_k takes the blocked path
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda v: top_k(v, 8)[1])(batch)),
                                  np.argsort(-np.asarray(batch), axis=1, kind="stable")[:, :8])


@pytest.mark.parametrize("n, chunk", [(10, 3), (9, 3), (5, 8), (1, 1), (1000, 64)])
def test_fold_row_chunks_counts_every_row_once_and_writes_every_row(n, chunk):
    """The chunk loop of the projection and the certificate's passes: with the `fresh` mask each row enters a
    sum exactly once (NumPy's sum of the rows, and a count of n), and in-place writes at `start` cover every
    row (the last chunk overlaps the one before)."""
    rng = np.random.default_rng(n)
    # integer-valued floats: their float32 sums are exact, so a row counted twice or missed shows
    data = (jnp.asarray(rng.integers(-50, 50, size=(n, 3)), jnp.float32), jnp.asarray(np.arange(n)))

    def add(carry, rows, start, fresh):
        total, count, out = carry
        x, idx = rows
        total = total + jnp.sum(jnp.where(fresh[:, None], x, 0.0), axis=0)
        out = jax.lax.dynamic_update_slice_in_dim(out, idx[:, None] + 1, start, 0)
        return total, count + jnp.sum(fresh), out

    init = (jnp.zeros(3, data[0].dtype), jnp.asarray(0), jnp.zeros((n, 1), data[1].dtype))
    total, count, out = jax.jit(lambda d: fold_row_chunks(add, init, d, chunk))(data)
    np.testing.assert_array_equal(np.asarray(total), np.asarray(data[0], np.float64).sum(axis=0))
    assert int(count) == n
    np.testing.assert_array_equal(np.asarray(out)[:, 0], np.arange(n) + 1)


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


def _compilations(fn):
    """(fn(), the number of XLA compilations it ran)."""
    with recorded_compilations() as names:
        out = fn()
    return out, len(names)


def test_host_checks_and_gathers_read_cpu_arrays_in_place_without_compiling():
    """A CPU device's array is host memory: `count_nonfinite` counts it with NumPy in blocks of HOST_BLOCK,
    and `gather` takes its rows with NumPy, both without an XLA compilation, and both equal to plain NumPy
    on arrays larger than HOST_CHECK_MAX (where they used to compile a reduction and a gather)."""
    from coresets_jax.core import validate

    block = validate.HOST_BLOCK
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3 * block + 5) // 5 * 5).astype(np.float32).reshape(-1, 5)
    flat = x.reshape(-1)
    bad = [0, block - 1, block, 2 * block + 3, flat.size - 1]  # either side of each block's edge
    flat[bad] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
    on_device = jax.device_put(x)
    assert validate.host_view(on_device) is not None and not validate.host_view(on_device).flags.owndata
    count, compiles = _compilations(lambda: validate.count_nonfinite(on_device))
    assert (count, compiles) == (int(np.count_nonzero(~np.isfinite(x))), 0) == (5, 0)
    idx = np.sort(rng.choice(x.shape[0], 777, replace=False))
    y = jax.device_put(rng.integers(0, 9, x.shape[0]).astype(np.int32))
    for leaf, host in ((on_device, x), (y, np.asarray(y))):
        rows, compiles = _compilations(lambda: validate.gather(leaf, idx))
        assert compiles == 0 and rows.dtype == host.dtype
        np.testing.assert_array_equal(np.asarray(rows), host[idx])
