"""Figures for coresets (matplotlib, an optional extra: `pip install -e ".[plot]"`).

- `coreset_points`: the data with the coreset's points drawn with area proportional to their weight, as in
  HC Figs. 2–5 (2-D data as is; otherwise the first two principal components, after dropping constant
  columns such as an intercept).
- `errors`: relative vector-sum error against coreset size M for several methods, and against construction
  time.
- `marginals`: posterior marginals of each parameter, full data against coresets.

Each function returns the matplotlib Figure and, with `path`, also writes it as PNG.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["coreset_points", "errors", "marginals", "principal_components"]


def _plt():
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("plots need the optional dependency matplotlib: pip install matplotlib "
                          "(or pip install -e \".[plot]\")") from err
    return plt


def _save(fig, path: Optional[str]):
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def principal_components(X: Any) -> tuple[np.ndarray, str]:
    """(N, 2) coordinates to draw and an axis description: X itself when it has two non-constant columns,
    else its first two principal components."""
    X = np.asarray(X, np.float64)
    if X.ndim == 1:
        X = X[:, None]
    varying = X[:, np.ptp(X, axis=0) > 0]
    if varying.shape[1] == 0:
        raise ValueError("X: every column is constant, so there is nothing to draw")
    if varying.shape[1] == 1:
        return np.column_stack([varying[:, 0], np.zeros(len(X))]), "x"
    if varying.shape[1] == 2:
        return varying, "x"
    centred = varying - varying.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    share = s[:2] ** 2 / np.sum(s ** 2)
    return centred @ vt[:2].T, f"PC (variance shares {share[0]:.0%}, {share[1]:.0%})"


def coreset_points(X: Any, indices: Any, weights: Any, labels: Any = None, *, title: str = "", ax=None,
                   path: Optional[str] = None, max_background: int = 20_000):
    """Scatter the data (grey; coloured by `labels` if given) and the coreset rows sized by weight."""
    plt = _plt()
    xy, axis_name = principal_components(X)
    indices, weights = np.asarray(indices), np.asarray(weights, np.float64)
    keep = weights > 0
    indices, weights = indices[keep], weights[keep]
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(5.2, 4.6))
    rng = np.random.default_rng(0)
    shown = rng.choice(len(xy), min(len(xy), max_background), replace=False)
    if labels is not None:
        labels = np.asarray(labels)
        for value, colour in zip(np.unique(labels)[:2], ("tab:blue", "tab:orange")):
            sel = shown[labels[shown] == value]
            ax.scatter(xy[sel, 0], xy[sel, 1], s=3, color=colour, alpha=0.3, linewidths=0,
                       label=f"data, y = {value:g}")
    else:
        ax.scatter(xy[shown, 0], xy[shown, 1], s=2, c="0.6", alpha=0.3, linewidths=0, label="data")
    if len(weights):
        area = 15 + 400 * weights / weights.max()
        ax.scatter(xy[indices, 0], xy[indices, 1], s=area, facecolors="none", edgecolors="black",
                   linewidths=1.0)
        # A legend entry of fixed size (the largest circle would swamp the legend).
        ax.scatter([], [], s=40, facecolors="none", edgecolors="black",
                   label=f"coreset: {len(weights)} points, area ∝ weight (max {weights.max():.3g})")
    ax.set_xlabel(f"{axis_name} 1" if axis_name != "x" else "x₁")
    ax.set_ylabel(f"{axis_name} 2" if axis_name != "x" else "x₂")
    ax.set_title(title or "coreset points sized by weight")
    # Below the axes: inside them it would hide points (a heavy point's circle is large).
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=7, frameon=False)
    return _save(fig or ax.figure, path)


def errors(rows: Sequence[dict], *, path: Optional[str] = None, title: str = ""):
    """Two panels: error against M, and error against construction time, one line per method.

    rows: dicts with `method`, `size`, `relative_error`, `time_s` (as in the CLI's results.json); a size
    "auto" is plotted at its `chosen_size`.
    """
    plt = _plt()
    fig, (ax_m, ax_t) = plt.subplots(1, 2, figsize=(10, 4))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    size = lambda r: r["chosen_size"] if r["size"] == "auto" else r["size"]  # noqa: E731
    for method in methods:
        mine = sorted((r for r in rows if r["method"] == method), key=size)
        m = [size(r) for r in mine]
        err = [max(r["relative_error"], 1e-12) for r in mine]
        t = [max(r["time_s"], 1e-6) for r in mine]
        ax_m.plot(m, err, "o-", label=method)
        ax_t.plot(t, err, "o-", label=method)
        for ti, ei, mi in zip(t, err, m):
            ax_t.annotate(f"M={mi}", (ti, ei), fontsize=6, xytext=(3, 3), textcoords="offset points")
    for ax in (ax_m, ax_t):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("relative error ‖Σv − Vᵀw‖ / ‖Σv‖")
    ax_m.set_xlabel("coreset size M")
    ax_t.set_xlabel("construction time (s, median after compilation)")
    ax_m.legend(fontsize=8)
    ax_m.set_title("error against size")
    ax_t.set_title("error against time")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def marginals(full: Any, others: dict, *, names: Optional[Sequence[str]] = None,
              path: Optional[str] = None, title: str = "", max_params: int = 6):
    """Histograms of each parameter's marginal: the full-data posterior (filled) against each coreset's.

    full: (S, D) draws (or (C, S, D)); others: {label: draws of the same D}.
    """
    plt = _plt()

    def flat(a):
        a = np.asarray(a, np.float64)
        return a.reshape(-1, a.shape[-1])

    full = flat(full)
    d = min(full.shape[1], max_params)
    names = list(names) if names is not None else [f"θ{i}" for i in range(full.shape[1])]
    cols = min(d, 3)
    rows = -(-d // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for i in range(d):
        ax = axes[i // cols][i % cols]
        lo, hi = np.percentile(full[:, i], [0.5, 99.5])
        for label, draws in others.items():
            draws = flat(draws)
            lo, hi = min(lo, np.percentile(draws[:, i], 0.5)), max(hi, np.percentile(draws[:, i], 99.5))
        pad = 0.05 * (hi - lo + 1e-12)
        bins = np.linspace(lo - pad, hi + pad, 50)
        ax.hist(full[:, i], bins=bins, density=True, color="0.75", label="full data")
        for label, draws in others.items():
            ax.hist(flat(draws)[:, i], bins=bins, density=True, histtype="step", linewidth=1.4, label=label)
        ax.set_title(names[i] if i < len(names) else f"θ{i}")
        ax.set_yticks([])
    for j in range(d, rows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title or "posterior marginals: full data against coresets")
    fig.tight_layout()
    return _save(fig, path)
