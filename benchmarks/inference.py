"""Coreset plus NUTS against NUTS on the full data: time, ESS/s, W1, test log-likelihood (issues 4 and 5).

Default (issue 4): synthetic logistic regression of HC §7.2 (x ~ N(0, I_2), intercept, theta = [3, 3, 0])
with N = 100,000 training rows and 1,000 held-out rows. NUTS (BlackJAX, window adaptation) runs on the full
data and on coresets of size M = 100 and 1,000 built by `cj.coreset` (Laplace pi_hat, Fisher projection,
J = 500) with GIGA and Frank–Wolfe. Reported per run:

- wall time of the sampler (compiled once per shape; the timed call is a second, already-compiled call),
  coreset construction time, and their sum;
- ESS per second (minimum over coordinates of bulk ESS / sampler wall time);
- W1 to the pooled full-data samples, raw and normalised by the median pairwise W1 between independent
  full-data runs (HC §7.3);
- normalised negative test log-likelihood (HC §7.3) and Laplace forward/reverse KL (IHT appendix D).

--end-to-end (issue 5, target 4; HC §7.4; was benchmarks/end_to_end.py): at N = 10^6 compare
  A: coreset construction (Laplace, Fisher projection J = 500, GIGA M = 1000, compressed) + NUTS on the coreset
  B: NUTS on the full data
with the same NUTS settings, each one call with compilation included, as a user would run it. Quality: W1
of each run to the full-data samples against the W1 between the two full-data chains (the Monte Carlo noise
floor), and test log-likelihood.

    python benchmarks/inference.py [--quick]                  # about 3 minutes on 2 CPU cores
    python benchmarks/inference.py --end-to-end [--n 1000000] [--method giga] [--size 1000] [--features 500]
        [--laplace-subsample ROWS] [--samples 500] [--warmup 500] [--tag _x] [--quick]

writes results/inference.{json,png} or, with --end-to-end, results/end_to_end{tag}.{json,png}
(*_quick.* with --quick).
"""

from __future__ import annotations

import json
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
from coresets_jax import metrics  # noqa: E402

NUM_TEST = 1_000
W1_POINTS = 1000


def summarize(post, reference, w1_scale, model, test, tll_full):
    w1 = metrics.wasserstein1(post.samples, reference, max_points=W1_POINTS)
    tll = float(metrics.test_log_likelihood(model, test, post.samples))
    return {
        "sampler_wall_time_s": post.wall_time,
        "init_time_s": post.init_time,
        "min_ess": float(jnp.min(post.ess)),
        "ess_per_second": float(jnp.min(post.ess)) / post.wall_time,
        "max_rhat": float(jnp.max(post.rhat)),
        "divergences": int(jnp.sum(post.num_divergent)),
        "acceptance_rate": [float(a) for a in post.acceptance_rate],
        "step_size": [float(s) for s in post.step_size],
        "posterior_mean": [float(m) for m in post.mean],
        "w1_to_full": w1,
        "w1_normalized": float(metrics.normalized_wasserstein1(w1, w1_scale)),
        "test_log_likelihood": tll,
        "normalized_neg_test_ll": None if tll_full is None else float(
            metrics.normalized_test_log_likelihood(tll, tll_full)),
    }


def _extra(p):
    p.add_argument("--end-to-end", action="store_true",
                   help="coreset + NUTS against full-data NUTS at N = 10^6, compilation included: "
                        "results/end_to_end{tag}.*")
    p.add_argument("--n", type=int, default=None, help="--end-to-end: N (default 10^6)")
    p.add_argument("--size", type=int, default=1000, help="--end-to-end: M")
    p.add_argument("--method", default="giga", help="--end-to-end: construction method")
    p.add_argument("--samples", type=int, default=None, help="--end-to-end: NUTS draws per chain (500)")
    p.add_argument("--warmup", type=int, default=None, help="--end-to-end: NUTS warm-up steps (500)")
    p.add_argument("--features", type=int, default=None, help="--end-to-end: J (500)")
    p.add_argument("--laplace-subsample", type=int, default=None,
                   help="--end-to-end: fit pi_hat on this many random rows (scaled by N / rows)")
    p.add_argument("--tag", default="", help="--end-to-end: suffix of the output file names")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    return end_to_end(args) if args.end_to_end else compiled_runs(args)


def compiled_runs(args) -> dict:
    """Issue 4: compiled NUTS on the full data (N = 10^5) against coresets (quick: N = 2000, GIGA M = 20)."""
    if args.quick:
        n, sizes, methods, num_full_runs = 2_000, (20,), ("giga",), 2
        settings = dict(method="nuts", num_samples=100, num_warmup=100, num_chains=2)
    else:
        n, sizes, methods, num_full_runs = 100_000, (100, 1_000), ("giga", "frank_wolfe"), 3
        settings = dict(method="nuts", num_samples=1000, num_warmup=1000, num_chains=2)
    key = jax.random.key(2019)
    k_data, k_full, k_cs, k_run = jax.random.split(key, 4)
    ds = cj.data.synthetic_logistic(k_data, n, num_test=NUM_TEST)
    model = cj.models.logistic_regression()
    data, test = ds.train, ds.test
    t_start = time.perf_counter()

    # Full data: num_full_runs independent runs; the first call compiles, the later ones are timed warm.
    full_runs = []
    for i, k in enumerate(jax.random.split(k_full, num_full_runs)):
        post = cj.sample(model, data, k, **settings)
        print(f"full run {i}: {post}", flush=True)
        full_runs.append(post)
    warm_full = [p for p in full_runs if not p.compiled]
    reference = np.concatenate([np.asarray(p.flat_samples) for p in full_runs])
    w1_pairs = metrics.median_pairwise_wasserstein1([p.samples for p in full_runs], max_points=W1_POINTS)
    tll_full = float(metrics.test_log_likelihood(model, test, reference))
    full_laplace = cj.laplace(model, data)

    # Full-data summary from a warm run, with W1 to the pooled samples of the other runs.
    others = np.concatenate([np.asarray(p.flat_samples) for p in full_runs if p is not warm_full[0]])
    full = summarize(warm_full[0], others, w1_pairs, model, test, tll_full)
    full["first_call_wall_time_s"] = full_runs[0].wall_time
    full["sampler_wall_time_s"] = float(np.median([p.wall_time for p in warm_full]))
    full["ess_per_second"] = float(np.median([float(jnp.min(p.ess)) / p.wall_time for p in warm_full]))
    results = {"full": full, "coresets": []}

    for i, method in enumerate(methods):
        for size, k in zip(sizes, jax.random.split(jax.random.fold_in(k_cs, i), len(sizes))):
            built = common.time_fn(lambda: cj.coreset(model, data, size, method, k), repeats=0)
            cs, build_time = built["output"], built["compile_s"]
            first = cj.sample(model, data, jax.random.fold_in(k_run, size), weights=cs, **settings)
            post = cj.sample(model, data, jax.random.fold_in(k_run, size + 1), weights=cs, **settings)
            assert not post.compiled
            row = summarize(post, reference, w1_pairs, model, test, tll_full)
            kl = metrics.laplace_kl(model, data, cs, full=full_laplace)
            row.update({
                "method": method, "size": size, "num_points": cs.num_points,
                "build_time_s": build_time, "first_call_wall_time_s": first.wall_time,
                "total_time_s": build_time + post.init_time + post.wall_time,
                "speedup_sampler": full["sampler_wall_time_s"] / post.wall_time,
                "speedup_total": (full["sampler_wall_time_s"] + full["init_time_s"])
                / (build_time + post.init_time + post.wall_time),
                "laplace_kl_forward": float(kl["forward"]), "laplace_kl_reverse": float(kl["reverse"]),
            })
            print(f"{method} M={size} ({cs.num_points} points): {post}; W1={row['w1_to_full']:.4f} "
                  f"(normalised {row['w1_normalized']:.2f}), speedup {row['speedup_sampler']:.1f}x",
                  flush=True)
            results["coresets"].append(row)

    results["quick"], results["environment"] = bool(args.quick), common.environment()
    results["config"] = {
        "dataset": "synthetic_logistic (HC 7.2), theta = [3, 3, 0]", "N": n, "num_test": NUM_TEST,
        "sizes": list(sizes), "construction": "cj.coreset: Laplace pi_hat, Fisher norm, J = 500",
        "construction_methods": list(methods), **settings, "num_full_runs": num_full_runs,
        "w1": f"exact optimal assignment on {W1_POINTS}-point subsamples (scipy linear_sum_assignment)",
        "w1_reference_median_pairwise_full": w1_pairs,
        "timing": "sampler wall time of an already-compiled call; first_call includes compilation",
        "ess": "min over coordinates of blackjax.diagnostics.ess_bulk",
        "benchmark_wall_time_s": time.perf_counter() - t_start,
    }
    stem = common.stem("inference", args.quick)
    common.write_json(results, args.out, stem)
    plot(results, args.out, stem)
    print(json.dumps({"full_sampler_s": full["sampler_wall_time_s"],
                      "coresets": [(r["method"], r["size"], round(r["sampler_wall_time_s"], 3),
                                    round(r["speedup_sampler"], 1), round(r["w1_normalized"], 2))
                                   for r in results["coresets"]]}, indent=1))
    return results


def end_to_end(args) -> dict:
    """Issue 5: one call each, compilation included (quick: N = 2000, M = 20, J = 50, 100 + 100 draws)."""
    n = args.n or (2_000 if args.quick else 1_000_000)
    samples = args.samples or (100 if args.quick else 500)
    warmup = args.warmup or (100 if args.quick else 500)
    features = args.features or (50 if args.quick else 500)
    if args.quick and args.size == 1000:
        args.size = 20

    def timed(fn):
        t = common.time_fn(fn, repeats=0)
        return t["output"], t["compile_s"]

    key = jax.random.key(0)
    k_data, k_cs, k_full, k_core = jax.random.split(key, 4)
    ds = cj.data.synthetic_logistic(k_data, n, num_test=10_000)
    model = cj.models.logistic_regression()
    nuts = dict(method="nuts", num_samples=samples, num_warmup=warmup, num_chains=2)

    print(f"coreset construction, N = {n}", flush=True)
    def construct():
        k_pi, k_rest = jax.random.split(k_cs)
        pi_hat = cj.laplace(model, ds.train, key=k_pi, subsample=args.laplace_subsample)
        return cj.coreset(model, ds.train, args.size, args.method, k_rest, num_features=features,
                          pi_hat=pi_hat)

    cs, t_build = timed(construct)
    print(f"  {t_build:.1f} s, {cs.num_points} points, info rank {cs.info.get('rank')}", flush=True)
    print("NUTS on the coreset", flush=True)
    post_cs, t_cs = timed(lambda: cj.sample(model, ds.train, k_core, weights=cs, **nuts))
    print(f"  {t_cs:.1f} s", flush=True)
    print("NUTS on the full data", flush=True)
    post_full, t_full = timed(lambda: cj.sample(model, ds.train, k_full, **nuts))
    print(f"  {t_full:.1f} s", flush=True)

    full = np.asarray(post_full.samples)
    full_flat = full.reshape(-1, full.shape[-1])
    core_flat = np.asarray(post_cs.samples).reshape(-1, full.shape[-1])
    w1_floor = float(cj.metrics.wasserstein1(full[0], full[1]))
    w1_core = float(cj.metrics.wasserstein1(core_flat, full_flat))
    tll_full = float(cj.metrics.test_log_likelihood(model, ds.test, full_flat))
    tll_core = float(cj.metrics.test_log_likelihood(model, ds.test, core_flat))
    t_coreset_total = t_build + t_cs
    report = {
        "n": n, "size": args.size, "method": args.method, "num_points": cs.num_points,
        "num_features": features, "laplace_subsample": args.laplace_subsample,
        "nuts": {k: v for k, v in nuts.items()},
        "seconds": {"coreset_construction": t_build, "nuts_coreset": t_cs, "coreset_total": t_coreset_total,
                    "nuts_full": t_full},
        "wall_clock_ratio_full_over_coreset": t_full / t_coreset_total,
        "wall_clock_ratio_coreset_over_full": t_coreset_total / t_full,
        "w1": {"coreset_vs_full": w1_core, "full_chain0_vs_chain1": w1_floor,
               "normalised": float(cj.metrics.normalized_wasserstein1(w1_core, w1_floor))},
        "test_log_likelihood": {"full": tll_full, "coreset": tll_core,
                                "normalised": tll_core / tll_full},
        "rhat_max": {"full": float(np.nanmax(post_full.rhat)), "coreset": float(np.nanmax(post_cs.rhat))},
        "notes": "Times include compilation (one call each, as a user would run it). W1 is exact optimal "
                 "assignment on subsamples (cj.metrics.wasserstein1). The noise floor is W1 between the two "
                 "full-data chains. Measured on a shared 2-core CPU.",
        "device": str(jax.devices()[0]), "quick": bool(args.quick), "environment": common.environment(),
    }
    stem = common.stem(f"end_to_end{args.tag}", args.quick)
    common.write_json(report, args.out, stem)
    print(json.dumps(common.jsonable(report), indent=2))
    fig, axes = common.figure(1, 2, (5.0, 4.0))
    a, b = axes[0]
    a.bar(["construct", "NUTS coreset", "NUTS full"], [t_build, t_cs, t_full],
          color=["tab:blue", "tab:blue", "tab:gray"])
    a.set_ylabel("seconds")
    a.set_title(f"N = {args.n}: coreset total / full = {t_coreset_total / t_full:.3f}")
    b.scatter(full_flat[:, 0], full_flat[:, 1], s=3, alpha=0.4, label="full data")
    b.scatter(core_flat[:, 0], core_flat[:, 1], s=3, alpha=0.4, label=f"{args.method} M={args.size}")
    b.set_xlabel("theta_0")
    b.set_ylabel("theta_1")
    b.legend()
    b.set_title(f"W1 {w1_core:.4f} (chain-to-chain {w1_floor:.4f})")
    common.save_figure(fig, args.out, stem)
    return report


def plot(results, out_dir, stem):
    full = results["full"]
    rows = results["coresets"]
    names = {"giga": "GIGA", "frank_wolfe": "FW"}
    labels = [f"full\nN={results['config']['N']}"] + [f"{names.get(r['method'], r['method'])}\nM={r['size']}" for r in rows]
    times = [full["sampler_wall_time_s"]] + [r["sampler_wall_time_s"] for r in rows]
    ess_s = [full["ess_per_second"]] + [r["ess_per_second"] for r in rows]
    w1 = [full["w1_normalized"]] + [r["w1_normalized"] for r in rows]
    fig, axes = common.figure(1, 3, (4.3, 4.0))
    axes = axes[0]
    colors = ["tab:gray"] + ["tab:blue" if r["method"] == "giga" else "tab:orange" for r in rows]
    titles = ("NUTS wall time (s)", "min ESS per second", "W1 / median full-vs-full W1")
    for ax, values, title, log in zip(axes, (times, ess_s, w1), titles, (True, True, True)):
        ax.bar(range(len(values)), values, color=colors)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
    axes[2].axhline(1.0, color="k", lw=0.8, ls="--")
    fig.suptitle("NUTS on synthetic logistic regression (HC 7.2): full data vs coresets "
                 f"({results['config']['num_chains']} chains x {results['config']['num_samples']} draws)")
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
