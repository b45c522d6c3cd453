"""Independent plain NumPy/SciPy solvers, written from the papers (never from the package's code).

- `frank_wolfe` (HC Algorithm 2), `giga` (Campbell & Broderick 2018, Alg. 1) and `iht2` (IHT Algorithm 3),
  written the straightforward way: one or two matvecs over V per iteration, dtype of V. They run exactly
  `iterations` iterations (no early stop) and return the dense weight vector: the "plain NumPy" baseline of
  benchmarks/perf.py and the twins of the fidelity table (benchmarks/solvers.py --fidelity).
- `aiht2_algorithm3` (A-IHT II towards any target y, as printed or as the authors' code runs it) and
  `omp_nnls` (orthogonal pursuit with SciPy's exact NNLS), float64: the fidelity table's twins.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import nnls

__all__ = ["aiht2_algorithm3", "frank_wolfe", "giga", "iht2", "omp_nnls"]


def frank_wolfe(V: np.ndarray, iterations: int) -> np.ndarray:
    sig_n = np.linalg.norm(V, axis=1)
    sig_n = np.where(sig_n > 0, sig_n, np.inf)
    sig = sig_n[np.isfinite(sig_n)].sum()
    L = V.sum(0)
    w = np.zeros(V.shape[0], V.dtype)
    f = np.argmax(V @ L / sig_n)
    w[f] = sig / sig_n[f]
    Lw = sig / sig_n[f] * V[f]
    for _ in range(iterations - 1):
        r = L - Lw
        f = np.argmax(V @ r / sig_n)
        u = sig / sig_n[f] * V[f] - Lw
        gamma = np.clip(u @ r / (u @ u), 0.0, 1.0)
        w *= 1 - gamma
        w[f] += gamma * sig / sig_n[f]
        Lw = Lw + gamma * u
    return w


def giga(V: np.ndarray, iterations: int) -> np.ndarray:
    sig_n = np.linalg.norm(V, axis=1)
    valid = sig_n > 0
    sig_n = np.where(valid, sig_n, 1.0)
    y = V.sum(0)
    ynorm = np.linalg.norm(y)
    ell = y / ynorm
    w = np.zeros(V.shape[0], V.dtype)  # coefficients of v_n in l(w)
    lw = np.zeros_like(ell)
    eps = 10 * np.finfo(V.dtype).eps
    for _ in range(iterations):
        z1 = ell @ lw
        d = ell - z1 * lw
        dn = np.linalg.norm(d)
        if dn <= eps:
            break
        d /= dn
        proj = V @ np.stack([d, lw], axis=1)
        along, cos = proj[:, 0] / sig_n, proj[:, 1] / sig_n
        sin2 = 1 - cos * cos
        scores = np.where(valid & (sin2 > eps), along / np.sqrt(np.maximum(sin2, eps)), -np.inf)
        f = int(np.argmax(scores))
        lf = V[f] / sig_n[f]
        z0, z2 = ell @ lf, cos[f]
        ga, gb = z0 - z1 * z2, z1 - z0 * z2
        gamma = np.clip(ga / (ga + gb), 0.0, 1.0) if ga + gb > 0 else 0.0
        new = (1 - gamma) * lw + gamma * lf
        nrm = np.linalg.norm(new)
        w *= (1 - gamma) / nrm
        w[f] += gamma / nrm / sig_n[f]
        lw = new / nrm
    return np.maximum(w * ynorm * (ell @ lw), 0.0)


def _line(r, d):
    dd = d @ d
    return (r @ d) / dd if dd > 0 else 0.0


def iht2(V: np.ndarray, k: int, iterations: int) -> np.ndarray:
    """A-IHT II with the de-bias step; dense N-vectors, one pass over V (the gradient) per iteration."""
    n = V.shape[0]
    y = V.sum(0)
    w = np.zeros(n, V.dtype)
    w_prev = np.zeros(n, V.dtype)
    approx = np.zeros_like(y)
    approx_prev = np.zeros_like(y)
    tau = 0.0
    for _ in range(iterations):
        z = w + tau * (w - w_prev)
        phi_z = approx + tau * (approx - approx_prev)
        r = y - phi_z
        g = V @ r
        in_z = z != 0
        cand = np.where(in_z, -1.0, np.abs(g))
        new = np.argpartition(-cand, k)[:k]
        S = np.union1d(np.flatnonzero(in_z), new)
        mu = _line(r, g[S] @ V[S])
        x = z + mu * g
        x = np.maximum(x, 0)
        top = np.argpartition(-x, k)[:k]
        vals = x[top]
        rows = V[top]
        r2 = y - vals @ rows
        g2 = np.where(vals > 0, rows @ r2, 0.0)
        vals = np.maximum(vals + _line(r2, g2 @ rows) * g2, 0.0)
        w_prev, approx_prev = w, approx
        w = np.zeros(n, V.dtype)
        w[top] = vals
        approx = vals @ rows
        tau = _line(y - approx, approx - approx_prev)
    return w


def aiht2_algorithm3(V, y, k, authors=False, max_iter=300, tol=1e-5):
    """IHT Algorithm 3 from w_0 = 0: (weights, iterations).

    authors=False: as printed (exact line-search steps, de-bias on supp(x_t)), returning the lowest-f iterate
    as cj.build does. authors=True: as the authors' published code runs it (module docstring): half steps,
    de-bias on the k slots of x_t, the last iterate returned, no stop test at the first iteration."""
    n = V.shape[0]
    step = 0.5 if authors else 1.0
    w, w_prev, z = np.zeros(n), np.zeros(n), np.zeros(n)
    Aw, Aw_prev, tau = np.zeros_like(y), np.zeros_like(y), 0.0
    best, best_f = np.zeros(n), np.inf
    for t in range(1, max_iter + 1):
        g = V @ (y - (Aw + tau * (Aw - Aw_prev)))  # -grad f(z) / 2
        in_z = z != 0
        outside = np.where(in_z, -1.0, np.abs(g))
        S = np.union1d(np.flatnonzero(in_z), np.argsort(-outside, kind="stable")[:k])
        d = g[S] @ V[S]
        mu = step * (g[S] @ g[S]) / (d @ d) if d @ d > 0 else 0.0  # line 6 along g_S
        x = z + mu * g
        top = np.argsort(-x, kind="stable")[:k]
        vals = np.maximum(x[top], 0.0)
        rows = V[top]
        g2 = rows @ (y - vals @ rows)  # lines 8-10
        if not authors:
            g2 = np.where(vals > 0, g2, 0.0)  # on supp(x_t)
        d2 = g2 @ rows
        if d2 @ d2 > 0:
            vals = np.maximum(vals + step * (g2 @ g2) / (d2 @ d2) * g2, 0.0)
        w_prev, Aw_prev = w, Aw
        w = np.zeros(n)
        w[top] = vals
        Aw = vals @ rows
        diff = Aw - Aw_prev
        tau = (y - Aw) @ diff / (diff @ diff) if diff @ diff > 0 else 0.0  # lines 11-12
        z = w + tau * (w - w_prev)
        f = np.sum((y - Aw) ** 2)
        if f < best_f:
            best, best_f = w, f
        if (t > 1 or not authors) and np.linalg.norm(w - w_prev) <= tol * np.linalg.norm(w):
            break
    return (w if authors else best), t


def omp_nnls(V, y, M, steps=None):
    """Orthogonal pursuit: the row outside the support most correlated with the residual joins, SciPy's
    exact NNLS re-solves the support weights, rows with weight 0 leave and may return."""
    sig = np.linalg.norm(V, axis=1)
    sig = np.where(sig > 0, sig, np.inf)
    support, w = [], np.zeros(0)
    for _ in range(2 * M if steps is None else steps):
        r = y - (w @ V[support] if support else 0.0)
        scores = V @ r / sig
        scores[support] = -np.inf
        f = int(np.argmax(scores))
        if scores[f] <= 64 * np.finfo(float).eps * np.linalg.norm(r) or len(support) >= M:
            break
        support.append(f)
        w, _ = nnls(V[support].T, y, maxiter=100 * len(support) + 1000)
        keep = w > 0
        support, w = [s for s, kp in zip(support, keep) if kp], w[keep]
    out = np.zeros(V.shape[0])
    out[support] = w
    return out
