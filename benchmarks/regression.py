"""HC §7: logistic and Poisson regression with MCMC on coresets and on the full data (Figs. 3, 4, 6, 8, 9).

Datasets: logistic on synthetic (`cj.data.synthetic_logistic`, theta = [3, 3, 0], 9,000 train + 1,000
test), phishing and ds1 (the 500-row files of the shared data folder); Poisson on synthetic
(`cj.data.synthetic_poisson`, theta = [1, 0]), biketrips_large and airportdelays_large. Files are loaded
with `cj.load_npz` from $CORESETS_DATA (default ../shared/data); absent files are skipped.

Pipeline per trial, one pure function of the key: J = 500 draws from the Laplace pi_hat -> projection
(Fisher, Eq. 5.7, or 2-norm, Eq. 5.10) -> solver -> coreset. Methods: Rand (uniform subsampling), IS-F /
IS-2 (HC Algorithm 1), FW-F / FW-2 (HC Algorithm 2), GIGA-F and A-IHT II-F. M in {10, 50, 100, 500, 1000}.

Batching: V of every dataset is zero-padded to the largest N (zero rows are never selected by the Hilbert
solvers), so one compiled solver per (method, M) serves every dataset and trial; the MCMC of all methods and
trials at one M is one `jit(vmap)` call of the pure weighted sampler (`sample_fn`).

MCMC: adaptive random-walk Metropolis (HC §7.3: target acceptance 0.234, covariance adaptation) with
fewer steps than the paper's 100,000 (stated in the JSON). Metrics (HC §7.3): negative test log-likelihood
normalised as (0 - tll) / (0 - tll_full), and W1 to full-data samples normalised by the median pairwise
W1 between independent full-data runs. Compute time = Laplace + projection + solver + MCMC per trial
(batched wall time / batch size), normalised by the full-data MCMC time.

    python benchmarks/regression.py [--trials 3] [--quick]

writes benchmarks/results/regression.{json,png} (regression_quick.* with --quick).
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

# (label, solver method or "rand", norm)
METHODS = (("Rand", "rand", None), ("IS-F", "importance", "fisher"), ("IS-2", "importance", "l2"),
           ("FW-F", "frank_wolfe", "fisher"), ("FW-2", "frank_wolfe", "l2"), ("GIGA-F", "giga", "fisher"),
           ("A-IHT II-F", "iht2", "fisher"))
DATASETS = (("synthetic_logistic", "logistic"), ("phishing", "logistic"), ("ds1", "logistic"),
            ("synthetic_poisson", "poisson"), ("biketrips_large", "poisson"),
            ("airportdelays_large", "poisson"))


def load(name, kind, key):
    if name == "synthetic_logistic":
        return cj.data.synthetic_logistic(key, 9000, num_test=1000)
    if name == "synthetic_poisson":
        return cj.data.synthetic_poisson(key, 9000, num_test=1000)
    path = common.data_path(f"{name}.npz")
    return None if path is None else cj.load_npz(path)


def model_of(kind):
    return cj.models.logistic_regression() if kind == "logistic" else cj.models.poisson_regression()


@functools.lru_cache(maxsize=None)
def projector(kind, norm, J):
    """(key, data, mean, chol) -> V (N, J): J draws of the Laplace pi_hat, then the projection (pure)."""
    model = model_of(kind)

    def project(key, data, mean, chol):
        k_theta, k_coord = jax.random.split(key)
        thetas = mean + jax.random.normal(k_theta, (J, mean.shape[0]), mean.dtype) @ chol.T
        # project_fn draws the Fisher coordinates d_j from k_coord (unused by the other norms)
        return cj.project_fn(model, norm, dtype=jnp.float32, chunk_size=2048)(k_coord, data, thetas)

    return jax.jit(jax.vmap(project, in_axes=(0, None, None, None)))


@functools.lru_cache(maxsize=None)
def constructor(method, M):
    """(V (B, Npad, J), keys (B,), n (B,)) -> (indices, weights), batched over trials and datasets."""
    if method == "rand":
        def solve(V, key, n):
            idx = jax.random.randint(key, (M,), 0, n)
            return idx, jnp.full((M,), n / M, jnp.float32)
    else:
        pure = common.solver_fn(method, M)

        def solve(V, key, n):
            return pure(V, key)
    return jax.jit(jax.vmap(solve))


@functools.lru_cache(maxsize=None)
def sampler(kind, num_samples, num_warmup):
    run = sample_fn(model_of(kind), "rwmh", num_samples=num_samples, num_warmup=num_warmup,
                             num_chains=1)
    # batched over (key, rows, weights); the start and the initial proposal covariance are shared
    return jax.jit(jax.vmap(run, in_axes=(0, 0, 0, None, None)))


def mcmc(kind, keys, rows, weights, init, cov, num_samples, num_warmup):
    draws, stats = sampler(kind, num_samples, num_warmup)(keys, rows, weights, init[None], cov)
    return draws[:, 0]  # (B, S, D)


def run(trials, Ms, names, J, num_samples, num_warmup, full_runs, w1_points, save=None, methods=METHODS):
    key = jax.random.key(73)
    cases = {}
    for name, kind in names:
        ds = load(name, kind, jax.random.fold_in(key, hash(name) % 1000))
        if ds is None:
            print(f"  {name}: file not found, skipped", flush=True)
            continue
        cases[name] = (kind, ds)
    if not cases:
        raise FileNotFoundError(f"none of the data sets {[n for n, _ in names]} was found under {common.DATA_DIR} "
                                "(set CORESETS_DATA to the folder holding the .npz files)")
    n_pad = max(int(ds.X.shape[0]) for _, ds in cases.values())
    res = {"N_padded": n_pad, "J": J, "M": list(Ms), "mcmc": {"method": "rwmh", "num_samples": num_samples,
           "num_warmup": num_warmup, "paper": "100,000 steps, 50,000 warm-up, thinning 5"},
           "full_data_runs": full_runs, "datasets": {}}
    for name, (kind, ds) in cases.items():
        t_all = time.perf_counter()
        model, data, test = model_of(kind), ds.train, ds.test
        n, d = int(ds.X.shape[0]), int(ds.X.shape[1])
        t0 = time.perf_counter()
        lap = cj.laplace(model, data)
        laplace_s = time.perf_counter() - t0
        chol = jnp.linalg.cholesky(lap.cov)
        # Full-data MCMC: `full_runs` independent chains (W1 normalisation and the reference samples).
        fkeys = jax.random.split(jax.random.fold_in(key, 1), full_runs)
        frows = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (full_runs,) + a.shape), data)
        fw = jnp.ones((full_runs, n), jnp.float32)
        tm = common.time_fn(lambda: mcmc(kind, fkeys, frows, fw, lap.mean, lap.cov, num_samples, num_warmup),
                            repeats=0)
        full = np.asarray(tm["output"])
        full_time = tm["compile_s"] / full_runs  # one call, compilation included (as for the coresets)
        tll_full = float(np.median([cj.metrics.test_log_likelihood(model, test, s) for s in full]))
        w1_ref = cj.metrics.median_pairwise_wasserstein1(list(full), max_points=w1_points)
        r = {"N": n, "D": d, "laplace_s": laplace_s, "full_mcmc_s_per_run": full_time,
             "full_mcmc_compile_s": tm["compile_s"], "test_ll_full": tll_full, "w1_reference": w1_ref,
             "nll_normalized": {}, "w1_normalized": {}, "time_normalized": {}, "num_points": {},
             "construction_s_per_trial": {}}
        # Projections for every trial and norm, padded to n_pad rows.
        tkeys = jax.random.split(jax.random.fold_in(key, 2), trials)
        Vs, proj_s = {}, {}
        norms = sorted({norm for _, _, norm in methods if norm}) or ["fisher"]
        for norm in norms:
            tp = common.time_fn(projector(kind, norm, J), tkeys, data, lap.mean, chol, repeats=0)
            Vs[norm] = jnp.pad(tp["output"], ((0, 0), (0, n_pad - n), (0, 0)))
            proj_s[norm] = tp["compile_s"] / trials
        # Coresets of every M are padded to the largest M with zero-weight rows, so the MCMC of all
        # methods, trials and sizes of one dataset is one vmapped call with a single compilation.
        Mmax = max(Ms)
        rows_all, w_all, tags, build_s = [], [], [], {}
        for M in Ms:
            for label, method, norm in methods:
                V = Vs[norm or norms[0]]
                skeys = jax.random.split(jax.random.fold_in(key, 3 + M), trials)
                tc = common.time_fn(constructor(method, M), V, skeys, jnp.full((trials,), n, jnp.int32),
                                    repeats=1)
                idx, w = tc["output"]
                build_s[(label, M)] = tc["median_s"] / trials + (0.0 if method == "rand" else
                                                                  laplace_s + proj_s[norm])
                rows_all.append(jnp.pad(idx, ((0, 0), (0, Mmax - M))))
                w_all.append(jnp.pad(w, ((0, 0), (0, Mmax - M))))
                tags += [(label, M)] * trials
                r["num_points"].setdefault(label, {})[str(M)] = float(np.median(np.sum(np.asarray(w) > 0, 1)))
        idx = jnp.concatenate(rows_all)
        rows = jax.tree_util.tree_map(lambda a: a[idx], data)
        weights = jnp.concatenate(w_all)
        mkeys = jax.random.split(jax.random.fold_in(key, 5), weights.shape[0])
        tmc = common.time_fn(lambda: mcmc(kind, mkeys, rows, weights, lap.mean, lap.cov, num_samples,
                                          num_warmup), repeats=0)
        draws = np.asarray(tmc["output"])
        mcmc_s = tmc["compile_s"] / weights.shape[0]  # one call, compilation included: an upper bound
        for label, _, _ in methods:
            for M in Ms:
                nll, w1 = [], []
                sel = [i for i, tag in enumerate(tags) if tag == (label, M)]
                for t, i in enumerate(sel):
                    s = draws[i]
                    if not np.all(np.isfinite(s)):
                        continue
                    tll = float(cj.metrics.test_log_likelihood(model, test, s))
                    nll.append(float(cj.metrics.normalized_test_log_likelihood(tll, tll_full)))
                    w1.append(float(cj.metrics.normalized_wasserstein1(
                        cj.metrics.wasserstein1(s, full[t % full_runs], max_points=w1_points), w1_ref)))
                r["nll_normalized"].setdefault(label, {})[str(M)] = common.summary(nll) if nll else None
                r["w1_normalized"].setdefault(label, {})[str(M)] = common.summary(w1) if w1 else None
                r["time_normalized"].setdefault(label, {})[str(M)] = (build_s[(label, M)] + mcmc_s) / full_time
                r["construction_s_per_trial"].setdefault(label, {})[str(M)] = build_s[(label, M)]
        r["coreset_mcmc_s_per_chain_upper"] = mcmc_s
        res["datasets"][name] = r
        if save is not None:
            save(res)  # keep finished datasets if a later one fails
        Mx = str(Ms[-1])
        print(f"  {name} ({time.perf_counter() - t_all:.0f} s): W1/ref at M = {Mx}: " + ", ".join(
            f"{lab} {r['w1_normalized'][lab][Mx]['median']:.2f}" for lab, _, _ in methods
            if r["w1_normalized"][lab][Mx]), flush=True)
    return res


def batched_speedup(batch, num_samples, num_warmup):
    """MCMC on B coresets (M = 100, phishing-like shapes) as one vmapped call against a loop of single calls."""
    ds = cj.data.synthetic_logistic(jax.random.key(0), 2000)
    model = model_of("logistic")
    lap = cj.laplace(model, ds.train)
    run = sample_fn(model, "rwmh", num_samples=num_samples, num_warmup=num_warmup, num_chains=1)
    idx = jax.random.randint(jax.random.key(1), (100,), 0, 2000)
    rows = jax.tree_util.tree_map(lambda a: a[idx], ds.train)
    w = jnp.full((100,), 20.0)

    def trial(key):
        return run(key, rows, w, lap.mean[None], lap.cov)[0]

    return {k: v for k, v in common.batched_speedup(trial, jax.random.split(jax.random.key(2), batch)).items()
            if k != "output"}


def plot(res, out_dir, stem):
    from matplotlib.ticker import NullFormatter

    names = list(res["datasets"])
    fig, axes = common.figure(3, max(len(names), 1), size=(4.0, 3.3))
    for c, name in enumerate(names):
        r = res["datasets"][name]
        for label, _, _ in METHODS:
            if label not in r["w1_normalized"]:
                continue
            Ms = [M for M in res["M"] if r["w1_normalized"][label].get(str(M))]
            if not Ms:
                continue
            ls = "--" if label == "Rand" else ("-" if label.endswith("F") else ":")
            nll = [r["nll_normalized"][label][str(M)]["median"] for M in Ms]
            w1 = [r["w1_normalized"][label][str(M)]["median"] for M in Ms]
            tt = [r["time_normalized"][label][str(M)] for M in Ms]
            axes[0, c].loglog(Ms, w1, ls, marker="o", ms=3, label=label)
            axes[1, c].loglog(tt, w1, ls, marker="o", ms=3, label=label)
            axes[2, c].loglog(tt, np.maximum(np.asarray(nll) - 1.0, 1e-4), ls, marker="o", ms=3, label=label)
        axes[0, c].set_title(f"{name} (N = {r['N']})", fontsize=9)
        axes[0, c].set_xlabel("M")
        axes[0, c].set_ylabel("W1 / full-data W1")
        axes[1, c].set_xlabel("time / full-data MCMC time")
        axes[1, c].set_ylabel("W1 / full-data W1")
        axes[2, c].set_xlabel("time / full-data MCMC time")
        axes[2, c].set_ylabel("normalised NLL - 1 (floored at 1e-4)")
        for a in axes[:, c]:
            a.grid(True, which="both", alpha=0.3)
            a.xaxis.set_minor_formatter(NullFormatter())
            a.yaxis.set_minor_formatter(NullFormatter())
    axes[0, 0].legend(fontsize=7)
    common.save_figure(fig, out_dir, stem)


def _extra(p):
    p.add_argument("--datasets", default=None, help="comma-separated subset of the datasets")
    p.add_argument("--stem", default=None, help="output name (default regression)")
    p.add_argument("--M", default=None, help="comma-separated coreset sizes (default 10,100,1000)")
    p.add_argument("--merge", nargs="+", default=None, help="merge these result JSONs into one and plot")


def merge(paths, out_dir, stem):
    """Join per-group result files (run in parallel processes) into one result and figure."""
    import json

    parts = [json.load(open(p)) for p in paths]
    res = dict(parts[0])
    res["datasets"] = {k: v for part in parts for k, v in part["datasets"].items()}
    res["batched_speedup"] = {f"{k} ({os.path.basename(p)})": v for part, p in zip(parts, paths)
                              for k, v in part.get("batched_speedup", {}).items()}
    res["merged_from"] = [os.path.basename(p) for p in paths]
    res["M"] = sorted({M for part in parts for M in part["M"]})  # each dataset lists its own sizes
    res["M_by_part"] = {os.path.basename(p): part["M"] for part, p in zip(parts, paths)}
    res["wall_s"] = max(part.get("wall_s", 0.0) for part in parts)
    common.write_json(res, out_dir, stem)
    plot(res, out_dir, stem)
    return res


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    if args.merge:
        return merge(args.merge, args.out, args.stem or "regression")
    methods = METHODS
    if args.quick:
        # CI smoke run (seconds): XLA compilation of each solver and sampler dominates, so the whole
        # pipeline once with Rand and FW-F only, and no batched-versus-loop timing.
        trials, Ms, names = args.trials or 2, (10,), (("phishing", "logistic"),)
        J, ns, nw, full_runs, w1_points, speed_batch = 50, 100, 100, 2, 100, 2
        methods = tuple(m for m in METHODS if m[0] in ("Rand", "FW-F"))
    else:
        # 2 trials (paper: 50), M in {10, 100, 1000} (paper adds 50, 500, 5000, 10000), 1,000 + 1,000 RWMH
        # steps (paper: 50,000 + 50,000): the shared CPU compiles each (method, M) and MCMC separately.
        trials, Ms, names = args.trials or 2, (10, 100, 1000), DATASETS
        J, ns, nw, full_runs, w1_points, speed_batch = 500, 1000, 1000, 4, 500, 8
    if args.M:
        Ms = tuple(int(m) for m in args.M.split(","))
    if args.datasets:
        wanted = args.datasets.split(",")
        names = tuple(d for d in DATASETS if d[0] in wanted)
    t0 = time.perf_counter()
    stem = common.stem(args.stem or "regression", args.quick)
    head = {"experiment": "HC §7 (Figs. 3, 4, 6, 8, 9)", "quick": bool(args.quick), "trials": trials,
            "paper_trials": 50, "environment": common.environment()}
    res = {**head, **run(trials, Ms, names, J, ns, nw, full_runs, w1_points,
                         save=lambda partial: common.write_json({**head, **partial, "partial": True},
                                                                args.out, stem), methods=methods)}
    res["batched_speedup"] = {}
    if not args.quick:
        res["batched_speedup"]["rwmh on 100-point coresets"] = batched_speedup(speed_batch, ns, nw)
        print(f"  batched vs loop (MCMC): {res['batched_speedup']['rwmh on 100-point coresets']['speedup']:.2f}x",
              flush=True)
    res["wall_s"] = time.perf_counter() - t0
    common.write_json(res, args.out, stem)
    plot(res, args.out, stem)
    return res


if __name__ == "__main__":
    main()
