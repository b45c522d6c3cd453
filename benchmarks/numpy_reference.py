"""Plain NumPy Frank–Wolfe (HC Algorithm 2), GIGA (Campbell & Broderick 2018, Alg. 1) and A-IHT II
(IHT Algorithm 3), written the straightforward way: one or two matvecs over V per iteration, dtype of V.

Used by benchmarks/perf.py as the "plain NumPy" baseline. Each function runs exactly `iterations`
iterations (no early stop) and returns the dense weight vector.
"""

from __future__ import annotations

import numpy as np

__all__ = ["frank_wolfe", "giga", "iht2"]


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
