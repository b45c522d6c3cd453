"""IHT §5: forward and reverse KL against K for Uniform, GIGA, A-IHT, A-IHT II (and Sparse VI), batched trials.

Cases (IHT §5.1-5.3 and appendix D):
- "gaussian": theta ~ N(0, I_D), x_n ~ N(theta, I_D), D = 200, N = 600 (IHT §5.1). Vectors are the exact
  centred L2(pi) features (rank D + 1, closed form; see `exact_vectors`), KL closed form in float64.
- "rbf": Bayesian RBF regression (IHT §5.2) on synthetic 2-D coordinates (`cj.data.synthetic_rbf`, the UK
  house prices are not shipped), N = 1000, D = 301, exact centred L2(pi) Gram factor, KL closed form.
- "glm": logistic (synth_lr, phishing, ds1) and Poisson (synth_poiss, biketrips, airportdelays) regression
  at N = 500 (the 500-row files of the shared data folder, loaded with `cj.load_npz`); pi_hat = Laplace,
  J = 500 centred features, KL between Laplace fits (IHT appendix D).
- IHT Fig. 4: f(w_t) = ||sum v - V^T w_t||^2 against iteration t for A-IHT and A-IHT II on the first
  Gaussian trial at K = 200 (GIGA and Uniform as horizontal lines: their final f).
- Construction times per method (compiled, median), including Sparse VI on two GLM datasets.

Trials of one (case, method, K) run as one `jit(vmap(solve))` over PRNG keys and datasets (Gaussian,
RBF) or over keys (GLM: the pi_hat draws, projection and solver are one pure function of the key).

    python benchmarks/iht.py [--trials 10] [--quick]
    python benchmarks/iht.py --starts [--trials 10] [--quick]   # the start ablation, results/iht_gaussian.*

writes benchmarks/results/iht.{json,png} (iht_quick.* with --quick). `--starts` is the IHT §5.1 ablation
(was benchmarks/iht_gaussian.py): uniform, GIGA, OMP, A-IHT and A-IHT II from the zero start, the GIGA start
and both, at D = 20, N = 200 ("miniature", tests/test_iht.py) and D = 200, N = 600 ("paper"), one
`cj.build` per trial, closed-form forward KL in float64; writes results/iht_gaussian.{json,png}.
"""

from __future__ import annotations

import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.metrics import gaussian_kls  # noqa: E402

METHODS = (("Uniform", "uniform"), ("GIGA", "giga"), ("A-IHT", "iht"), ("A-IHT II", "iht2"))
GLM = (("synth_lr", "logistic"), ("phishing", "logistic"), ("ds1", "logistic"),
       ("synth_poiss", "poisson"), ("biketrips", "poisson"), ("airportdelays", "poisson"))


# ---------------------------------------------------------------------------------------------------------
# Gaussian, IHT §5.1


def exact_vectors(x):
    """Exact centred L2(pi) features: with theta = mean + e, e ~ N(0, s I), s = 1 / (1 + N),
    L_n - E L_n = (x_n - mean)^T e - (|e|^2 - D s) / 2, so v_n = [sqrt(s)(x_n - mean), sqrt(D / 2) s]."""
    n, d = x.shape
    s = 1.0 / (1.0 + n)
    mean = x.sum(0) * s
    return jnp.concatenate([jnp.sqrt(s) * (x - mean), jnp.full((n, 1), jnp.sqrt(d / 2.0) * s, x.dtype)], 1)


def gaussian_kl_pair(x, w):
    """(forward KL(pi || pi_w), reverse KL(pi_w || pi)) for N(m, s I) posteriors, closed form."""
    d = x.shape[1]
    s1, s2 = 1.0 / (1.0 + x.shape[0]), 1.0 / (1.0 + jnp.sum(w))
    diff = (w @ x) * s2 - x.sum(0) * s1
    maha = diff @ diff
    fwd = 0.5 * (d * s1 / s2 + maha / s2 - d + d * jnp.log(s2 / s1))
    rev = 0.5 * (d * s2 / s1 + maha / s1 - d + d * jnp.log(s1 / s2))
    return fwd, rev


def gaussian_data(key, n, d):
    k_theta, k_x = jax.random.split(key)
    theta = jax.random.normal(k_theta, (d,), jnp.float64)
    return theta + jax.random.normal(k_x, (n, d), jnp.float64)


@functools.lru_cache(maxsize=None)
def gaussian_batched(method, K, n, d):
    solve = cj_solver(method, K)

    def trial(key):
        x = gaussian_data(key, n, d)
        V = exact_vectors(x).astype(jnp.float32)
        idx, w = solve(V, jax.random.fold_in(key, 1))
        wd = common.dense(idx, w.astype(jnp.float64), n)
        r = V.sum(0).astype(jnp.float64) - wd @ V.astype(jnp.float64)
        return (*gaussian_kl_pair(x, wd), r @ r)

    return jax.jit(jax.vmap(trial))


def cj_solver(method, K):
    return common.solver_fn(method, K)


def run_gaussian(trials, n, d, Ks, methods=METHODS):
    keys = jax.random.split(jax.random.key(1000), trials)
    out = {"D": d, "N": n, "K": list(Ks), "forward_kl": {}, "reverse_kl": {}, "f": {}}
    for label, method in methods:
        t0 = time.perf_counter()
        for name in ("forward_kl", "reverse_kl", "f"):
            out[name][label] = {}
        for K in Ks:
            fwd, rev, f = common.block(gaussian_batched(method, K, n, d)(keys))
            out["forward_kl"][label][str(K)] = common.summary(fwd)
            out["reverse_kl"][label][str(K)] = common.summary(rev)
            out["f"][label][str(K)] = common.summary(f)
        print(f"  gaussian {label}: fwd KL at K = {Ks[-1]}: "
              f"{out['forward_kl'][label][str(Ks[-1])]['median']:.3g} ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    return out


def convergence(n, d, K, iters, full=True):
    """IHT Fig. 4: f(w_t) per iteration of A-IHT and A-IHT II (first trial), final f of GIGA and Uniform.
    full=False (quick mode): A-IHT II from the zero start and Uniform only."""
    x = gaussian_data(jax.random.split(jax.random.key(1000), 1)[0], n, d)
    V = exact_vectors(x).astype(jnp.float32)
    res = {"K": K, "max_iter": iters}
    for label, method in (("A-IHT", "iht"), ("A-IHT II", "iht2")) if full else (("A-IHT II", "iht2"),):
        for init, suffix in (("zero", ""), ("both", " (best of zero and GIGA starts)"))[:2 if full else 1]:
            info = jax.jit(cj.build_fn(method, K, max_iter=iters, init=init))(V, jax.random.key(0)).info
            res[label + suffix] = np.asarray(info["objective"]).tolist()
    for label, method in (("GIGA", "giga"), ("Uniform", "uniform")) if full else (("Uniform", "uniform"),):
        idx, w = jax.jit(cj_solver(method, K))(V, jax.random.key(0))
        r = V.sum(0) - common.dense(idx, w, n) @ V
        res[label] = float(r @ r)
    return res


# ---------------------------------------------------------------------------------------------------------
# RBF regression, IHT §5.2


def rbf_case(key, n):
    ds = cj.data.synthetic_rbf(key, n=n, dtype=jnp.float64)
    problem = cj.models.rbf_regression(jax.random.fold_in(key, 1), ds.X, ds.y)
    return problem, cj.models.exact_centered_vectors(problem)


def run_rbf(trials, n, Ks, methods=METHODS):
    cases = [rbf_case(k, n) for k in jax.random.split(jax.random.key(52), trials)]
    Vs = jnp.stack([V.astype(jnp.float32) for _, V in cases])
    posts = [cj.models.rbf_posterior(p) for p, _ in cases]
    out = {"N": n, "D": int(cases[0][0].data[0].shape[1]), "K": list(Ks), "forward_kl": {}, "reverse_kl": {},
           "rank_of_V": int(np.median([np.sum(np.linalg.svd(np.asarray(V), compute_uv=False) >
                                                1e-8 * np.linalg.norm(np.asarray(V))) for _, V in cases[:2]]))}
    keys = jax.random.split(jax.random.key(5), trials)
    for label, method in methods:
        out["forward_kl"][label], out["reverse_kl"][label] = {}, {}
        t0 = time.perf_counter()
        for K in Ks:
            # vmap over datasets and keys at once
            idx, w = jax.jit(jax.vmap(cj_solver(method, K)))(Vs, keys)
            fwd, rev = [], []
            for t, (problem, _) in enumerate(cases):
                wd = common.dense(idx[t], w[t].astype(jnp.float64), n)
                kl = gaussian_kls(*posts[t], *cj.models.rbf_posterior(problem, wd))
                fwd.append(float(kl[0]))
                rev.append(float(kl[1]))
            out["forward_kl"][label][str(K)] = common.summary(fwd)
            out["reverse_kl"][label][str(K)] = common.summary(rev)
        print(f"  rbf {label}: fwd KL at K = {Ks[-1]}: {out['forward_kl'][label][str(Ks[-1])]['median']:.3g}"
              f" ({time.perf_counter() - t0:.0f} s)", flush=True)
    return out


# ---------------------------------------------------------------------------------------------------------
# Logistic and Poisson regression at N = 500, IHT §5.3 / appendix D


def glm_model(kind):
    return cj.models.logistic_regression() if kind == "logistic" else cj.models.poisson_regression()


@functools.lru_cache(maxsize=None)
def glm_projector(kind, J):
    """(keys, data, mean, chol) -> V (B, N, J): J draws of the Laplace pi_hat, centred features (pure)."""
    model = glm_model(kind)

    def project(key, data, mean, chol):
        thetas = mean + jax.random.normal(key, (J, mean.shape[0]), mean.dtype) @ chol.T
        # the key is unused by the centred norm
        return cj.project_fn(model, "centered", dtype=jnp.float32, chunk_size=data[0].shape[0])(key, data, thetas)

    return jax.jit(jax.vmap(project, in_axes=(0, None, None, None)))


@functools.lru_cache(maxsize=None)
def glm_solver(method, K):
    """(V (B, N, J), keys (B,)) -> coresets; every GLM file has N = 500, so one compilation per (method, K)
    serves all six datasets."""
    return jax.jit(jax.vmap(cj_solver(method, K)))


def run_glm(trials, Ks, J, names, sparse_vi_Ks, methods=METHODS):
    out = {"J": J, "K": list(Ks), "datasets": {}}
    for name, kind in names:
        path = common.data_path(f"{name}.npz")
        if path is None:
            print(f"  glm: {name}.npz not found, skipped", flush=True)
            continue
        ds = cj.load_npz(path)
        data = ds.train
        model = glm_model(kind)
        full = cj.laplace(model, data)
        chol = jnp.linalg.cholesky(full.cov)
        keys = jax.random.split(jax.random.key(11), trials)
        tp = common.time_fn(glm_projector(kind, J), keys, data, full.mean, chol, repeats=1)
        V = tp["output"]
        r = {"N": int(data[0].shape[0]), "D": int(data[0].shape[1]), "forward_kl": {}, "reverse_kl": {},
             "construction_s": {}, "projection_s_per_trial": tp["median_s"] / trials}
        for label, method in methods:
            r["forward_kl"][label], r["reverse_kl"][label] = {}, {}
            for K in Ks:
                tc = common.time_fn(glm_solver(method, K), V, keys, repeats=1)
                idx, w = tc["output"]
                fwd, rev = [], []
                for t in range(trials):
                    wd = common.dense(idx[t], w[t], r["N"])
                    try:
                        kl = cj.metrics.laplace_kl(model, data, wd, full=full)
                    except ValueError as e:  # the coreset's Laplace fit failed: recorded, left out of the KL
                        r.setdefault("laplace_failures", []).append(
                            {"method": label, "K": K, "trial": t, "error": str(e)[:200],
                             "num_points": int(jnp.sum(wd > 0)), "sum_w": float(jnp.sum(wd)),
                             "max_w": float(jnp.max(wd)), "indices": np.asarray(idx[t]).tolist(),
                             "weights": np.asarray(w[t]).tolist()})
                        print(f"  glm {name} {label} K = {K} trial {t}: Laplace failed ({e})", flush=True)
                        continue
                    fwd.append(float(kl["forward"]))
                    rev.append(float(kl["reverse"]))
                r["forward_kl"][label][str(K)] = common.summary(fwd) if fwd else None
                r["reverse_kl"][label][str(K)] = common.summary(rev) if rev else None
                r["construction_s"].setdefault(label, {})[str(K)] = {
                    "solver_s_per_trial": tc["median_s"] / trials,
                    "with_projection_s": tc["median_s"] / trials + r["projection_s_per_trial"]}
        if name in ("synth_lr", "synth_poiss"):
            r["sparse_vi"] = {}
            for K in sparse_vi_Ks:
                t0 = time.perf_counter()
                cs = cj.coreset(model, data, K, method="sparse_vi", key=jax.random.key(3), pi_hat=full)
                el = time.perf_counter() - t0
                kl = cj.metrics.laplace_kl(model, data, cs, full=full)
                r["sparse_vi"][str(K)] = {"forward_kl": float(kl["forward"]), "reverse_kl": float(kl["reverse"]),
                                          "time_s": el, "timing": "one call, compilation included",
                                          "trials": 1}
        out["datasets"][name] = r
        print(f"  glm {name}: fwd KL at K = {Ks[-1]}: " + ", ".join(
            f"{lab} {r['forward_kl'][lab][str(Ks[-1])]['median']:.3g}" for lab, _ in methods
            if r['forward_kl'][lab][str(Ks[-1])]), flush=True)
    return out


# ---------------------------------------------------------------------------------------------------------


def plot(res, out_dir, stem):
    """Forward KL of every case (rows of 4 panels), then reverse KL, then IHT Fig. 4 and the GLM times."""
    panels = [("gaussian", res["gaussian"])] + ([("rbf", res["rbf"])] if "K" in res["rbf"] else [])
    panels += list(res["glm"]["datasets"].items())
    ncols = 4
    case_rows = -(-len(panels) // ncols)
    fig, axes = common.figure(2 * case_rows + 1, ncols, size=(4.2, 3.2))
    for a in axes.ravel():
        a.axis("off")
    for block, metric in enumerate(("forward_kl", "reverse_kl")):
        for i, (name, r) in enumerate(panels):
            ax = axes[block * case_rows + i // ncols, i % ncols]
            ax.axis("on")
            Ks = res["glm"]["K"] if name not in ("gaussian", "rbf") else r["K"]
            for label, _ in METHODS:
                if label not in r[metric]:
                    continue
                s = r[metric][label]
                Kok = [K for K in Ks if s[str(K)]]
                ax.semilogy(Kok, [max(s[str(K)]["median"], 1e-12) for K in Kok], "o-", ms=3, label=label)
            if metric == "forward_kl" and "sparse_vi" in r:
                sv = r["sparse_vi"]
                ax.semilogy([int(k) for k in sv], [max(v["forward_kl"], 1e-12) for v in sv.values()], "k*", ms=10,
                            label="Sparse VI (1 trial)")
            extra = f", N = {r['N']}, D = {r['D']}" if "D" in r else ""
            ax.set_title(f"{name}{extra}: {metric.replace('_', ' ')} (median)", fontsize=9)
            ax.set_xlabel("K")
            ax.grid(True, which="both", alpha=0.3)
            if i == 0 or (metric == "forward_kl" and "sparse_vi" in r and i == 2):
                ax.legend(fontsize=7)
    ax = axes[-1, 0]
    ax.axis("on")
    c = res["convergence"]
    for label in ("A-IHT", "A-IHT II"):
        if label not in c:
            continue
        line, = ax.semilogy(np.maximum(c[label], 1e-16), label=f"{label} (zero start, as printed)")
        both = c.get(label + " (best of zero and GIGA starts)")
        if both is not None:
            ax.semilogy(np.maximum(both, 1e-16), ls=":", color=line.get_color(), label=f"{label} (default)")
    for label in ("GIGA", "Uniform"):
        if label not in c:
            continue
        ax.axhline(max(c[label], 1e-16), ls="--", lw=1, label=f"{label} (final)", color="k" if label == "GIGA"
                   else "gray")
    ax.set_title(f"IHT Fig. 4: f(w_t), Gaussian, K = {c['K']}", fontsize=9)
    ax.set_xlabel("iteration")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlim(0, c["max_iter"])
    ax.legend(fontsize=6)
    ax = axes[-1, 1]
    ax.axis("on")
    Kx = str(res["glm"]["K"][-1])
    labels = [lab for lab, _ in METHODS if all(lab in d["construction_s"] for d in res["glm"]["datasets"].values())]
    times = [np.median([d["construction_s"][lab][Kx]["with_projection_s"] for d in res["glm"]["datasets"].values()])
             for lab in labels]
    sv = [d["sparse_vi"] for d in res["glm"]["datasets"].values() if d.get("sparse_vi")]
    if sv:
        labels.append("Sparse VI")
        times.append(np.median([v["time_s"] for d in sv for v in d.values()]))
    ax.bar(labels, times)
    ax.set_yscale("log")
    svK = ",".join(sorted({k for d in sv for k in d}, key=int)) if sv else ""
    ax.set_title(f"GLM construction s per trial, median over files (K = {Kx}"
                 + (f"; Sparse VI: K = {svK}, 1 trial, incl. compile)" if sv else ")"), fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    common.save_figure(fig, out_dir, stem)


# ---------------------------------------------------------------------------------------------------------
# The start ablation of IHT §5.1 (--starts; was benchmarks/iht_gaussian.py): every A-IHT start and OMP.

# (label, method, options)
START_VARIANTS = (("uniform", "uniform", {}), ("giga", "giga", {}), ("omp", "omp", {}), ("iht", "iht", {}),
                  ("iht2_zero_start", "iht2", {"init": "zero"}), ("iht2_giga_start", "iht2", {"init": "giga"}),
                  ("iht2", "iht2", {}))
START_SETTINGS = {"miniature": (20, 200, (5, 10, 15, 20, 30, 50, 100)),  # tests/test_iht.py's problem
                  "paper": (200, 600, (10, 25, 50, 100, 150, 200, 250, 300))}


def run_starts_setting(name, trials):
    """Forward KL and f(w) of each START_VARIANTS entry against K, one `cj.build` per trial (not batched:
    OMP and the two-start A-IHT II are data-dependent loops, and the ablation is small)."""
    D, N, Ks = START_SETTINGS[name]
    kl = {label: {K: [] for K in Ks} for label, _, _ in START_VARIANTS}
    l2 = {label: {K: [] for K in Ks} for label, _, _ in START_VARIANTS}
    greedy_won = {K: [] for K in Ks}
    for trial in range(trials):
        k_theta, k_data, k_alg = jax.random.split(jax.random.key(1000 + trial), 3)
        # Draws and solvers in float32 (x64 off, as in the committed results/iht_gaussian.json); the vectors'
        # exact values, the KL and f(w) in float64.
        theta = jax.random.normal(k_theta, (D,))
        x = theta + jax.random.normal(k_data, (N, D))
        with jax.enable_x64(True):
            x = x.astype(jnp.float64)
            V64 = exact_vectors(x)
            V, y = V64.astype(jnp.float32), V64.sum(0)
        for K in Ks:
            for label, method, options in START_VARIANTS:
                cs = cj.build(V, K, method, key=k_alg, **options)
                with jax.enable_x64(True):
                    w = cs.dense(N).astype(jnp.float64)
                    kl[label][K].append(float(gaussian_kl_pair(x, w)[0]))
                    r = y - w @ V64
                    l2[label][K].append(float(r @ r))
                if label == "iht2":
                    greedy_won[K].append(bool(cs.info["greedy_start"]))
        print(f"{name}: trial {trial + 1}/{trials} done", flush=True)

    def summary(values):
        return {**common.summary(values), "trials": list(values)}

    out = {"D": D, "N": N, "K": list(Ks), "forward_kl": {}, "l2_objective": {}}
    for label, _, _ in START_VARIANTS:
        out["forward_kl"][label] = {str(K): summary(kl[label][K]) for K in Ks}
        out["l2_objective"][label] = {str(K): summary(l2[label][K]) for K in Ks}
    g = {K: np.asarray(kl["giga"][K]) for K in Ks}
    out["fraction_of_trials_kl_le_giga"] = {
        label: {str(K): float(np.mean(np.asarray(kl[label][K]) <= g[K] * (1 + 1e-6) + 1e-9)) for K in Ks}
        for label in ("iht", "iht2_zero_start", "iht2_giga_start", "iht2")}
    out["iht2_greedy_start_won"] = {str(K): float(np.mean(greedy_won[K])) for K in Ks}
    return out


def plot_starts(res, out_dir, stem):
    names = [n for n in START_SETTINGS if n in res["settings"]]
    fig, axes = common.figure(1, len(names), (7.0, 5.0))
    for ax, name in zip(axes[0], names):
        r = res["settings"][name]
        Ks = r["K"]
        for label, _, _ in START_VARIANTS:
            s = r["forward_kl"][label]
            med = [max(s[str(K)]["median"], 1e-12) for K in Ks]
            lo = [max(s[str(K)]["q25"], 1e-12) for K in Ks]
            hi = [max(s[str(K)]["q75"], 1e-12) for K in Ks]
            line, = ax.semilogy(Ks, med, "o-", label=label)
            ax.fill_between(Ks, lo, hi, color=line.get_color(), alpha=0.15)
        ax.axvline(r["D"] + 1, color="k", ls=":", lw=1)
        ax.set_title(f"IHT §5.1 {name}: D = {r['D']}, N = {r['N']} (dotted: rank D + 1)")
        ax.set_xlabel("K (coreset size)")
        ax.set_ylabel("forward KL(pi || pi_w), median and quartiles")
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend()
    common.save_figure(fig, out_dir, stem)


def run_starts(args) -> dict:
    """results/iht_gaussian.{json,png}: the miniature and paper settings (quick: miniature, 3 trials)."""
    names = ("miniature",) if args.quick else tuple(START_SETTINGS)
    trials = 3 if args.quick else (args.trials or 10)
    t0 = time.perf_counter()
    res = {"quick": bool(args.quick), "environment": common.environment(),
           "config": {"trials": trials, "vectors": "exact centred L2(pi) features, float32",
                      "kl": "closed-form forward KL(pi || pi_w), float64",
                      "variants": [[label, method, options] for label, method, options in START_VARIANTS]}}
    res["settings"] = {name: run_starts_setting(name, trials) for name in names}
    res["config"]["wall_s"] = time.perf_counter() - t0
    stem = common.stem("iht_gaussian", args.quick)
    common.write_json(res, args.out, stem)
    plot_starts(res, args.out, stem)
    for name, r in res["settings"].items():
        print(f"\n{name}: D = {r['D']}, N = {r['N']}; median forward KL")
        print(f"{'K':>5} | " + " | ".join(f"{label:>15}" for label, _, _ in START_VARIANTS))
        for K in r["K"]:
            print(f"{K:>5} | " + " | ".join(f"{r['forward_kl'][label][str(K)]['median']:>15.4g}"
                                            for label, _, _ in START_VARIANTS))
    return res


def _extra(p):
    p.add_argument("--only", choices=("closed_form", "glm"), default=None,
                   help="run only the closed-form cases (Gaussian, RBF, Fig. 4) or only the GLM case")
    p.add_argument("--glm-datasets", default=None, help="comma-separated subset of the GLM files")
    p.add_argument("--K", default=None, help="comma-separated K values for the GLM case")
    p.add_argument("--closed-form-K", default=None, help="comma-separated K values for the Gaussian and RBF cases")
    p.add_argument("--no-speedup", action="store_true", help="skip the batched-versus-loop timing")
    p.add_argument("--starts", action="store_true",
                   help="only the start ablation of IHT §5.1 (every A-IHT start and OMP, D = 20 and 200): "
                        "results/iht_gaussian.{json,png}")
    p.add_argument("--merge", nargs=2, default=None, metavar=("CLOSED_FORM_JSON", "GLM_JSON"),
                   help="join the two parts (run in parallel processes) into iht.json and plot")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    if args.starts:
        return run_starts(args)
    if args.merge:
        import json

        res = json.load(open(args.merge[0]))
        res["glm"] = json.load(open(args.merge[1]))["glm"]
        res["merged_from"] = [os.path.basename(p) for p in args.merge]
        common.write_json(res, args.out, "iht")
        plot(res, args.out, "iht")
        return res
    if args.quick:
        # CI smoke run (seconds): XLA compilation of every (method, K, shape) dominates, so each case runs
        # once with one method: A-IHT II on the Gaussian and from the zero start for Fig. 4 (with Uniform's
        # final f), Uniform on GLM; the RBF case is skipped (its float64 model set-up and closed-form KLs
        # compile ~150 small programs, ~12 s; tests/test_rbf.py covers the model); no batched timing.
        trials = args.trials or 2
        g = (40, 10, (5,))
        rbf = (80, (5,))
        glm = ((5,), 50, GLM[:1], ())
        conv = (40, 10, 5, 20)
        speed_batch = 2
        methods_of = {"gaussian": METHODS[3:], "rbf": METHODS[:1], "glm": METHODS[:1], "speed": ()}
    else:
        # 5 trials (paper: 10 and 20) and short K grids: the shared CPU compiles each (method, K) separately
        trials = args.trials or 5
        g = (600, 200, (10, 50, 100, 200, 300))
        rbf = (1000, (10, 50, 150, 300))
        glm = ((5, 20, 100), 500, GLM, (10,))
        conv = (600, 200, 200, 300)
        speed_batch = 16
        methods_of = {"gaussian": METHODS, "rbf": METHODS, "glm": METHODS,
                      "speed": (("A-IHT II", "iht2"), ("GIGA", "giga"))}
    if args.closed_form_K:
        Kc = tuple(int(k) for k in args.closed_form_K.split(","))
        g, rbf = (g[0], g[1], Kc), (rbf[0], Kc)
    if args.glm_datasets or args.K:
        names = glm[2] if not args.glm_datasets else tuple(d for d in GLM if d[0] in args.glm_datasets.split(","))
        Ks = glm[0] if not args.K else tuple(int(k) for k in args.K.split(","))
        glm = (Ks, glm[1], names, tuple(k for k in glm[3] if k <= max(Ks)))
    glm = (*glm, methods_of["glm"])
    t0 = time.perf_counter()
    res = {"experiment": "IHT §5 (Figs. 1, 3, 4 and appendix D)", "quick": bool(args.quick), "trials": trials,
           "paper_trials": {"gaussian": 10, "rbf": 10, "glm": 20}, "environment": common.environment()}
    if args.only == "glm":
        res["glm"] = run_glm(trials, *glm)
        res["wall_s"] = time.perf_counter() - t0
        common.write_json(res, args.out, common.stem("iht_glm", args.quick))
        return res
    with jax.enable_x64(True):
        res["gaussian"] = run_gaussian(trials, *g, methods_of["gaussian"])
        res["convergence"] = convergence(*conv, full=not args.quick)
        res["rbf"] = ({"skipped": "quick mode (see main)"} if args.quick else
                      run_rbf(trials, *rbf, methods_of["rbf"]))
        K = g[2][-1]
        sk = jax.random.split(jax.random.key(9), speed_batch)
        res["batched_speedup"] = {}
        for label, method in () if args.no_speedup else methods_of["speed"]:
            solve = cj_solver(method, K)

            def trial(key, solve=solve):
                x = gaussian_data(key, g[0], g[1])
                V = exact_vectors(x).astype(jnp.float32)
                return solve(V, key)

            sp = common.batched_speedup(trial, sk)
            res["batched_speedup"][f"gaussian {label} K={K}"] = sp
            print(f"  batched vs loop, {label}: {sp['speedup']:.2f}x", flush=True)
    if args.only == "closed_form":
        res["wall_s"] = time.perf_counter() - t0
        common.write_json(res, args.out, common.stem("iht_closed_form", args.quick))
        return res
    stem = common.stem("iht", args.quick)
    common.write_json(res, args.out, stem)  # the closed-form cases are kept even if the GLM part fails
    res["glm"] = run_glm(trials, *glm)
    res["wall_s"] = time.perf_counter() - t0
    common.write_json(res, args.out, stem)
    plot(res, args.out, stem)
    return res


if __name__ == "__main__":
    main()
