"""LR §4: sensitivity coresets for logistic regression against random subsampling (Figs. 1 and 2).

- Posterior quality (LR Fig. 2): BINARY5, BINARY10 and MIXTURE (`cj.data.synthetic_binary`,
  `synthetic_mixture`) and phishing, ds1 (shared data folder, `cj.load_npz`). Sensitivity coresets (LR
  Algorithm 1 with App. E's choices: k-means++ on a subsample, R = a / sqrt(I), a = 3; k = 4 for synthetic,
  k = 6 for real data) against uniform random subsampling, for M from 100 to 10,000 (up to N for the
  500-row real files). Metrics: MMD with the degree-3 polynomial kernel to full-data samples, and test
  log-likelihood. MCMC: adaptive MALA targeting acceptance 0.574 (LR App. E), fewer iterations than the
  paper's 100,000 (stated in the JSON).
- Mean sensitivity against N (LR Fig. 1b) on BINARY10 up to N = 10^6, against R and k (Fig. 1c).
- Coreset construction time as a fraction of total inference time (Fig. 1a): construction / (construction +
  MCMC on the coreset), per M.

Batching: the coreset draws of all trials are one `jit(vmap)` of the pure sampling core over keys; the MCMC
on every coreset of one M (both methods, all trials) is one `jit(vmap)` of the pure weighted sampler.

    python benchmarks/logistic_sensitivity.py [--trials 3] [--quick]

writes benchmarks/results/logistic_sensitivity.{json,png} (…_quick.* with --quick).
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
from coresets_jax.inference import sample_fn  # noqa: E402  (pure weighted sampler)
from coresets_jax.sensitivity import sensitivity_sample_core  # noqa: E402  (LR Alg. 1 lines 7-11)

MODEL = cj.models.logistic_regression()


def dataset(name, key, n):
    if name == "BINARY5":
        return cj.data.synthetic_binary(key, n, 5, num_test=1000), 4
    if name == "BINARY10":
        return cj.data.synthetic_binary(key, n, 10, num_test=1000), 4
    if name == "MIXTURE":
        return cj.data.synthetic_mixture(key, n, num_test=1000), 4
    path = common.data_path(f"{name}.npz")
    return (None, 6) if path is None else (cj.load_npz(path), 6)


@functools.lru_cache(maxsize=None)
def draw(M):
    """(keys (B,), probabilities (N,)) -> B coresets of M draws (indices, weights); uniform = equal p."""
    return jax.jit(jax.vmap(lambda k, s: sensitivity_sample_core(k, s, M), in_axes=(0, None)))


@functools.lru_cache(maxsize=None)
def sampler(num_samples, num_warmup):
    run = sample_fn(MODEL, "mala", num_samples=num_samples, num_warmup=num_warmup, num_chains=1)
    return jax.jit(jax.vmap(run, in_axes=(0, 0, 0, None, None)))


def posterior_quality(names, n, Ms, trials, ns, nw, mmd_points, time_fraction=True):
    out = {}
    key = jax.random.key(16)
    for name in names:
        ds, k = dataset(name, jax.random.fold_in(key, len(name)), n)
        if ds is None:
            print(f"  {name}: not found, skipped", flush=True)
            continue
        data, test = ds.train, ds.test
        N = int(ds.X.shape[0])
        lap = cj.laplace(MODEL, data)
        tf = time.perf_counter()
        full = np.asarray(common.block(sampler(ns, nw)(jax.random.split(jax.random.key(2), 1),
                                                       jax.tree_util.tree_map(lambda a: a[None], data),
                                                       jnp.ones((1, N)), lap.mean[None], lap.cov)[0]))[0, 0]
        full_s = time.perf_counter() - tf  # one call, compilation included
        tll_full = float(cj.metrics.test_log_likelihood(MODEL, test, full))
        # Sensitivities: one k-means++ clustering per trial (timed; the draws are batched below).
        sens, sens_s = [], []
        for t in range(trials):
            t0 = time.perf_counter()
            m, info = cj.sensitivity.logistic_sensitivity(data, jax.random.key(100 + t), k=k, a=3.0)
            common.block(m)
            sens_s.append(time.perf_counter() - t0)
            sens.append(m)
        r = {"N": N, "D": int(ds.X.shape[1]), "k": k, "test_ll_full": tll_full, "full_mcmc_s": full_s,
             "mean_sensitivity": float(np.mean([float(jnp.mean(m)) for m in sens])),
             "sensitivity_s": float(np.median(sens_s)), "mmd": {}, "test_ll": {}, "coreset_time_fraction": {}}
        # Coresets of every M padded with zero-weight rows to the largest M: all MCMC chains of a dataset
        # (both methods, all trials and sizes) are one vmapped call with one compilation.
        sizes = [M for M in Ms if M <= N or N > 1000]
        Mmax = max(sizes)
        idx_all, w_all, tags, build_s = [], [], [], {}
        for M in sizes:
            for t in range(trials):
                keys = jax.random.split(jax.random.key(1000 * M + t), 1)
                for label, probs in (("coreset", sens[t]), ("random", jnp.ones(N))):
                    idx, w = draw(M)(keys, probs)
                    idx_all.append(jnp.pad(idx, ((0, 0), (0, Mmax - M))))
                    w_all.append(jnp.pad(w, ((0, 0), (0, Mmax - M))))
                    tags.append((label, M))
            tdraw = common.time_fn(draw(M), jax.random.split(jax.random.key(0), 1), sens[0], repeats=3)
            build_s[M] = r["sensitivity_s"] + tdraw["median_s"]
        idx, w = jnp.concatenate(idx_all), jnp.concatenate(w_all)
        rows = jax.tree_util.tree_map(lambda a: a[idx], data)
        mk = jax.random.split(jax.random.key(7), idx.shape[0])
        tm = common.time_fn(sampler(ns, nw), mk, rows, w, lap.mean[None], lap.cov, repeats=0)
        draws = np.asarray(tm["output"][0])[:, 0]
        mcmc_s = tm["compile_s"] / idx.shape[0]  # one call, compilation included, per chain (upper bound)
        for M in sizes:
            for label in ("coreset", "random"):
                sel = [i for i, tag in enumerate(tags) if tag == (label, M)]
                ok = [i for i in sel if np.all(np.isfinite(draws[i]))]
                mm = [cj.metrics.mmd(draws[i], full) for i in ok]
                tl = [float(cj.metrics.test_log_likelihood(MODEL, test, draws[i])) for i in ok]
                r["mmd"].setdefault(label, {})[str(M)] = common.summary(mm) if mm else None
                r["test_ll"].setdefault(label, {})[str(M)] = common.summary(tl) if tl else None
            # LR Fig. 1a: MALA time for 10,000 iterations on an unpadded M-point coreset, from a compiled
            # 200-iteration run scaled by 50 (not in the quick run: one more compilation per M).
            if not time_fraction:
                continue
            sel = [i for i, tag in enumerate(tags) if tag == ("coreset", M)][0]
            one = jax.tree_util.tree_map(lambda a: a[sel:sel + 1, :M], rows)
            tt = common.time_fn(sampler(100, 100), mk[:1], one, w[sel:sel + 1, :M], lap.mean[None], lap.cov,
                                repeats=1)
            mala_10k = tt["median_s"] * 50.0
            r["coreset_time_fraction"][str(M)] = {"construction_s": build_s[M], "mala_10k_iterations_s": mala_10k,
                                                  "fraction": build_s[M] / (build_s[M] + mala_10k)}
        r["mcmc_s_per_chain_padded_upper"] = mcmc_s
        out[name] = r
        Ms_done = list(r["mmd"]["coreset"])
        print(f"  {name}: MMD ratio random/coreset at M = {Ms_done[0]}: "
              f"{r['mmd']['random'][Ms_done[0]]['median'] / r['mmd']['coreset'][Ms_done[0]]['median']:.2f}",
              flush=True)
    return out


def sensitivity_scaling(Ns, ks, Rs, key):
    """LR Figs. 1b and 1c: mean sensitivity against N (k = 6, R = a / sqrt(I), a = 3) and against R, k."""
    big = cj.data.synthetic_binary(key, max(Ns), 10)
    vs_n = {}
    for N in Ns:
        data = (big.X[:N], big.y[:N])
        _, info = cj.sensitivity.logistic_sensitivity(data, jax.random.key(N), k=6, a=3.0)
        vs_n[str(N)] = float(info["mean_sensitivity"])
    data = (big.X[:min(Ns[-1], 100_000)], big.y[:min(Ns[-1], 100_000)])
    vs_r = {str(k): {str(R): float(cj.sensitivity.logistic_sensitivity(data, jax.random.key(k), k=k,
                                                                        radius=R)[1]["mean_sensitivity"])
                     for R in Rs} for k in ks}
    # Exponential in R (Lemma 3.1): slope of log mean sensitivity against R, per k.
    slopes = {k: float(np.polyfit(Rs, np.log([vs_r[k][str(R)] for R in Rs]), 1)[0]) for k in vs_r}
    return {"N": list(Ns), "mean_sensitivity_vs_N": vs_n, "R": list(Rs), "mean_sensitivity_vs_R": vs_r,
            "log_slope_vs_R": slopes, "N_for_R": int(data[0].shape[0])}


def speedup(batch, ns, nw):
    ds = cj.data.synthetic_binary(jax.random.key(0), 5000, 10)
    lap = cj.laplace(MODEL, ds.train)
    run = sample_fn(MODEL, "mala", num_samples=ns, num_warmup=nw, num_chains=1)
    idx, w = draw(500)(jax.random.split(jax.random.key(1), 1), jnp.ones(5000))
    rows = jax.tree_util.tree_map(lambda a: a[idx[0]], ds.train)

    def trial(key):
        return run(key, rows, w[0], lap.mean[None], lap.cov)[0]

    sp = common.batched_speedup(trial, jax.random.split(jax.random.key(3), batch))
    return {k: v for k, v in sp.items() if k != "output"}


def plot(res, out_dir, stem):
    """Row 1: MMD against M per dataset; row 2: negative test LL; row 3: LR Figs. 1b, 1c and 1a."""
    from matplotlib.ticker import NullFormatter

    q = res["posterior"]
    names = list(q)
    ncols = max(len(names), 3)
    fig, axes = common.figure(3, ncols, size=(3.8, 3.1))
    for a in axes.ravel():
        a.axis("off")
    for c, name in enumerate(names):
        r = q[name]
        for row in (0, 1):
            axes[row, c].axis("on")
        for label, ls in (("coreset", "-"), ("random", "--")):
            Ms = [int(M) for M, v in r["mmd"][label].items() if v]
            axes[0, c].loglog(Ms, [r["mmd"][label][str(M)]["median"] for M in Ms], ls, marker="o", ms=3,
                              label=label)
            axes[1, c].semilogx(Ms, [-r["test_ll"][label][str(M)]["median"] for M in Ms], ls, marker="o",
                                ms=3, label=label)
        axes[1, c].axhline(-r["test_ll_full"], color="k", lw=0.8, ls=":", label="full data")
        axes[0, c].set_title(f"{name} (N = {r['N']}, {res['trials']} trials)", fontsize=9)
        axes[0, c].set_ylabel("MMD (poly-3) to full, median")
        axes[1, c].set_ylabel("negative test LL, median")
        axes[1, c].set_xlabel("M")
        for a in axes[:2, c]:
            a.grid(True, which="both", alpha=0.3)
            a.xaxis.set_minor_formatter(NullFormatter())
    axes[0, 0].legend(fontsize=7)
    axes[1, 0].legend(fontsize=7)
    s = res["scaling"]
    ax = axes[2, 0]
    ax.axis("on")
    ax.semilogx(s["N"], [s["mean_sensitivity_vs_N"][str(N)] for N in s["N"]], "o-")
    ax.set_title("LR Fig. 1b: mean sensitivity vs N (BINARY10, k = 6)", fontsize=8)
    ax.set_xlabel("N")
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[2, 1]
    ax.axis("on")
    for k, v in s["mean_sensitivity_vs_R"].items():
        ax.semilogy(s["R"], [v[str(R)] for R in s["R"]], "o-", label=f"k = {k}")
    ax.set_title(f"LR Fig. 1c: mean sensitivity vs R (BINARY10, N = {s['N_for_R']})", fontsize=8)
    ax.set_xlabel("R")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax = axes[2, 2]
    ax.axis("on")
    for name in names:
        f = q[name]["coreset_time_fraction"]
        ax.semilogx([int(M) for M in f], [v["fraction"] for v in f.values()], "o-", label=name)
    ax.set_title("LR Fig. 1a: coreset time / (coreset + 10k MALA)", fontsize=8)
    ax.set_xlabel("M")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    common.save_figure(fig, out_dir, stem)


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__)
    if args.quick:
        # CI smoke run (seconds): XLA compilation dominates, so one N for the scaling part and the same
        # (N, D, k) shapes in the posterior part (BINARY10, N = 1000, k = 4), no time fraction (one more
        # MALA compilation per M) and no batched-versus-loop timing.
        trials, names, n, Ms = args.trials or 2, ("BINARY10",), 1000, (100,)
        ns, nw, mmd_points, Ns, ks, Rs, speed_batch = 100, 100, 100, (1000,), (4,), (1.0, 2.0), 2
    else:
        trials, names, n = args.trials or 3, ("BINARY5", "BINARY10", "MIXTURE", "phishing", "ds1"), 100_000
        Ms = (100, 1000, 10000)
        ns, nw, mmd_points, Ns, ks, Rs, speed_batch = 1000, 1000, 1000, (10**3, 10**4, 10**5, 10**6), \
            (4, 6, 8), (0.5, 1.0, 2.0, 3.0, 4.0), 8
    t0 = time.perf_counter()
    if not args.quick:
        Ms_real = (50, 100, 200, 400)  # the real files have N = 500
        Ms = tuple(sorted(set(Ms) | set(Ms_real)))
    res = {"experiment": "LR §4 (Figs. 1 and 2)", "quick": bool(args.quick), "trials": trials, "paper_trials": 20,
           "N_posterior": n, "paper_N": 1_000_000,
           "mcmc": {"method": "mala (adaptive step, target 0.574)", "num_samples": ns, "num_warmup": nw,
                    "paper": "100,000 iterations, half warm-up"},
           "environment": common.environment()}
    res["scaling"] = sensitivity_scaling(Ns, ks, Rs, jax.random.key(5))
    print(f"  mean sensitivity vs N: {res['scaling']['mean_sensitivity_vs_N']}", flush=True)
    res["posterior"] = posterior_quality(names, n, Ms, trials, ns, nw, mmd_points, time_fraction=not args.quick)
    res["batched_speedup"] = {}
    if not args.quick:
        res["batched_speedup"]["mala on 500-point coresets"] = speedup(speed_batch, ns, nw)
        print(f"  batched vs loop (MALA): {res['batched_speedup']['mala on 500-point coresets']['speedup']:.2f}x",
              flush=True)
    res["wall_s"] = time.perf_counter() - t0
    stem = common.stem("logistic_sensitivity", args.quick)
    common.write_json(res, args.out, stem)
    plot(res, args.out, stem)
    return res


if __name__ == "__main__":
    main()
