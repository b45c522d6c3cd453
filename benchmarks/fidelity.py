"""Fidelity and reference-setting speed of the solvers (issue 11), used by `benchmarks/solvers.py --fidelity`.

Fidelity: each solver's relative error ||y - V^T w|| / ||y|| in float64 and float32, beside an independent
plain NumPy/SciPy implementation written here from the papers (float64):
  - A-IHT II, IHT Algorithm 3 (appendix A) with the exact line-search steps as printed, and as the authors'
    published NumPy code runs it: each of the two line-search steps (lines 6 and 9) is half the exact one (its
    factor 1/2 multiplies Phi^T r, not the gradient 2 Phi^T r), the de-bias gradient covers the k slots of x_t,
    and the last iterate is returned (written here from that description, not copied);
  - orthogonal pursuit with SciPy's exact NNLS on the support and re-selection of rows whose weight fell to 0;
  - GIGA (Campbell & Broderick 2018, Algorithm 1) and Frank-Wolfe (HC Algorithm 2): benchmarks/numpy_reference.py.
Problems:
  - "cone": the IHT authors' example, uniform(-1/2, 1/2) vectors (N = 1000, J = 300), target in the cone of
    K = 100 of them with uniform(0, 1) weights (numpy seed 233); the target is not sum_n v_n, so only the
    sparse regression solvers (A-IHT II, OMP) apply;
  - "fisher": Fisher features (HC Eq. 5.7) of synthetic logistic regression (HC §7.2), Laplace pi_hat,
    target sum_n v_n: N = 1000 (J = 100, M = 30) and N = 5000 (J = 200, M = 100);
  - "opposite pairs" (issue 24): the K = 100 rows that define the target, P = 450 random rows a_p each beside
    -a_p, and one offset row that puts sum_n v_n in the cone of the K rows (J = 300, N = 1001, uniform(-1/2,
    1/2), numpy seed 233, drawn as one (J, K + P) matrix, then the weights); the target is sum_n v_n, so every
    solver applies. The previous A-IHT II default (swap=False) stalled there at 1.1e-2.
OMP's float32 round-off floor: sqrt(J) eps32 sum_S w_n ||v_n|| / ||y|| of its float32 solution.
Speed: GIGA and Frank-Wolfe at the reference library's own setting (centred L2 features of synthetic logistic
regression, N = 20000, J = 500, M = 500, float32 V), cj.build at its defaults (compress="auto") and with
compress=False, against the plain NumPy implementation on the same V and, with --reference-library PATH (a
checkout of github.com/trevorcampbell/bayesian-coresets, which is run, not copied), against the reference
library's own `snnls.GIGA` / `snnls.FrankWolfe` on the same V in float64 (its own dtype; it is slower in
float32). Alternating, medians, in one run.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import nnls

import coresets_jax as cj
import numpy_reference as npref
from coresets_jax.solvers import make_problem, run
from coresets_jax.solvers.frank_wolfe import frank_wolfe
from coresets_jax.solvers.giga import giga
from coresets_jax.solvers.iht import iht2
from coresets_jax.solvers.omp import omp

# ------------------------------------------------------------------------------------------------------
# Independent NumPy implementations (float64), written from the papers.


def numpy_aiht2(V, y, k, authors=False, max_iter=300, tol=1e-5):
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


def numpy_omp(V, y, M, steps=None):
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


# ------------------------------------------------------------------------------------------------------
# Problems.


def cone(support_first=True):
    """The authors' example (their draw order: the support, then the weights); support_first=False draws the
    weights first (another instance of the same construction, on which every A-IHT II variant stalls)."""
    rng = np.random.RandomState(233)
    A = rng.rand(300, 1000) - 0.5
    w = np.zeros(1000)
    if support_first:
        support = rng.permutation(1000)[:100]
        w[support] = rng.rand(100)
    else:
        values = rng.rand(100)
        w[rng.permutation(1000)[:100]] = values
    return A.T.copy(), A @ w, 100


def opposite_pairs(seed=233, j=300, k=100, p=450):
    """Issue 24's example (module docstring); returns (V, sum_n v_n, K)."""
    rng = np.random.RandomState(seed)
    A = rng.rand(j, k + p) - 0.5
    w = rng.rand(k)
    rows, pairs = A[:, :k].T, A[:, k:].T
    V = np.concatenate([rows, np.stack([pairs, -pairs], axis=1).reshape(2 * p, j), ((w - 1.0) @ rows)[None]])
    return V, V.sum(0), k


def fisher(n, j, seed=0):
    kd, kp, kt, kf = jax.random.split(jax.random.key(seed), 4)
    ds = cj.data.synthetic_logistic(kd, n)
    model = cj.models.logistic_regression()
    approx = cj.laplace(model, ds.train, key=kp)
    with jax.enable_x64(True):
        V = cj.project(model, ds.train, approx.sample(kt, j), norm="fisher", key=kf, dtype=jnp.float64)
        V = np.asarray(V, np.float64)
    return V, V.sum(0)


def rel_error(V, y, w):
    return float(np.linalg.norm(y - w @ V) / np.linalg.norm(y))


def ours(solver, V, y, dtype):
    """(dense weights in float64, seconds after compilation, iterations or None) of a solver run on target y."""
    problem = make_problem(jnp.asarray(V, dtype))._replace(target=jnp.asarray(y, dtype))
    fn = jax.jit(lambda p: run(solver, p, jax.random.key(0)))
    idx, w, _ = fn(problem)
    w.block_until_ready()
    t0 = time.perf_counter()
    idx, w, info = fn(problem)
    w.block_until_ready()
    t = time.perf_counter() - t0
    dense = np.zeros(V.shape[0])
    np.add.at(dense, np.asarray(idx), np.asarray(w, np.float64))
    return dense, t, (int(info["iterations"]) if "iterations" in info else None)


def fidelity_rows():
    problems = [("cone", *cone()), ("cone, weights drawn first", *cone(False)),
                ("fisher N=1000", *fisher(1000, 100), 30),
                ("fisher N=5000", *fisher(5000, 200), 100),
                ("opposite pairs", *opposite_pairs())]
    rows = []
    for name, V, y, M in problems:
        sparse_only = name.startswith("cone")
        printed = ("A-IHT II as printed (NumPy)", lambda: numpy_aiht2(V, y, M))
        authors = ("A-IHT II as the authors' code runs it (NumPy)", lambda: numpy_aiht2(V, y, M, authors=True))
        ortho = ("orthogonal pursuit + SciPy NNLS (NumPy)", lambda: (numpy_omp(V, y, M), None))
        variants = [("iht2 (default)", lambda: iht2(M), [printed, authors]),
                    ("iht2 swap=False (the previous default)", lambda: iht2(M, swap=False), []),
                    ("iht2 debias='step'", lambda: iht2(M, debias="step"), []),
                    ("omp (default)", lambda: omp(M), [ortho]),
                    ("omp exact_nnls=False (the previous default)", lambda: omp(M, exact_nnls=False), [])]
        if not sparse_only:
            variants += [("giga", lambda: giga(M), [("GIGA (numpy_reference)", lambda: (npref.giga(V, M), None))]),
                         ("frank_wolfe", lambda: frank_wolfe(M),
                          [("Frank-Wolfe (numpy_reference)", lambda: (npref.frank_wolfe(V, M), None))])]
        for label, make, twins in variants:
            row = dict(problem=name, N=V.shape[0], J=V.shape[1], M=M, solver=label)
            with jax.enable_x64(True):
                w64, t64, it64 = ours(make(), V, y, jnp.float64)
            w32, t32, it32 = ours(make(), V, y, jnp.float32)
            row.update(error_float64=rel_error(V, y, w64), error_float32=rel_error(V, y, w32),
                       time_float64_s=t64, time_float32_s=t32, points=int(np.sum(w64 > 0)), twins={},
                       float32_roundoff_floor=float(np.sqrt(V.shape[1]) * np.finfo(np.float32).eps * np.sum(
                           np.abs(w32) * np.linalg.norm(V, axis=1)) / np.linalg.norm(y)))
            if it64 is not None:
                row.update(iterations_float64=it64, iterations_float32=it32, twin_iterations={})
            for twin_label, twin in twins:
                w_twin, its = twin()
                row["twins"][twin_label] = rel_error(V, y, w_twin)
                if its is not None:
                    row["twin_iterations"][twin_label] = its
            rows.append(row)
            print(f"{name:>14} {label:>22}: f64 {row['error_float64']:.2e}  f32 {row['error_float32']:.2e}  "
                  + (f"its {it64}/{it32}  " if it64 is not None else "")
                  + "  ".join(f"[{k}: {v:.2e}]" for k, v in row["twins"].items()), flush=True)
    return rows


def _reference_library(path):
    """The reference library's SNNLS classes, imported from a checkout at `path` (None: not measured)."""
    if path is None:
        return None
    import logging
    import sys

    sys.path.insert(0, path)
    import bayesiancoresets as bc

    logging.disable(logging.WARNING)  # it logs every numerical-precision retry
    return {"giga": bc.snnls.GIGA, "frank_wolfe": bc.snnls.FrankWolfe}


def speed_rows(n=20_000, j=500, m=500, repeats=3, reference_library=None):
    """GIGA and FW: cj.build (defaults, and compress=False) against numpy_reference on the same float32 V and,
    if given, the reference library on the same V in float64; alternating; medians."""
    from solvers import projected  # the centred L2 features of benchmarks/solvers.py

    V = projected(n, j)
    Vn = np.asarray(V)
    V64 = Vn.astype(np.float64)
    y = V64.sum(0)
    ref = _reference_library(reference_library)
    out = []
    for method, npfn in (("giga", npref.giga), ("frank_wolfe", npref.frank_wolfe)):
        variants = {"jax_default": {}, "jax_exact": dict(compress=False)}
        compressed = {}
        for label, opts in variants.items():  # compile
            cs = cj.build(V, m, method, **opts)
            compressed[label] = bool(cs.settings["compressed"])
            cs.weights.block_until_ready()
        times = {k: [] for k in list(variants) + ["numpy"] + (["reference_library"] if ref else [])}
        errors = {}
        for _ in range(repeats):
            for label, opts in variants.items():
                t0 = time.perf_counter()
                cs = cj.build(V, m, method, **opts)
                cs.weights.block_until_ready()
                times[label].append(time.perf_counter() - t0)
                errors[label] = rel_error(V64, y, np.asarray(cs.dense(n), np.float64))
            t0 = time.perf_counter()
            w = npfn(Vn, m)
            times["numpy"].append(time.perf_counter() - t0)
            errors["numpy"] = rel_error(V64, y, np.asarray(w, np.float64))
            if ref:
                A = V64.T.copy()
                t0 = time.perf_counter()
                alg = ref[method](A, A.sum(1))
                alg.build(m)
                times["reference_library"].append(time.perf_counter() - t0)
                errors["reference_library"] = rel_error(V64, y, alg.weights())
        med = {k: statistics.median(v) for k, v in times.items()}
        row = dict(method=method, N=n, J=j, M=m, dtype="float32", median_s=med, errors=errors,
                   default_compressed=compressed["jax_default"], repeats=repeats,
                   speedup_over_numpy={k: med["numpy"] / med[k] for k in variants})
        if ref:
            row["speedup_over_reference_library"] = {k: med["reference_library"] / med[k] for k in variants}
            row["error_ratio_to_reference_library"] = {k: errors[k] / errors["reference_library"]
                                                       for k in variants}
        out.append(row)
        print(f"{method}: " + "  ".join(f"{k} {v:.3f}s (err {errors[k]:.4f})" for k, v in med.items()), flush=True)
    return out
