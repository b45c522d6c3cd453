"""Posterior-driven coresets (Coreset MCMC, quasi-Newton, Sparse VI) against the Hilbert methods (issue 12).

For each problem: two independent full-data NUTS runs (their W1 is the Monte Carlo noise floor), then for
each method and coreset size M: construct the coreset (pi_hat, projection and solver, or the posterior-
driven loop; compilation included), sample its posterior with NUTS (Coreset MCMC returns its own draws,
`info["samples"]`, so it needs no second run), and measure
  - moment-matched KL: KL(N(full moments) || N(coreset moments)) between sample moments;
  - W1 to the first full-data run, divided by the noise floor;
  - the coreset posterior's mode (Laplace of pi_w) against the full-data mode, in full-data posterior sd
    (max over coordinates);
  - wall time of construction and of sampling.

Writes benchmarks/results/sota{tag}.json and .png (KL and normalised W1 against M and against total time).

    python benchmarks/sota.py --quick                     # seconds-to-minutes smoke run
    python benchmarks/sota.py [--problems synth_logistic biketrips_large] [--n 100000] [--sizes 50 200]
                              [--samples 500] [--warmup 500] [--tag _x]
Real data sets are read from --data-dir (default /work/shared/data); the package does not depend on them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's package, not another installed copy

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
METHODS = ("uniform", "giga", "iht2", "omp", "sparse_vi", "quasi_newton", "coreset_mcmc")
HILBERT = ("giga", "iht2", "omp")
POSTERIOR = ("sparse_vi", "quasi_newton", "coreset_mcmc")
REAL = {"phishing": "logistic", "ds1": "logistic", "biketrips_large": "poisson",
        "airportdelays_large": "poisson"}


def load_problem(name: str, n: int, data_dir: str):
    if name == "synth_logistic":
        return cj.models.logistic_regression(), cj.data.synthetic_logistic(jax.random.key(0), n).train
    if name == "synth_poisson":
        return cj.models.poisson_regression(), cj.data.synthetic_poisson(jax.random.key(0), n).train
    kind = REAL[name]
    ds = cj.load_npz(os.path.join(data_dir, name + ".npz"))
    model = cj.models.logistic_regression() if kind == "logistic" else cj.models.poisson_regression()
    return model, (ds.X, ds.y)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    jax.block_until_ready(jax.tree_util.tree_leaves(out))
    return out, time.perf_counter() - start


def method_options(method: str, n: int, quick: bool, samples: int) -> dict:
    if method == "coreset_mcmc":
        k = 4
        return dict(num_chains=k, num_iters=500 if quick else 2000, num_warmup=200,
                    num_draws=max(samples // 2, 1), subsample=min(n, 500))
    if method == "quasi_newton":
        return dict(num_steps=10 if quick else 20, subsample=min(n, 1000))
    if method == "sparse_vi":
        return dict(num_samples=20, weight_iters=20, sampler="mala", num_warmup=50, step_scale=0.1)
    return {}


def moments(x):
    x = np.asarray(x, np.float64)
    return x.mean(0), np.cov(x, rowvar=False)


def run_problem(name, args, log, save):
    model, data = load_problem(name, args.n, args.data_dir)
    n = int(data[0].shape[0])
    log(f"== {name}: N = {n}, D = {data[0].shape[1]}")
    sample = lambda key, weights=None: cj.sample(model, data, key, weights=weights, num_samples=args.samples,
                                                 num_warmup=args.warmup, num_chains=2, warn=False)
    full_a, t_full = timed(lambda: sample(jax.random.key(100)).samples)
    full_b, _ = timed(lambda: sample(jax.random.key(101)).samples)
    full_a = np.asarray(full_a).reshape(-1, full_a.shape[-1])
    full_b = np.asarray(full_b).reshape(-1, full_b.shape[-1])
    floor = cj.metrics.wasserstein1(full_a, full_b)
    mean_f, cov_f = moments(np.concatenate([full_a, full_b]))
    sd_f = np.sqrt(np.diag(cov_f))
    map_f = np.asarray(cj.laplace(model, data).mean, np.float64)
    log(f"   full-data NUTS {t_full:.1f} s, W1 floor {floor:.4g}")
    rows = []
    summary = dict(problem=name, N=n, D=int(data[0].shape[1]), full_nuts_s=t_full, w1_floor=float(floor),
                   rows=rows)
    for method in args.methods:
        if method == "sparse_vi" and n > args.sparse_vi_max_n:
            log(f"   {method}: skipped (N > {args.sparse_vi_max_n}: O(N) per weight iteration)")
            continue
        opts = method_options(method, n, args.quick, args.samples)
        for size in args.sizes:
            if size > n:
                continue
            key = jax.random.key(size)
            try:
                cs, t_build = timed(lambda: cj.coreset(model, data, size, method, key=key, **opts))
                if method == "coreset_mcmc":
                    draws, t_sample = np.asarray(cs.info["samples"]), 0.0
                else:
                    draws, t_sample = timed(lambda: sample(jax.random.key(7 + size), cs).samples)
                draws = np.asarray(draws, np.float64).reshape(-1, draws.shape[-1])
                mean_c, cov_c = moments(draws)
                kl = float(cj.metrics.gaussian_kl(mean_f, cov_f, mean_c, cov_c))
                w1 = cj.metrics.wasserstein1(full_a, draws) / floor
                weights = cs.dense(n)
                map_c = np.asarray(cj.laplace(model, data, weights=weights).mean, np.float64)
                map_sd = float(np.max(np.abs(map_c - map_f) / sd_f))
                row = dict(problem=name, method=method, size=size, num_points=int(cs.num_points),
                           mm_kl=kl, w1_normalised=float(w1), map_distance_sd=map_sd,
                           build_s=t_build, sample_s=t_sample, total_s=t_build + t_sample, options=opts)
            except Exception as err:  # record, keep going: one failing method must not hide the others
                row = dict(problem=name, method=method, size=size, error=f"{type(err).__name__}: {err}")
            rows.append(row)
            save(summary)  # partial results survive an interrupted run
            log("   " + json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                                    if k != "options"}))
    return summary


def plot(results, path):
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    probs = results["problems"]
    fig, axes = plt.subplots(len(probs), 4, figsize=(17, 3.6 * len(probs)), squeeze=False)
    for r, prob in enumerate(probs):
        for method in METHODS:
            rows = [x for x in prob["rows"] if x["method"] == method and "error" not in x]
            if not rows:
                continue
            style = "-o" if method in POSTERIOR else "--s"
            m = [x["size"] for x in rows]
            t = [x["total_s"] for x in rows]
            for c, (xs, key) in enumerate([(m, "mm_kl"), (m, "w1_normalised"), (t, "mm_kl"),
                                          (t, "w1_normalised")]):
                axes[r, c].plot(xs, [max(x[key], 1e-6) for x in rows], style, label=method,
                                color=f"C{METHODS.index(method)}")  # one colour per method in every panel
        titles = ["moment KL vs M", "W1 / floor vs M", "moment KL vs total time", "W1 / floor vs total time"]
        for c in range(4):
            ax = axes[r, c]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels overlap
            if c < 2:  # label the sizes that were run
                sizes = sorted({x["size"] for x in prob["rows"]})
                ax.set_xticks(sizes)
                ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_title(f"{prob['problem']} (N={prob['N']}): {titles[c]}", fontsize=9)
            ax.set_xlabel("M" if c < 2 else "construction + sampling (s)")
            if c in (2, 3):
                ax.axvline(prob["full_nuts_s"], color="k", lw=0.8, ls=":")
            if c in (1, 3):
                ax.axhline(1.0, color="k", lw=0.8, ls=":")
        axes[r, 0].legend(fontsize=7)
    fig.suptitle(results["device"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--problems", nargs="+", default=None)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--n", type=int, default=100_000, help="rows of the synthetic problems")
    parser.add_argument("--sizes", nargs="+", type=int, default=None)
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=None)
    parser.add_argument("--sparse-vi-max-n", type=int, default=5000)
    parser.add_argument("--data-dir", default="/work/shared/data")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    if args.quick:
        args.problems = args.problems or ["synth_logistic"]
        args.n = min(args.n, 1000)
        args.sizes = args.sizes or [20]
        args.samples, args.warmup = args.samples or 100, args.warmup or 100
        args.tag = args.tag or "_quick"
    else:
        args.problems = args.problems or ["synth_logistic", "biketrips_large"]
        args.sizes = args.sizes or [50, 200]
        args.samples, args.warmup = args.samples or 500, args.warmup or 500
    lines = []

    def log(s):
        print(s, flush=True)
        lines.append(s)

    device = (f"{jax.devices()[0].platform.upper()} ({jax.devices()[0].device_kind}), {os.cpu_count()} "
              f"logical cores shared with other jobs, {platform.machine()}")
    results = dict(device=device, command=" ".join(["python benchmarks/sota.py"] + sys.argv[1:]),
                   config={k: v for k, v in vars(args).items()}, problems=[])
    start = time.perf_counter()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    base = os.path.join(HERE, "results", f"sota{args.tag}")

    def save(current):
        done = [p for p in results["problems"] if p["problem"] != current["problem"]]
        out = dict(results, problems=done + [current], wall_s=time.perf_counter() - start)
        with open(base + ".json", "w") as f:
            json.dump(out, f, indent=1)
        plot(out, base + ".png")

    for name in args.problems:
        results["problems"].append(run_problem(name, args, log, save))
    results["wall_s"] = time.perf_counter() - start
    with open(base + ".json", "w") as f:
        json.dump(results, f, indent=1)
    plot(results, base + ".png")
    log(f"wrote {base}.json and .png in {results['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
