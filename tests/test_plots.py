"""Plots: what each figure draws (checked on the matplotlib artists), and PNG files written."""

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from coresets_jax import plots  # noqa: E402


def test_principal_components_against_numpy():
    rng = np.random.default_rng(0)
    # Two varying columns plus an intercept: drawn as they are.
    X = np.column_stack([rng.normal(size=100), rng.normal(size=100), np.ones(100)])
    xy, name = plots.principal_components(X)
    np.testing.assert_array_equal(xy, X[:, :2])
    assert name == "x"
    # Five correlated columns: the first two principal components, variance = the top two eigenvalues.
    Z = rng.normal(size=(500, 5)) @ rng.normal(size=(5, 5))
    xy, name = plots.principal_components(np.column_stack([Z, np.ones(500)]))
    eig = np.sort(np.linalg.eigvalsh(np.cov(Z, rowvar=False)))[::-1]
    np.testing.assert_allclose(np.var(xy, axis=0, ddof=1), eig[:2], rtol=1e-8)
    assert name.startswith("PC")
    with pytest.raises(ValueError, match="constant"):
        plots.principal_components(np.ones((10, 2)))


def test_coreset_points_sizes_follow_weights(tmp_path):
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=(300, 2)), np.ones(300)])
    y = np.where(rng.random(300) < 0.5, -1.0, 1.0)
    indices = np.array([3, 10, 42, 0])
    weights = np.array([1.0, 4.0, 2.0, 0.0])  # the last slot is padding
    fig = plots.coreset_points(X, indices, weights, y, path=str(tmp_path / "c.png"))
    ax = fig.axes[0]
    coreset = [c for c in ax.collections if len(c.get_offsets()) == 3][0]
    np.testing.assert_allclose(coreset.get_sizes(), 15 + 400 * weights[:3] / 4.0)
    np.testing.assert_allclose(coreset.get_offsets(), X[indices[:3], :2])
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_errors_and_marginals(tmp_path):
    rows = [{"method": m, "size": s, "relative_error": e, "time_s": t}
            for m, f in (("giga", 1.0), ("uniform", 5.0))
            for s, e, t in ((10, 1.0 * f, 0.01), (100, 0.3 * f, 0.02))]
    fig = plots.errors(rows, path=str(tmp_path / "e.png"))
    by_size, by_time = fig.axes
    lines = {line.get_label(): line for line in by_size.get_lines()}
    assert set(lines) == {"giga", "uniform"}
    np.testing.assert_allclose(lines["uniform"].get_ydata(), [5.0, 1.5])
    np.testing.assert_allclose(by_time.get_lines()[0].get_xdata(), [0.01, 0.02])
    rng = np.random.default_rng(2)
    full = rng.normal(size=(2, 400, 4))
    fig = plots.marginals(full, {"coreset": rng.normal(0.5, 1.0, size=(400, 4))}, names=list("abcd"),
                          path=str(tmp_path / "m.png"))
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == list("abcd")
    for name in ("e.png", "m.png"):
        assert (tmp_path / name).stat().st_size > 1000
